"""Snapshots in the simulator (KIP-630): each node's tiny state machine and the seeded
policy by which it snapshots its applied state and moves its log start.

`StateMachine` is what the node has applied: the committed records in offset order from
0 (raft's control records too, as the metadata layer's snapshots carry them), taken
from the log up to each high watermark the node publishes (`raft.types.Ready`). It is
rebuilt on a restart from the snapshot at the log start plus the log, and reloaded from
the store when the core loaded a fetched snapshot in place of its log
(`Ready.loaded_snapshot`).

A snapshot is written as production writes one (`metadata.snapshot_writer`): raft's own
records first, from the core's pure `snapshot_control_records` (KIP-853: kraft.version
and the voter set in force at the end offset; none for a static quorum), then the
applied records. Loading one splits them apart again (`split_raft_records`).

`SnapshotPolicy` is one node's habit, drawn from the seed: it snapshots its applied
state every `interval` committed records (a fresh draw after each snapshot), writes it
into the node's store (`raft.snapshot.encode_snapshot`), and moves the log start to it
at once or after `trim_delay_ms`, unless the node keeps a long log (never trims). The
cluster (`raft.sim.cluster`) drives both.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from raft.snapshot import encode_snapshot, parse_snapshot
from raft.types import SnapshotId
from raft.voters import voters_change_of

# How the sim draws fetch_snapshot_max_bytes when SimConfig leaves it open: small, so a
# snapshot of a run's few hundred records (a few KB) takes several FetchSnapshot rounds.
SNAPSHOT_CHUNK_BYTES = (128, 512, 2048)
_MAX_BYTES = 1 << 62


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotConfig:
    """What the per-node policies are drawn from."""

    enabled: bool = True
    interval: tuple[int, int] = (5, 40)  # committed records between two snapshots
    keep_long_log_probability: float = 0.25  # a node that never moves its log start
    trim_at_once_probability: float = 0.5  # per snapshot, else after trim_delay_ms
    trim_delay_ms: tuple[float, float] = (100.0, 5000.0)
    fetch_snapshot_max_bytes: int | None = None  # None: one of SNAPSHOT_CHUNK_BYTES


class StateMachine:
    """The committed records a node applied, from offset 0; `epoch` is the epoch of the
    last one (0 before any)."""

    __slots__ = ("records", "epoch")

    def __init__(self) -> None:
        self.records: list[bytes] = []
        self.epoch = 0

    @property
    def applied_end(self) -> int:
        return len(self.records)

    def load(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Replace the state with a snapshot's (its bytes checked whole; raft's records at
        its front are the core's, not applied state)."""
        _, records = parse_snapshot(data, snapshot_id.file_name, snapshot_id.epoch)
        self.records = list(split_raft_records(records)[1])
        self.epoch = snapshot_id.epoch

    def reset(self) -> None:
        self.records = []
        self.epoch = 0

    def apply(self, log: Any, high_watermark: int) -> int:
        """Apply the log's records from the applied end up to `high_watermark`; how many.
        The caller makes sure the log holds them (its start is at most the applied end)."""
        start = self.applied_end
        if high_watermark <= start:
            return 0
        for batch in log.read(start, _MAX_BYTES):
            for index, record in enumerate(batch.records):
                offset = batch.base_offset + index
                if offset < start:
                    continue
                if offset >= high_watermark:
                    return self.applied_end - start
                self.records.append(record)
                self.epoch = batch.epoch
        return self.applied_end - start

    def snapshot(self, raft_records: Callable[[int], Sequence[bytes]],
                 extra: Sequence[tuple[int, bytes]] = ()) -> tuple[SnapshotId, bytes]:
        """The snapshot of the applied state (plus `extra` (epoch, record)s after it: only
        a planted bug snapshots records it has not applied), after `raft_records(end
        offset)` (the core's `snapshot_control_records`)."""
        records = self.records + [record for _, record in extra]
        epoch = extra[-1][0] if extra else self.epoch
        snapshot_id = SnapshotId(len(records), epoch)
        return snapshot_id, encode_snapshot(snapshot_id, [*raft_records(len(records)),
                                                          *records])


def split_raft_records(records: Sequence[bytes]) -> tuple[Sequence[bytes], Sequence[bytes]]:
    """(raft's records, the applied records) of a snapshot: raft's are the kraft.version
    and voter set records at its front (the applied records begin with the first
    leader's LeaderChange, never with one of those)."""
    count = 0
    while count < len(records) and voters_change_of(records[count]) is not None:
        count += 1
    return records[:count], records[count:]


class SnapshotPolicy:
    """One node's snapshot habit (see the module docstring); its draws come from its own
    `Random`, so they do not disturb the cluster's other streams."""

    def __init__(self, config: SnapshotConfig, rng: random.Random) -> None:
        self.config = config
        self.rng = rng
        self.keeps_long_log = rng.random() < config.keep_long_log_probability
        self.next_at = self._draw_interval()  # snapshot once this many records applied
        self.taken = 0

    def taken_at(self, offset: int) -> float | None:
        """A snapshot was written at `offset`: the delay (ms) after which to move the log
        start to it (0: at once), or None to keep the long log."""
        self.taken += 1
        self.next_at = offset + self._draw_interval()
        if self.keeps_long_log:
            return None
        if self.rng.random() < self.config.trim_at_once_probability:
            return 0.0
        return self.rng.uniform(*self.config.trim_delay_ms)

    def _draw_interval(self) -> int:
        return self.rng.randint(*self.config.interval)
