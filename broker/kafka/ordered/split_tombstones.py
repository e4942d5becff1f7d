"""Compacted ordered topics: the tombstone a producer leaves where a key used to live.

Compaction keeps the last record of each key in a partition. When growth moves a key
from partition P3 to P1, its new values go to P1, so P3's old values of it are never
superseded and would stay for ever. So, as KIP-253's section 9 says, a producer that
sends a keyed record to P1 of a compacted ordered topic also sends P3 a tombstone of that
key (acks=0), while P3 still holds records from before P1 was created; compaction then
removes the key's old values from P3 and, after `delete.retention.ms`, the tombstone.

Three points where the KIP is silent or reads the other way:
- The chain: P3 may itself have been added by an earlier growth, and the key's older
  values may be in P3's own source (2 -> 3 -> ... -> 8 moves `key-2` from 0 to 2 to 6).
  Each partition on the chain of split sources gets the tombstone, while it holds
  records from before the split that took the key from it (`tombstone_targets`).
- The condition: a tombstone is needed while the source's earliest offset is *below* the
  end of the epoch recorded for it (records from before the split remain); the KIP's
  text has the comparison the other way round, which would send tombstones exactly when
  nothing is left to remove.
- Delivery: an ordered consumer reads P3 after the split, and the tombstone sits there
  after P1's creation gate opened, so it could be delivered after the key's new value in
  P1 and delete it for a consumer that builds a table. A split tombstone carries the
  header `SPLIT_TOMBSTONE_HEADER`; ordered consumers drop it (`is_split_tombstone`);
  compaction, which looks at the value only, treats it as any tombstone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from broker.kafka.ordered.gates import creation_source

SPLIT_TOMBSTONE_HEADER = "kraft.split-tombstone"


def tombstone_targets(partition: int, initial: int,
                      after_creation: Mapping[int, Mapping[int, int]]
                      ) -> list[tuple[int, int]]:
    """(source, epoch) for each partition a key of `partition` lived in before the
    growths that moved it here, nearest first: the source, and the leader epoch the
    source had when the partition taking the key from it was created (its records up to
    that epoch's end are from before the split). A partition without an after-creation
    map (one of the initial ones, or of a topic never grown) ends the chain."""
    targets: list[tuple[int, int]] = []
    child = partition
    while child >= initial and (recorded := after_creation.get(child)):
        source = creation_source(child, initial, recorded)
        if source == child or source not in recorded:
            break
        targets.append((source, recorded[source]))
        child = source
    return targets


def needs_tombstone(earliest: int, epoch_end: int) -> bool:
    """Whether a source still holds records from before the split: its earliest offset
    is below the first offset after the recorded epoch. An epoch the leader no longer
    knows (`epoch_end` -1) proves nothing either way: a tombstone costs little, a value
    left behind stays for ever."""
    return epoch_end < 0 or earliest < epoch_end


def is_split_tombstone(value: bytes | None,
                       headers: Iterable[tuple[str, bytes | None]] | None) -> bool:
    return value is None and any(name == SPLIT_TOMBSTONE_HEADER for name, _ in headers or ())


class SentTombstones:
    """What a producer no longer needs to send: the (source, epoch, key) tombstones it
    sent (one per key and split is enough: later values of the key go to the new
    partition), and the (source, epoch) splits whose source keeps nothing from before
    (its log start only moves on). Bounded: once full it starts again, which at worst
    sends a tombstone twice."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._sent: set[tuple[int, int, bytes]] = set()
        self._clean: set[tuple[int, int]] = set()

    def missing(self, targets: Sequence[tuple[int, int]], key: bytes
                ) -> list[tuple[int, int]]:
        return [t for t in targets
                if t not in self._clean and (t[0], t[1], key) not in self._sent]

    def settle(self, source: int, epoch: int, key: bytes, *, clean: bool) -> None:
        """A split looked at for `key`: its tombstone sent, or the source `clean`."""
        if len(self._sent) + len(self._clean) >= self.limit:
            self._sent.clear()
            self._clean.clear()
        if clean:
            self._clean.add((source, epoch))
        else:
            self._sent.add((source, epoch, key))
