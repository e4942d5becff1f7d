"""The dynamic quorum's data (KIP-853): replica keys, voter sets, and the history of
voter sets a node's log holds.

A *replica key* is a node id plus the directory id `kraft format` writes into
`meta.properties` (a new one on every format). A voter is a replica key: a node whose
disk was wiped and formatted anew has a new directory id, so it is not the voter it
was (its old votes and its old log belonged to the old key) until it is added again.

`VoterSet` is one set of voters (id -> directory id and endpoints). A *static* set
(`kraft.version` 0, from `controller.quorum.voters`) has no directory ids: any
directory of a voter's id is that voter, today's behaviour.

`VoterHistory` is what one node knows of the voter sets in its log: the set in force
before the log (the static set, the bootstrap checkpoint's, or the snapshot's at the
log start) and every `VotersRecord` in the log with its offset. The set in force is
the latest, committed or not (KIP-853); truncating the log below a record reverts to
the one before it. Records are found by a cheap test of their first bytes
(`voters_change_of`): raft's records are opaque bytes to it otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import compress, count
from operator import itemgetter
from pathlib import Path

from raft.common.record import RecordError
from raft.common.uuid import Uuid
from raft.control_records import (
    CONTROL_RECORDS,
    KRAFT_VERSION,
    VOTERS,
    Endpoint,
    KRaftVersionRecord,
    VoterEntry,
    VotersRecord,
)
from raft.snapshot import read_snapshot, write_snapshot
from raft.types import SnapshotId

# A record is a msgpack map whose first key is "type" (`raft.common.record`): a fixmap
# header byte, then "type" as a fixstr, then the type id as a positive fixint.
_TYPE_KEY = b"\xa4type"
_VOTERS_TAG = _TYPE_KEY + bytes((VOTERS,))
_KRAFT_VERSION_TAG = _TYPE_KEY + bytes((KRAFT_VERSION,))
_TAGS = frozenset({_VOTERS_TAG, _KRAFT_VERSION_TAG})
_TAG = itemgetter(slice(1, 1 + len(_VOTERS_TAG)))  # a record's bytes after the map header


@dataclass(frozen=True, slots=True)
class ReplicaKey:
    """A replica: node id and directory id (None: unknown, as a static voter's)."""

    id: int
    directory_id: Uuid | None = None

    def __str__(self) -> str:
        return f"{self.id}" if self.directory_id is None else f"{self.id}@{self.directory_id}"


@dataclass(frozen=True, slots=True)
class Voter:
    key: ReplicaKey
    endpoints: tuple[Endpoint, ...] = ()


class VoterSet:
    """An immutable set of voters by id (one directory per id, as Kafka's VoterSet)."""

    __slots__ = ("_by_id", "ids", "id_set", "majority", "static")

    def __init__(self, voters: Iterable[Voter], *, static: bool = False) -> None:
        self._by_id = {v.key.id: v for v in sorted(voters, key=lambda v: v.key.id)}
        self.ids: tuple[int, ...] = tuple(self._by_id)
        self.id_set = frozenset(self.ids)
        self.majority = len(self.ids) // 2 + 1
        self.static = static

    @classmethod
    def from_ids(cls, ids: Iterable[int]) -> VoterSet:
        return cls((Voter(ReplicaKey(i)) for i in ids), static=True)

    @classmethod
    def from_record(cls, record: VotersRecord) -> VoterSet:
        return cls(Voter(ReplicaKey(e.voter_id, e.directory_id), tuple(e.endpoints))
                   for e in record.voters)

    def to_record(self) -> VotersRecord:
        return VotersRecord(voters=tuple(
            VoterEntry(voter_id=v.key.id, directory_id=v.key.directory_id or Uuid(0),
                       endpoints=v.endpoints) for v in self._by_id.values()))

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[Voter]:
        return iter(self._by_id.values())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VoterSet) and self._by_id == other._by_id

    def __hash__(self) -> int:
        return hash(tuple(self._by_id.values()))

    def __repr__(self) -> str:
        return "VoterSet(" + ", ".join(str(v.key) for v in self._by_id.values()) + ")"

    def voter(self, node_id: int) -> Voter | None:
        return self._by_id.get(node_id)

    def directory_of(self, node_id: int) -> Uuid | None:
        voter = self._by_id.get(node_id)
        return None if voter is None else voter.key.directory_id

    def is_voter(self, node_id: int, directory_id: Uuid | None) -> bool:
        """Whether (node_id, directory_id) is one of these voters: a static voter
        (no directory id) is any directory of its id; a dynamic one only its own."""
        voter = self._by_id.get(node_id)
        if voter is None:
            return False
        return voter.key.directory_id is None or voter.key.directory_id == directory_id

    def keys(self) -> tuple[ReplicaKey, ...]:
        return tuple(v.key for v in self._by_id.values())

    def added(self, voter: Voter) -> VoterSet:
        return VoterSet((*self._by_id.values(), voter))

    def removed(self, node_id: int) -> VoterSet:
        return VoterSet(v for v in self._by_id.values() if v.key.id != node_id)

    def replaced(self, voter: Voter) -> VoterSet:
        """The same set with `voter`'s entry (same key) taking the old one's place."""
        return VoterSet(voter if v.key == voter.key else v for v in self._by_id.values())

    def differs_by_at_most_one(self, other: VoterSet) -> bool:
        """KIP-853's one change at a time: at most one key added or removed (an
        endpoint update keeps every key)."""
        mine, theirs = set(self.keys()), set(other.keys())
        return len(mine ^ theirs) <= 1


