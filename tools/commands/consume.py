"""`kraft consume`: a consumer-group member that prints every delivered record, like
kafka-console-consumer.sh, or the ordered consumer of KIP-253 with `--ordered`.

    kraft consume (--cluster DIR | --bootstrap-server HOST:PORT[,...]) --topic NAME
        [--group ID] [--from-beginning] [--max-messages N] [--property print.key=true ...]
        [--duration SECONDS] [--json]
    kraft consume ... --topic NAME --group ID --ordered [--no-gates] [--process-delay-ms MS]

Without `--ordered` it reads as Kafka's console consumer does: in group ID (default a
new `console-consumer-NNNNN`), from the committed offsets, else from the end or, with
`--from-beginning`, the start; each record prints as its value (`--property
print.key=true`: the key, `key.separator`, the value; `print.partition` and
`print.offset` put those first). `--ordered` delivers records in order per partition,
and holds back those the group has not consumed what must come first after the topic's
partition count changed (tools/client/consumer.py); `--no-gates` skips those waits (to
show the reordering they prevent). Records without a key are delivered in both modes.
`--json` prints each record as one line: key, value, partition, offset and the delivery
time ts_ms. It stops after `--max-messages` records, after `--duration` or on
SIGTERM/SIGINT, committing its positions and leaving the group. Exit 0; 1 when the topic
does not exist or the group refuses; 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
from collections.abc import Mapping, Sequence

import trio
from kio.index import load_request_schema

from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from tools.addresses import add_broker_target, broker_addresses
from tools.client.connection import METADATA, ClientError, KafkaClient
from tools.client.consumer import ConsumedRecord, OrderedConsumer
from tools.client.offsets import EARLIEST, LATEST
from tools.errors import CommandError, unknown_topic, usage_error

# kafka-console-consumer's formatter properties this verb reads, with their defaults
PROPERTIES = {"print.key": "false", "print.partition": "false", "print.offset": "false",
              "key.separator": "\t"}


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    add_broker_target(parser)
    parser.add_argument("--topic", required=True, help="the topic to read")
    parser.add_argument("--group", metavar="ID",
                        help="consumer group (default: a new console-consumer-NNNNN; "
                        "needed with --ordered)")
    parser.add_argument("--from-beginning", action="store_true",
                        help="start at the earliest offset when the group committed none "
                        "(default: the end)")
    parser.add_argument("--max-messages", type=int, metavar="N",
                        help="stop after N records")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="record format: print.key, print.partition, print.offset "
                        "(true|false), key.separator")
    parser.add_argument("--duration", type=float, default=60.0, metavar="SECONDS",
                        help="stop after this long (default 60)")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per record: key, value, partition, offset, "
                        "ts_ms")
    ordered = parser.add_argument_group("ordered delivery (KIP-253)")
    ordered.add_argument("--ordered", action="store_true",
                         help="per-key order across partition-count changes; starts at the "
                         "earliest offset when nothing is committed")
    ordered.add_argument("--no-gates", action="store_true",
                         help="deliver without waiting for the group (may reorder keys)")
    ordered.add_argument("--process-delay-ms", type=int, default=0, metavar="MS",
                         help="time spent on each record before the next")
    parser.add_argument("--heartbeat-interval-ms", type=int, default=500, metavar="MS",
                        help="group heartbeat interval")
    parser.add_argument("--session-timeout-ms", type=int, default=10_000, metavar="MS",
                        help="group session timeout")


def parse_properties(pairs: Sequence[str]) -> dict[str, str]:
    """`--property KEY=VALUE` pairs over the defaults; an unknown key or a bad value is
    a usage error naming it."""
    out = dict(PROPERTIES)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in PROPERTIES:
            raise usage_error(f"--property {pair!r}: expected KEY=VALUE with KEY one of "
                              f"{', '.join(PROPERTIES)}")
        if key.startswith("print.") and value not in ("true", "false"):
            raise usage_error(f"--property {key}: expected true or false, got {value!r}")
        out[key] = value.encode().decode("unicode_escape") if key == "key.separator" \
            else value
    return out


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode(errors="replace")


def _shown(data: bytes | None) -> str:
    """As kafka-console-consumer prints a key or value: `null` when there is none."""
    return "null" if data is None else data.decode(errors="replace")


def format_record(record: ConsumedRecord, *, as_json: bool, ordered: bool,
                  properties: Mapping[str, str]) -> str:
    """One record's line: JSON; `PARTITION:OFFSET KEY VALUE` (--ordered); or as
    kafka-console-consumer's default formatter (`null` for a missing key or value)."""
    if as_json:
        return json.dumps({"key": _text(record.key), "value": _text(record.value),
                           "partition": record.partition, "offset": record.offset,
                           "ts_ms": record.ts_ms})
    if ordered:
        return (f"{record.partition}:{record.offset} {_text(record.key)} "
                f"{_text(record.value)}")
    separator = properties["key.separator"]
    fields = [f"Partition:{record.partition}"] if properties["print.partition"] == "true" \
        else []
    if properties["print.offset"] == "true":
        fields.append(f"Offset:{record.offset}")
    if properties["print.key"] == "true":
        fields.append(_shown(record.key))
    return separator.join([*fields, _shown(record.value)])


