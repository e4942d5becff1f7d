"""Replacing a segment with its cleaned copy crash-safely, as Kafka's cleaner does.

The cleaner writes `<base>.log.cleaned` and fsyncs it, renames it `<base>.log.swap`
and fsyncs the directory: from then on the copy is complete and durable. The log then
renames the swap over `<base>.log` (one atomic rename: the segment is either the old
or the cleaned one, never missing) and fsyncs the directory. Opening a log
(`recover_swaps`) finishes a swap whose segment is still there, discards one whose
segment retention deleted meanwhile, and discards a `.cleaned` (a copy cut short), each
with one WARNING naming the file.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from broker.kafka.partitions.segments import segment_name
from raft.common.durable import fsync_dir, open_private

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


def cleaned_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_name(base_offset) + CLEANED_SUFFIX)


def swap_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_name(base_offset) + SWAP_SUFFIX)


def write_cleaned(directory: Path, base_offset: int, data: bytes) -> Path:
    """Step one: the cleaned copy, written and fsynced."""
    path = cleaned_path(directory, base_offset)
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return path


def promote(directory: Path, base_offset: int) -> Path:
    """Step two: the complete copy becomes a swap, durably."""
    swap = swap_path(directory, base_offset)
    os.rename(cleaned_path(directory, base_offset), swap)
    fsync_dir(directory)
    return swap


def install(directory: Path, base_offset: int) -> None:
    """Step three: the swap replaces its segment (the caller fsyncs the directory)."""
    os.replace(swap_path(directory, base_offset), directory / segment_name(base_offset))


def recover_swaps(directory: Path) -> None:
    """Finish or discard what a cleaner left in `directory` when the process stopped."""
    changed = False
    for name in sorted(os.listdir(directory)):
        path = directory / name
        if name.endswith(CLEANED_SUFFIX):
            log.warning("discarding an unfinished cleaned segment", extra={"path": str(path)})
            path.unlink()
        elif name.endswith(SWAP_SUFFIX):
            segment = directory / name[:-len(SWAP_SUFFIX)]
            if segment.exists():
                log.warning("finishing a cleaned segment's swap", extra={"path": str(path)})
                os.replace(path, segment)
            else:
                log.warning("discarding the swap of a deleted segment",
                            extra={"path": str(path)})
                path.unlink()
        else:
            continue
        changed = True
    if changed:
        fsync_dir(directory)
