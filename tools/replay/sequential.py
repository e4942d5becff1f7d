"""The per-node checks: one pass over one node's records in offset order.

These checks are about the *order* of one log (what is live at each offset), so they run
as a plain sequential scan inside the Spark task that reads that node's segments (see
`load.node_task`) rather than as SQL: `NodeScan.batch` takes one batch at a time,
decodes its records with msgpack and `metadata.records`' type table, and records
violations (capped at `MAX_KEPT` per check), LeaderChange claims and, when asked, the
analysis aggregates. The driver merges nodes: a violation replicated on several nodes
counts once, with its node list.

One scan serves many nodes. A node whose batches are byte for byte the first n batches of
the scanned log (a faithful or lagging follower: same BLAKE2b digests in the same order)
would see exactly the same records, so `ScanResult.view(n)` gives its results without
decoding its copy: every output carries the index of the batch it came from.

Topic state follows what a replaying image does with a bad record (see
`metadata.image`): a record that names a dead topic changes nothing; a Topic record
reusing an ID or a live name is flagged but still applied, so one fault is reported once
rather than cascading into every later record of that topic.

KIP-253 resizes are checked per batch (the controller writes each one as one batch):
each topic's partitions are followed as (leader, leader epoch, marked) along with its
undeleted count and its enable.ordered.delivery, and `ResizeBatch` holds what a batch did
to a topic (its epochs before, the partitions it added or marked, its PartitionCount);
at the end of the batch `_resize_batch_end` judges it.

A log that starts above offset 0 (cut below a snapshot) is scanned from its snapshot:
`NodeScan.seed` takes the snapshot's image as the topic state before the first offset
scanned (live topics and names, every ID used, the metadata topic ID), so a record
naming a topic the snapshot holds is not taken for a dangling one. The caller feeds only
the records from the snapshot's end offset on (`load.node_task`).

Hot loop: topic IDs stay 16-byte `bytes` and record types stay ints; text (KIP-516 base64,
type names) is made only for what is reported.
"""

from __future__ import annotations

import base64
import hashlib
import re
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import msgpack

from metadata.records import RECORD_CLASSES, RecordType
from raft.common.uuid import METADATA_TOPIC_ID, ZERO_UUID, Uuid

if TYPE_CHECKING:
    from metadata.image import MetadataImage

MAX_KEPT = 10_000
RESERVED = frozenset({ZERO_UUID.to_bytes(), METADATA_TOPIC_ID.to_bytes()})
UNDECODABLE = 0  # the kind of a record we cannot read (no record type is 0)
TYPE_NAMES = {int(t): t.name for t in RecordType if int(t) in RECORD_CLASSES}
TYPE_NAMES[UNDECODABLE] = "UNDECODABLE"

_LEADER_CHANGE = int(RecordType.LEADER_CHANGE)
_METADATA_TOPIC = int(RecordType.METADATA_TOPIC)
_TOPIC = int(RecordType.TOPIC)
_REMOVE_TOPIC = int(RecordType.REMOVE_TOPIC)
_RENAME_TOPIC = int(RecordType.RENAME_TOPIC)
_TOPIC_CONFIG = int(RecordType.TOPIC_CONFIG)
_PARTITION = int(RecordType.PARTITION)
_PARTITION_CHANGE = int(RecordType.PARTITION_CHANGE)
_PARTITION_COUNT = int(RecordType.PARTITION_COUNT)
_REMOVE_PARTITION = int(RecordType.REMOVE_PARTITION)
ORDERED_DELIVERY = "enable.ordered.delivery"
BEFORE_DELETION = "leader_epoch_before_deletion"
_KNOWN = frozenset(k for k in TYPE_NAMES if k != UNDECODABLE)
NO_TOPICS: frozenset[bytes] = frozenset()


def uuid_text(raw: Any) -> str | None:
    """16 bytes as KIP-516 text (the same as `str(Uuid)`); None for anything else."""
    if isinstance(raw, bytes) and len(raw) == 16:
        return str(Uuid.from_bytes(raw))
    return None


