"""A history of client operations, one JSON object per line.

Each operation is recorded twice: an `invoke` event when the client sends it, then one
completion event: `ok` (the cluster acknowledged it), `failed` (the cluster definitely
did not apply it, e.g. an error code from the controller) or `unknown` (a timeout or a
dropped connection: it may or may not have taken effect). Times are `time.monotonic()`
seconds, so events of different threads can be ordered.

    {"index": 3, "process": "admin-1", "type": "invoke", "op": "create", "time": 12.5,
     "args": {"name": "t0"}}
    {"index": 3, "process": "admin-1", "type": "ok", "op": "create", "time": 12.7,
     "result": {"topic_id": "fmja9INwQxClI4eKGWbfrQ"}}
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INVOKE, OK, FAILED, UNKNOWN = "invoke", "ok", "failed", "unknown"
COMPLETIONS = (OK, FAILED, UNKNOWN)


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    index: int
    process: str
    type: str  # invoke | ok | failed | unknown
    op: str  # create | delete | describe_name | describe_id | produce | read | status
    time: float
    args: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"index": self.index, "process": self.process, "type": self.type,
                           "op": self.op, "time": self.time, "args": self.args,
                           "result": self.result}, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> Event:
        data = json.loads(line)
        return cls(index=int(data["index"]), process=str(data["process"]),
                   type=str(data["type"]), op=str(data["op"]), time=float(data["time"]),
                   args=dict(data.get("args") or {}), result=dict(data.get("result") or {}))


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    """An invocation paired with its completion (UNKNOWN when none was recorded)."""

    index: int
    process: str
    op: str
    args: dict[str, Any]
    status: str  # ok | failed | unknown
    invoke_time: float
    complete_time: float | None  # None: unknown, it may take effect at any later time
    result: dict[str, Any]

    @property
    def is_ok(self) -> bool:
        return self.status == OK

    @property
    def may_have_happened(self) -> bool:
        return self.status != FAILED

    @property
    def end_time(self) -> float:
        return float("inf") if self.complete_time is None else self.complete_time


def pair(events: Iterable[Event]) -> list[Operation]:
    """Operations in invocation order; an invocation without completion is UNKNOWN."""
    invokes: dict[int, Event] = {}
    completions: dict[int, Event] = {}
    for event in events:
        if event.type == INVOKE:
            invokes[event.index] = event
        elif event.type in COMPLETIONS:
            completions[event.index] = event
        else:
            raise ValueError(f"event {event.index}: unknown type {event.type!r}")
    operations = []
    for index, invoke in sorted(invokes.items(), key=lambda item: item[1].time):
        done = completions.get(index)
        status = UNKNOWN if done is None else done.type
        complete = None if done is None or status == UNKNOWN else done.time
        operations.append(Operation(index=index, process=invoke.process, op=invoke.op,
                                    args=invoke.args, status=status,
                                    invoke_time=invoke.time, complete_time=complete,
                                    result={} if done is None else done.result))
    return operations


def read_history(path: str | Path) -> list[Event]:
    with open(path) as handle:
        return [Event.from_json(line) for line in handle if line.strip()]


class HistoryWriter:
    """Thread-safe recorder; every event is appended (and flushed) to `path` at once, so
    a crashed run still leaves its history."""

    def __init__(self, path: str | Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.Lock()
        self._next = 0
        self._events: list[Event] = []
        self._completed = dict.fromkeys(COMPLETIONS, 0)  # for the progress display
        self._handle = open(self.path, "a")  # noqa: SIM115 - closed by close()

    def invoke(self, process: str, op: str, args: dict[str, Any]) -> int:
        with self._lock:
            index = self._next
            self._next += 1
            self._append(Event(index=index, process=process, type=INVOKE, op=op,
                               time=self._clock(), args=args))
        return index

    def complete(self, index: int, process: str, op: str, status: str,
                 result: dict[str, Any] | None = None) -> None:
        if status not in COMPLETIONS:
            raise ValueError(f"bad completion {status!r}")
        with self._lock:
            self._append(Event(index=index, process=process, type=status, op=op,
                               time=self._clock(), result=result or {}))

    def _append(self, event: Event) -> None:
        if self._handle.closed:  # a run torn down early: its workload threads still finish
            return
        self._events.append(event)
        if event.type in self._completed:
            self._completed[event.type] += 1
        self._handle.write(event.to_json() + "\n")
        self._handle.flush()

    def events(self) -> list[Event]:
        with self._lock:
            return list(self._events)

    def completed(self) -> dict[str, int]:
        """Operations completed so far by outcome (ok, failed, unknown)."""
        with self._lock:
            return dict(self._completed)

    def close(self) -> None:
        with self._lock:
            self._handle.close()

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events())
