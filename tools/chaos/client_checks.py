"""Checks of Kafka's client promises over the group workload's histories
(tools/chaos/group_workload.py): pure functions of the recorded operations and the group
topic's final contents (every record of every partition, read after the faults healed).

Rules (a violation of each is a `Violation` of that kind):
- idem_duplicate: an idempotent producer's record (PRODUCER:SEQ) is in the log once at most,
  unless its two copies are stored under two epochs of one producer id. After a message
  timeout librdkafka bumps the producer epoch (KIP-360) and sends the records still
  unacknowledged again under the new epoch with sequences from 0, where the broker's
  per-epoch sequence check cannot see a first copy it appended: a chaos run showed the
  same value at (epoch 0, seq 121) and (epoch 1, seq 0) of one producer id. Such pairs
  are counted (`duplicates_after_epoch_bump`), not flagged; the producer id and epoch of
  each copy come from the brokers' partition logs (`ReadRecord.producer`).
- idem_order: in each partition, read in offset order, each producer's sequence numbers
  strictly increase.
- idem_lost: an acknowledged idempotent produce is in the log at its acknowledged
  partition and offset.
- unconsumed: every acknowledged record was consumed by the group at least once (by the
  end: the group drained after the faults healed).
- consumed_phantom: what a member consumed at a partition and offset is what the log
  finally holds there (a consumer never sees a record the log later lost).
- skipped: after a rebalance, a member's first record of a partition is at or below the
  committed offset its assignment read (no record between the committed offset and the
  first one consumed), and within one assignment no record is jumped over.
- committed_unconsumed: every record below an offset the group committed was consumed
  by some member.
- commit_backwards: committed offsets of a partition never go backwards: a read of them
  (`committed`, `assign`) invoked after a commit or another read completed returns at
  least what that one committed or returned.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tools.chaos.checker import ReadRecord, Violation
from tools.chaos.history import Event, Operation, pair

NO_COMMIT = -1  # a read of committed offsets that found none for the partition


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientResult:
    counts: dict[str, int]
    violations: tuple[Violation, ...]
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**self.counts, **self.extra,
                "violations": [v.to_json() for v in self.violations]}


def parse_value(value: str) -> tuple[str, int] | None:
    """(producer, seq) of an idempotent producer's value PRODUCER:SEQ; None otherwise."""
    producer, _, seq = value.rpartition(":")
    if not producer or not seq.isdigit():
        return None
    return producer, int(seq)


def check_clients(events: Iterable[Event], reads: Sequence[ReadRecord], *,
                  read_complete: bool, member_kills: int = 0) -> ClientResult:
    """`reads`: every record of the group topic after healing; `read_complete`: whether
    every partition was read to its high watermark (if not, the rules that need the whole
    log are skipped and that is reported)."""
    operations = [op for op in pair(events) if op.op in CLIENT_OPS]
    by_op: dict[str, list[Operation]] = defaultdict(list)
    for op in operations:
        by_op[op.op].append(op)
    log = _log_index(reads)
    violations: list[Violation] = []
    idempotence, resent = _idempotent_log(reads)
    violations += idempotence
    if read_complete:
        violations += _idempotent_lost(by_op["idem_produce"], log)
        violations += _consumed_phantom(by_op["consume"], log)
    violations += _unconsumed(by_op["idem_produce"], by_op["consume"])
    violations += _skipped(by_op["assign"], by_op["consume"], log)
    violations += _committed_unconsumed(by_op["commit"], by_op["committed"] + by_op["assign"],
                                        by_op["consume"], log)
    violations += _commit_backwards(by_op["commit"], by_op["committed"] + by_op["assign"])
    consumed = Counter(str(op.args.get("value")) for op in by_op["consume"])
    statuses = Counter((op.op, op.status) for op in operations)
    counts = {
        "produced": len(by_op["idem_produce"]),
        "acked": statuses[("idem_produce", "ok")],
        "acked_without_offset": sum(1 for op in by_op["idem_produce"]
                                    if op.is_ok and op.result.get("offset") is None),
        "produce_unknown": statuses[("idem_produce", "unknown")],
        "consumed": len(by_op["consume"]),
        "consumed_distinct": len(consumed),
        "redelivered": sum(n - 1 for n in consumed.values()),
        "log_records": len(reads),
        "log_duplicates": sum(1 for v in violations if v.kind == "idem_duplicate"),
        "duplicates_after_epoch_bump": len(resent),
        "rebalances": len(by_op["assign"]),
        "member_kills": member_kills,
        "commits": len(by_op["commit"]),
        "commits_ok": statuses[("commit", "ok")],
        "committed_reads": statuses[("committed", "ok")] + statuses[("assign", "ok")],
        "producer_fatal": len(by_op["producer_fatal"]),
    }
    return ClientResult(counts=counts, violations=tuple(violations),
                        extra={"read_complete": read_complete})