def record_hash(data: bytes) -> int:
    """64-bit BLAKE2b of one record's bytes, as a signed (Spark `long`) big-endian int:
    its identity when nodes are compared."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), signed=True)


def decode_record(data: bytes) -> tuple[int, Any, str | None]:
    """(kind, fields, detail): the record type id (UNDECODABLE when unreadable), the
    msgpack map, and why it is undecodable. The same rules as `decode_batch`."""
    try:
        fields = msgpack.unpackb(data)  # raw=False, strict_map_key=True: the defaults
    except Exception as exc:  # msgpack raises several unrelated types
        return UNDECODABLE, None, f"not msgpack: {exc}"
    kind = _kind(fields)
    if kind == UNDECODABLE:
        return kind, fields, f"unknown record {str(fields)[:80]}"
    return kind, fields, None


def _kind(fields: Any) -> int:
    type_id = fields.get("type") if type(fields) is dict else None
    # isinstance, not type(): a bool type id counts as its int, as it always has
    if isinstance(type_id, int) and type_id in _KNOWN:
        return int(type_id)
    return UNDECODABLE


def record_columns(kind: int, fields: Any) -> dict[str, Any]:
    """The reported view of a record: type name, topic ID text, name, partition, leader
    (only the fields that are set)."""
    out: dict[str, Any] = {"record_type": TYPE_NAMES[kind]}
    if kind == UNDECODABLE:
        return out
    get = fields.get
    topic_id = uuid_text(get("topic_id"))
    name = get("name", get("new_name"))
    partition = get("partition")
    leader = get("leader_id") if kind == _LEADER_CHANGE else None
    for key, value in (("topic_id", topic_id), ("name", name if isinstance(name, str) else None),
                       ("partition", partition if isinstance(partition, int) else None),
                       ("leader_id", leader if isinstance(leader, int) else None)):
        if value is not None:
            out[key] = value
    return out


def _leader_of(fields: Any) -> int | None:
    leader = fields.get("leader_id")
    return leader if isinstance(leader, int) else None


def _topic_id(fields: Any) -> bytes | None:
    raw = fields.get("topic_id")
    return raw if type(raw) is bytes and len(raw) == 16 else None


def _name(fields: Any) -> str | None:
    name = fields.get("name", fields.get("new_name"))
    return name if isinstance(name, str) else None


def _fixarray() -> bytes:
    """A msgpack array of 0 to 15 ids below 128, exactly (fixarray of positive fixints)."""
    return b"(?:" + b"|".join(bytes([0x90 + n]) + b"[\\x00-\\x7f]{%d}" % n
                              for n in range(16)) + b")"


# The two records of a busy log as `metadata.records` encodes them in their plain form,
# every id, count and epoch below 128: a PartitionChange that only moves a leader and
# sets an ISR (no bump, no marks, no replicas), and a Partition without leader-epoch
# maps. Their bytes have one layout each: the map's keys in the codec's order, the type
# at TYPE_AT, the topic ID at TOPIC_ID, the partition at PARTITION_AT; the change's
# leader at CHANGE_LEADER_AT, the Partition's leader and leader epoch 32 and 18 bytes
# from its end. One pattern takes both (their first byte, the map's size, tells them
# apart at once), so a batch is matched by one `map` in C.
_PLAIN = re.compile(
    rb"\x86\xa4type\x08\xa7version\x00\xa8topic_id\xc4\x10.{16}\xa9partition[\x00-\x7f]"
    rb"\xa6leader[\x00-\x7f]\xa3isr" + _fixarray()
    + rb"|\x89\xa4type\x07\xa7version\x00\xa8topic_id\xc4\x10.{16}\xa9partition[\x00-\x7f]"
    rb"\xa8replicas" + _fixarray() + rb"\xa3isr" + _fixarray()
    + rb"\xa6leader[\x00-\x7f]\xacleader_epoch[\x00-\x7f]\xafpartition_epoch[\x00-\x7f]",
    re.DOTALL).fullmatch
Match = re.Match  # a plain record's entry in `decode_batch`'s maps
TYPE_AT, TOPIC_ID, PARTITION_AT, CHANGE_LEADER_AT = 6, slice(27, 43), 53, 61
_TYPE_BYTE = itemgetter(TYPE_AT)
PARTITION_LEADER_AT, PARTITION_EPOCH_AT = -32, -18
# (kind, topic ID, partition, leader, leader epoch: None for a PartitionChange)
PlainRecord = tuple[int, bytes, int, int, int | None]


def plain_record(data: bytes) -> PlainRecord | None:
    """What the scan needs of a plain PartitionChange or Partition (`_PLAIN`), read
    from its bytes without decoding the map; None for any other bytes. Where it answers,
    msgpack decodes the same map and `metadata.records.decode` the same record
    (tests/property/test_replay_scan_props.py). `NodeScan.batch` reads the same places."""
    if _PLAIN(data) is None:
        return None
    if data[TYPE_AT] == _PARTITION_CHANGE:
        return _PARTITION_CHANGE, data[TOPIC_ID], data[PARTITION_AT], data[CHANGE_LEADER_AT], None
    return (_PARTITION, data[TOPIC_ID], data[PARTITION_AT], data[PARTITION_LEADER_AT],
            data[PARTITION_EPOCH_AT])


def decode_batch(records: list[bytes]) -> tuple[list[int], list[Any]]:
    """(kind, msgpack map) of each record of a batch, by the rules of `decode_record`:
    a record that is not a map with a known type is UNDECODABLE (its map, when it has
    one, kept). A plain PartitionChange's or Partition's map is its `_PLAIN` match
    instead (`plain_record` reads it), which `NodeScan.batch` decodes into the map only
    when it needs one. The records are decoded before any is scanned, so the batch can
    be classified first (`resize_topics`). A batch of well-formed records, nearly every
    one, is decoded by a few passes in C and one check of every type; any other record
    sends the whole batch through the per-record rules (`_decode_each`)."""
    unpack = msgpack.unpackb  # no keywords: raw=False is its default, and cheaper so
    maps: list[Any] = list(map(_PLAIN, records))
    try:
        # a plain record's type is its byte TYPE_AT; the others are decoded one by one,
        # found by `index` (in C, as the maps and the bytes are made: no loop over all)
        kinds: list[Any] = list(map(_TYPE_BYTE, records))
        at = -1
        for _ in range(maps.count(None)):
            at = maps.index(None, at + 1)
            fields = maps[at] = unpack(records[at])
            kinds[at] = fields["type"]  # raises for a non-map or a map without a type
    except Exception:  # msgpack raises several unrelated types
        return _decode_each(records)
    # exact ints only: a bool or float type equals an int but is judged by `_kind`
    if set(map(type, kinds)) == {int} and _KNOWN.issuperset(kinds):
        return kinds, maps
    return _decode_each(records)


def _decode_each(records: list[bytes]) -> tuple[list[int], list[Any]]:
    kinds: list[int] = []
    maps: list[Any] = []
    for data in records:
        try:
            fields = msgpack.unpackb(data)
            kind = _kind(fields)
        except Exception:  # msgpack raises several unrelated types
            fields, kind = None, UNDECODABLE
        kinds.append(kind)
        maps.append(fields)
    return kinds, maps


def resize_topics(kinds: list[int], maps: list[Any],
                  counted: AbstractSet[bytes]) -> AbstractSet[bytes]:
    """The topics whose partition count a batch may change, which the scan follows
    record by record (`ResizeBatch`) and judges at the batch's end: those a
    PartitionCount names, those a Partition or PartitionChange with a before-deletion
    map names, and those a Partition record names while the topic's undeleted count is
    recorded (`counted`: the live topics whose count is; an added partition then needs a
    PartitionCount). Nothing at the batch's end can flag any other topic
    (`_resize_batch_end`: no count, no mark, no addition to a counted topic), so most
    batches follow none (a `ResizeBatch` per topic and batch cost a third of the scan).
    A batch without PartitionCount whose partition records are all plain (no maps:
    `plain_record`) follows none while no live topic's count is recorded: that is told
    by counting in C, without a loop over the records."""
    if 17 not in kinds and not (counted and 7 in kinds) and \
            list(map(type, maps)).count(Match) == kinds.count(7) + kinds.count(8):
        return NO_TOPICS
    tracked: set[bytes] = set()
    for kind, fields in zip(kinds, maps, strict=True):
        if kind != 7 and kind != 8 and kind != 17:
            continue
        plain = fields.__class__ is Match  # a plain record marks nothing (plain_record)
        topic_id = fields.string[TOPIC_ID] if plain else _topic_id(fields)
        if kind != 17 and (plain or BEFORE_DELETION not in fields):
            if kind == 8 or topic_id not in counted:
                continue
        if topic_id is not None:
            tracked.add(topic_id)
    return tracked


def _texts(ids: list[bytes]) -> list[str]:
    """KIP-516 text of many 16-byte IDs in one base64 call: each padded to 18 bytes (a
    whole number of 3-byte groups) encodes to 24 characters whose first 22 are its text."""
    if not ids:
        return []
    encoded = base64.urlsafe_b64encode(b"\0\0".join(ids) + b"\0\0").decode("ascii")
    return [encoded[at:at + 22] for at in range(0, len(encoded), 24)]


TopicRow = tuple[str | None, bytes | None, int]  # a Topic record's name, ID and offset


def recreated_names(topics: list[TopicRow], removed: AbstractSet[bytes]
                    ) -> list[dict[str, Any]]:
    """Names that more than one topic ID took: every Topic record of that name, its ID
    old (in `removed`: some RemoveTopic names it) or current; the names taken most
    first. The names are counted in C first, so only the rows of names taken more than
    once are grouped. Made where the scan ran, from what it kept, so neither the Topic
    records nor the removed IDs travel to the driver."""
    taken = Counter(map(itemgetter(0), topics))
    by_name: dict[str, list[TopicRow]] = {
        name: [] for name, count in taken.items() if count > 1 and name is not None}
    for row in topics:
        rows = by_name.get(row[0])  # type: ignore[arg-type]  # None finds none
        if rows is not None:
            rows.append(row)
    many = {name: sorted(rows, key=itemgetter(2)) for name, rows in by_name.items()
            if len({topic_id for _, topic_id, _ in rows if topic_id is not None}) > 1}
    ids = list({topic_id for rows in many.values() for _, topic_id, _ in rows
                if topic_id is not None})  # no order: a dict of their texts needs none
    texts: dict[bytes | None, str | None] = dict(zip(ids, _texts(ids), strict=True))
    texts[None] = None
    table: list[dict[str, Any]] = []
    for name in sorted(many, key=lambda n: (-len(many[n]), n)):
        rows = many[name]
        old: list[str | None] = []
        current = None  # the last ID no RemoveTopic names (or a record without one)
        for _, topic_id, _ in rows:
            if topic_id is not None and topic_id in removed:
                old.append(texts[topic_id])
            else:
                current = topic_id
        table.append({"name": name, "old_ids": old, "current_id": texts[current],
                      "offsets": list(map(itemgetter(2), rows))})
    return table


@dataclass(slots=True)
class Aggregates:
    """What the analysis needs from one log: per epoch [first offset, last offset,
    records], records per kind, the offsets of Topic and RemoveTopic records and the
    recreated names. While scanning: every Topic record's (name, topic ID, offset) and
    the IDs some RemoveTopic names, of which `NodeScan.result` makes the names."""

    epochs: dict[int, list[int]] = field(default_factory=dict)
    kinds: list[int] = field(default_factory=list)  # per record while scanning
    kind_counts: dict[int, int] = field(default_factory=dict)  # filled by NodeScan.result
    topic_offsets: array[int] = field(default_factory=lambda: array("q"))
    remove_offsets: array[int] = field(default_factory=lambda: array("q"))
    topics: list[TopicRow] = field(default_factory=list)
    removed_ids: set[bytes] = field(default_factory=set)
    recreated_names: list[dict[str, Any]] = field(default_factory=list)  # by `result`


@dataclass(slots=True)
class TopicPartitions:
    """One live topic's partitions as replay has them: leaders and leader epochs by
    partition, those marked for deletion, the undeleted count (None: never recorded,
    all of them) and enable.ordered.delivery (on only when set to true, as
    `metadata.image.TopicImage.ordered_delivery` reads it)."""

    leaders: list[int] = field(default_factory=list)  # lists: made for every new topic,
    epochs: list[int] = field(default_factory=list)  # cheaper than arrays
    marked: set[int] = field(default_factory=set)
    undeleted: int | None = None
    ordered: bool = False

    def place_plain(self, data: bytes) -> None:
        """A plain Partition record's bytes (`plain_record`) of a topic no resize of its
        batch follows: it places its partition (of none, as replay skips them: nothing)."""
        partition = data[PARTITION_AT]
        if partition <= len(self.epochs):
            # resize_topics follows the additions to a topic whose count is recorded
            assert partition < len(self.epochs) or self.undeleted is None
            self.place(partition, data[PARTITION_LEADER_AT], data[PARTITION_EPOCH_AT],
                       marked=False)

    def place(self, partition: int, leader: int, epoch: int, *, marked: bool) -> None:
        """A Partition record: a new last partition, or a full replacement; marked for
        deletion or not by its before-deletion map."""
        if partition == len(self.epochs):
            self.leaders.append(leader)
            self.epochs.append(epoch)
        else:
            self.leaders[partition], self.epochs[partition] = leader, epoch
        if marked:
            self.marked.add(partition)
        else:
            self.marked.discard(partition)

    def move_leader(self, partition: int, leader: int) -> bool:
        """A PartitionChange naming `leader`: a new leader adds one to the epoch."""
        if leader == self.leaders[partition]:
            return False
        self.leaders[partition] = leader
        self.epochs[partition] += 1
        return True

    def remove_last(self) -> None:
        self.leaders.pop()
        self.epochs.pop()
        self.marked.discard(len(self.epochs))


Located = tuple[int, int, bytes, Any]  # a record's offset, epoch, bytes and fields


@dataclass(slots=True)
class ResizeBatch:
    """What one batch did to a topic: its partitions, count and marks before (`begin`,
    on the first record), each changed partition's epoch before, the partitions added
    (with their after-creation maps) and marked (with their before-deletion maps), and
    its PartitionCount records. `created`: the batch created the topic."""

    created: bool = False
    length: int | None = None
    undeleted: int | None = None
    marked_before: frozenset[int] = frozenset()
    epochs_before: dict[int, int] = field(default_factory=dict)
    added: dict[int, tuple[int, int, bytes, Any, list[tuple[int, int]] | None]] = field(
        default_factory=dict)
    marked: dict[int, tuple[int, int, bytes, Any, list[tuple[int, int]] | None]] = field(
        default_factory=dict)
    counts: list[tuple[int, int, bytes, Any, int]] = field(default_factory=list)

    def begin(self, state: TopicPartitions) -> None:
        if self.length is None and not self.created:
            self.length = len(state.epochs)
            self.undeleted = state.undeleted
            self.marked_before = frozenset(state.marked)

    def before(self, state: TopicPartitions, partition: int) -> None:
        if partition not in self.epochs_before:
            self.epochs_before[partition] = state.epochs[partition]

    def epoch_before(self, state: TopicPartitions, partition: int) -> int:
        return self.epochs_before.get(partition, state.epochs[partition])


def _pairs(value: Any) -> list[tuple[int, int]] | None:
    """A leader-epoch map's (partition, epoch) pairs, or None when absent or malformed."""
    if type(value) is not list:
        return None
    pairs = []
    for pair in value:
        if type(pair) is not list or len(pair) != 2 or not all(type(x) is int for x in pair):
            return None
        pairs.append((pair[0], pair[1]))
    return pairs


