"""Per-key order across several consumers' outputs: the check behind ordered delivery
(`kraft order-check`, and the tests of ordered delivery).

Producers (`kraft produce --ordered --json`) print every acknowledged record: a key and
its sequence number as the value, from 0. Consumers (`kraft consume --ordered --json`)
print every delivered record with its delivery time `ts_ms`. Merged by delivery time,
each key's values must first arrive in increasing order, and every acknowledged value
must arrive. A value delivered again after it was already delivered is a redelivery
(at-least-once after a crash), counted apart: it breaks no order the group promised.

Deliveries by different consumers within the same millisecond have no order between
them; they are never counted as out of order.

A record without a key (a null `key`; its value names its producer, so it is unique)
has no order to keep: it must only arrive (`check_outputs`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Delivery:
    key: str
    value: int
    ts_ms: float
    consumer: int  # which output it came from
    line: int  # its place in that output
    partition: int = -1
    offset: int = -1


@dataclass(slots=True)
class OrderReport:
    delivered: int = 0
    acknowledged: int = 0
    redeliveries: int = 0
    out_of_order: list[str] = field(default_factory=list)  # first few, described
    out_of_order_count: int = 0
    missing: dict[str, list[int]] = field(default_factory=dict)  # key -> values never delivered
    unkeyed_missing: list[str] = field(default_factory=list)  # keyless values never delivered
    unacknowledged_delivered: int = 0  # sent, ack lost, yet stored: allowed

    @property
    def missing_count(self) -> int:
        return sum(len(v) for v in self.missing.values()) + len(self.unkeyed_missing)

    @property
    def ok(self) -> bool:
        return self.out_of_order_count == 0 and self.missing_count == 0

    def summary(self) -> str:
        return (f"{self.delivered} delivered, {self.acknowledged} acknowledged, "
                f"{self.out_of_order_count} out of order, {self.missing_count} missing, "
                f"{self.redeliveries} redelivered")


_KEPT_EXAMPLES = 20


def check_order(acknowledged: Iterable[tuple[str, int]],
                deliveries: Iterable[Delivery]) -> OrderReport:
    """`acknowledged`: (key, value) pairs the producers saw acknowledged."""
    report = OrderReport()
    acked: dict[str, set[int]] = {}
    for key, value in acknowledged:
        acked.setdefault(key, set()).add(value)
        report.acknowledged += 1
    merged = sorted(deliveries, key=lambda d: (d.ts_ms, d.consumer, d.line))
    seen: dict[str, set[int]] = {}
    history: dict[str, _KeyHistory] = {}
    for delivery in merged:
        report.delivered += 1
        values = seen.setdefault(delivery.key, set())
        if delivery.value in values:
            report.redeliveries += 1
            continue
        values.add(delivery.value)
        earlier = history.setdefault(delivery.key, _KeyHistory()).add(delivery)
        if earlier is not None:
            report.out_of_order_count += 1
            if len(report.out_of_order) < _KEPT_EXAMPLES:
                report.out_of_order.append(
                    f"key {delivery.key!r}: value {delivery.value} (partition "
                    f"{delivery.partition} offset {delivery.offset}, consumer "
                    f"{delivery.consumer}) after {earlier.value} (partition "
                    f"{earlier.partition} offset {earlier.offset}, consumer "
                    f"{earlier.consumer})")
    for key, values in sorted(acked.items()):
        never = sorted(values - seen.get(key, set()))
        if never:
            report.missing[key] = never
    report.unacknowledged_delivered = sum(
        len(values - acked.get(key, set())) for key, values in seen.items())
    return report


class _KeyHistory:
    """One key's first deliveries so far, in merged order: what was surely delivered
    before the next one (by the same consumer, or in an earlier millisecond)."""

    __slots__ = ("by_consumer", "before_ms", "ms", "in_ms")

    def __init__(self) -> None:
        self.by_consumer: dict[int, Delivery] = {}  # each consumer's highest value
        self.before_ms: Delivery | None = None  # the highest in milliseconds before `ms`
        self.ms = -1
        self.in_ms: Delivery | None = None  # the highest in millisecond `ms`

    def add(self, delivery: Delivery) -> Delivery | None:
        """Note `delivery`; return a higher value surely delivered before it, if any."""
        ms = int(delivery.ts_ms)
        if ms != self.ms:
            self.before_ms = _higher(self.before_ms, self.in_ms)
            self.ms, self.in_ms = ms, None
        earlier = _higher(self.before_ms, self.by_consumer.get(delivery.consumer))
        self.by_consumer[delivery.consumer] = _higher(
            self.by_consumer.get(delivery.consumer), delivery) or delivery
        self.in_ms = _higher(self.in_ms, delivery)
        return earlier if earlier is not None and earlier.value > delivery.value else None


def _higher(a: Delivery | None, b: Delivery | None) -> Delivery | None:
    if a is None:
        return b
    return a if b is None or a.value >= b.value else b


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a command's --json output; other lines are skipped."""
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def deliveries_from(outputs: Sequence[Sequence[dict[str, Any]]]) -> list[Delivery]:
    """The deliveries of keyed records."""
    return [Delivery(key=str(row["key"]), value=int(row["value"]), ts_ms=float(row["ts_ms"]),
                     consumer=consumer, line=line, partition=int(row.get("partition", -1)),
                     offset=int(row.get("offset", -1)))
            for consumer, rows in enumerate(outputs) for line, row in enumerate(rows)
            if row["key"] is not None]


def acknowledged_from(outputs: Sequence[Sequence[dict[str, Any]]]) -> list[tuple[str, int]]:
    """The (key, value) of every keyed record acknowledged."""
    return [(str(row["key"]), int(row["value"])) for rows in outputs for row in rows
            if row["key"] is not None]


def _unkeyed_values(outputs: Sequence[Sequence[dict[str, Any]]]) -> set[str]:
    return {str(row["value"]) for rows in outputs for row in rows if row["key"] is None}


def check_outputs(produced: Sequence[Sequence[dict[str, Any]]],
                  consumed: Sequence[Sequence[dict[str, Any]]]) -> OrderReport:
    """The producers' and consumers' --json rows: keyed records checked for order and
    arrival, records without a key for arrival."""
    report = check_order(acknowledged_from(produced), deliveries_from(consumed))
    report.unkeyed_missing = sorted(_unkeyed_values(produced) - _unkeyed_values(consumed))
    return report


def partitions_seen(deliveries: Iterable[Delivery]) -> Counter[int]:
    return Counter(d.partition for d in deliveries)
