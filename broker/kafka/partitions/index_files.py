"""A partition log's index files on disk (their layout and rules:
broker.kafka.partitions.segment_index).

The files are written as batches are appended and flushed with the segment; they get no
fsync of their own: the log's start-up scan checks each against the segment it indexes
and rewrites one that is missing, cut short or damaged (one WARNING naming the file), so
a lost or torn index costs a rewrite, never a record. A segment's index files are
unlinked after the segment; those a crash left without one are removed at start-up.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from broker.kafka.partitions.segment_index import (
    OFFSET_INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    SegmentIndex,
    offset_index_problem,
    time_index_problem,
)
from raft.common.durable import open_private

log = logging.getLogger(__name__)


def offset_index_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}{OFFSET_INDEX_SUFFIX}"


def time_index_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}{TIME_INDEX_SUFFIX}"


def _write(path: Path, data: bytes, flags: int) -> None:
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | flags)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def write(directory: Path, index: SegmentIndex) -> None:
    """Both files of `index`, replaced whole."""
    _write(offset_index_path(directory, index.base_offset), index.offset_index_bytes(),
           os.O_TRUNC)
    _write(time_index_path(directory, index.base_offset), index.time_index_bytes(),
           os.O_TRUNC)


def append(directory: Path, base_offset: int, offset_entries: bytes,
           time_entries: bytes) -> None:
    """New entries at the end of the segment's files."""
    if offset_entries:
        _write(offset_index_path(directory, base_offset), offset_entries, os.O_APPEND)
    if time_entries:
        _write(time_index_path(directory, base_offset), time_entries, os.O_APPEND)


def unlink(directory: Path, base_offset: int) -> None:
    offset_index_path(directory, base_offset).unlink(missing_ok=True)
    time_index_path(directory, base_offset).unlink(missing_ok=True)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def check(directory: Path, expected: SegmentIndex, *, end_offset: int, size: int) -> None:
    """Rewrite each of the segment's index files that is not `expected` (built by the
    scan of the segment, offsets [base, end), `size` bytes), with one WARNING naming it."""
    base = expected.base_offset
    offset_path, time_path = offset_index_path(directory, base), time_index_path(directory, base)
    offset_problem = offset_index_problem(_read(offset_path), expected, end_offset=end_offset,
                                          size=size)
    if offset_problem:
        log.warning("rebuilding a partition log's offset index", extra={
            "path": str(offset_path), "reason": offset_problem})
        _write(offset_path, expected.offset_index_bytes(), os.O_TRUNC)
    time_problem = time_index_problem(_read(time_path), expected, end_offset=end_offset)
    if time_problem:
        log.warning("rebuilding a partition log's time index", extra={
            "path": str(time_path), "reason": time_problem})
        _write(time_path, expected.time_index_bytes(), os.O_TRUNC)


def remove_orphans(directory: Path, segment_bases: list[int]) -> None:
    """Unlink the index files of segments that are gone."""
    kept = set(segment_bases)
    for name in os.listdir(directory):
        for suffix in (OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            stem = name[:-len(suffix)]
            if name.endswith(suffix) and len(stem) == 20 and stem.isdigit() and \
                    int(stem) not in kept:
                (directory / name).unlink()