def voters_change_of(record: bytes) -> VotersRecord | KRaftVersionRecord | None:
    """The VotersRecord or KRaftVersionRecord `record` is, else None (never raises).
    Only records whose first bytes name those types are decoded."""
    tag = record[1:7]
    if tag != _VOTERS_TAG and tag != _KRAFT_VERSION_TAG:
        return None
    try:
        decoded = CONTROL_RECORDS.decode(record)
    except RecordError:
        return None
    return decoded if isinstance(decoded, VotersRecord | KRaftVersionRecord) else None


def _voter_changes(records: Sequence[bytes]
                   ) -> Iterator[tuple[int, VotersRecord | KRaftVersionRecord]]:
    """(index, record) of each VotersRecord and KRaftVersionRecord among `records`, in
    order: the type test runs in C over every record (a snapshot or a log read at start
    is a million of them, 0.3 s a million as a Python loop), the decode only for the
    few that name one of those types."""
    for index in compress(count(), map(_TAGS.__contains__, map(_TAG, records))):
        change = voters_change_of(records[index])
        if change is not None:
            yield index, change


class VoterHistory:
    """The voter sets (and kraft.version) of one node's log; see the module docstring.
    `base` is in force before the first record at or above `base_offset`."""

    def __init__(self, base: VoterSet, *, kraft_version: int = 0,
                 base_offset: int = 0) -> None:
        self.base = base
        self.base_kraft_version = kraft_version
        self.base_offset = base_offset
        self.sets: list[tuple[int, VoterSet]] = []  # (offset of the VotersRecord, set)
        self.versions: list[tuple[int, int]] = []  # (offset, kraft.version)

    @property
    def latest(self) -> VoterSet:
        return self.sets[-1][1] if self.sets else self.base

    @property
    def latest_offset(self) -> int | None:
        """The offset of the VotersRecord in force; None if it is not in the log."""
        return self.sets[-1][0] if self.sets else None

    @property
    def kraft_version(self) -> int:
        return self.versions[-1][1] if self.versions else self.base_kraft_version

    def previous(self) -> VoterSet:
        """The set before the one in force (the same when nothing changed it)."""
        return self.sets[-2][1] if len(self.sets) > 1 else self.base

    def set_at(self, offset: int) -> VoterSet:
        """The set in force for the record at `offset` (records below it counted).
        ValueError below `base_offset`: the records that decided it are gone (the log
        start moved, or a snapshot replaced the log), and `base` is the set at
        `base_offset`, not there."""
        if offset < self.base_offset:
            raise ValueError(f"the voter set at offset {offset} is no longer known: this "
                             f"history starts at {self.base_offset}")
        found = self.base
        for at, voters in self.sets:
            if at >= offset:
                break
            found = voters
        return found

    def on_records(self, base_offset: int, records: Sequence[bytes]) -> bool:
        """Records appended at `base_offset`; True if the voter set changed."""
        changed = False
        for index, change in _voter_changes(records):
            offset = base_offset + index
            if isinstance(change, VotersRecord):
                self.sets.append((offset, VoterSet.from_record(change)))
                changed = True
            else:
                self.versions.append((offset, change.kraft_version))
        return changed

    def truncate_to(self, offset: int) -> bool:
        """The log was cut to end at `offset`: records at or above it are gone."""
        before = len(self.sets)
        self.sets = [(o, s) for o, s in self.sets if o < offset]
        self.versions = [(o, v) for o, v in self.versions if o < offset]
        return len(self.sets) != before

    def reset_to(self, offset: int, snapshot_records: Sequence[bytes]) -> None:
        """The log is now empty from `offset` on, after a snapshot holding
        `snapshot_records`: the snapshot's latest voter set (and version) is the base;
        one without any (a static quorum's) keeps the base as it is."""
        voters, version = None, None
        for _, change in _voter_changes(snapshot_records):
            if isinstance(change, VotersRecord):
                voters = VoterSet.from_record(change)
            elif isinstance(change, KRaftVersionRecord):
                version = change.kraft_version
        self.base = voters if voters is not None else self.base
        if version is not None:
            self.base_kraft_version = version
        self.base_offset = offset
        self.sets = []
        self.versions = []

    def forget_below(self, offset: int) -> None:
        """The log start moved to `offset`: fold the records below it into the base."""
        base, version = self.set_at(offset), self.version_at(offset)
        self.base, self.base_kraft_version, self.base_offset = base, version, offset
        self.sets = [(o, s) for o, s in self.sets if o >= offset]
        self.versions = [(o, v) for o, v in self.versions if o >= offset]

    def version_at(self, offset: int) -> int:
        found = self.base_kraft_version
        for at, version in self.versions:
            if at >= offset:
                break
            found = version
        return found


