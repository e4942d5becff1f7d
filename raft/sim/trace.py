"""The last events of a run, kept cheaply (raw objects in a ring buffer) and formatted as
readable lines only when a violation is reported."""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any

_MAX_LINE = 220


class Trace:
    def __init__(self, size: int) -> None:
        self._events: deque[tuple[int, int, str, Any]] = deque(maxlen=max(1, size))
        self.enabled = size > 0

    def add(self, time_us: int, node_id: int, kind: str, obj: Any) -> None:
        if self.enabled:
            self._events.append((time_us, node_id, kind, obj))

    def lines(self) -> list[str]:
        return [format_event(*event) for event in self._events]


def format_event(time_us: int, node_id: int, kind: str, obj: Any) -> str:
    who = f"n{node_id}" if node_id else "--"
    if kind == "recv":
        text = f"<- n{obj.src} {brief(obj.message)}"
    elif kind == "drop":
        text = f"lost in flight: n{obj.src} -> n{obj.dst} {brief(obj.message)}"
    elif kind == "ready":
        text = f"ready {describe_ready(obj)}"
    elif kind == "state":
        role, epoch, leader = obj
        text = f"is {role} in epoch {epoch}" + (f", leader {leader}" if leader is not None
                                                else "")
    elif kind == "propose":
        text = "propose -> " + ("not leader" if obj is None
                                else f"epoch {obj[0]} offset {obj[1]}")
    elif kind == "start":
        text = f"starts (incarnation {obj})"
    elif kind == "crash":
        text = f"crashes{' (' + obj + ')' if obj else ''}"
    elif kind in ("pause", "resume"):
        text = "pauses (stop-the-world)" if kind == "pause" else "resumes"
    elif kind == "resign":
        text = "resigns (graceful shutdown)"
    elif kind == "snapshot":
        snapshot_id, delay_ms = obj
        text = (f"snapshots its state: {snapshot_id.end_offset}-{snapshot_id.epoch}, log start"
                + (" kept" if delay_ms is None else " moves at once" if delay_ms == 0
                   else f" moves in {delay_ms:.0f} ms"))
    elif kind == "trim":
        snapshot_id, moved = obj
        text = (f"log start {'moved' if moved else 'not moved (refused)'} to "
                f"{snapshot_id.end_offset}-{snapshot_id.epoch}")
    else:
        text = _describe_other(kind, obj)
    line = f"{time_us / 1000:11.3f} ms  {who:>4}  {text}"
    return line if len(line) <= _MAX_LINE else line[:_MAX_LINE - 3] + "..."


def _describe_other(kind: str, obj: Any) -> str:
    if kind == "peer":
        peer, refused = obj
        return f"hears its connection to n{peer} was {'refused' if refused else 'lost'}"
    return f"{kind}: {obj}"


def describe_ready(ready: Any) -> str:
    parts = []
    if ready.election is not None:
        e = ready.election
        parts.append(f"persist epoch={e.epoch} leader={e.leader_id} voted={e.voted_id}")
    if ready.truncate_to is not None:
        parts.append(f"truncate to {ready.truncate_to}")
    if ready.entries:
        first, last = ready.entries[0], ready.entries[-1]
        parts.append(f"append [{first.base_offset}..{last.last_offset}] "
                     f"epoch {last.epoch}")
    if ready.messages:
        sent = ", ".join(f"{type(m.message).__name__}->n{m.dst}" for m in ready.messages[:4])
        more = len(ready.messages) - 4
        parts.append(f"send {sent}" + (f" +{more}" if more > 0 else ""))
    if ready.high_watermark is not None:
        parts.append(f"hw={ready.high_watermark}")
    loaded = getattr(ready, "loaded_snapshot", None)
    if loaded is not None:
        parts.append(f"loaded snapshot {loaded.end_offset}-{loaded.epoch}")
    return "; ".join(parts) or "(empty)"


def brief(value: Any, depth: int = 0) -> str:
    """A compact repr: bytes as their length, long sequences cut, defaults left out."""
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)}B>"
    if type(value).__name__ == "Uuid":
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if depth > 3:
            return type(value).__name__
        fields = []
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            if f.name == "cluster_id":
                continue
            fields.append(f"{f.name}={brief(v, depth + 1)}")
        return f"{type(value).__name__}({', '.join(fields)})"
    if isinstance(value, list | tuple):
        items = [brief(v, depth + 1) for v in value[:3]]
        if len(value) > 3:
            items.append(f"...{len(value)} items")
        return "[" + ", ".join(items) + "]"
    return str(value)