def _replay_partition(state: TopicPartitions, change: ResizeBatch | None, partition: int,
                      where: Located) -> None:
    """A Partition record: a new last partition, or a full replacement (`change`: None
    for a topic the batch cannot resize, `resize_topics`)."""
    fields = where[3]
    leader, epoch = fields.get("leader"), fields.get("leader_epoch", 0)
    if type(leader) is not int or type(epoch) is not int:
        return
    if partition == len(state.epochs):
        if change is not None:
            change.added[partition] = (*where,
                                       _pairs(fields.get("leader_epoch_after_creation")))
        else:  # an untracked topic has no recorded count: its growth needs no judging
            assert state.undeleted is None
    elif change is not None:
        change.before(state, partition)
    state.place(partition, leader, epoch, marked=bool(_pairs(fields.get(BEFORE_DELETION))))


def _replay_change(state: TopicPartitions, change: ResizeBatch | None, partition: int,
                   where: Located) -> None:
    """A PartitionChange: a new leader or a bump adds one to the epoch; a map marks (only
    in a batch that tracks the topic: `resize_topics`)."""
    fields = where[3]
    if change is not None:
        change.before(state, partition)
    leader = fields.get("leader")
    moved = type(leader) is int and state.move_leader(partition, leader)
    if not moved and fields.get("bump_leader_epoch") is True:
        state.epochs[partition] += 1
    before_deletion = fields.get(BEFORE_DELETION)
    if before_deletion is not None and (marks := _pairs(before_deletion)):
        assert change is not None  # resize_topics tracks the topic of every such record
        change.marked[partition] = (*where, marks)
        state.marked.add(partition)


