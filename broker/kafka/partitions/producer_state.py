"""Idempotent producers' state on one partition (pure: no I/O, no clock).

For every producer id that wrote to the partition we keep its epoch and the sequence
ranges and offsets of its last `BATCHES_TO_RETAIN` (5) batches, the most a Kafka client
keeps in flight per partition (`max.in.flight.requests.per.connection` <= 5 with
idempotence). Kafka's rules for a batch a client produces (`check`):

- a producer epoch older than the one on record -> INVALID_PRODUCER_EPOCH;
- the exact sequence range of one of the last 5 batches, same epoch -> a duplicate: the
  caller answers success with that batch's original offsets and appends nothing;
- a newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
- the same epoch must continue at last sequence + 1 (wrapping after 2**31 - 1 to 0), else
  OUT_OF_ORDER_SEQUENCE_NUMBER;
- a producer id with no state here is accepted at any sequence. That is Kafka since 2.5
  (KIP-360), which no longer answers UNKNOWN_PRODUCER_ID to Produce: the state of a
  producer whose records all left the log is gone, and refusing it would strand the
  producer. Our partition logs start at offset 0 for good (no retention), so a producer
  is unknown here only if none of its batches is in this log.

A follower (and a log being reopened) applies the batches it stores with `apply` and no
checks, exactly as the leader applied them, so a follower that becomes leader decides
retries as the old leader would. Several batches of one request are checked in order,
each against the state the previous ones leave (`check` works on a copy).

The state round-trips through `encode_snapshot` / `decode_snapshot` (a CRC32C-checked
binary file format, broker.kafka.partitions.partition_log keeps the files).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from crc32c import crc32c

from raft.common.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
BATCHES_TO_RETAIN = 5
MAX_SEQUENCE = (1 << 31) - 1

TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

_HEADER = struct.Struct(">hiqqqhi")  # attributes .. baseSequence, from byte 21


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """What a magic v2 batch header says about its producer."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_offset_delta: int
    attributes: int = 0
    max_timestamp: int = -1

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def last_sequence(self) -> int:
        return last_sequence(self.base_sequence, self.last_offset_delta)


def read_header(batch: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """The producer fields of the magic v2 batch at `position` (framing already checked)."""
    attributes, delta, _, max_ts, producer_id, epoch, base_seq = _HEADER.unpack_from(
        batch, position + 21)
    return BatchHeader(producer_id, epoch, base_seq, delta, attributes, max_ts)


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The batch's last sequence: sequences wrap from 2**31 - 1 to 0, as Kafka's."""
    if base_sequence < 0:
        return NO_SEQUENCE
    return (base_sequence + last_offset_delta) % (MAX_SEQUENCE + 1)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: tuple[BatchMetadata, ...] = ()  # oldest first, at most BATCHES_TO_RETAIN

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def with_batch(self, epoch: int, batch: BatchMetadata) -> ProducerEntry:
        """Kafka's addBatch: a new epoch forgets the old epoch's batches."""
        kept = self.batches if epoch == self.epoch else ()
        return replace(self, epoch=epoch, batches=(kept + (batch,))[-BATCHES_TO_RETAIN:])

    def duplicate_of(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        last = header.last_sequence
        return next((b for b in self.batches
                     if b.first_seq == header.base_sequence and b.last_seq == last), None)


@dataclass(frozen=True, slots=True)
class Accept:
    """Append the batches; the state is updated by `apply` once they are stored."""


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A retry of a batch already stored at these offsets: answer them, append nothing."""

    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class Reject:
    error: ErrorCode
    message: str


Verdict = Accept | Duplicate | Reject


def _check_one(entry: ProducerEntry | None, header: BatchHeader) -> Reject | None:
    """Kafka's epoch and sequence rules for one client batch against `entry`."""
    pid, epoch, first_seq = header.producer_id, header.producer_epoch, header.base_sequence
    if first_seq < 0:
        return Reject(ErrorCode.INVALID_RECORD,
                      f"producer {pid} sent a batch without a sequence number")
    if entry is None or entry.epoch == NO_PRODUCER_EPOCH:
        return None  # unknown here: any sequence (KIP-360, see the module docstring)
    if epoch < entry.epoch:
        return Reject(ErrorCode.INVALID_PRODUCER_EPOCH,
                      f"producer {pid} epoch {epoch} is older than the last seen "
                      f"epoch {entry.epoch}")
    if epoch != entry.epoch:
        if first_seq != 0:
            return Reject(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                          f"producer {pid}: new epoch {epoch} starts at sequence "
                          f"{first_seq}, not 0")
        return None
    if not in_sequence(entry.last_seq, first_seq):
        return Reject(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                      f"producer {pid} epoch {epoch}: sequence {first_seq} after "
                      f"{entry.last_seq}")
    return None


class ProducerStates:
    """The producer state of one partition's log, covering its batches below
    `end_offset` (where the next batch applied must start, or above)."""

    def __init__(self, entries: Mapping[int, ProducerEntry] | None = None,
                 end_offset: int = 0) -> None:
        self.entries: dict[int, ProducerEntry] = dict(entries or {})
        self.end_offset = end_offset

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProducerStates) and \
            (self.entries, self.end_offset) == (other.entries, other.end_offset)

    def __repr__(self) -> str:
        return f"ProducerStates(end_offset={self.end_offset}, entries={self.entries!r})"

    def copy(self) -> ProducerStates:
        return ProducerStates(self.entries, self.end_offset)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self.entries.get(producer_id)

    def check(self, headers: Iterable[BatchHeader], first_offset: int) -> Verdict:
        """Kafka's verdict on the batches one client request appends from
        `first_offset` (the log end): a duplicate of any of them answers the request
        with that batch's offsets, as Kafka does; else the first error; else Accept."""
        scratch = self.copy()
        offset = first_offset
        for header in headers:
            if not header.has_producer_id:
                offset += header.last_offset_delta + 1
                continue
            entry = scratch.entries.get(header.producer_id)
            if entry is not None:
                duplicate = entry.duplicate_of(header)
                if duplicate is not None:
                    return Duplicate(duplicate.first_offset, duplicate.last_offset)
            rejected = _check_one(entry, header)
            if rejected is not None:
                return rejected
            scratch.apply(header, offset)
            offset += header.last_offset_delta + 1
        return Accept()

    def apply(self, header: BatchHeader, first_offset: int) -> None:
        """Record a stored batch (any origin, no checks; Kafka's replication origin)."""
        last_offset = first_offset + header.last_offset_delta
        self.end_offset = max(self.end_offset, last_offset + 1)
        if not header.has_producer_id or header.is_control:
            return
        entry = self.entries.get(header.producer_id) or ProducerEntry(header.producer_id)
        self.entries[header.producer_id] = entry.with_batch(header.producer_epoch, BatchMetadata(
            header.base_sequence, header.last_sequence, first_offset, last_offset))


