"""The node's test-only faults from `fault.injection.file` (`raft.fault_injection`, set by
`kraft chaos` and tests), as the parts `raft.node.RaftNode` takes: a clock whose rate is
skewed (`SkewedClock`, still monotonic) and a wait before the fsyncs of a turn (a slow
disk); and what a broker's Kafka side takes: the image it serves by, frozen while the
file says so (`FrozenMetadata`: a partition leader whose metadata lags).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

from metadata.image import MetadataImage
from raft.clock import TrioClock
from raft.fault_injection import FaultInjection


class SkewedClock:
    """`now_ms` advances at `faults.clock_rate` times trio's clock, starting from the wall
    clock; a new rate applies from the reading that notices it on."""

    def __init__(self, faults: FaultInjection) -> None:
        self._faults = faults
        self._real_s = 0.0  # the trio time of the last reading
        self._virtual_s = 0.0  # ... and this clock's then

    def start(self) -> None:
        wall = TrioClock()
        wall.start()
        self._real_s = trio.current_time()
        self._virtual_s = wall.now_ms() / 1000

    def now_ms(self) -> int:
        real = trio.current_time()
        self._virtual_s += (real - self._real_s) * self._faults.clock_rate
        self._real_s = real
        self._faults.poll(real)
        return int(self._virtual_s * 1000)

    def trio_time_at(self, deadline_ms: int) -> float:
        ahead_s = deadline_ms / 1000 - self._virtual_s  # node time left, at the last reading
        return self._real_s + max(0.0, ahead_s) / self._faults.clock_rate


class FrozenMetadata:
    """The image a broker's Kafka side sees: the live one, or while `metadata_frozen` is
    set, the one it saw when it first noticed the freeze. The file is read as the node's
    clock polls it (every turn of its loop). A thaw is an image change to the Kafka side:
    `on_thaw` (its image-changed notice) wakes what waits on its plan, as the commit that
    would have brought those images does."""

    def __init__(self, faults: FaultInjection) -> None:
        self._faults = faults
        self._frozen: MetadataImage | None = None
        self.on_thaw: Callable[[], None] | None = None
        faults.on_change.append(self._changed)

    def _changed(self) -> None:
        if not self._faults.metadata_frozen and self._frozen is not None:
            self._frozen = None
            if self.on_thaw is not None:
                self.on_thaw()

    def view(self, live: MetadataImage) -> MetadataImage:
        if not self._faults.metadata_frozen:
            self._frozen = None
            return live
        if self._frozen is None:
            self._frozen = live
        return self._frozen


@dataclass(frozen=True)
class NodeFaults:
    clock: SkewedClock
    before_fsync: Callable[[], Awaitable[None]]
    metadata: FrozenMetadata


def node_faults(fault_file: str | os.PathLike[str]) -> NodeFaults:
    """The skewed clock, the slow disk and the frozen metadata that `fault_file`
    drives."""
    faults = FaultInjection(fault_file)

    async def before_fsync() -> None:
        if faults.fsync_delay_ms:
            await trio.sleep(faults.fsync_delay_ms / 1000)

    return NodeFaults(SkewedClock(faults), before_fsync, FrozenMetadata(faults))
