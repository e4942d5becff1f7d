"""`kraft delete-records`: move partitions' log starts, like kafka-delete-records.sh.

    kraft delete-records (--bootstrap-server HOST:PORT[,...] | --cluster DIR)
        --offset-json-file FILE

FILE is Kafka's: {"partitions": [{"topic": "orders", "partition": 0, "offset": 42}],
"version": 1}; offset -1 deletes up to the high watermark. Each partition's leader gets
one DeleteRecords (broker.kafka.admin.delete_records_api) and answers its low watermark,
printed as Kafka's tool does (`partition: orders-0  low_watermark: 42`, or `error:` and
the error's name). Exit 0 when every partition answered its low watermark; 1 when one
failed (an unknown topic, an offset above the high watermark: OFFSET_OUT_OF_RANGE); 2
when FILE is unreadable or not such a JSON document (one line naming what is wrong).
"""

from __future__ import annotations

import argparse
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import trio
from kio.index import load_request_schema

from broker.kafka.sasl.sasl_settings import SaslClientSettings
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from tools.addresses import add_broker_target, broker_addresses
from tools.client.connection import ClientError, KafkaClient
from tools.errors import CommandError, usage_error
from tools.kafka_json import partition_entries

DELETE_RECORDS, VERSION = 21, 2
TIMEOUT_MS = 30_000


@dataclass(frozen=True, slots=True)
class Deletion:
    topic: str
    partition: int
    offset: int


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    add_broker_target(parser)
    parser.add_argument("--offset-json-file", required=True, metavar="FILE",
                        help='{"partitions": [{"topic": T, "partition": P, "offset": O}], '
                        '"version": 1}; offset -1: up to the high watermark')


def parse_offsets(text: str) -> list[Deletion]:
    """The deletions of a kafka-delete-records.sh offset file; ValueError naming what is
    wrong."""
    deletions = []
    for number, entry in enumerate(partition_entries(
            text, '{"partitions": [...], "version": 1}')):
        topic, partition, offset = entry.get("topic"), entry.get("partition"), \
            entry.get("offset")
        if not isinstance(topic, str) or not topic or type(partition) is not int or \
                partition < 0 or type(offset) is not int or offset < -1:
            raise ValueError(f"partitions[{number}]: expected a topic name, a partition "
                             ">= 0 and an offset >= -1")
        deletions.append(Deletion(topic, partition, offset))
    if len({(d.topic, d.partition) for d in deletions}) != len(deletions):
        raise ValueError("a partition is given more than once")
    return deletions


def result_line(deletion: Deletion, error_code: int, low_watermark: int) -> str:
    name = f"{deletion.topic}-{deletion.partition}"
    if error_code != ErrorCode.NONE:
        return f"partition: {name}\terror: {ErrorCode(error_code).name}"
    return f"partition: {name}\tlow_watermark: {low_watermark}"


async def _leaders(client: KafkaClient, deletions: list[Deletion]
                   ) -> dict[Deletion, str | ErrorCode]:
    """Each deletion's leader address, or the error its topic or partition has."""
    found: dict[Deletion, str | ErrorCode] = {}
    for topic in sorted({d.topic for d in deletions}):
        metadata = await client.topic_metadata(topic)
        for deletion in (d for d in deletions if d.topic == topic):
            leader = metadata.leaders.get(deletion.partition)
            if metadata.error_code != ErrorCode.NONE:
                found[deletion] = ErrorCode(metadata.error_code)
            elif leader is None:
                found[deletion] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif leader not in metadata.brokers:
                found[deletion] = ErrorCode.LEADER_NOT_AVAILABLE
            else:
                found[deletion] = metadata.brokers[leader]
    return found


async def delete(addresses: list[str], deletions: list[Deletion],
                 ssl_context: ssl.SSLContext | None = None,
                 sasl: SaslClientSettings | None = None) -> dict[Deletion, tuple[int, int]]:
    """(error code, low watermark) per deletion, one request per leader."""
    client = KafkaClient(addresses, client_id="kraft-delete-records", ssl_context=ssl_context,
                         sasl=sasl)
    try:
        leaders = await _leaders(client, deletions)
        results = {d: (int(error), -1) for d, error in leaders.items()
                   if isinstance(error, ErrorCode)}
        by_leader: dict[str, list[Deletion]] = {}
        for deletion, leader in leaders.items():
            if isinstance(leader, str):
                by_leader.setdefault(leader, []).append(deletion)
        for address, chosen in by_leader.items():
            response = await client.call(address, _request(chosen), TIMEOUT_MS / 1000 + 5)
            for topic in response.topics:
                for part in topic.partitions:
                    deletion = next(d for d in chosen if d.topic == str(topic.name)
                                    and d.partition == int(part.partition_index))
                    results[deletion] = (int(part.error_code), int(part.low_watermark))
        return results
    finally:
        await client.aclose()


def _request(deletions: list[Deletion]) -> object:
    topics: dict[str, list[Mapping[str, int]]] = {}
    for d in deletions:
        topics.setdefault(d.topic, []).append({"partition_index": d.partition,
                                               "offset": d.offset})
    return build(load_request_schema(DELETE_RECORDS, VERSION), {
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
        "timeout": TIMEOUT_MS})


def run(args: argparse.Namespace) -> int:
    try:
        deletions = parse_offsets(Path(args.offset_json_file).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise usage_error(f"--offset-json-file {args.offset_json_file}: {exc}") from None
    addresses = broker_addresses(args.cluster, args.bootstrap_server)
    print("Executing records delete operation")
    try:
        results = trio.run(delete, addresses, deletions, args.client_ssl, args.client_sasl)
    except ClientError as exc:
        raise CommandError(f"delete-records: {exc}") from None
    print("Records delete operation completed:")
    for deletion in deletions:
        print(result_line(deletion, *results[deletion]))
    return 0 if all(error == ErrorCode.NONE for error, _ in results.values()) else 1