def _removal_error(state: TopicPartitions, partition: int, fields: Any) -> str | None:
    """Why a RemovePartition is not a removal the controller may decide, or None."""
    last = len(state.epochs) - 1
    if partition != last:
        return f"partition {partition} is not the topic's last ({last})"
    if partition not in state.marked:
        return f"partition {partition} is not marked for deletion"
    start, end = fields.get("log_start_offset"), fields.get("log_end_offset")
    if start != end:
        return f"partition {partition} was reported with log start {start} != log end {end}"
    return None


def _growth_while_marked(change: ResizeBatch) -> str:
    return (f"the topic grows from {change.length} partitions while partitions "
            f"{sorted(change.marked_before)} are marked for deletion")


def _expected_epochs(state: TopicPartitions, change: ResizeBatch,
                     partitions: range) -> list[tuple[int, int]]:
    return [(q, change.epoch_before(state, q)) for q in partitions]


def _count_batch_error(state: TopicPartitions, change: ResizeBatch) -> str | None:
    """Why a batch with a PartitionCount is not the growth or shrink it says, or None."""
    assert change.length is not None
    count = change.counts[-1][4]
    before = change.length if change.undeleted is None else change.undeleted
    length = len(state.epochs)
    if count > before:  # growth
        if length != count or sorted(change.added) != list(range(change.length, count)):
            return (f"undeleted count {before} -> {count}, but the batch leaves "
                    f"{length} partitions")
        if not state.ordered:
            return None
        existing = range(change.length)
        expected = _expected_epochs(state, change, existing)
        for partition, (*_, after) in sorted(change.added.items()):
            if after != expected:
                return (f"new partition {partition}'s after-creation map {after} is not "
                        f"the epochs before the growth {expected}")
        return _unbumped(state, change, existing)
    if count < before:  # shrink
        staying = range(count)
        expected = _expected_epochs(state, change, staying)
        for partition in range(count, before):
            if partition in change.marked_before:
                continue
            marked = change.marked.get(partition)
            if marked is None or marked[4] != expected:
                return (f"partition {partition} leaves the undeleted count {before} -> "
                        f"{count} without a before-deletion map of the epochs before "
                        f"{expected}")
        return _unbumped(state, change, staying)
    return None


