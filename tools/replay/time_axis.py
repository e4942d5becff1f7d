"""The replay's time-axis tables as events on lanes (for the HTML report's timeline) and
as a run's figures (for report.json and `kraft replay --compare`).

The rule: an event is drawn where the metadata log puts it, at its batch's append time;
an event without a time (a log written before batches were timed) is counted, never
placed at 0. A span still open at the end of the log ends at the log's last time. The
lanes: the chaos faults (`kraft replay --faults`), the elections (each epoch's first
record), each broker's fenced spans (from its registration or fencing to its next
event), the partitions' leaderless spans, the ISR changes (shrinks and expansions of a
partition's ISR) and the topics' events (creation, config, rename, resize, deletion;
each names its topic, whose whole story `topic_stories` holds). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tools.replay.timeline import Timeline

# availability columns used here
_LEADERLESS, _UNDER_REPLICATED, _UNDER_MIN_ISR, _TIMES_KNOWN = 8, 9, 10, 12


@dataclass(frozen=True, slots=True)
class Event:
    lane: str
    kind: str  # the CSS class: fault, election, fenced, leaderless, isr, topic
    start_ms: int
    end_ms: int | None  # None: a point in time
    label: str
    topic: str | None = None  # the topic id whose story a click shows
    detail: str | None = None  # fenced: register or fence; isr: shrink or expand; topic: event


@dataclass(slots=True, kw_only=True)
class Axis:
    """The events in lane order, the time span they cover, how many had no time, and
    where the log's tables begin (its replay base: offset 0, or the snapshot its log
    starts at) with the faults that started before them."""

    lanes: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    start_ms: int | None = None
    end_ms: int | None = None
    untimed: int = 0
    log_start: tuple[int, int | None] | None = None  # (first offset, its time)
    faults_before_log: int = 0


def _fault_label(fault: Sequence[Any]) -> str:
    kind, target, leader, amount, _, end, error = fault
    who = "no node" if target is None else f"node {target}"
    text = f"{kind}{'' if amount is None else f' ({amount:g})'} {who}" \
        + (" (the leader)" if leader else "")
    return text + (" never healed" if end is None else "") + (f": {error}" if error else "")


def _leaderless_spans(timeline: Timeline) -> list[tuple[str, int, int | None, int | None]]:
    """(name, partition, from ms, to ms) of each span a partition had no leader: from
    the change that left it leaderless to the next change that gave it one, its end or
    the log end."""
    open_since: dict[tuple[str, int], tuple[str, int | None]] = {}
    spans = []
    for topic_id, name, partition, change, _, _, time_ms, leader, *_ in \
            timeline.partition_history:
        key = (topic_id, partition)
        if key in open_since and (leader is not None or change in ("deleted", "removed")):
            since_name, since = open_since.pop(key)
            spans.append((since_name, partition, since, time_ms))
        if leader is None and change in ("create", "change") and key not in open_since:
            open_since[key] = (name, time_ms)
    spans += [(name, key[1], since, timeline.end_ms)
              for key, (name, since) in open_since.items()]
    return spans


Candidate = tuple[str, str, int | None, int | None, str, str | None, str | None]


def _isr_changes(timeline: Timeline) -> list[Candidate]:
    """Each change of a partition's ISR: `expand` when it grew, else `shrink`."""
    isr_of: dict[tuple[str, int], list[int]] = {}
    out: list[Candidate] = []
    for topic_id, name, partition, change, _, _, time_ms, _, isr, *_ in \
            timeline.partition_history:
        key = (topic_id, partition)
        before = isr_of.get(key)
        if change == "create":
            isr_of[key] = isr
        elif change == "change" and before is not None and isr != before:
            isr_of[key] = isr
            out.append(("ISR changes", "isr", time_ms, None,
                        f"{name}-{partition}: ISR {before} -> {isr}", topic_id,
                        "expand" if len(isr) > len(before) else "shrink"))
    return out


