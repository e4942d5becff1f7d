"""`kraft produce`: write records to a partition over the brokers' Kafka protocol, as an
idempotent producer addressing the topic by ID (like kafka-console-producer.sh).

    kraft produce (--bootstrap-server HOST:PORT[,...] | --cluster DIR) --topic NAME
        [--partition N] [--key K | --key-separator SEP] [--acks all|1|0]
        [--timeout SECONDS] [--json] [VALUE ...]
    kraft produce (--bootstrap-server ... | --cluster DIR) --topic NAME --ordered
        --keys K [--unkeyed U] [--key-prefix P] --count N [--rate R] [--timeout SECONDS]
        [--json]

The values (or, without any, the lines of stdin) go as one magic v2 batch to the
partition `--partition` (default 0), whatever their keys. A record's key is null, or
`--key K` for every record, or with `--key-separator SEP` the text before the first SEP
of each value (like kafka-console-producer's `parse.key`; a value without SEP is a usage
error naming it). The topic's
ID and the partition's leader come from Metadata v12; with acks=all the producer takes a
producer ID (InitProducerId) and sends the batch with sequence 0 by Produce v13 (topics
by ID, KIP-516). A retriable answer (the leader moved, the broker is not caught up) or a
lost connection resends the same batch to the leader the metadata then names: the
broker's producer state answers a batch it already stored with its original offset, so
a retry never stores the records twice. With a SASL login (`--command-config` naming
SASL_PLAINTEXT or SASL_SSL) each connection logs in first, as `tools.client.connection`'s
do; a refused login is one line, exit 1. Exit 0 with the base offset; 1 when the
brokers refuse the records or the timeout passes; 2 on bad usage.

With `--ordered` it writes per-key sequence numbers instead (tools/client/
sequences.py): keys P0..P{K-1}, round-robin, each key's values 0, 1, 2, ... as decimal
text, partitioned by linear hashing, one record acknowledged before the next, each
acknowledged record printed; with `--unkeyed U`, U of every K + U records have no key.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import ssl
import sys
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kio.index import load_request_schema

from raft.common.errors import ErrorCode
from raft.common.kafka import record_batch
from raft.common.kafka.codec import build
from raft.common.kafka.wire_client import call, connect, encode_request
from tools.addresses import add_broker_target, broker_addresses
from tools.errors import CommandError, unknown_topic, usage_error

if TYPE_CHECKING:
    from broker.kafka.sasl.sasl_settings import SaslClientSettings

PRODUCE, METADATA, INIT_PRODUCER_ID = 0, 3, 22
PRODUCE_VERSION = 13
RETRY_BACKOFF_S = 0.2
# A topic just created reaches the brokers' images within milliseconds (README: p99 under
# 10 ms), so a topic still unknown after this long is taken not to exist.
UNKNOWN_TOPIC_GRACE_S = 2.0
RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.INCONSISTENT_TOPIC_ID})
ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


@dataclasses.dataclass(frozen=True, slots=True)
class Login:
    """How to reach the brokers: over TLS with `tls` (None: plaintext), logged in with
    `sasl` (None: no SASL), as the command line read them (`tools/cli.py`)."""

    tls: ssl.SSLContext | None = None
    sasl: SaslClientSettings | None = None


PLAINTEXT = Login()


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    add_broker_target(parser)
    parser.add_argument("--topic", required=True, help="the topic to write to")
    parser.add_argument("--partition", type=int, default=0,
                        help="the partition every record goes to (default 0)")
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument("--key", metavar="K", help="the key of every record (default: none)")
    keys.add_argument("--key-separator", metavar="SEP",
                      help="each value is KEY SEP VALUE (like parse.key=true)")
    parser.add_argument("--acks", choices=sorted(ACKS), default="all",
                        help="acknowledgements to wait for (default all)")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                        help="give up after this long (default 30)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("values", nargs="*", metavar="VALUE",
                        help="record values (default: the lines of stdin)")
    ordered = parser.add_argument_group("ordered per-key sequences (--ordered)")
    ordered.add_argument("--ordered", action="store_true",
                         help="keyed sequences by linear hashing, order kept across resizes")
    ordered.add_argument("--keys", type=int, metavar="K", help="how many keys")
    ordered.add_argument("--unkeyed", type=int, default=0, metavar="U",
                         help="records without a key in every K + U (default 0)")
    ordered.add_argument("--key-prefix", default="key-", metavar="P",
                         help="the keys' common prefix (default key-)")
    ordered.add_argument("--count", type=int, metavar="N", help="records in all")
    ordered.add_argument("--rate", type=float, metavar="R", help="records per second")


def encode_batch(values: list[bytes], *, keys: list[bytes | None] | None = None,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 timestamp_ms: int | None = None) -> bytes:
    """An uncompressed magic v2 batch of records (CRC32C included), keyed by `keys`
    (default: every key null)."""
    stamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    keyed = [None] * len(values) if keys is None else keys
    return record_batch.encode_batch(list(zip(keyed, values, strict=True)),
                                     timestamps=[stamp] * len(values), producer_id=producer_id,
                                     producer_epoch=producer_epoch, base_sequence=base_sequence)


def _answers(brokers: list[str], request: Any, login: Login
             ) -> Iterator[Any]:
    """Each broker's answer to `request`, in turn, skipping those that fail; a
    CommandError when every one refused the connection (nothing listens there)."""
    refused = []
    for address in brokers:
        try:
            yield _call(address, request, login)
        except ConnectionRefusedError:
            refused.append(address)
        except OSError:
            continue
    if len(refused) == len(brokers):
        raise CommandError(f"every broker refused the connection: {', '.join(refused)} "
                           "(is the cluster running?)")


def _metadata(brokers: list[str], topic: str, partition: int, login: Login
              ) -> tuple[uuid.UUID, str] | ErrorCode:
    """(topic ID, leader address) from the first broker that answers, or the error."""
    request = build(load_request_schema(METADATA, 12), {
        "topics": [{"name": topic, "topic_id": None}],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    error = ErrorCode.LEADER_NOT_AVAILABLE
    for response in _answers(brokers, request, login):
        (found,) = response.topics
        if found.error_code != ErrorCode.NONE:
            return ErrorCode(found.error_code)
        parts = {int(p.partition_index): p for p in found.partitions}
        if partition not in parts:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        leader = int(parts[partition].leader_id)
        endpoints = {int(b.node_id): f"{b.host}:{b.port}" for b in response.brokers}
        if leader in endpoints:
            return found.topic_id, endpoints[leader]
    return error


def _topic_names(brokers: list[str], login: Login) -> list[str]:
    """Every topic's name, from the first broker that answers Metadata."""
    request = build(load_request_schema(METADATA, 12), {
        "topics": None, "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    return next(([str(t.name) for t in response.topics]
                 for response in _answers(brokers, request, login)), [])


