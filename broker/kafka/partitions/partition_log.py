"""One partition's log in its partition directory: Kafka magic v2 record batches, stored
intact (client CRCs and compression untouched) in segment files named as Kafka's
(`<base offset, 20 digits>.log`, rolled at `segment.bytes` / `segment.ms`: see
broker.kafka.partitions.segments). A log written before segments existed is one segment,
`00000000000000000000.log`, and opens as it is.

The broker assigns base offsets and stamps its leader epoch; both lie outside the
batch's CRC32C (which covers attributes .. end), so the client's CRC stays valid and
consumers verify it end to end. An append is durable (write + fsync) before it is
acknowledged. Opening a log rescans its segments and truncates a torn or corrupt tail
(and drops the segments after it: they would follow a gap). The per-batch list built by
that scan (offsets, segment, position, epoch, producer fields) serves the producer state,
the epoch cache, truncation, retention and compaction. Fetch and ListOffsets by timestamp
go through each segment's offset and time indexes (broker.kafka.partitions.segment_index,
on disk as Kafka's `.index` and `.timeindex`: broker.kafka.partitions.index_files), then
read batch headers from the position found.

The log owns its partition's idempotent-producer state (broker.kafka.partitions.producer_state):
every batch stored, by the leader (`append`) or a follower (`append_replicated`), is
applied to it; a truncation rebuilds it. `<offset, 20 digits>.producer-snapshot` files
next to the log hold the state below that offset (written every
`SNAPSHOT_INTERVAL_BYTES` of appends and on close, the newest `SNAPSHOTS_KEPT` kept);
opening a log loads the newest valid snapshot at a batch boundary at or below the log
end and applies the batches after it. A truncation deletes the snapshots above the new
end before it cuts the file, so no snapshot ever describes records the log lost.

Blocking file I/O: the Trio shell calls `append` through a worker thread, one at a time
per partition.
"""

from __future__ import annotations

import bisect
import io
import itertools
import logging
import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c  # Kafka's batch checksum is CRC32C (Castagnoli), not zlib's CRC32

from broker.dataplane.divergence import end_offset_for_epoch
from broker.kafka.partitions import compression, index_files
from broker.kafka.partitions.batch_walk import HEADER_BYTES, LOG_OVERHEAD, MAGIC_V2, whole_batches
from broker.kafka.partitions.file_region import FileRegion
from broker.kafka.partitions.producer_state import (
    BatchHeader,
    ProducerStates,
    SnapshotError,
    decode_snapshot,
    encode_snapshot,
    read_header,
)
from broker.kafka.partitions.segment_index import SegmentIndex, build
from broker.kafka.partitions.segment_swap import install, recover_swaps
from broker.kafka.partitions.segments import (
    NO_TIMESTAMP,
    RollLimits,
    SegmentStat,
    segment_bases,
    segment_for,
    segment_name,
    should_roll,
)
from raft.common.durable import fsync_dir, open_private, write_atomically
from raft.common.kafka.record_batch import read_varint

log = logging.getLogger(__name__)

LOG_FILE = segment_name(0)  # the first segment, and a log's only file before segments
_OFFSET_LENGTH = struct.Struct(">qi")
_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_LAST_DELTA = struct.Struct(">i")
_COUNT = struct.Struct(">i")
MAX_BATCH_BYTES = 64 * 1024 * 1024
_SCAN_CHUNK_BYTES = 16 * 1024  # read at once when scanning a segment's batch headers
SNAPSHOT_SUFFIX = ".producer-snapshot"
SNAPSHOT_INTERVAL_BYTES = 4 << 20
SNAPSHOTS_KEPT = 2
_LOG_APPEND_TIME = 0x08


class InvalidBatchError(ValueError):
    """Produced bytes are not valid magic v2 batches; `corrupt` distinguishes a CRC or
    framing error (CORRUPT_MESSAGE) from an unsupported format (INVALID_RECORD)."""

    def __init__(self, message: str, *, corrupt: bool) -> None:
        super().__init__(message)
        self.corrupt = corrupt


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchInfo:
    base_offset: int
    last_offset: int
    leader_epoch: int
    position: int  # in its segment's file
    size: int
    max_timestamp: int = NO_TIMESTAMP
    segment: int = 0  # its segment's base offset


