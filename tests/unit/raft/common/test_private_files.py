"""raft.common.durable's private files: what `open_private` creates is 0o600, a file it
opens with O_CREAT but without O_EXCL is made 0o600 even if it was older (a temp file a
crash left), `make_private_dir` makes 0o700, and the writers built on them (atomic
writes, a fetched snapshot's download file) follow, under a umask that hides nothing.
Real files in a temporary directory."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from raft.common.durable import (
    DIR_MODE,
    FILE_MODE,
    TEMP_SUFFIX,
    make_private_dir,
    open_private,
    write_atomically,
)
from raft.snapshot import SnapshotId
from raft.snapshot_store import DiskSnapshotStore


@pytest.fixture(autouse=True)
def open_umask() -> Iterator[None]:
    """umask 0: every mode bit asked for is granted, so a default mode would show."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_open_private_creates_the_file_for_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "segment"
    os.close(open_private(path, os.O_RDWR | os.O_CREAT | os.O_EXCL))
    assert mode(path) == FILE_MODE == 0o600


def test_open_private_makes_an_older_file_private_when_it_may_create(tmp_path: Path) -> None:
    path = tmp_path / "old"
    path.write_bytes(b"x")
    path.chmod(0o644)
    os.close(open_private(path, os.O_RDWR))  # not creating: left as it is
    assert mode(path) == 0o644
    os.close(open_private(path, os.O_RDWR | os.O_CREAT))
    assert mode(path) == 0o600


def test_write_atomically_gives_a_private_file_when_a_shared_temp_file_was_left(
        tmp_path: Path) -> None:
    target = tmp_path / "quorum-state"
    leftover = tmp_path / ("quorum-state" + TEMP_SUFFIX)
    leftover.write_bytes(b"half")
    leftover.chmod(0o666)
    write_atomically(target, b"{}")
    assert (target.read_bytes(), mode(target)) == (b"{}", 0o600)


def test_make_private_dir_makes_the_directory_for_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "a" / "log-dir"
    make_private_dir(path, parents=True)
    assert mode(path) == DIR_MODE == 0o700


def test_snapshot_download_file_is_private_when_a_fetch_starts(tmp_path: Path) -> None:
    store = DiskSnapshotStore(tmp_path)
    snapshot_id = SnapshotId(end_offset=5, epoch=1)
    assert store.download(snapshot_id) == 0
    [download] = list(tmp_path.iterdir())
    assert mode(download) == 0o600