def _producer_id(brokers: list[str], login: Login) -> tuple[int, int] | None:
    request = build(load_request_schema(INIT_PRODUCER_ID, 4), {
        "transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1,
        "producer_epoch": -1})
    for response in _answers(brokers, request, login):
        if response.error_code == ErrorCode.NONE:
            return int(response.producer_id), int(response.producer_epoch)
    return None


def _identity(brokers: list[str], deadline: float, login: Login
              ) -> tuple[int, int] | None:
    """(producer id, epoch) from InitProducerId, retried until `deadline`."""
    while time.monotonic() < deadline:
        identity = _producer_id(brokers, login)
        if identity is not None:
            return identity
        time.sleep(RETRY_BACKOFF_S)
    return None


def _send(leader: str, request: Any, acks: int, deadline: float,
          login: Login) -> tuple[ErrorCode, int]:
    """One attempt: (error, base offset); NETWORK_EXCEPTION when the connection fails."""
    try:
        if acks == 0:
            _call(leader, request, login, answered=False)
            return ErrorCode.NONE, -1
        answer = _call(leader, request, login, max(1.0, deadline - time.monotonic()))
    except OSError:
        return ErrorCode.NETWORK_EXCEPTION, -1
    part = answer.responses[0].partition_responses[0]
    return ErrorCode(part.error_code), int(part.base_offset)