def split_batches(data: bytes) -> list[bytes]:
    """Validate `data` as one or more complete magic v2 batches (framing, magic, CRC32C,
    record count); returns each batch's bytes."""
    batches: list[bytes] = []
    view = memoryview(data)
    position = 0
    while position < len(view):
        if len(view) - position < HEADER_BYTES:
            raise InvalidBatchError("truncated batch header", corrupt=True)
        _, length = _OFFSET_LENGTH.unpack_from(view, position)
        end = position + LOG_OVERHEAD + length
        if length < HEADER_BYTES - LOG_OVERHEAD or end > len(view) or \
                length > MAX_BATCH_BYTES:
            raise InvalidBatchError(f"bad batch length {length}", corrupt=True)
        magic = view[position + 16]
        if magic != MAGIC_V2:
            raise InvalidBatchError(f"magic {magic} batches are not supported", corrupt=False)
        (crc,) = _CRC.unpack_from(view, position + 17)
        if crc32c(view[position + 21:end]) != crc:
            raise InvalidBatchError("batch CRC32C mismatch", corrupt=True)
        (last_delta,) = _LAST_DELTA.unpack_from(view, position + 23)
        (count,) = _COUNT.unpack_from(view, position + 57)
        if last_delta < 0 or count < 0 or count > last_delta + 1:
            raise InvalidBatchError(f"bad record count {count} for last offset delta "
                                    f"{last_delta}", corrupt=True)
        batches.append(bytes(view[position:end]))
        position = end
    if not batches:
        raise InvalidBatchError("no record batch", corrupt=True)
    return batches


def last_offset_delta(batch: bytes | bytearray | memoryview, position: int = 0) -> int:
    return int(_LAST_DELTA.unpack_from(batch, position + 23)[0])


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    """The offsets of the producer-state snapshots in `directory`, ascending."""
    offsets = []
    for path in directory.glob(f"*{SNAPSHOT_SUFFIX}"):
        stem = path.name[:-len(SNAPSHOT_SUFFIX)]
        if len(stem) == 20 and stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


@dataclass(slots=True, kw_only=True)
class _Segment:
    base_offset: int
    index: SegmentIndex
    size: int = 0
    # when its first batch was written, by the broker's clock (segment.ms counts from
    # it; producers' timestamps may be anything); after a restart, its file's last
    # write, so a segment rolls at most segment.ms late
    first_write_ms: int = NO_TIMESTAMP


