"""KIP-253 leader-epoch maps: (partition, leader_epoch) pairs sorted by partition.

The type lives apart from the records that carry it (`metadata.records` re-exports it) so
that the admin messages (`metadata.admin`), which carry it too, do not import every
record type: `kraft topics` pays for the admin messages only.

The shared codec carries tuple[X, ...] only, so at run time (what it reads) a pair is a
tuple[int, ...]; a pair of another length is an anomaly at replay (`metadata.delta`), and
type checkers see the pairs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    EpochMap = tuple[tuple[int, int], ...]
else:
    EpochMap = tuple[tuple[int, ...], ...]
