"""The node's clock: monotonic milliseconds for the core, and the trio time at which a
deadline in those milliseconds falls, to sleep until it.

`TrioClock` reads trio's clock (so a test's `trio.testing.MockClock` drives it) shifted
to read like wall-clock time (DescribeQuorum reports it). `kraft chaos` skews a node's
clock with `tools.server.faults.SkewedClock`. Every clock is monotonic.
"""

from __future__ import annotations

import time
from typing import Protocol

import trio


class Clock(Protocol):
    def start(self) -> None:
        """Called once in the node's trio run, before any reading."""

    def now_ms(self) -> int: ...

    def trio_time_at(self, deadline_ms: int) -> float:
        """The trio time at which `now_ms()` reaches `deadline_ms` (sleep until it)."""


class TrioClock:
    def __init__(self) -> None:
        self._offset_s = 0.0

    def start(self) -> None:
        self._offset_s = time.time() - trio.current_time()

    def now_ms(self) -> int:
        return int((trio.current_time() + self._offset_s) * 1000)

    def trio_time_at(self, deadline_ms: int) -> float:
        return deadline_ms / 1000 - self._offset_s