def axis(timeline: Timeline, faults: Sequence[Sequence[Any]] | None = None) -> Axis:
    """Every lane's events."""
    out = Axis(end_ms=timeline.end_ms)
    candidates: list[Candidate] = []
    for fault in faults or ():
        candidates.append(("chaos faults", "fault", fault[4], fault[5] or timeline.end_ms,
                           _fault_label(fault), None, fault[0]))
    for epoch, leader, _, start_ms, *_ in timeline.leadership:
        candidates.append(("elections", "election", start_ms, None,
                           f"epoch {epoch}: leader {leader}", None, None))
    for broker, _, _, event, _, time_ms, fenced, until, _, until_ms, duration in \
            sorted(timeline.broker_sessions, key=lambda row: (row[0], row[4])):
        if fenced:
            candidates.append((f"broker {broker} fenced", "fenced", time_ms, until_ms,
                               f"broker {broker} fenced ({event}) for {duration} ms, "
                               f"until {until}", None, event))
    for name, partition, since, until in _leaderless_spans(timeline):
        candidates.append(("no leader", "leaderless", since, until,
                           f"{name}-{partition} without a leader", None, None))
    candidates += _isr_changes(timeline)
    for topic_id, name, event, _, _, time_ms, partitions, key, value, new_name in \
            timeline.topic_lifecycle:
        what = {"create": f"created with {partitions} partition(s)",
                "resize": f"resized to {partitions} partition(s)",
                "config": f"{key}={value}", "rename": f"renamed {new_name}",
                "delete": "deleted"}.get(event, event)
        candidates.append(("topics", "topic", time_ms, None, f"{name}: {what}", topic_id,
                           event))
    for lane, kind, start, end, label, topic, detail in candidates:
        if start is None:
            out.untimed += 1
            continue
        out.events.append(Event(lane, kind, start, end, label, topic, detail))
        if lane not in out.lanes:
            out.lanes.append(lane)
    if timeline.leadership:
        out.log_start = (timeline.leadership[0][2], timeline.leadership[0][3])
        first_ms = out.log_start[1]
        out.faults_before_log = 0 if first_ms is None else sum(
            1 for fault in faults or () if fault[4] < first_ms)
    times = [t for e in out.events for t in (e.start_ms, e.end_ms) if t is not None]
    if times:
        out.start_ms, out.end_ms = min(times), max([*times, out.end_ms or 0])
    return out


def topic_stories(timeline: Timeline) -> dict[str, list[dict[str, Any]]]:
    """topic id -> its `topic_lifecycle` rows, in log order, as the report shows them."""
    stories: dict[str, list[dict[str, Any]]] = {}
    for topic_id, name, event, offset, epoch, time_ms, partitions, key, value, new_name in \
            timeline.topic_lifecycle:
        stories.setdefault(topic_id, []).append(
            {"event": event, "name": name, "offset": offset, "epoch": epoch,
             "time_ms": time_ms, "partitions": partitions, "config_key": key,
             "config_value": value, "new_name": new_name})
    return stories


def _total(rows: Sequence[Sequence[Any]], column: int) -> int | None:
    known = [row[column] for row in rows if row[_TIMES_KNOWN]]
    return sum(known) if known else None


def figures(timeline: Timeline, availability: Sequence[Sequence[Any]],
            faults: Sequence[Sequence[Any]] | None = None) -> dict[str, Any]:
    """A run's availability and election figures (None: unknown without times)."""
    times = [row[3] for row in timeline.leadership if row[3] is not None]
    elections = [row[3] for row in timeline.leadership]
    isr = _isr_changes(timeline)
    out: dict[str, Any] = {
        "span_ms": None if not times or timeline.end_ms is None
        else timeline.end_ms - min(times),
        "elections": len(elections),
        "fencings": sum(1 for row in timeline.broker_sessions if row[3] == "fence"),
        "fenced_ms": _sum_known([row[10] for row in timeline.broker_sessions if row[6]]),
        "isr_shrinks": sum(1 for change in isr if change[6] == "shrink"),
        "isr_expands": sum(1 for change in isr if change[6] == "expand"),
        "partitions": len(availability),
        "leaderless_ms": _total(availability, _LEADERLESS),
        "max_leaderless_ms": max((row[_LEADERLESS] for row in availability
                                  if row[_TIMES_KNOWN]), default=None),
        "partitions_leaderless": sum(1 for row in availability if row[_LEADERLESS]),
        "under_replicated_ms": _total(availability, _UNDER_REPLICATED),
        "partitions_under_replicated": sum(1 for row in availability
                                           if row[_UNDER_REPLICATED]),
        "under_min_isr_ms": _total(availability, _UNDER_MIN_ISR),
        "partitions_under_min_isr": sum(1 for row in availability if row[_UNDER_MIN_ISR]),
    }
    if faults is not None:
        out["faults"] = len(faults)
        out["elections_during_faults"] = sum(
            1 for at in elections if at is not None and any(
                f[4] <= at <= (f[5] if f[5] is not None else at) for f in faults))
    return out


def _sum_known(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
