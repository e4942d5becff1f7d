"""A test-only fault hook for one node: a slow disk, a skewed clock (used by `kraft chaos`)
and a broker's frozen metadata.

`fault.injection.file` (default empty: off) names a JSON file such as

    {"fsync_delay_ms": 200, "clock_rate": 0.9, "metadata_frozen": true}

that the node re-reads at most every 100 ms (a `stat`; the file is parsed only when its
inode, mtime or size changed). `fsync_delay_ms` > 0: the node sleeps that long (trio.sleep)
before the fsyncs of each turn that writes quorum-state or flushes the log (a slow disk).
`clock_rate` (default 1.0): the node's `now_ms` advances at that rate relative to trio's
clock (still monotonic). `metadata_frozen` (default false): a broker's Kafka side keeps
the metadata image it had when the flag was first read (a partition leader whose
metadata lags; `tools.server.faults.FrozenMetadata`), its raft observer still
replicating, until the flag is cleared. A missing file means no fault; write it
atomically (temp file + rename). A malformed file is logged and ignored (no fault). Never
configured in production.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.1
MAX_FSYNC_DELAY_MS = 60_000
CLOCK_RATE_RANGE = (0.1, 10.0)


class FaultInjection:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.fsync_delay_ms = 0
        self.clock_rate = 1.0
        self.metadata_frozen = False
        self.on_change: list[Callable[[], None]] = []  # called once the faults changed
        self._checked_at: float | None = None
        self._seen: tuple[int, int, int] | None = None

    def poll(self, now_s: float) -> None:
        """Re-read the file if `POLL_INTERVAL_S` passed since the last check and it changed."""
        if self._checked_at is not None and now_s - self._checked_at < POLL_INTERVAL_S:
            return
        self._checked_at = now_s
        try:
            st = os.stat(self.path)
        except OSError:
            seen = None
        else:
            seen = (st.st_ino, st.st_mtime_ns, st.st_size)
        if seen == self._seen:
            return
        self._seen = seen
        delay, rate, frozen = 0, 1.0, False
        if seen is not None:
            try:
                spec = json.loads(self.path.read_text())
                delay, rate, frozen = _parse(spec)
            except (OSError, ValueError) as exc:
                log.warning("fault injection file ignored",
                            extra={"path": str(self.path), "error": str(exc)})
        changed = (delay, rate, frozen) != (self.fsync_delay_ms, self.clock_rate,
                                            self.metadata_frozen)
        if changed:
            log.warning("fault injection", extra={
                "path": str(self.path), "fsync_delay_ms": delay, "clock_rate": rate,
                "metadata_frozen": frozen})
        self.fsync_delay_ms, self.clock_rate, self.metadata_frozen = delay, rate, frozen
        if changed:
            for listener in self.on_change:
                listener()


def _parse(spec: object) -> tuple[int, float, bool]:
    if not isinstance(spec, dict):
        raise ValueError("expected a JSON object")
    delay = spec.get("fsync_delay_ms", 0)
    rate = spec.get("clock_rate", 1.0)
    frozen = spec.get("metadata_frozen", False)
    if not isinstance(frozen, bool):
        raise ValueError(f"metadata_frozen: expected true or false, got {frozen!r}")
    if isinstance(delay, bool) or not isinstance(delay, int) or \
            not 0 <= delay <= MAX_FSYNC_DELAY_MS:
        raise ValueError(f"fsync_delay_ms: expected 0..{MAX_FSYNC_DELAY_MS}, got {delay!r}")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or \
            not CLOCK_RATE_RANGE[0] <= rate <= CLOCK_RATE_RANGE[1]:
        raise ValueError(f"clock_rate: expected {CLOCK_RATE_RANGE[0]}..{CLOCK_RATE_RANGE[1]},"
                         f" got {rate!r}")
    return delay, float(rate), frozen


def write_fault_file(path: str | os.PathLike[str], *, fsync_delay_ms: int = 0,
                     clock_rate: float = 1.0, metadata_frozen: bool = False) -> None:
    """Atomically (temp + rename) set a node's faults; all defaults remove the file."""
    path = Path(path)
    if fsync_delay_ms == 0 and clock_rate == 1.0 and not metadata_frozen:
        clear_fault_file(path)
        return
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(json.dumps({"fsync_delay_ms": fsync_delay_ms, "clock_rate": clock_rate,
                                "metadata_frozen": metadata_frozen}))
    os.replace(temp, path)


def clear_fault_file(path: str | os.PathLike[str]) -> None:
    Path(path).unlink(missing_ok=True)
