"""Durable file helpers: what a crash at any instant leaves behind is either the old
state or the new one, never a mix.

And private ones: every file of a node's log directory (segments, snapshots,
quorum-state, meta.properties, checkpoints, partition logs) holds the cluster's metadata,
SCRAM credentials included, so it is created FILE_MODE (0o600) and every directory
DIR_MODE (0o700) by `open_private` and `make_private_dir`, whatever the process's umask:
a umask does not protect files another tool creates. Other tools that run as the node's
user (`kraft dump-log`, `kraft replay`) still read them."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

TEMP_SUFFIX = ".tmp"  # `<name>.tmp`: a file being written; a crash may leave one behind
FILE_MODE = 0o600  # read and written by the node's user only
DIR_MODE = 0o700


def open_private(path: str | os.PathLike[str], flags: int) -> int:
    """`os.open(path, flags)`, a file it creates FILE_MODE. With O_CREAT but not O_EXCL
    the file may be older (a temp file a crash left, made by an earlier version): it is
    made FILE_MODE too, as it is about to hold this node's data."""
    fd = os.open(path, flags, FILE_MODE)
    if flags & os.O_CREAT and not flags & os.O_EXCL:
        try:
            os.fchmod(fd, FILE_MODE)
        except BaseException:
            os.close(fd)
            raise
    return fd


def make_private_dir(path: Path, *, parents: bool = False, exist_ok: bool = False) -> None:
    """`path.mkdir(...)`, the directory DIR_MODE (parents it makes are the umask's: they
    are not the node's)."""
    path.mkdir(mode=DIR_MODE, parents=parents, exist_ok=exist_ok)


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
    fd = open_private(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
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
