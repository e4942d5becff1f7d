"""Durable file helpers: what a crash at any instant leaves behind is either the old
state or the new one, never a mix."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

TEMP_SUFFIX = ".tmp"  # `<name>.tmp`: a file being written; a crash may leave one behind


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves the old or the new file."""
    write_chunks_atomically(path, (data,))


def write_chunks_atomically(path: Path, chunks: Iterable[bytes]) -> None:
    """`write_atomically` of the chunks joined, each written as it comes, so a large
    file (a snapshot) never has to be in memory whole. Temp file, fsync, rename, then
    the directory's fsync; if writing fails, the temp file is removed."""
    temp = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _remove_quietly(temp)
        raise
    os.close(fd)
    os.replace(temp, path)
    fsync_dir(path.parent)


def _remove_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass  # the error being raised already says what went wrong