CLIENT_OPS = frozenset({"idem_produce", "consume", "assign", "commit", "committed",
                        "producer_fatal"})


def _log_index(reads: Sequence[ReadRecord]) -> dict[int, dict[int, str]]:
    log: dict[int, dict[int, str]] = defaultdict(dict)
    for record in reads:
        log[record.partition][record.offset] = record.value
    return log


def _idempotent_log(reads: Sequence[ReadRecord]) -> tuple[list[Violation], list[str]]:
    """The violations, and the value of each later copy stored under another epoch of the
    first copy's producer id (counted, not flagged)."""
    violations = []
    resent: list[str] = []
    seen: dict[tuple[str, int], ReadRecord] = {}
    last: dict[tuple[int, str], tuple[int, int]] = {}  # (partition, producer) -> seq, offset
    for record in sorted(reads, key=lambda r: (r.partition, r.offset)):
        parsed = parse_value(record.value)
        if parsed is None:
            continue
        first = seen.get(parsed)
        if first is not None and _under_two_epochs(first.producer, record.producer):
            resent.append(record.value)
            continue
        if first is not None:
            violations.append(Violation(kind="idem_duplicate", message=(
                f"{record.value!r} is in the log twice: partition {first.partition} offset "
                f"{first.offset} (producer {first.producer}) and partition "
                f"{record.partition} offset {record.offset} (producer {record.producer})")))
            continue  # (a duplicate is out of order too: reported once, as that)
        seen[parsed] = record
        producer, seq = parsed
        previous = last.get((record.partition, producer))
        if previous is not None and seq <= previous[0]:
            violations.append(Violation(kind="idem_order", message=(
                f"partition {record.partition}: {producer} seq {seq} at offset "
                f"{record.offset} after seq {previous[0]} at offset {previous[1]}")))
        last[(record.partition, producer)] = (seq, record.offset)
    return violations, resent


def resent_after_epoch_bump(reads: Sequence[ReadRecord]) -> frozenset[str]:
    """The idempotent values stored twice under two epochs of one producer id (what
    `idem_duplicate` spares): `kraft replay --history` leaves their writes out, as it
    would take the unacknowledged first copy for a duplicate."""
    return frozenset(_idempotent_log(reads)[1])


def _under_two_epochs(first: tuple[int, int] | None, second: tuple[int, int] | None
                      ) -> bool:
    """Whether two copies are stored under different epochs of one producer id."""
    return first is not None and second is not None and first[0] >= 0 and \
        first[0] == second[0] and first[1] != second[1]


def _idempotent_lost(produces: Sequence[Operation], log: Mapping[int, Mapping[int, str]]
                     ) -> list[Violation]:
    """An acknowledgement without an offset (librdkafka reports a batch it knows was
    persisted, e.g. because a later batch of the producer was acknowledged, with no
    offset) must be in its partition at some offset."""
    violations = []
    values: dict[int, set[str]] = {}
    for op in produces:
        if not op.is_ok:
            continue
        partition, offset = int(op.result.get("partition") or 0), op.result.get("offset")
        if offset is None:
            if partition not in values:
                values[partition] = set(log.get(partition, {}).values())
            found = op.args.get("value") in values[partition]
        else:
            found = log.get(partition, {}).get(int(offset)) == op.args.get("value")
        if not found:
            violations.append(Violation(kind="idem_lost", op_index=op.index, message=(
                f"acknowledged {op.args.get('value')!r} at partition {partition} offset "
                f"{offset} is not in the log there")))
    return violations


def _unconsumed(produces: Sequence[Operation], consumes: Sequence[Operation]
                ) -> list[Violation]:
    consumed = {op.args.get("value") for op in consumes}
    return [Violation(kind="unconsumed", op_index=op.index, message=(
                f"acknowledged {op.args.get('value')!r} (partition "
                f"{op.result.get('partition')} offset {op.result.get('offset')}) was never "
                f"consumed by the group"))
            for op in produces if op.is_ok and op.args.get("value") not in consumed]


def _consumed_phantom(consumes: Sequence[Operation], log: Mapping[int, Mapping[int, str]]
                      ) -> list[Violation]:
    violations = []
    for op in consumes:
        partition, offset = int(op.args["partition"]), int(op.args["offset"])
        held = log.get(partition, {}).get(offset)
        if held != op.args.get("value"):
            violations.append(Violation(kind="consumed_phantom", op_index=op.index, message=(
                f"{op.process} consumed {op.args.get('value')!r} at partition {partition} "
                f"offset {offset}; the log holds {held!r} there")))
    return violations