def parse_controllers(text: str) -> VoterSet:
    """`ID@HOST:PORT:DIRID,...` (kafka-storage.sh --initial-controllers) as a voter set;
    ValueError naming the entry that is not of that shape."""
    voters = []
    for entry in (e.strip() for e in text.split(",")):
        node, at, rest = entry.partition("@")
        host, _, port_dir = rest.rpartition(":") if rest.count(":") >= 2 else ("", "", "")
        host, _, port = host.rpartition(":") if host else ("", "", "")
        try:
            if not at or not host:
                raise ValueError
            key = ReplicaKey(int(node), Uuid.from_string(port_dir))
            voters.append(Voter(key, (Endpoint(name="CONTROLLER", host=host,
                                               port=int(port)),)))
        except ValueError:
            raise ValueError(f"--initial-controllers: {entry!r} is not "
                             "ID@HOST:PORT:DIRECTORY_ID") from None
    ids = [v.key.id for v in voters]
    if len(set(ids)) != len(ids):
        raise ValueError(f"--initial-controllers: a node id appears twice in {text!r}")
    return VoterSet(voters)


# --- the bootstrap checkpoint (kraft format --standalone / --initial-controllers) -------

BOOTSTRAP_SNAPSHOT_ID = SnapshotId(0, 0)


def write_bootstrap_checkpoint(partition_dir: str | os.PathLike[str],
                               voters: VoterSet) -> Path:
    """`00000000000000000000-0000000000.checkpoint` holding KRaftVersionRecord(1) and the
    VotersRecord, as Kafka's format writes it: the voters before the log names any."""
    records = [KRaftVersionRecord(kraft_version=1).encode(), voters.to_record().encode()]
    return write_snapshot(partition_dir, BOOTSTRAP_SNAPSHOT_ID, records,
                          last_contained_log_timestamp=0)


def read_bootstrap_voters(partition_dir: str | os.PathLike[str]) -> VoterSet | None:
    """The voter set of the bootstrap checkpoint in `partition_dir`; None without one (a
    static quorum, or a replica formatted with --no-initial-controllers)."""
    path = Path(partition_dir) / BOOTSTRAP_SNAPSHOT_ID.file_name
    if not path.exists():
        return None
    history = VoterHistory(VoterSet(()))
    history.reset_to(0, read_snapshot(path).records)
    return history.latest if history.kraft_version >= 1 else None