def _unbumped(state: TopicPartitions, change: ResizeBatch, partitions: range) -> str | None:
    late = [q for q in partitions if state.epochs[q] <= change.epoch_before(state, q)]
    return None if not late else f"partitions {late} keep their leader epochs through a resize"


def _stray_resize(change: ResizeBatch) -> tuple[int, int, bytes, int, Any, str] | None:
    """A batch without PartitionCount that still changes the count: it marks a
    partition, or adds one to a topic whose count was recorded."""
    for partition, (offset, epoch, data, fields, _) in sorted(change.marked.items()):
        return (offset, epoch, data, 8, fields,
                f"partition {partition} is marked for deletion without a PartitionCount")
    if change.undeleted is not None:
        for partition, (offset, epoch, data, fields, _) in sorted(change.added.items()):
            return (offset, epoch, data, _PARTITION, fields,
                    f"partition {partition} is added without a PartitionCount")
    return None


@dataclass(slots=True)
class ScanResult:
    """A scan's output, each item tagged with the index of its batch in the scanned log.
    violations: (batch, check, offset, epoch, record_hash, reason, record);
    claims: (batch, epoch, leader_id, offset, record_hash)."""

    violations: list[tuple[Any, ...]]
    marks: dict[str, array[int]]  # check -> batch index of every violation (not capped)
    claims: list[tuple[Any, ...]]
    first_topic_batch: int | None
    metadata_topic_batch: int | None
    aggregates: Aggregates | None

    def view(self, batches: int) -> tuple[list[tuple[Any, ...]], dict[str, int],
                                          list[tuple[Any, ...]], bool]:
        """What a scan of only the first `batches` batches would have found:
        (violations, counts per check, claims, whether the metadata topic ID is missing
        though topics were created)."""
        violations = [v for v in self.violations if v[0] < batches]
        counts = {check: n for check, seqs in self.marks.items()
                  if (n := bisect_left(seqs, batches))}
        claims = [c for c in self.claims if c[0] < batches]
        missing = (self.first_topic_batch is not None and self.first_topic_batch < batches
                   and (self.metadata_topic_batch is None
                        or self.metadata_topic_batch >= batches))
        return violations, counts, claims, missing