def _records_between(log: Mapping[int, Mapping[int, str]], partition: int, low: int,
                     high: int, sorted_offsets: dict[int, list[int]]) -> list[int]:
    """Offsets of records of `partition` in [low, high)."""
    offsets = sorted_offsets.get(partition)
    if offsets is None:
        offsets = sorted_offsets[partition] = sorted(log.get(partition, {}))
    return offsets[bisect.bisect_left(offsets, low):bisect.bisect_left(offsets, high)]


def _skipped(assigns: Sequence[Operation], consumes: Sequence[Operation],
             log: Mapping[int, Mapping[int, str]]) -> list[Violation]:
    violations = []
    sorted_offsets: dict[int, list[int]] = {}
    committed_at: dict[tuple[str, int, int], int] = {}  # (process, session, partition)
    for op in assigns:
        if op.is_ok:
            for partition, offset in (op.result.get("committed") or {}).items():
                committed_at[(op.process, int(op.args.get("session", 0)), int(partition))] = (
                    0 if offset is None else int(offset))  # none: from the start (earliest)
    last: dict[tuple[str, int, int], int] = {}
    for op in sorted(consumes, key=lambda o: o.invoke_time):
        partition, offset = int(op.args["partition"]), int(op.args["offset"])
        key = (op.process, int(op.args.get("session", 0)), partition)
        if key in last:
            low, what = last[key] + 1, f"after offset {last[key]}"
        elif key in committed_at:
            low, what = committed_at[key], f"after a rebalance, committed {committed_at[key]}"
        else:
            low, what = offset, ""
        jumped = _records_between(log, partition, low, offset, sorted_offsets)
        if jumped:
            violations.append(Violation(kind="skipped", op_index=op.index, message=(
                f"{op.process} consumed partition {partition} offset {offset} {what}: "
                f"{len(jumped)} record(s) skipped (offsets {jumped[:5]}...)")))
        last[key] = max(offset, last.get(key, offset))
    return violations


def _committed_values(op: Operation) -> dict[int, int]:
    if op.op == "commit":
        return {int(p): int(o) for p, o in (op.args.get("offsets") or {}).items()}
    return {int(p): (NO_COMMIT if o is None else int(o))
            for p, o in (op.result.get("committed") or {}).items()}


def _committed_unconsumed(commits: Sequence[Operation], reads: Sequence[Operation],
                          consumes: Sequence[Operation], log: Mapping[int, Mapping[int, str]]
                          ) -> list[Violation]:
    highest: dict[int, int] = {}
    for op in list(commits) + list(reads):
        if op.is_ok:
            for partition, offset in _committed_values(op).items():
                highest[partition] = max(highest.get(partition, NO_COMMIT), offset)
    consumed: dict[int, set[int]] = defaultdict(set)
    for op in consumes:
        consumed[int(op.args["partition"])].add(int(op.args["offset"]))
    violations = []
    for partition, committed in sorted(highest.items()):
        missing = [o for o in sorted(log.get(partition, {})) if o < committed
                   and o not in consumed[partition]]
        if missing:
            violations.append(Violation(kind="committed_unconsumed", message=(
                f"partition {partition}: the group committed {committed} but never consumed "
                f"{len(missing)} record(s) below it (offsets {missing[:5]}...)")))
    return violations


def _commit_backwards(commits: Sequence[Operation], reads: Sequence[Operation]
                      ) -> list[Violation]:
    """A read invoked after a commit or read completed returns at least its offset."""
    known: dict[int, list[tuple[float, int]]] = defaultdict(list)  # completion, offset
    for op in list(commits) + list(reads):
        if op.is_ok and op.complete_time is not None:
            for partition, offset in _committed_values(op).items():
                known[partition].append((op.complete_time, offset))
    prefix_max: dict[int, tuple[list[float], list[int]]] = {}
    for partition, items in known.items():
        items.sort()
        times, maxima, best = [], [], NO_COMMIT
        for time, offset in items:
            best = max(best, offset)
            times.append(time)
            maxima.append(best)
        prefix_max[partition] = (times, maxima)
    violations = []
    for op in sorted(reads, key=lambda o: o.invoke_time):
        if not op.is_ok:
            continue
        for partition, offset in sorted(_committed_values(op).items()):
            times, maxima = prefix_max.get(partition, ([], []))
            before = bisect.bisect_left(times, op.invoke_time)
            if before and maxima[before - 1] > offset:
                violations.append(Violation(kind="commit_backwards", op_index=op.index,
                                            message=(
                    f"{op.process} read committed offset "
                    f"{'none' if offset == NO_COMMIT else offset} for partition "
                    f"{partition}, after {maxima[before - 1]} was committed or read")))
    return violations
