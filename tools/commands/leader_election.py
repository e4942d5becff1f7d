"""`kraft leader-election`: elect partition leaders, like kafka-leader-election.sh.

    kraft leader-election (--bootstrap-server HOST:PORT[,...] | --cluster DIR)
        [--command-config FILE] --election-type PREFERRED|UNCLEAN
        (--topic T --partition P | --all-topic-partitions | --path-to-json-file FILE)
        [--json]

FILE is Kafka's: {"partitions": [{"topic": "orders", "partition": 0}]}. One ElectLeaders
goes to a broker (`tools.client.admin`), which forwards it to the controllers
(`metadata.elections` decides). The answer is printed in Kafka's tool's lines:
`Successfully completed leader election (PREFERRED) for partitions orders-0, orders-1`,
`Valid replica already elected for partitions orders-2` and, per partition that failed,
`Error completing leader election (PREFERRED) for partition: orders-3: ERROR: why`.
Exit 0 when no partition failed; 1 when one did (then one line on stderr saying how
many, as Kafka's); 2 for bad input: an election type, a JSON file that is unreadable or
not such a document, or options that do not go together (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from metadata.admin import ElectionTopic, ElectLeadersRequest, ElectLeadersResponse
from metadata.elections import ELECTION_TYPES as KINDS
from raft.common.errors import ErrorCode
from tools.addresses import add_broker_target, broker_addresses
from tools.client.admin import BrokerAdminClient, KafkaRequestFailed
from tools.client.connection import ClientError
from tools.errors import CommandError, usage_error
from tools.kafka_json import partition_entries

ELECTION_TYPES = {name: kind for kind, name in KINDS.items()}  # PREFERRED 0, UNCLEAN 1
TIMEOUT_S = 30.0


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    add_broker_target(parser)
    parser.add_argument("--election-type", required=True, metavar="PREFERRED|UNCLEAN",
                        help="PREFERRED: the first replica leads when in sync; UNCLEAN: a "
                        "leaderless partition takes a live replica outside the ISR where "
                        "unclean.leader.election.enable allows it")
    parser.add_argument("--topic", metavar="TOPIC", help="with --partition: one partition")
    parser.add_argument("--partition", type=int, metavar="P", help="the partition of --topic")
    parser.add_argument("--all-topic-partitions", action="store_true",
                        help="every partition of every topic")
    parser.add_argument("--path-to-json-file", metavar="FILE",
                        help='{"partitions": [{"topic": T, "partition": P}, ...]}')
    parser.add_argument("--json", action="store_true")


def parse_partitions(text: str) -> list[tuple[str, int]]:
    """The partitions of a kafka-leader-election.sh JSON file; ValueError naming what is
    wrong."""
    partitions = []
    for number, entry in enumerate(partition_entries(
            text, '{"partitions": [{"topic": T, "partition": P}, ...]}')):
        topic, partition = entry.get("topic"), entry.get("partition")
        if not isinstance(topic, str) or not topic or type(partition) is not int or \
                partition < 0:
            raise ValueError(f"partitions[{number}]: expected a topic name and a "
                             "partition >= 0")
        partitions.append((topic, partition))
    if len(set(partitions)) != len(partitions):
        raise ValueError("a partition is given more than once")
    return partitions


def election_request(election_type: str, partitions: list[tuple[str, int]] | None
                     ) -> ElectLeadersRequest:
    """The request for `partitions` (None: every partition); ValueError for an unknown
    election type."""
    kind = ELECTION_TYPES.get(election_type.upper())
    if kind is None:
        raise ValueError(f"--election-type {election_type!r}: expected PREFERRED or UNCLEAN")
    if partitions is None:
        return ElectLeadersRequest(election_type=kind)
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return ElectLeadersRequest(election_type=kind, topic_partitions=tuple(
        ElectionTopic(topic=t, partitions=tuple(ps)) for t, ps in topics.items()))


def result_lines(election_type: str, response: ElectLeadersResponse) -> tuple[list[str], int]:
    """Kafka's tool's lines for the answer, and how many partitions failed."""
    label = election_type.upper()
    done, noop, failed = [], [], []
    for topic in response.replica_election_results:
        for p in topic.partition_result:
            name = f"{topic.topic}-{p.partition_id}"
            if p.error_code == ErrorCode.NONE:
                done.append(name)
            elif p.error_code == ErrorCode.ELECTION_NOT_NEEDED:
                noop.append(name)
            else:
                why = f"{ErrorCode(p.error_code).name}" + \
                    (f": {p.error_message}" if p.error_message else "")
                failed.append(f"Error completing leader election ({label}) for partition: "
                              f"{name}: {why}")
    lines = []
    if done:
        lines.append(f"Successfully completed leader election ({label}) for partitions "
                     + ", ".join(done))
    if noop:
        lines.append("Valid replica already elected for partitions " + ", ".join(noop))
    return lines + failed, len(failed)


def result_json(election_type: str, response: ElectLeadersResponse) -> str:
    return json.dumps({"election_type": election_type.upper(), "partitions": [
        {"topic": t.topic, "partition": p.partition_id,
         "error": None if p.error_code == ErrorCode.NONE else ErrorCode(p.error_code).name,
         "message": p.error_message}
        for t in response.replica_election_results for p in t.partition_result]})


def _partitions(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    """What the options name (None: every partition); usage errors otherwise."""
    chosen = [args.topic is not None, args.all_topic_partitions,
              args.path_to_json_file is not None]
    if sum(chosen) != 1:
        raise usage_error("give exactly one of --topic with --partition, "
                          "--all-topic-partitions, --path-to-json-file")
    if (args.topic is None) != (args.partition is None):
        raise usage_error("--topic and --partition go together")
    if args.topic is not None:
        if args.partition < 0:
            raise usage_error(f"--partition {args.partition}: expected >= 0")
        return [(args.topic, args.partition)]
    if args.all_topic_partitions:
        return None
    try:
        return parse_partitions(Path(args.path_to_json_file).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise usage_error(f"--path-to-json-file {args.path_to_json_file}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    try:
        request = election_request(args.election_type, _partitions(args))
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    client = BrokerAdminClient(broker_addresses(args.cluster, args.bootstrap_server),
                               ssl_context=args.client_ssl, sasl=args.client_sasl,
                               timeout_s=TIMEOUT_S)
    try:
        response = client.call(request)
    except ClientError as exc:
        raise CommandError(f"leader-election: {exc}") from None
    if response.error_code != ErrorCode.NONE:
        failure = KafkaRequestFailed("ElectLeaders", response.error_code,
                                     response.error_message)
        raise CommandError(f"leader-election: {failure}")
    lines, failed = result_lines(args.election_type, response)
    for line in [result_json(args.election_type, response)] if args.json else lines:
        print(line)
    if failed:
        raise CommandError(f"{failed} replica(s) could not be elected")
    return 0
