"""How long each partition went without a leader, under-replicated (ISR smaller than
its replicas) or below its topic's `min.insync.replicas`, from `partition_history` and
the topic's config changes (`tools.replay.timeline`).

The rule: a partition's state holds from the change that set it until the next change
of the partition or of its topic's `min.insync.replicas` (Kafka's default, 1, when not
set), and its life runs from its creation (or its first change in a log replayed from a
snapshot) to its removal, its topic's deletion, or the end of the log; a partition
created again after a removal is a new row. Times are the batches' append times: when
any change in a partition's life has no time (a log written before batches were timed)
its durations are None, never 0, and `times_known` is false. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from metadata.topic_configs import KEYS, MIN_INSYNC_REPLICAS
from tools.replay.timeline import LOG_END, Timeline, elapsed

DEFAULT_MIN_INSYNC = int(KEYS[MIN_INSYNC_REPLICAS].default)
_ENDS = ("deleted", "removed")
# partition_history columns used here
_TOPIC, _NAME, _PARTITION, _CHANGE, _OFFSET, _TIME, _LEADER, _ISR, _REPLICAS = (
    0, 1, 2, 3, 4, 6, 7, 8, 9)


def _min_insync_changes(timeline: Timeline) -> dict[str, list[tuple[int, int | None, int]]]:
    """topic id -> [(offset, time, min.insync.replicas from then on)], in offset order."""
    out: dict[str, list[tuple[int, int | None, int]]] = {}
    for topic_id, _, event, offset, _, time_ms, _, key, value, _ in timeline.topic_lifecycle:
        if event == "config" and key == MIN_INSYNC_REPLICAS:
            out.setdefault(topic_id, []).append(
                (offset, time_ms, DEFAULT_MIN_INSYNC if value is None else int(value)))
    return out


def _lives(timeline: Timeline) -> list[list[tuple[Any, ...]]]:
    """Each partition life's history rows, in offset order: a life ends at a removal or
    deletion row, and a create row after that begins another."""
    open_lives: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
    lives: list[list[tuple[Any, ...]]] = []
    for row in timeline.partition_history:
        key = (row[_TOPIC], row[_PARTITION])
        life = open_lives.get(key)
        if life is None:
            life = open_lives[key] = []
            lives.append(life)
        life.append(row)
        if row[_CHANGE] in _ENDS:
            del open_lives[key]
    return lives


def _life_row(life: Sequence[tuple[Any, ...]], min_insync: list[tuple[int, int | None, int]],
              end_offset: int, end_ms: int | None) -> tuple[Any, ...]:
    first, last = life[0], life[-1]
    ended = last[_CHANGE] in _ENDS
    stop = (last[_OFFSET], last[_TIME]) if ended else (end_offset, end_ms)
    required = DEFAULT_MIN_INSYNC
    points: list[tuple[int, int | None, tuple[Any, ...] | None, int | None]] = []
    for offset, time_ms, value in min_insync:
        if offset < first[_OFFSET]:
            required = value
        elif offset < stop[0]:
            points.append((offset, time_ms, None, value))
    points += [(row[_OFFSET], row[_TIME], row, None) for row in life]
    points.sort(key=lambda point: point[0])
    points.append((stop[0], stop[1], None, None))
    totals = [0, 0, 0]  # leaderless, under-replicated, under min.insync.replicas
    known = all(point[1] is not None for point in points)
    state: tuple[Any, ...] | None = None
    for (_, start_ms, row, changed), (_, next_ms, _, _) in zip(points, points[1:],
                                                               strict=False):
        state = row if row is not None else state
        required = changed if changed is not None else required
        if state is None or not known or state[_CHANGE] in _ENDS:
            continue
        span = elapsed(start_ms, next_ms) or 0
        isr, replicas = len(state[_ISR] or ()), len(state[_REPLICAS] or ())
        totals[0] += span if state[_LEADER] is None else 0
        totals[1] += span if isr < replicas else 0
        totals[2] += span if isr < required else 0
    shown: list[int | None] = list(totals) if known else [None, None, None]
    return (first[_TOPIC], last[_NAME], first[_PARTITION], first[_OFFSET], first[_TIME],
            stop[0], stop[1], last[_CHANGE] if ended else LOG_END, *shown, required, known)


def availability(timeline: Timeline) -> list[tuple[Any, ...]]:
    """One row per partition life (`tools.replay.views.PARTITION_AVAILABILITY`)."""
    min_insync = _min_insync_changes(timeline)
    return [_life_row(life, min_insync.get(life[0][_TOPIC], []), timeline.end_offset,
                      timeline.end_ms) for life in _lives(timeline)]
