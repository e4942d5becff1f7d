"""`kraft consume`: an ordered consumer-group member that prints every delivered record.

    kraft consume (--cluster DIR | --bootstrap-server HOST:PORT[,...]) --topic NAME
        --group ID --ordered [--duration SECONDS] [--json] [--no-gates]
        [--process-delay-ms MS]

Records are delivered in order per partition, and held back while the group has not
consumed what must come first after the topic's partition count changed
(tools/client/consumer.py). `--no-gates` skips those waits (to show the reordering they
prevent). Each record prints as one line (`--json`: key, value, partition, offset and the
delivery time ts_ms). It stops after `--duration` or on SIGTERM/SIGINT, committing its
positions and leaving the group. Exit 0; 1 when the group or the topic refuses; 2 on
bad usage.
"""

from __future__ import annotations

import argparse
import json
import signal

import trio

from tools.addresses import broker_addresses
from tools.client.connection import ClientError, KafkaClient
from tools.client.consumer import ConsumedRecord, OrderedConsumer
from tools.errors import CommandError, usage_error


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--cluster", metavar="DIR", help="a local cluster's directory")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--ordered", action="store_true",
                        help="ordered delivery across partition-count changes (required)")
    parser.add_argument("--duration", type=float, default=60.0, metavar="SECONDS")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-gates", action="store_true",
                        help="deliver without waiting for the group (may reorder keys)")
    parser.add_argument("--process-delay-ms", type=int, default=0, metavar="MS",
                        help="time spent on each record before the next")
    parser.add_argument("--heartbeat-interval-ms", type=int, default=500, metavar="MS")
    parser.add_argument("--session-timeout-ms", type=int, default=10_000, metavar="MS")


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode(errors="replace")


def _line(record: ConsumedRecord, as_json: bool) -> str:
    if as_json:
        return json.dumps({"key": _text(record.key), "value": _text(record.value),
                           "partition": record.partition, "offset": record.offset,
                           "ts_ms": record.ts_ms})
    return (f"{record.partition}:{record.offset} {_text(record.key)} "
            f"{_text(record.value)}")


async def consume(args: argparse.Namespace, addresses: list[str]) -> None:
    client = KafkaClient(addresses)
    consumer = OrderedConsumer(
        client, args.topic, args.group, use_gates=not args.no_gates,
        heartbeat_interval_s=args.heartbeat_interval_ms / 1000,
        session_timeout_ms=args.session_timeout_ms)
    delay_s = args.process_delay_ms / 1000

    async def deliver(record: ConsumedRecord) -> None:
        if delay_s:
            await trio.sleep(delay_s)
        print(_line(record, args.json), flush=True)

    try:
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
    if not args.ordered:
        raise usage_error("kraft consume needs --ordered (the only mode so far)")
    if args.duration <= 0 or args.process_delay_ms < 0:
        raise usage_error("--duration must be > 0 and --process-delay-ms >= 0")
    addresses = broker_addresses(args.cluster, args.bootstrap_server)
    try:
        trio.run(consume, args, addresses)
    except ClientError as exc:
        raise CommandError(f"consume {args.topic} in group {args.group}: {exc}") from None
    except BaseExceptionGroup as group:  # a failure inside the signal nursery
        failures = group.subgroup(ClientError)
        if failures is None:
            raise
        first = failures.exceptions[0]
        raise CommandError(f"consume {args.topic} in group {args.group}: {first}") from None
    return 0