def produce(brokers: list[str], topic: str, partition: int, values: list[bytes], *,
            acks: int, timeout_s: float, keys: list[bytes | None] | None = None,
            login: Login = PLAINTEXT) -> tuple[ErrorCode, int, int]:
    """(error, base offset, attempts): the batch sent, and resent on retriable errors,
    until it is acknowledged or `timeout_s` passes, as `login` says (default plaintext)."""
    deadline = time.monotonic() + timeout_s
    producer_id, epoch = -1, -1
    if acks == -1:  # idempotence needs acks=all, as in Kafka's producer
        identity = _identity(brokers, deadline, login)
        if identity is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, 0
        producer_id, epoch = identity
    batch = encode_batch(values, keys=keys, producer_id=producer_id, producer_epoch=epoch,
                         base_sequence=0 if producer_id >= 0 else -1)
    error, attempts = ErrorCode.REQUEST_TIMED_OUT, 0
    unknown_until = time.monotonic() + UNKNOWN_TOPIC_GRACE_S
    while time.monotonic() < deadline:
        found = _metadata(brokers, topic, partition, login)
        if isinstance(found, ErrorCode):
            error = found
            if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and \
                    time.monotonic() > unknown_until:
                return error, -1, attempts
        else:
            topic_id, leader = found
            attempts += 1
            request = build(load_request_schema(PRODUCE, PRODUCE_VERSION), {
                "acks": acks, "timeout": int(max(1.0, deadline - time.monotonic()) * 1000),
                "topic_data": [{"topic_id": topic_id, "partition_data": [
                    {"index": partition, "records": batch}]}]})
            error, base = _send(leader, request, acks, deadline, login)
            if error == ErrorCode.NONE:
                return error, base, attempts
        if error not in RETRIABLE and error != ErrorCode.NETWORK_EXCEPTION:
            return error, -1, attempts
        time.sleep(RETRY_BACKOFF_S)
    return error, -1, attempts


def _call(address: str, body: Any, login: Login, timeout_s: float = 10.0, *,
          answered: bool = True) -> Any:
    """The answer to `body` from `address`, on a new connection (OSError when it fails):
    logged in first with `login.sasl` when given (a refused login is a CommandError);
    with `answered=False` (acks=0) only sent, and None returned."""
    if login.sasl is None:
        if answered:
            return call(address, body, timeout_s, ssl_context=login.tls)
        with connect(address, timeout_s, ssl_context=login.tls) as sock:
            sock.sendall(encode_request(body))
        return None
    import trio  # only for a SASL listener: the login is the async client's

    from tools.client.connection import BrokerConnection, ClientError, ConnectionLost

    async def logged_in() -> Any:
        connection = BrokerConnection(address, "kraft-produce", timeout_s,
                                      ssl_context=login.tls, sasl=login.sasl)
        try:
            return await connection.request(body, answered=answered)
        finally:
            await connection.close()
    try:
        return trio.run(logged_in)
    except ConnectionLost as exc:
        raise (ConnectionRefusedError if exc.refused else ConnectionError)(str(exc)) from None
    except ClientError as exc:
        raise CommandError(str(exc)) from None


def split_keys(texts: list[str], *, key: str | None, separator: str | None
               ) -> tuple[list[bytes | None], list[bytes]]:
    """(keys, values) of the records: every key `key` (None: null), or each text split
    at its first `separator`; a text without the separator is a usage error."""
    if not separator:
        if separator == "":
            raise usage_error("--key-separator must not be empty")
        return [None if key is None else key.encode()] * len(texts), \
            [text.encode() for text in texts]
    keys: list[bytes | None] = []
    values = []
    for number, text in enumerate(texts, start=1):
        found, sep, value = text.partition(separator)
        if not sep:
            raise usage_error(f"record {number} ({text!r}) has no key separator "
                              f"{separator!r}")
        keys.append(found.encode())
        values.append(value.encode())
    return keys, values


def run(args: argparse.Namespace) -> int:
    brokers = broker_addresses(args.cluster, args.bootstrap_server)
    if args.ordered:
        from tools.client.sequences import run_ordered  # imports trio
        return run_ordered(args, brokers)
    if args.partition < 0:
        raise usage_error("--partition must be >= 0")
    texts = args.values or [line.rstrip("\n") for line in sys.stdin]
    if not texts:
        raise usage_error("nothing to produce (no VALUE and an empty stdin)")
    keys, values = split_keys(texts, key=args.key, separator=args.key_separator)
    login = Login(args.client_ssl, args.client_sasl)
    error, base, attempts = produce(brokers, args.topic, args.partition, values,
                                    acks=ACKS[args.acks], timeout_s=args.timeout, keys=keys,
                                    login=login)
    result = {"topic": args.topic, "partition": args.partition, "records": len(values),
              "base_offset": base, "attempts": attempts, "error": error.name.upper(),
              "error_code": int(error)}
    if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not args.json:
        names = _topic_names(brokers, login)
        if args.topic not in names:
            raise unknown_topic(args.topic, names)
    if error != ErrorCode.NONE:
        if args.json:
            print(json.dumps(result))
            return 1
        raise CommandError(f"produce to {args.topic}-{args.partition} failed: "
                           f"{error.name.upper()} ({int(error)})", exit_code=1)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"produced {len(values)} records to {args.topic}-{args.partition} at offset "
              f"{base}")
    return 0
