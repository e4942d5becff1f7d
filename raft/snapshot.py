"""Snapshot files of the metadata partition (checkpoints): names, writing, reading, and
finding the newest whole one.

The snapshot of the log below `end_offset`, whose last record is of epoch `epoch`, is
the file `<end offset, 20 digits>-<epoch, 10 digits>.checkpoint` in the partition
directory, next to the segments. It is a run of batches in the segment format
(`raft.segment`: a header, the payload, a CRC over both). Batch base offsets count the
file's records from 0 and every batch carries the snapshot's epoch. The first batch
holds only a `SnapshotHeader` and the last only a `SnapshotFooter`
(`raft.control_records`); the batches between hold the records, opaque bytes to raft,
at most `max_batch_bytes` of payload each unless one record alone is larger.

A file is written under a temporary name, fsynced, renamed and the directory fsynced
(`raft.common.durable.write_chunks_atomically`), so a `.checkpoint` name always holds a
whole file; a crash can leave `<name>.checkpoint.tmp` (or a fetched snapshot's
`<name>.checkpoint.part`, `raft.snapshot_store`), which `remove_partial_snapshots`
deletes. `read_snapshot` checks the whole file before it hands out a single record
(every CRC, the offsets and epochs, the header first, the footer last, nothing after
it); anything wrong is one `SnapshotError` naming the file and the byte offset.
`stream_snapshot` makes the same checks batch by batch, handing out each batch's records
as it goes (a loader builds from them without holding them all; an error can come after
some were handed out). `newest_valid` opens a directory with the caller's reader
(`read_snapshot`, or a loader over `stream_snapshot`): it removes partial files and
loads the newest snapshot that reads whole (ending at or below a given offset, if
asked), falling back past any that do not.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TypeVar

from raft.common.durable import TEMP_SUFFIX, fsync_dir, write_chunks_atomically
from raft.common.record import Record, RecordError
from raft.control_records import CONTROL_RECORDS, SnapshotFooter, SnapshotHeader
from raft.segment import CorruptBatchError, StoredBatch, encode_batch, iter_batches
from raft.types import MAX_END_OFFSET as MAX_END_OFFSET  # re-exported with the format
from raft.types import MAX_EPOCH as MAX_EPOCH
from raft.types import SNAPSHOT_SUFFIX as SNAPSHOT_SUFFIX
from raft.types import Batch
from raft.types import SnapshotId as SnapshotId

PARTIAL_SUFFIX = SNAPSHOT_SUFFIX + TEMP_SUFFIX  # what a crash mid-write leaves
DOWNLOAD_SUFFIX = ".part"  # `<name>.checkpoint.part`: a snapshot being fetched
DEFAULT_MAX_BATCH_BYTES = 1 << 20
_NAME = re.compile(r"([0-9]{20})-([0-9]{10})" + re.escape(SNAPSHOT_SUFFIX))
_EXPECTED_NAME = "<end offset, 20 digits>-<epoch, 10 digits>.checkpoint"
# msgpack's worst case: a bin32 header per record, an array32 header per payload
_RECORD_OVERHEAD = 5
_PAYLOAD_OVERHEAD = 5

log = logging.getLogger(__name__)
ControlRecord = TypeVar("ControlRecord", bound=Record)
T = TypeVar("T")


class SnapshotError(Exception):
    """A snapshot file that cannot be used; `path` and `position` (a byte offset in the
    file, None when the whole file is at fault) say where."""

    def __init__(self, path: str | os.PathLike[str], position: int | None,
                 reason: str) -> None:
        where = "" if position is None else f" at byte offset {position}"
        super().__init__(f"{os.fspath(path)}: bad snapshot{where}: {reason}")
        self.path = os.fspath(path)
        self.position = position
        self.reason = reason


class NoValidSnapshotError(SnapshotError):
    """Snapshots exist in a directory and none of them is whole; `failures` says why for
    each file, newest first."""

    def __init__(self, directory: str | os.PathLike[str],
                 failures: tuple[SnapshotError, ...]) -> None:
        details = "; ".join(str(f) for f in failures)
        super().__init__(directory, None, f"none of its {len(failures)} snapshot(s) is "
                         f"valid: {details}")
        self.failures = failures


def parse_snapshot_name(path: str | os.PathLike[str]) -> SnapshotId:
    """The SnapshotId a file name (of a path) spells; SnapshotError naming it otherwise."""
    match = _NAME.fullmatch(os.path.basename(os.fspath(path)))
    if match is None:
        raise SnapshotError(path, None, f"not a snapshot file name (expected {_EXPECTED_NAME})")
    try:
        return SnapshotId(int(match[1]), int(match[2]))
    except ValueError as exc:
        raise SnapshotError(path, None, f"not a snapshot file name: {exc}") from None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot file read and checked whole."""

    snapshot_id: SnapshotId
    path: Path
    header: SnapshotHeader
    records: tuple[bytes, ...]


class SnapshotFile(NamedTuple):
    snapshot_id: SnapshotId
    path: Path


# --- writing ------------------------------------------------------------------------