class PartitionLog:
    """Appends and reads; `log_end_offset` is the next offset to assign. The high
    watermark is kept by the caller (it follows the ISR). `producers` is the
    idempotent-producer state of the batches below the log end."""

    def __init__(self, directory: Path, limits: RollLimits | None = None, *,
                 log_start: int = 0) -> None:
        self.directory = directory
        self.limits = limits or RollLimits()
        self._segments: list[_Segment] = []
        self._batches: list[BatchInfo] = []
        self._bases: list[int] = []
        self._epoch_starts: list[tuple[int, int]] = []  # (epoch, first offset): epoch cache
        self._max_ts_index = -1  # the first batch holding the largest timestamp
        self.log_end_offset = 0
        self._headers: list[BatchHeader] = []  # per batch, for rebuilding producer state
        self.producers = ProducerStates()
        self._bytes_since_snapshot = 0
        self._recover()
        # where the last cleaning stopped and the earliest delete horizon of the
        # tombstones it kept (broker.kafka.partitions.compaction); in memory only: after
        # a restart the whole log is dirty and cleaned once more, which finds both again
        self.first_dirty_offset = 0
        self.delete_horizon_ms = NO_TIMESTAMP
        # a log start inside the first segment (DeleteRecords) comes from the log dir's
        # checkpoint; one outside the log is another log's (a recreated topic): ignored
        self._log_start = self._segments[0].base_offset
        if self._log_start <= log_start <= self.log_end_offset:
            self._log_start = log_start
        self._load_producers()
        self._file = self._open_active()

    @property
    def path(self) -> Path:
        """The active segment's file."""
        return self._segment_path(self._segments[-1].base_offset)

    def _segment_path(self, base_offset: int) -> Path:
        return self.directory / segment_name(base_offset)

    def _new_segment(self, base_offset: int, first_write_ms: int = NO_TIMESTAMP) -> _Segment:
        return _Segment(base_offset=base_offset, first_write_ms=first_write_ms,
                        index=SegmentIndex(base_offset=base_offset,
                                           interval_bytes=self.limits.index_interval_bytes))

    def _open_active(self) -> io.BufferedWriter:
        return os.fdopen(  # noqa: SIM115 - closed by close()
            open_private(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab")

    def _recover(self) -> None:
        if self.directory.is_dir():
            recover_swaps(self.directory)
        names = os.listdir(self.directory) if self.directory.is_dir() else []
        bases = segment_bases(names) or [0]
        self.log_end_offset = bases[0]
        for number, base in enumerate(bases):
            self._segments.append(self._new_segment(base))
            self.log_end_offset = max(self.log_end_offset, base)  # an empty segment's base
            if not self._recover_segment(base):
                for later in bases[number + 1:]:
                    log.warning("deleting a partition log segment after a torn one", extra={
                        "path": str(self._segment_path(later))})
                    self._segment_path(later).unlink()
                if number + 1 < len(bases):
                    fsync_dir(self.directory)
                break
        if self.directory.is_dir():
            index_files.remove_orphans(self.directory, self.segment_bases)

    def _recover_segment(self, base_offset: int) -> bool:
        """Scan one segment into the index, and check its index files against it; False
        when its tail was torn (and cut)."""
        path = self._segment_path(base_offset)
        existed = path.exists()
        data = path.read_bytes() if existed else b""
        segment = self._segments[-1]
        first = len(self._batches)
        position = 0  # the end of the last whole batch
        view = memoryview(data)
        for start, end in whole_batches(view):
            base, _ = _OFFSET_LENGTH.unpack_from(view, start)
            (epoch,) = _EPOCH.unpack_from(view, start + 12)
            header = read_header(view, start)
            self._add(BatchInfo(base_offset=base, last_offset=base + header.last_offset_delta,
                                leader_epoch=epoch, position=start, size=end - start,
                                max_timestamp=header.max_timestamp, segment=base_offset),
                      header)
            position = end
        segment.size = position
        if position:
            segment.first_write_ms = int(path.stat().st_mtime * 1000)
        torn = position < len(data)
        if torn:
            log.warning("truncating the torn tail of a partition log", extra={
                "path": str(path), "offset": self.log_end_offset, "position": position,
                "dropped_bytes": len(data) - position})
            with open(path, "r+b") as handle:
                handle.truncate(position)
                os.fsync(handle.fileno())
        segment.index = self._build_index(base_offset, self._batches[first:])
        if existed:
            index_files.check(self.directory, segment.index, end_offset=self.log_end_offset,
                              size=segment.size)
        else:  # a new log
            index_files.write(self.directory, segment.index)
        return not torn

    def _build_index(self, base_offset: int, batches: list[BatchInfo]) -> SegmentIndex:
        """The index of segment `base_offset` from its batches among `batches`."""
        return build(base_offset, (info for info in batches if info.segment == base_offset),
                     self.limits.index_interval_bytes)

    def _add(self, info: BatchInfo, header: BatchHeader) -> None:
        largest = self._batches[self._max_ts_index].max_timestamp \
            if self._max_ts_index >= 0 else NO_TIMESTAMP - 1
        self._batches.append(info)
        self._bases.append(info.base_offset)
        self._headers.append(header)
        self.log_end_offset = info.last_offset + 1
        if not self._epoch_starts or info.leader_epoch > self._epoch_starts[-1][0]:
            self._epoch_starts.append((info.leader_epoch, info.base_offset))
        if info.max_timestamp > largest:
            self._max_ts_index = len(self._batches) - 1

    # --- producer state --------------------------------------------------------------

    def _is_boundary(self, offset: int) -> bool:
        """Whether a batch starts at `offset`, or the log ends there."""
        if offset == self.log_end_offset:
            return True
        index = bisect.bisect_left(self._bases, offset)
        return index < len(self._bases) and self._bases[index] == offset

    def _load_producers(self, below: int | None = None) -> None:
        """Producer state from the newest usable snapshot at or below the log end (or
        `below`), then the batches after it. Snapshots above the log end are deleted."""
        limit = self.log_end_offset if below is None else below
        states = ProducerStates()
        for offset in reversed(snapshot_offsets(self.directory)):
            path = snapshot_path(self.directory, offset)
            if offset > self.log_end_offset:
                path.unlink(missing_ok=True)
                continue
            if offset > limit or not self._is_boundary(offset):
                continue
            try:
                loaded = decode_snapshot(path.read_bytes())
            except (OSError, SnapshotError) as exc:
                log.warning("ignoring a producer-state snapshot", extra={
                    "path": str(path), "reason": str(exc)})
                continue
            if loaded.end_offset == offset:
                states = loaded
                break
        start = bisect.bisect_left(self._bases, states.end_offset)
        for info, header in zip(self._batches[start:], self._headers[start:], strict=True):
            states.apply(header, info.base_offset)
        states.end_offset = self.log_end_offset
        self.producers = states

    def _owns_directory(self) -> bool:
        """Whether `directory` still holds this log's file: a deleted topic's directory
        is renamed away by reconciliation, and a recreated topic of the same name gets a
        new one at the same path, which must never receive this log's snapshots."""
        try:
            return os.stat(self.path).st_ino == os.fstat(self._file.fileno()).st_ino
        except (OSError, ValueError):
            return False

    def write_producer_snapshot(self) -> None:
        """Snapshot the producer state at the log end; keep the newest SNAPSHOTS_KEPT.
        Nothing is written once the directory is no longer this log's."""
        if not self._owns_directory():
            raise FileNotFoundError(f"{self.path} is no longer this partition log's file")
        write_atomically(snapshot_path(self.directory, self.log_end_offset),
                         encode_snapshot(self.producers))
        self._bytes_since_snapshot = 0
        for offset in snapshot_offsets(self.directory)[:-SNAPSHOTS_KEPT]:
            snapshot_path(self.directory, offset).unlink(missing_ok=True)

    def _appended(self, size: int) -> None:
        self._bytes_since_snapshot += size
        if self._bytes_since_snapshot >= SNAPSHOT_INTERVAL_BYTES:
            try:  # the batches are stored: a failed snapshot costs a longer scan only
                self.write_producer_snapshot()
            except OSError as exc:
                log.warning("producer-state snapshot failed", extra={
                    "path": str(self.directory), "reason": str(exc)})

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    def segment_stats(self) -> list[SegmentStat]:
        """Each segment's offsets, size, largest and first batch's timestamp, oldest
        first (retention, compaction)."""
        largest: dict[int, int] = {}
        first: dict[int, int] = {}
        for info in self._batches:
            largest[info.segment] = max(largest.get(info.segment, NO_TIMESTAMP),
                                        info.max_timestamp)
            first.setdefault(info.segment, info.max_timestamp)
        ends = [s.base_offset for s in self._segments[1:]] + [self.log_end_offset]
        return [SegmentStat(base_offset=segment.base_offset, end_offset=end, size=segment.size,
                            max_timestamp=largest.get(segment.base_offset, NO_TIMESTAMP),
                            first_timestamp=first.get(segment.base_offset, NO_TIMESTAMP))
                for segment, end in zip(self._segments, ends, strict=True)]

    def advance_log_start(self, offset: int) -> bool:
        """Move the log start up to `offset` (never past the log end: retention,
        DeleteRecords, a follower following its leader) and delete the segments wholly
        below it, the oldest first and never the active one, so a crash leaves a log
        whose first segment is at or below the new start. False when it did not move."""
        offset = min(offset, self.log_end_offset)
        if offset <= self._log_start:
            return False
        if not self._owns_directory():
            raise FileNotFoundError(f"{self.path} is no longer this partition log's file")
        self._log_start = offset
        gone = [segment for segment, following in itertools.pairwise(self._segments)
                if following.base_offset <= offset]
        for segment in gone:
            self._segment_path(segment.base_offset).unlink()
            index_files.unlink(self.directory, segment.base_offset)
        if gone:
            fsync_dir(self.directory)
            del self._segments[:len(gone)]
            first = bisect.bisect_left(self._bases, self._segments[0].base_offset)
            self._reindex(first, len(self._batches))
        return True

    def reset_to(self, offset: int) -> None:
        """Empty the log and start it at `offset`: a follower whose log ends below its
        leader's log start (Kafka's truncateFullyAndStartAt). The old segments go newest
        first, then the new one is made: a crash leaves a prefix of the old log, which
        the next fetch resets again."""
        if not self._owns_directory():
            raise FileNotFoundError(f"{self.path} is no longer this partition log's file")
        self._file.close()
        for snap in snapshot_offsets(self.directory):
            snapshot_path(self.directory, snap).unlink(missing_ok=True)
        for segment in reversed(self._segments):
            self._segment_path(segment.base_offset).unlink(missing_ok=True)
            index_files.unlink(self.directory, segment.base_offset)
        fsync_dir(self.directory)
        self._segments = [self._new_segment(offset)]
        self._reindex(0, 0)
        self.log_end_offset = self._log_start = offset
        self._file = self._open_active()
        index_files.write(self.directory, self._segments[0].index)
        fsync_dir(self.directory)
        self.producers = ProducerStates(end_offset=offset)
        log.warning("reset a partition log to its leader's log start", extra={
            "path": str(self.path), "offset": offset})

    def _reindex(self, first: int, stop: int) -> None:
        """Keep only batches [first, stop) in the index (the log end is the caller's)."""
        self._rebuild_index(list(zip(self._batches[first:stop], self._headers[first:stop],
                                     strict=True)))

    def _rebuild_index(self, kept: list[tuple[BatchInfo, BatchHeader]]) -> None:
        end = self.log_end_offset
        self._batches, self._bases, self._epoch_starts, self._headers = [], [], [], []
        self._max_ts_index = -1
        for info, header in kept:
            self._add(info, header)
        self.log_end_offset = end

    @property
    def segment_bases(self) -> list[int]:
        return [segment.base_offset for segment in self._segments]

    def producer_last_offsets(self) -> dict[int, int]:
        """Each idempotent producer's last batch's last offset (the cleaner keeps it)."""
        return {header.producer_id: info.last_offset
                for info, header in zip(self._batches, self._headers, strict=True)
                if header.has_producer_id}

    def install_cleaned(self, base_offset: int, original_size: int,
                        batches: list[tuple[BatchInfo, BatchHeader]]) -> bool:
        """Put the cleaned copy of segment `base_offset` (its `.swap`, holding `batches`)
        in place of the segment, when the segment is still the one it was cleaned from:
        there, not active, `original_size` bytes long and this log's. The caller holds
        the partition's lock (no append, truncation or retention meanwhile) and fsyncs
        the directory after. False (nothing changed) otherwise."""
        found = [(segment, following.base_offset)
                 for segment, following in itertools.pairwise(self._segments)
                 if segment.base_offset == base_offset and segment.size == original_size]
        if not found or not self._owns_directory():
            return False
        segment, next_base = found[0]
        offsets = [offset for info, _ in batches for offset in (info.base_offset,
                                                                info.last_offset)]
        # a copy that moved an offset or left its segment would corrupt every read
        assert offsets == sorted(offsets), f"cleaned batches out of order in {base_offset}"
        assert not offsets or base_offset <= offsets[0] and offsets[-1] < next_base, \
            f"cleaned batches outside segment {base_offset}"
        install(self.directory, base_offset)
        segment.size = sum(info.size for info, _ in batches)
        segment.index = self._build_index(base_offset, [info for info, _ in batches])
        index_files.write(self.directory, segment.index)
        kept = [(info, header) for info, header in zip(self._batches, self._headers,
                                                         strict=True)
                if info.segment != base_offset]
        at = bisect.bisect_left([info.base_offset for info, _ in kept], base_offset)
        kept[at:at] = batches
        self._rebuild_index(kept)
        return True

    def _maybe_roll(self, batches: list[bytes], last_offset: int) -> None:
        """Start a new active segment at the log end when these batches, ending at
        `last_offset`, would not fit the active one
        (broker.kafka.partitions.segments.should_roll)."""
        active = self._segments[-1]
        now_ms = int(time.time() * 1000)
        if not should_roll(segment_bytes_used=active.size,
                           append_bytes=sum(len(batch) for batch in batches),
                           first_write_ms=active.first_write_ms, now_ms=now_ms,
                           limits=self.limits,
                           relative_last_offset=last_offset - active.base_offset):
            if active.size == 0:
                active.first_write_ms = now_ms
            return
        if not self._owns_directory():
            raise FileNotFoundError(f"{self.path} is no longer this partition log's file")
        self._file.close()
        self._segments.append(self._new_segment(self.log_end_offset, first_write_ms=now_ms))
        self._file = self._open_active()
        index_files.write(self.directory, self._segments[-1].index)
        fsync_dir(self.directory)

    def append(self, batches: list[bytes], leader_epoch: int) -> tuple[int, int]:
        """Assign offsets from the log end, stamp `leader_epoch`, write and fsync.
        Returns (base offset of the first batch, last offset). No producer checks (the
        caller made them: broker.kafka.partitions.produce); the batches are applied to
        `producers`."""
        first = self.log_end_offset
        self._maybe_roll(batches, first + sum(last_offset_delta(batch) + 1
                                              for batch in batches) - 1)
        active = self._segments[-1]
        out = bytearray()
        infos: list[tuple[BatchInfo, BatchHeader]] = []
        next_offset = first
        for batch in batches:
            stamped = bytearray(batch)
            struct.pack_into(">q", stamped, 0, next_offset)
            _EPOCH.pack_into(stamped, 12, leader_epoch)
            header = read_header(stamped)
            last = next_offset + header.last_offset_delta
            infos.append((BatchInfo(base_offset=next_offset, last_offset=last,
                                    leader_epoch=leader_epoch,
                                    position=active.size + len(out), size=len(stamped),
                                    max_timestamp=header.max_timestamp,
                                    segment=active.base_offset), header))
            out += stamped
            next_offset = last + 1
        self._write(out, infos)
        return first, next_offset - 1

    def _write(self, out: bytearray, infos: list[tuple[BatchInfo, BatchHeader]]) -> None:
        self._file.write(out)
        self._file.flush()
        os.fsync(self._file.fileno())
        active = self._segments[-1]
        active.size += len(out)
        offset_entries, time_entries = bytearray(), bytearray()
        for info, header in infos:
            self._add(info, header)
            self.producers.apply(header, info.base_offset)
            new_offset_entry, new_time_entry = active.index.add(
                last_offset=info.last_offset, position=info.position, size=info.size,
                max_timestamp=info.max_timestamp)
            offset_entries += new_offset_entry
            time_entries += new_time_entry
        if offset_entries and self._owns_directory():  # never into a recreated topic's
            index_files.append(self.directory, active.base_offset, bytes(offset_entries),
                               bytes(time_entries))
        self._appended(len(out))

    def append_replicated(self, batches: list[bytes]) -> None:
        """A follower's append: offsets and epochs as the leader assigned them; the
        producer state follows the batches as the leader's did."""
        out = bytearray()
        infos: list[tuple[BatchInfo, BatchHeader]] = []
        end = self.log_end_offset
        batches = [batch for batch in batches if _OFFSET_LENGTH.unpack_from(batch, 0)[0] >= end]
        if not batches:
            return
        self._maybe_roll(batches, _OFFSET_LENGTH.unpack_from(batches[-1], 0)[0] +
                         last_offset_delta(batches[-1]))
        active = self._segments[-1]
        for batch in batches:
            base, _ = _OFFSET_LENGTH.unpack_from(batch, 0)
            (epoch,) = _EPOCH.unpack_from(batch, 12)
            header = read_header(batch)
            infos.append((BatchInfo(base_offset=base,
                                    last_offset=base + header.last_offset_delta,
                                    leader_epoch=epoch, position=active.size + len(out),
                                    size=len(batch), max_timestamp=header.max_timestamp,
                                    segment=active.base_offset),
                          header))
            out += batch
        self._write(out, infos)

    @property
    def last_epoch(self) -> int:
        """The leader epoch of the last batch (-1 for an empty log)."""
        return self._batches[-1].leader_epoch if self._batches else -1

    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset >= `offset` (a follower whose log diverged
        from the new leader's), durably; the producer state is rebuilt for what is
        left (snapshots above the new end are deleted first)."""
        keep = [b for b in self._batches if b.last_offset < offset]
        if len(keep) == len(self._batches):
            return
        new_end = keep[-1].last_offset + 1 if keep else self.log_start_offset
        dropped = [s for s in self._segments[1:] if s.base_offset >= new_end]
        owned = self._owns_directory()
        if dropped and not owned:
            raise FileNotFoundError(f"{self.path} is no longer this partition log's file")
        if owned:
            for snap in snapshot_offsets(self.directory):
                if snap > new_end:
                    snapshot_path(self.directory, snap).unlink(missing_ok=True)
            for segment in reversed(dropped):  # the newest first: no gap if interrupted
                self._segment_path(segment.base_offset).unlink()
                index_files.unlink(self.directory, segment.base_offset)
            fsync_dir(self.directory)
        if dropped:
            del self._segments[-len(dropped):]
            self._file.close()
            self._file = self._open_active()
        active = self._segments[-1]
        in_active = [b for b in keep if b.segment == active.base_offset]
        size = in_active[-1].position + in_active[-1].size if in_active else 0
        self._file.flush()
        os.ftruncate(self._file.fileno(), size)  # this log's file, wherever it now is
        os.fsync(self._file.fileno())
        log.warning("truncated a diverging partition log", extra={
            "path": str(self.path), "from_offset": self.log_end_offset,
            "to_offset": new_end})
        self._reindex(0, len(keep))
        active.size = size
        active.index = self._build_index(active.base_offset, in_active)
        if owned:  # a prefix of the batches: a prefix of the index
            index_files.write(self.directory, active.index)
        self.log_end_offset = new_end
        self._log_start = min(self._log_start, new_end)
        self._load_producers()

    def read(self, offset: int, max_bytes: int, upper_offset: int) -> bytes:
        """The bytes of `read_region`'s region (b"" when there is none)."""
        region = self.read_region(offset, max_bytes, upper_offset)
        return b"" if region is None else region.read_and_close()

    def read_region(self, offset: int, max_bytes: int, upper_offset: int
                    ) -> FileRegion | None:
        """Whole batches holding offsets from `offset` below `upper_offset`, up to
        `max_bytes` (at least one batch, so a large batch is never stuck), from one
        segment (as Kafka's: the next fetch reads the next segment), as stored: a range
        of the segment file, held open (None when there is no batch to read). The
        segment's offset index gives where to scan from for the batch holding `offset`,
        for the one holding `upper_offset`, and for the last batch ending within
        `max_bytes`; the file is opened once for all of it."""
        if offset >= min(upper_offset, self.log_end_offset):
            return None
        first_segment = segment_for(self.segment_bases, offset)
        for number, segment in enumerate(self._segments[first_segment:], first_segment):
            with _SegmentReader(self._segment_path(segment.base_offset), segment) as reader:
                first = reader.first_batch(offset)
                if first is None:  # cleaned away up to the segment's end: the next one
                    continue
                if first.last_offset >= upper_offset:
                    return None
                limit = min(segment.size, first.position + max(max_bytes, first.size))
                following = self._segments[number + 1].base_offset \
                    if number + 1 < len(self._segments) else self.log_end_offset
                upper = reader.first_batch(upper_offset) if upper_offset < following \
                    else None
                if upper is not None:
                    limit = min(limit, upper.position)
                end = start = max(first.position, segment.index.entry_at_or_below(limit))
                for info in reader.batches(start):
                    if info.position + info.size > limit:
                        break
                    end = info.position + info.size
                return reader.region(first.position, end - first.position)
        return None

    def _read_at(self, segment: int, position: int, size: int) -> bytes:
        with open(self._segment_path(segment), "rb") as handle:
            handle.seek(position)
            return handle.read(size)

    def _read_batch(self, info: BatchInfo) -> bytes:
        return self._read_at(info.segment, info.position, info.size)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, the end offset of that epoch) — OffsetForLeaderEpoch,
        from the epoch cache (O(log epochs)). (-1, -1) when no batch has such an epoch."""
        return end_offset_for_epoch(self._epoch_starts, self.log_end_offset, epoch)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int, int] | None:
        """Kafka's ListOffsets by timestamp: (offset, timestamp, leader epoch) of the
        first record at or above the log start whose timestamp is >= `timestamp_ms`,
        None when no record has one. The first segment (from the one holding the log
        start: DeleteRecords leaves records below it in its segment) whose largest
        timestamp reaches it holds the record; its time index and offset index give
        where to scan for the first batch whose max timestamp reaches it, whose records
        are then read one by one."""
        for segment in self._segments[segment_for(self.segment_bases, self._log_start):]:
            if segment.index.max_timestamp < timestamp_ms:
                continue
            start = max(segment.index.time_scan_start(timestamp_ms), self._log_start)
            with _SegmentReader(self._segment_path(segment.base_offset), segment) as reader:
                for info in reader.batches(segment.index.position_for(start)):
                    if info.last_offset < self._log_start or \
                            info.max_timestamp < timestamp_ms:
                        continue
                    records = record_timestamps(self._read_batch(info))
                    for offset, timestamp in records:
                        if offset >= self._log_start and timestamp >= timestamp_ms:
                            return offset, timestamp, info.leader_epoch
                    if not records:  # undecodable: at batch granularity
                        return max(info.base_offset, self._log_start), info.max_timestamp, \
                            info.leader_epoch
        return None

    def max_timestamp(self) -> tuple[int, int, int] | None:
        """ListOffsets MAX_TIMESTAMP (KIP-734): (offset, timestamp, leader epoch) of the
        first record holding the largest timestamp; None for an empty log."""
        if self._max_ts_index < 0:
            return None
        info = self._batches[self._max_ts_index]
        for offset, timestamp in record_timestamps(self._read_batch(info)):
            if timestamp == info.max_timestamp:
                return offset, timestamp, info.leader_epoch
        return info.base_offset, info.max_timestamp, info.leader_epoch  # undecodable

    def close(self) -> None:
        """Snapshot the producer state (so the next open scans nothing) and close."""
        if self._file.closed:
            return
        try:
            if self.producers.end_offset > 0 and \
                    self.log_end_offset not in snapshot_offsets(self.directory):
                self.write_producer_snapshot()
        except OSError as exc:  # the directory may be gone (staged for deletion)
            log.info("no producer-state snapshot on close", extra={
                "path": str(self.directory), "reason": str(exc)})
        self._file.close()


class _SegmentReader:
    """One segment file open for reading: batch headers scanned from a position where a
    batch starts, a chunk read at a time and the last chunk kept (a fetch scans near the
    same place up to three times), and a range of the file, held open."""

    def __init__(self, path: Path, segment: _Segment) -> None:
        self._segment = segment
        self._fd = os.open(path, os.O_RDONLY)
        self._chunk, self._chunk_at = b"", 0

    def __enter__(self) -> _SegmentReader:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)

    def first_batch(self, offset: int) -> BatchInfo | None:
        """The first batch holding an offset >= `offset`."""
        return next((info for info in self.batches(self._segment.index.position_for(offset))
                     if info.last_offset >= offset), None)

    def batches(self, position: int) -> Iterator[BatchInfo]:
        """The batches from `position` (where one starts) to the segment's end."""
        segment = self._segment
        while position + HEADER_BYTES <= segment.size:
            at = position - self._chunk_at
            if at < 0 or at + HEADER_BYTES > len(self._chunk):
                # no further than the segment's size then: an append may be writing past
                # it, and the kept chunk must not hold half a header later taken as whole
                self._chunk, self._chunk_at, at = os.pread(
                    self._fd, min(_SCAN_CHUNK_BYTES, segment.size - position), position), \
                    position, 0
            chunk = self._chunk
            base, length = _OFFSET_LENGTH.unpack_from(chunk, at)
            # the start-up scan checked every batch: another length is a broken file
            assert length >= HEADER_BYTES - LOG_OVERHEAD, \
                f"batch length {length} at {position} of segment {segment.base_offset}"
            (epoch,) = _EPOCH.unpack_from(chunk, at + 12)
            header = read_header(chunk, at)
            yield BatchInfo(base_offset=base, last_offset=base + header.last_offset_delta,
                            leader_epoch=epoch, position=position,
                            size=LOG_OVERHEAD + length, max_timestamp=header.max_timestamp,
                            segment=segment.base_offset)
            position += LOG_OVERHEAD + length

    def region(self, position: int, size: int) -> FileRegion:
        """A range of the file, on a descriptor of its own (this one closes on exit)."""
        return FileRegion(os.dup(self._fd), position, size)


def record_timestamps(batch: bytes) -> list[tuple[int, int]]:
    """(offset, timestamp) of each record of a stored magic v2 batch. LogAppendTime
    batches give every record the batch's max timestamp (as Kafka's records report);
    a compressed body is decoded (broker.kafka.partitions.compression); a malformed one
    gives [] (the caller then answers at batch granularity)."""
    base_offset = int(struct.unpack_from(">q", batch, 0)[0])
    header = read_header(batch)
    (base_timestamp,) = struct.unpack_from(">q", batch, 27)
    (count,) = _COUNT.unpack_from(batch, 57)
    try:
        body = compression.decompress(header.attributes & compression.CODEC_MASK,
                                      batch[HEADER_BYTES:])
        out = []
        position = 0
        for _ in range(count):
            length, position = read_varint(body, position)
            start = position
            position += 1  # record attributes
            timestamp_delta, position = read_varint(body, position)
            offset_delta, position = read_varint(body, position)
            timestamp = header.max_timestamp if header.attributes & _LOG_APPEND_TIME \
                else base_timestamp + timestamp_delta
            out.append((base_offset + offset_delta, timestamp))
            position = start + length
        return out
    except (ValueError, IndexError):  # CompressionError is a ValueError
        return []