async def _check_topic(client: KafkaClient, topic: str) -> None:
    """One line naming a topic that does not exist (with a close name if there is one),
    before the group is joined: the consumer would otherwise wait for it."""
    metadata = await client.topic_metadata(topic)
    if metadata.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return
    _, every = await client.call_any(build(load_request_schema(METADATA, 12), {
        "topics": None, "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False}))
    raise unknown_topic(topic, [str(t.name) for t in every.topics])


async def consume(args: argparse.Namespace, addresses: list[str],
                  properties: Mapping[str, str]) -> None:
    client = KafkaClient(addresses, ssl_context=args.client_ssl, sasl=args.client_sasl)
    consumer = OrderedConsumer(
        client, args.topic, args.group, use_gates=args.ordered and not args.no_gates,
        heartbeat_interval_s=args.heartbeat_interval_ms / 1000,
        session_timeout_ms=args.session_timeout_ms,
        reset=EARLIEST if args.ordered or args.from_beginning else LATEST)
    delay_s = args.process_delay_ms / 1000
    delivered = 0

    async def deliver(record: ConsumedRecord) -> None:
        nonlocal delivered
        if delay_s:
            await trio.sleep(delay_s)
        print(format_record(record, as_json=args.json, ordered=args.ordered,
                            properties=properties), flush=True)
        delivered += 1
        if delivered == args.max_messages:
            scope.cancel()  # the position moves past this record before the commit

    try:
        await _check_topic(client, args.topic)
        with trio.move_on_after(args.duration) as scope, \
                trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                async def on_signal() -> None:
                    async for _ in signals:
                        scope.cancel()  # the consumer commits and leaves on the way out
                        return
                nursery.start_soon(on_signal)
                await consumer.run(deliver)
    finally:
        with trio.CancelScope(shield=True):
            await client.aclose()


def run(args: argparse.Namespace) -> int:
    if args.ordered and args.group is None:
        raise usage_error("--ordered needs --group")
    if args.duration <= 0 or args.process_delay_ms < 0:
        raise usage_error("--duration must be > 0 and --process-delay-ms >= 0")
    if args.max_messages is not None and args.max_messages <= 0:
        raise usage_error("--max-messages must be > 0")
    properties = parse_properties(args.property)
    if args.group is None:  # as kafka-console-consumer.sh names its group
        args.group = f"console-consumer-{random.randrange(100_000):05d}"
    addresses = broker_addresses(args.cluster, args.bootstrap_server)
    try:
        trio.run(consume, args, addresses, properties)
    except ClientError as exc:
        raise CommandError(f"consume {args.topic} in group {args.group}: {exc}") from None
    except BaseExceptionGroup as group:  # a failure inside the signal nursery
        failures = group.subgroup(ClientError)
        if failures is None:
            raise
        first = failures.exceptions[0]
        raise CommandError(f"consume {args.topic} in group {args.group}: {first}") from None
    return 0
