"""The steps of a simulated disk's multi-step operations, and its directory entries.

A real operation that must survive a crash takes several steps, each a system call
(`raft.common.durable.write_chunks_atomically`: temp file, fsync, rename, directory
fsync; `raft.log.DiskLog.advance_start`: the log-start file that way, then the segments
below deleted, then the directory fsynced; `DiskLog.truncate_to` and `DiskLog.reset_to`:
segments unlinked, the directory fsynced, then the cut or the new start). The simulated
disk takes the same steps through `DiskSteps.take`, so an armed crash (`DiskSteps.arm`)
strikes between any two of them: `take` raises `CrashPoint`, the steps before are done
and the rest never happen, and the simulator crashes the node on the spot
(`raft.sim.cluster`).

A name created or renamed in a directory is durable only once the directory is fsynced
(`SimDirectory`): until then a crash loses it, here always (the worst a power cut may
do), so code that skips a directory fsync it needs loses the file.
"""

from __future__ import annotations

from collections import Counter


class CrashPoint(Exception):
    """An armed crash struck before `step` of `operation` on the disk of `steps`."""

    def __init__(self, steps: DiskSteps, operation: str, step: str) -> None:
        super().__init__(f"crash in {operation}, before {step}")
        self.steps = steps
        self.operation = operation
        self.step = step


class DiskSteps:
    """Where an armed crash strikes: before the step `arm(count)` counts from now (0: the
    next one), in whatever operation takes it. `struck` counts the crashes by operation
    and step, for the sweep's faults by kind."""

    def __init__(self) -> None:
        self.armed: int | None = None
        self.struck: Counter[str] = Counter()

    def arm(self, count: int) -> None:
        self.armed = count

    def disarm(self) -> None:
        self.armed = None

    def take(self, operation: str, step: str) -> None:
        if self.armed is None:
            return
        if self.armed > 0:
            self.armed -= 1
            return
        self.armed = None
        self.struck[f"crash in {operation} before {step}"] += 1
        raise CrashPoint(self, operation, step)


class SimDirectory:
    """One directory's entries made since its last fsync (`pending`): a crash loses them
    all (`crash`), a directory fsync makes them durable (`sync`)."""

    def __init__(self) -> None:
        self.pending: set[str] = set()
        self.lost = 0  # entries crashes lost, for the sweep's faults by kind

    def add(self, name: str) -> None:
        """`name` was created, or another file renamed to it."""
        self.pending.add(name)

    def remove(self, name: str) -> None:
        self.pending.discard(name)

    def sync(self) -> None:
        self.pending.clear()

    def crash(self) -> set[str]:
        """The names lost: every entry not synced."""
        lost, self.pending = self.pending, set()
        self.lost += len(lost)
        return lost