# --- snapshot files ---------------------------------------------------------------------

SNAPSHOT_MAGIC = b"KPPS"
SNAPSHOT_VERSION = 1
_SNAP_HEAD = struct.Struct(">4sHI")  # magic, version, crc32c of the rest
_SNAP_BODY = struct.Struct(">qi")  # end offset, entry count
_SNAP_ENTRY = struct.Struct(">qhb")  # producer id, epoch, batch count
_SNAP_BATCH = struct.Struct(">iiqq")


class SnapshotError(ValueError):
    """A producer-state snapshot that cannot be trusted (damaged or foreign)."""


def encode_snapshot(states: ProducerStates) -> bytes:
    body = bytearray(_SNAP_BODY.pack(states.end_offset, len(states.entries)))
    for producer_id in sorted(states.entries):
        entry = states.entries[producer_id]
        body += _SNAP_ENTRY.pack(producer_id, entry.epoch, len(entry.batches))
        for b in entry.batches:
            body += _SNAP_BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset)
    return _SNAP_HEAD.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, crc32c(bytes(body))) + body


def decode_snapshot(data: bytes) -> ProducerStates:
    try:
        magic, version, crc = _SNAP_HEAD.unpack_from(data, 0)
        if magic != SNAPSHOT_MAGIC or version != SNAPSHOT_VERSION:
            raise SnapshotError(f"not a producer-state snapshot v{SNAPSHOT_VERSION}")
        body = memoryview(data)[_SNAP_HEAD.size:]
        if crc32c(body) != crc:
            raise SnapshotError("producer-state snapshot CRC32C mismatch")
        end_offset, count = _SNAP_BODY.unpack_from(body, 0)
        position = _SNAP_BODY.size
        entries: dict[int, ProducerEntry] = {}
        for _ in range(count):
            producer_id, epoch, n = _SNAP_ENTRY.unpack_from(body, position)
            position += _SNAP_ENTRY.size
            batches = []
            for _ in range(n):
                batches.append(BatchMetadata(*_SNAP_BATCH.unpack_from(body, position)))
                position += _SNAP_BATCH.size
            if producer_id < 0 or not 0 <= n <= BATCHES_TO_RETAIN or producer_id in entries:
                raise SnapshotError(f"bad producer entry {producer_id}")
            entries[producer_id] = ProducerEntry(producer_id, epoch, tuple(batches))
        if position != len(body) or end_offset < 0:
            raise SnapshotError("producer-state snapshot has a bad length or end offset")
    except struct.error as exc:
        raise SnapshotError(f"truncated producer-state snapshot: {exc}") from None
    return ProducerStates(entries, end_offset)