class NodeScan:
    seq: int  # the index of the batch being scanned, set by `batch` before any output

    def __init__(self, *, analysis: bool = False) -> None:
        self.kept: dict[str, int] = {}
        self.violations: list[tuple[Any, ...]] = []
        self.marks: dict[str, array[int]] = {}
        self.claims: list[tuple[Any, ...]] = []
        self.prev_offset: int | None = None
        self.prev_epoch: int | None = None  # the highest epoch so far
        self.live: dict[bytes, str | None] = {}  # topic_id -> name
        self.live_by_name: dict[str, bytes] = {}  # name -> topic_id
        # topic_id -> offset of its first assignment (text for one a snapshot holds)
        self.first_use: dict[bytes, int | str] = {}
        self.removed: set[bytes] = set()
        self.metadata_topic: tuple[bytes | None, int | str] | None = None  # (ID, offset)
        self.first_topic_batch: int | None = None
        self.metadata_topic_batch: int | None = None
        self.aggregates = Aggregates() if analysis else None
        # The rarer record kinds, by type (partition records, the hot path, are inline).
        self.scanners: dict[int, Callable[[int, int, bytes, int, Any], None]] = {
            UNDECODABLE: self.undecodable_record, _TOPIC: self.topic_record,
            _REMOVE_TOPIC: self.topic_user, _RENAME_TOPIC: self.topic_user,
            _LEADER_CHANGE: self.leader_change_record,
            _METADATA_TOPIC: self.metadata_topic_record, _TOPIC_CONFIG: self.topic_config_record}
        # KIP-253: per live topic its partitions, the undeleted count once recorded, and
        # whether ordered delivery is on; what the current batch does to each topic
        self.partitions: dict[bytes, TopicPartitions] = {}
        self.resizing: dict[bytes, ResizeBatch] = {}
        self.tracked: AbstractSet[bytes] = NO_TOPICS  # those the batch may resize
        self.counted: set[bytes] = set()  # the live topics whose undeleted count is recorded

    def seed(self, image: MetadataImage, start: int) -> None:
        """Begin from `image`, a snapshot of the log below offset `start` (before any
        batch): the next record scanned must be at `start`."""
        where = f"below {start} (in the snapshot)"
        metadata_topic = image.metadata_topic_id
        if metadata_topic is not None:
            self.metadata_topic = (metadata_topic.to_bytes(), where)
            self.metadata_topic_batch = -1  # assigned before the first batch
        for topic_id in image.used_topic_ids:
            if topic_id != metadata_topic:
                self.first_use[topic_id.to_bytes()] = where
        for topic_id, topic in image.topics.items():
            self.live[topic_id.to_bytes()] = topic.name
            self.live_by_name[topic.name] = topic_id.to_bytes()
            self.partitions[topic_id.to_bytes()] = TopicPartitions(
                leaders=[p.leader for p in topic.partitions],
                epochs=[p.leader_epoch for p in topic.partitions],
                marked={p.partition for p in topic.partitions if p.marked_for_deletion},
                undeleted=topic.undeleted_partition_count, ordered=topic.ordered_delivery)
            if topic.undeleted_partition_count is not None:
                self.counted.add(topic_id.to_bytes())
        self.removed = set(self.first_use) - set(self.live)
        self.prev_offset = start - 1 if start > 0 else None

    def flag(self, check: str, offset: int, epoch: int, data: bytes, kind: int, fields: Any,
             reason: str) -> None:
        marks = self.marks.get(check)
        if marks is None:
            marks = self.marks[check] = array("q")
        marks.append(self.seq)
        kept = self.kept.get(check, 0)
        if kept >= MAX_KEPT:
            return
        self.kept[check] = kept + 1
        self.violations.append((self.seq, check, offset, epoch, record_hash(data), reason,
                                record_columns(kind, fields)))

    def batch(self, seq: int, base_offset: int, epoch: int, records: list[bytes]) -> None:
        """Scan one batch (`seq`: its index in this log, `records`: its record bytes)."""
        self.seq = seq
        if not records:
            return
        gap, falling = self._order_breaks(base_offset, epoch)
        kinds, maps = decode_batch(records)
        self.tracked = resize_topics(kinds, maps, self.counted)
        if self.aggregates is not None:
            self.aggregates.kinds += kinds
        partitions = self.partitions  # keyed by the live topics, as `live`
        tracked = self.tracked
        offset = base_offset - 1
        for at in range(len(records)):  # by index: compiled (mypyc), a C loop over lists
            data, kind, fields = records[at], kinds[at], maps[at]
            offset += 1
            if type(fields) is Match:  # plain: a live, untracked topic's is done here
                topic_id = data[27:43]  # TOPIC_ID (literals: the hot path)
                state = partitions.get(topic_id)
                if state is not None and not (gap or falling) and topic_id not in tracked:
                    if kind == 8:  # a PartitionChange: `move_leader`, inlined
                        partition, leader, leaders = data[53], data[61], state.leaders
                        if partition < len(leaders) and leaders[partition] != leader:
                            leaders[partition] = leader
                            state.epochs[partition] += 1
                    else:
                        state.place_plain(data)
                    continue
                fields = msgpack.unpackb(data)  # the map, for the general path below
            if gap or falling:
                self._order(offset, epoch, data, kind, fields, gap, falling)
                gap = False
            # PARTITION_CHANGE, PARTITION, PARTITION_COUNT, REMOVE_PARTITION (literals: the
            # hot path)
            if kind == 8 or kind == 7 or kind == 17 or kind == 18:
                topic_id = fields.get("topic_id")
                state = partitions.get(topic_id) if topic_id.__class__ is bytes else None
                if state is None:
                    self.flag("records_name_live_topic", offset, epoch, data, kind, fields,
                              "no live topic with this ID here")
                else:
                    self.partition_state(state, topic_id, offset, epoch, data, kind, fields)
            elif (scan := self.scanners.get(kind)) is not None:
                scan(offset, epoch, data, kind, fields)
        self._batch_end(epoch, base_offset, offset, len(records))

    def _batch_end(self, epoch: int, first: int, last: int, count: int) -> None:
        self.prev_offset = last
        self.prev_epoch = epoch if self.prev_epoch is None else max(epoch, self.prev_epoch)
        if self.resizing:
            self._resize_batch_end()
        if self.aggregates is not None:
            self._count_epoch(epoch, first, last, count)

    def _order_breaks(self, base_offset: int, epoch: int) -> tuple[bool, bool]:
        """(a gap before this batch, its epoch below an earlier one). Offsets inside a
        batch are contiguous and share its epoch, so only the first record can open a
        gap; every record is below the highest epoch if the first is."""
        gap = self.prev_offset is not None and base_offset != self.prev_offset + 1
        falling = self.prev_epoch is not None and epoch < self.prev_epoch
        return gap, falling

    def _count_epoch(self, epoch: int, first: int, last: int, count: int) -> None:
        """Per-epoch offset range and record count (min/max: a broken log need not be
        in order)."""
        assert self.aggregates is not None
        entry = self.aggregates.epochs.get(epoch)
        if entry is None:
            self.aggregates.epochs[epoch] = [first, last, count]
        else:
            entry[0], entry[1] = min(entry[0], first), max(entry[1], last)
            entry[2] += count

    def _order(self, offset: int, epoch: int, data: bytes, kind: int, fields: Any,
               gap: bool, falling: bool) -> None:
        if gap:
            previous = self.prev_offset
            self.flag("offsets_contiguous", offset, epoch, data, kind, fields,
                      "duplicate offset" if offset == previous
                      else f"gap: previous record is at offset {previous}")
        if falling:
            self.flag("epochs_monotonic", offset, epoch, data, kind, fields,
                      f"epoch {epoch} after epoch {self.prev_epoch}")

    def undecodable_record(self, offset: int, epoch: int, data: bytes, kind: int,
                           fields: Any) -> None:
        detail = decode_record(data)[2]
        assert detail is not None  # decode_record judges a record as the scan does
        # no fields: an undecodable record is reported by its type name alone
        self.flag("records_decodable", offset, epoch, data, kind, None, detail)

    def leader_change_record(self, offset: int, epoch: int, data: bytes, kind: int,
                             fields: Any) -> None:
        self.claims.append((self.seq, epoch, _leader_of(fields), offset, record_hash(data)))

    def metadata_topic_record(self, offset: int, epoch: int, data: bytes, kind: int,
                              fields: Any) -> None:
        topic_id = _topic_id(fields)
        flag = self.flag
        if topic_id is None or topic_id in RESERVED:
            flag("topic_ids_valid", offset, epoch, data, _METADATA_TOPIC, fields,
                 "metadata topic ID is missing, ZERO_UUID or the sentinel")
        if self.metadata_topic is not None:
            flag("metadata_topic_once", offset, epoch, data, _METADATA_TOPIC, fields,
                 f"metadata topic ID assigned again (first at offset {self.metadata_topic[1]})")
            return
        if topic_id is not None and topic_id in self.first_use:
            flag("topic_ids_valid", offset, epoch, data, _METADATA_TOPIC, fields,
                 f"metadata topic takes the ID of the topic created at offset "
                 f"{self.first_use[topic_id]}")
        self.metadata_topic = (topic_id, offset)
        self.metadata_topic_batch = self.seq

    def topic_record(self, offset: int, epoch: int, data: bytes, kind: int,
                     fields: Any) -> None:
        if self.first_topic_batch is None:
            self.first_topic_batch = self.seq
        topic_id, name = _topic_id(fields), _name(fields)
        if self.aggregates is not None:
            self.aggregates.topic_offsets.append(offset)
            self.aggregates.topics.append((name, topic_id, offset))
        if topic_id is None or topic_id in RESERVED:
            self.flag("topic_ids_valid", offset, epoch, data, _TOPIC, fields,
                      "topic ID is missing, ZERO_UUID or the sentinel")
            return
        if self.metadata_topic is not None and topic_id == self.metadata_topic[0]:
            self.flag("topic_ids_valid", offset, epoch, data, _TOPIC, fields,
                      f"topic takes the metadata topic's ID (assigned at offset "
                      f"{self.metadata_topic[1]})")
        elif topic_id in self.first_use:
            after = " after RemoveTopic" if topic_id in self.removed else ""
            self.flag("topic_ids_valid", offset, epoch, data, _TOPIC, fields,
                      f"topic ID reused{after}: first assigned at offset "
                      f"{self.first_use[topic_id]}")
        self.first_use.setdefault(topic_id, offset)
        if name is not None and self.live_by_name.get(name, topic_id) != topic_id:
            self.flag("name_one_live_id", offset, epoch, data, _TOPIC, fields,
                      f"name already maps to live topic ID "
                      f"{uuid_text(self.live_by_name[name])}")
            return
        self.removed.discard(topic_id)
        self.live[topic_id] = name
        self.partitions[topic_id] = TopicPartitions([], [], set())
        self.counted.discard(topic_id)
        if topic_id in self.tracked:
            self.resizing[topic_id] = ResizeBatch(created=True)
        if name is not None:
            self.live_by_name[name] = topic_id

    def topic_user(self, offset: int, epoch: int, data: bytes, kind: int, fields: Any) -> None:
        """RemoveTopic and RenameTopic (Partition and PartitionChange are inlined in
        `batch`: they only need their topic to be live)."""
        topic_id = _topic_id(fields)
        if kind == _REMOVE_TOPIC and self.aggregates is not None:
            self.aggregates.remove_offsets.append(offset)
            if topic_id is not None:
                self.aggregates.removed_ids.add(topic_id)
        if topic_id is None or topic_id not in self.live:
            self.flag("records_name_live_topic", offset, epoch, data, kind, fields,
                      "no live topic with this ID here")
            return
        if kind == _REMOVE_TOPIC:
            self._free_name(topic_id, self.live.pop(topic_id))
            self.removed.add(topic_id)
            del self.partitions[topic_id]  # every live topic has its partitions
            self.counted.discard(topic_id)
            self.resizing.pop(topic_id, None)
            return
        name = _name(fields)
        if name is None:
            return
        holder = self.live_by_name.get(name)
        if holder is not None and holder != topic_id:
            self.flag("name_one_live_id", offset, epoch, data, kind, fields,
                      f"new name already maps to live topic ID {uuid_text(holder)}")
            return
        self._free_name(topic_id, self.live[topic_id])
        self.live[topic_id] = name
        self.live_by_name[name] = topic_id

    def topic_config_record(self, offset: int, epoch: int, data: bytes, kind: int,
                            fields: Any) -> None:
        """Only enable.ordered.delivery matters here (a resize's rules depend on it)."""
        topic_id = _topic_id(fields)
        state = None if topic_id is None else self.partitions.get(topic_id)
        if state is not None and fields.get("key") == ORDERED_DELIVERY:
            state.ordered = fields.get("value") == "true"

    def partition_state(self, state: TopicPartitions, topic_id: bytes, offset: int,
                        epoch: int, data: bytes, kind: int, fields: Any) -> None:
        """Follow a live topic's partitions through a Partition, PartitionChange,
        PartitionCount or RemovePartition record (what replay does with it, or nothing
        for fields replay would refuse), noting in `resizing` what the batch changed."""
        change = None
        if topic_id in self.tracked:
            change = self.resizing.get(topic_id)
            if change is None:
                change = self.resizing[topic_id] = ResizeBatch()
            change.begin(state)
        where = (offset, epoch, data, fields)
        if kind == _PARTITION_COUNT:
            count = fields.get("undeleted_partition_count")
            if type(count) is int:
                assert change is not None  # resize_topics tracks every PartitionCount's topic
                change.counts.append((*where, count))
                state.undeleted = count
                self.counted.add(topic_id)
            return
        partition = fields.get("partition")
        if type(partition) is not int or not 0 <= partition <= len(state.epochs):
            return
        if kind == _REMOVE_PARTITION:
            reason = _removal_error(state, partition, fields)
            if reason is not None:
                self.flag("partition_removals_valid", offset, epoch, data, kind, fields,
                          reason)
            else:
                state.remove_last()
        elif kind == _PARTITION:
            _replay_partition(state, change, partition, where)
        elif partition < len(state.epochs):  # replay skips a change of no partition
            _replay_change(state, change, partition, where)

    def _resize_batch_end(self) -> None:
        """Judge what the batch just scanned did to each topic's partition count."""
        for topic_id, change in self.resizing.items():
            if change.length is None:  # the batch created the topic: nothing to compare
                continue
            state = self.partitions[topic_id]  # a topic removed leaves `resizing` too
            if change.counts:
                offset, rec_epoch, data, fields, _ = change.counts[-1]
                if change.marked_before and state.ordered and \
                        len(state.epochs) > change.length:
                    # where the new partitions would go is undefined: one violation
                    self.flag("no_growth_while_marked", offset, rec_epoch, data,
                              _PARTITION_COUNT, fields, _growth_while_marked(change))
                    continue
                reason = _count_batch_error(state, change)
                if reason is not None:
                    self.flag("partition_counts_consistent", offset, rec_epoch, data,
                              _PARTITION_COUNT, fields, reason)
                continue
            stray = _stray_resize(change)
            if stray is not None:
                offset, rec_epoch, data, kind, fields, reason = stray
                self.flag("partition_counts_consistent", offset, rec_epoch, data, kind,
                          fields, reason)
        self.resizing.clear()

    def _free_name(self, topic_id: bytes, name: str | None) -> None:
        """The name a topic leaves (removed or renamed) maps to no live ID any more."""
        if name is not None and self.live_by_name.get(name) == topic_id:
            del self.live_by_name[name]

    def result(self) -> ScanResult:
        aggregates = self.aggregates
        if aggregates is not None:  # ship counts and names, not every record's
            aggregates.kind_counts = dict(Counter(aggregates.kinds))
            aggregates.recreated_names = recreated_names(aggregates.topics,
                                                         aggregates.removed_ids)
            aggregates.kinds, aggregates.topics, aggregates.removed_ids = [], [], set()
        return ScanResult(violations=self.violations, marks=self.marks, claims=self.claims,
                          first_topic_batch=self.first_topic_batch,
                          metadata_topic_batch=self.metadata_topic_batch,
                          aggregates=self.aggregates)