def write_snapshot(directory: str | os.PathLike[str], snapshot_id: SnapshotId,
                   records: Iterable[bytes], *, last_contained_log_timestamp: int,
                   max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> Path:
    """Write the snapshot `snapshot_id` of `records` into `directory`, durably: when this
    returns, the file is whole under its name and survives a crash. `records` is read
    once, as the file is written. An existing snapshot of the same id is never replaced
    (FileExistsError): it already holds that state."""
    if max_batch_bytes <= 0:
        raise ValueError(f"max_batch_bytes must be positive, not {max_batch_bytes}")
    path = Path(directory) / snapshot_id.file_name
    if path.exists():
        raise FileExistsError(f"{path}: the snapshot already exists")
    header = SnapshotHeader(last_contained_log_timestamp=last_contained_log_timestamp)
    write_chunks_atomically(path, _encoded_batches(snapshot_id.epoch, header, records,
                                                   max_batch_bytes))
    return path


def encode_snapshot(snapshot_id: SnapshotId, records: Iterable[bytes], *,
                    last_contained_log_timestamp: int = 0,
                    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> bytes:
    """The bytes of the snapshot file `write_snapshot` would write (the simulator keeps
    its snapshots in memory)."""
    header = SnapshotHeader(last_contained_log_timestamp=last_contained_log_timestamp)
    return b"".join(_encoded_batches(snapshot_id.epoch, header, records, max_batch_bytes))


def _encoded_batches(epoch: int, header: SnapshotHeader, records: Iterable[bytes],
                     max_batch_bytes: int) -> Iterator[bytes]:
    yield encode_batch(Batch(base_offset=0, epoch=epoch, records=(header.encode(),)))
    next_offset = 1
    for batch_records in _bounded_batches(records, max_batch_bytes):
        yield encode_batch(Batch(base_offset=next_offset, epoch=epoch, records=batch_records))
        next_offset += len(batch_records)
    yield encode_batch(Batch(base_offset=next_offset, epoch=epoch,
                             records=(SnapshotFooter().encode(),)))


def _bounded_batches(records: Iterable[bytes],
                     max_batch_bytes: int) -> Iterator[tuple[bytes, ...]]:
    """The records in order, grouped so each group's payload is at most max_batch_bytes
    (a record larger than that alone in its group)."""
    group: list[bytes] = []
    size = _PAYLOAD_OVERHEAD
    for record in records:
        if not isinstance(record, bytes):  # msgpack would store a str, which no reader takes
            raise TypeError(f"a snapshot record must be bytes, not {type(record).__name__}")
        added = len(record) + _RECORD_OVERHEAD
        if group and size + added > max_batch_bytes:
            yield tuple(group)
            group, size = [], _PAYLOAD_OVERHEAD
        group.append(record)
        size += added
    if group:
        yield tuple(group)


# --- reading ------------------------------------------------------------------------


def read_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """The snapshot in `path`, checked whole; SnapshotError naming the file (and the byte
    offset) when anything is wrong, its name included."""
    path = Path(path)
    snapshot_id = parse_snapshot_name(path)
    header, records = parse_snapshot(_read(path), path, snapshot_id.epoch)
    return Snapshot(snapshot_id=snapshot_id, path=path, header=header, records=records)


def stream_snapshot(path: str | os.PathLike[str]
                    ) -> tuple[SnapshotId, Iterator[tuple[bytes, ...]]]:
    """`read_snapshot`'s checks, batch by batch: the snapshot's id and an iterator over
    the records of each batch between the header and the footer, handed out as its batch
    is checked, so that a loader builds from them without a million records in memory
    at once. A SnapshotError can come from the iterator after batches were taken (a
    batch further on is corrupt, the footer is missing): the caller discards what it
    built from them. `read_snapshot` hands out nothing before the whole file checks."""
    path = Path(path)
    snapshot_id = parse_snapshot_name(path)
    data = _read(path)
    batches = _checked_batches(data, path, snapshot_id.epoch)
    first = next(batches, None)
    if first is None:
        raise SnapshotError(path, 0, "empty file: no snapshot header")
    _control_record(first, path, SnapshotHeader, "first")
    return snapshot_id, _records_before_footer(batches, len(data), path)


def _records_before_footer(batches: Iterator[StoredBatch], size: int,
                           path: str | os.PathLike[str]) -> Iterator[tuple[bytes, ...]]:
    """The records of every batch but the last, which must hold the footer: each batch is
    handed out once the one after it is checked."""
    held: StoredBatch | None = None
    for stored in batches:
        if held is not None:
            yield held.batch.records
        held = stored
    if held is None:
        raise SnapshotError(path, size, _NO_FOOTER)
    _control_record(held, path, SnapshotFooter, "last")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SnapshotError(path, None, f"unreadable: {exc}") from None


def parse_snapshot(data: bytes, path: str | os.PathLike[str],
                   epoch: int) -> tuple[SnapshotHeader, tuple[bytes, ...]]:
    """The header and the records of a snapshot file's bytes (see the module docstring
    for what is checked); `path` is only named in errors."""
    batches = list(_checked_batches(data, path, epoch))
    if not batches:
        raise SnapshotError(path, 0, "empty file: no snapshot header")
    header = _control_record(batches[0], path, SnapshotHeader, "first")
    if len(batches) == 1:
        raise SnapshotError(path, len(data), _NO_FOOTER)
    _control_record(batches[-1], path, SnapshotFooter, "last")
    records = tuple(r for stored in batches[1:-1] for r in stored.batch.records)
    return header, records


_NO_FOOTER = "no snapshot footer after the header (cut short at a batch boundary?)"


def _checked_batches(data: bytes, path: str | os.PathLike[str],
                     epoch: int) -> Iterator[StoredBatch]:
    """Every batch, each once it is CRC-checked, numbered from 0 without gaps, of `epoch`;
    then that they fill the file exactly."""
    end = expected_offset = 0
    try:
        for stored in iter_batches(data, os.fspath(path)):
            batch = stored.batch
            if batch.base_offset != expected_offset:
                raise SnapshotError(path, stored.position, f"batch base offset "
                                    f"{batch.base_offset}, expected {expected_offset}")
            if batch.epoch != epoch:
                raise SnapshotError(path, stored.position, f"batch epoch {batch.epoch}, but "
                                    f"the file name says epoch {epoch}")
            if not batch.records:
                raise SnapshotError(path, stored.position, "empty batch")
            yield stored
            end, expected_offset = stored.position + stored.size, batch.next_offset
    except CorruptBatchError as exc:
        raise SnapshotError(path, exc.position, exc.reason) from None
    if end != len(data):  # iter_batches stops quietly at an incomplete batch
        raise SnapshotError(path, end, f"truncated: {len(data) - end} bytes of an "
                            f"incomplete batch at the end")


def _control_record(stored: StoredBatch, path: str | os.PathLike[str],
                    cls: type[ControlRecord], which: str) -> ControlRecord:
    """The one record of the `which` batch, a `cls`; SnapshotError saying what it holds
    otherwise."""
    records = stored.batch.records
    if len(records) != 1:
        found = f"{len(records)} records"
    else:
        try:
            record = CONTROL_RECORDS.decode(records[0])
        except RecordError as exc:
            found = str(exc)
        else:
            if isinstance(record, cls):
                return record
            found = f"a {type(record).__name__}"
    raise SnapshotError(path, stored.position, f"the {which} batch holds no "
                        f"{cls.__name__}: {found}")


# --- a directory of snapshots --------------------------------------------------------


def list_snapshots(directory: str | os.PathLike[str]) -> list[SnapshotFile]:
    """The snapshot files in `directory`, newest first, unread. Partial files (a crash
    mid-write) are not listed. A `.checkpoint` file whose name is not a snapshot's is a
    SnapshotError: something else wrote it, and guessing where it stands could skip the
    newest state."""
    found = []
    for entry in os.scandir(directory):
        if entry.name.endswith(SNAPSHOT_SUFFIX):
            path = Path(directory) / entry.name
            found.append(SnapshotFile(parse_snapshot_name(path), path))
    return sorted(found, reverse=True)


def remove_partial_snapshots(directory: str | os.PathLike[str]) -> list[Path]:
    """Delete, durably, the temp files of snapshots whose writing never finished (a crash
    leaves them; nothing reads them). Only while no snapshot is being written here, as
    when the directory is opened. Returns what was removed."""
    removed = [Path(directory) / e.name for e in os.scandir(directory)
               if e.name.endswith((PARTIAL_SUFFIX, SNAPSHOT_SUFFIX + DOWNLOAD_SUFFIX))]
    for path in removed:
        os.unlink(path)
    if removed:
        fsync_dir(Path(directory))
    return removed


def newest_valid(directory: str | os.PathLike[str], read: Callable[[Path], T], *,
                 max_end_offset: int | None = None, min_end_offset: int = 0) -> T | None:
    """Open a directory's snapshots: remove partial files, then `read` the newest snapshot
    that is whole (`read` raises SnapshotError for one that is not: a reader that builds
    as it checks, over `stream_snapshot`, leaves what it built behind), falling back to
    older ones past any that are not (each a WARNING naming
    the file: the fallback still starts the node). With `max_end_offset`, snapshots
    ending above it are passed over unread (the caller cannot prove their records
    committed); so are those ending below `min_end_offset` (the log start). None when no
    snapshot is left to read; NoValidSnapshotError naming every file read when none is
    whole. The caller checks that the log continues from the snapshot's end offset: an
    older snapshot may end below the log's start."""
    remove_partial_snapshots(directory)
    failures: list[SnapshotError] = []
    for snapshot_file in list_snapshots(directory):
        end_offset = snapshot_file.snapshot_id.end_offset
        if end_offset < min_end_offset or (max_end_offset is not None
                                           and end_offset > max_end_offset):
            continue
        try:
            snapshot = read(snapshot_file.path)
        except SnapshotError as exc:
            log.warning("%s; trying an older snapshot", exc)
            failures.append(exc)
            continue
        if failures:
            log.warning("%s: loaded snapshot %s after %d newer one(s) failed", directory,
                        snapshot_file.path.name, len(failures))
        return snapshot
    if failures:
        raise NoValidSnapshotError(directory, tuple(failures))
    return None
