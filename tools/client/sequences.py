"""`kraft produce --ordered` (tools/commands/produce.py): per-key sequence numbers
through the ordered producer (tools/client/producer.py), each acknowledged record
printed as it is acknowledged.

Record n has key `{prefix}{n mod K}` and value `n div K` as decimal text: every key's
values count 0, 1, 2, ... in the order they were acknowledged. With `--unkeyed U`, of
every K + U records the last U have no key (round-robin over the partitions) and the
value `unkeyed-{prefix}{m}`, m counting them: unique across producers of other prefixes.
It stops after `--count` records or on SIGTERM/SIGINT, letting the record in flight
finish (for at most STOP_GRACE_S): a record is printed only once acknowledged.
"""

from __future__ import annotations

import argparse
import json
import signal
from collections.abc import AsyncIterator

import trio

from tools.client.connection import ClientError, KafkaClient
from tools.client.producer import Acknowledged, OrderedProducer
from tools.errors import CommandError, usage_error

STOP_GRACE_S = 5.0


def _line(ack: Acknowledged, as_json: bool) -> str:
    key, value = None if ack.key is None else ack.key.decode(), ack.value.decode()
    if as_json:
        return json.dumps({"key": key, "value": value, "partition": ack.partition,
                           "offset": ack.offset})
    return f"{'null' if key is None else key} {value} -> {ack.partition}:{ack.offset}"


def sequence_record(n: int, *, keys: int, unkeyed: int, prefix: str
                    ) -> tuple[bytes | None, bytes]:
    """Record n's (key, value): `keys` keyed slots then `unkeyed` unkeyed ones per round."""
    round_, slot = divmod(n, keys + unkeyed)
    if slot < keys:
        return f"{prefix}{slot}".encode(), str(round_).encode()
    return None, f"unkeyed-{prefix}{round_ * unkeyed + slot - keys}".encode()


async def produce_sequences(args: argparse.Namespace, brokers: list[str]) -> None:
    client = KafkaClient(brokers, ssl_context=args.client_ssl, sasl=args.client_sasl)
    producer = OrderedProducer(client, args.topic, timeout_s=args.timeout)
    stopping = trio.Event()
    sending = trio.CancelScope()

    async def on_signal(signals: AsyncIterator[int]) -> None:
        async for _ in signals:
            stopping.set()
            sending.deadline = min(sending.deadline, trio.current_time() + STOP_GRACE_S)
            return

    try:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(on_signal, signals)
                start = trio.current_time()
                with sending:
                    for n in range(args.count):
                        if stopping.is_set():
                            break
                        if args.rate:
                            with trio.move_on_at(start + n / args.rate):
                                await stopping.wait()
                            if stopping.is_set():
                                break
                        key, value = sequence_record(n, keys=args.keys,
                                                     unkeyed=args.unkeyed,
                                                     prefix=args.key_prefix)
                        ack = await producer.send(key, value)
                        print(_line(ack, args.json), flush=True)
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await client.aclose()


def run_ordered(args: argparse.Namespace, brokers: list[str]) -> int:
    if args.keys is None or args.count is None:
        raise usage_error("--ordered needs --keys K and --count N")
    if args.keys < 1 or args.count < 0 or args.unkeyed < 0 or \
            (args.rate is not None and args.rate <= 0):
        raise usage_error("--keys must be >= 1, --count >= 0, --unkeyed >= 0 and --rate > 0")
    if args.values:
        raise usage_error("--ordered makes its own values; give no VALUE")
    try:
        trio.run(produce_sequences, args, brokers)
    except ClientError as exc:
        raise CommandError(f"ordered produce to {args.topic}: {exc}") from None
    except BaseExceptionGroup as group:
        failures = group.subgroup(ClientError)
        if failures is None:
            raise
        raise CommandError(f"ordered produce to {args.topic}: "
                           f"{_first(failures)}") from None
    return 0


def _first(group: BaseExceptionGroup[ClientError]) -> BaseException:
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first
