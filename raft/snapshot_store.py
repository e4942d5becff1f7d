"""Where the Raft core finds the snapshots it serves and stores the ones it fetches
(FetchSnapshot, KIP-630): `DiskSnapshotStore` over a partition directory, and
`MemorySnapshotStore` for the simulator. The core calls them directly, as it calls its
log; both check a fetched snapshot whole (`raft.snapshot.parse_snapshot`: every CRC, the
header and footer, the size) before it becomes visible under its name.

A download is resumable: the bytes fetched so far stay in a partial file (in memory for
the simulator) until the snapshot is finished or abandoned, so a dropped connection costs
only the chunk in flight.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from raft.common.durable import fsync_dir, open_private
from raft.snapshot import (
    DOWNLOAD_SUFFIX,
    SnapshotError,
    SnapshotId,
    list_snapshots,
    parse_snapshot,
)


class SnapshotStore(Protocol):
    def latest(self) -> SnapshotId | None:
        """The newest whole snapshot held (every snapshot is of committed records)."""
        ...

    def size(self, snapshot_id: SnapshotId) -> int | None:
        """The size in bytes of a whole snapshot held; None when it is not held."""
        ...

    def read(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        """Up to `max_bytes` of a held snapshot's bytes from `position`."""
        ...

    def download(self, snapshot_id: SnapshotId) -> int:
        """Start or resume fetching `snapshot_id` (dropping any other partial fetch):
        how many of its bytes are already held."""
        ...

    def write(self, snapshot_id: SnapshotId, position: int, data: bytes) -> None:
        """Add fetched bytes at `position`, which must be the bytes held so far."""
        ...

    def finish(self, snapshot_id: SnapshotId) -> tuple[bytes, ...]:
        """Check the fetched snapshot whole and make it durable and visible; its records
        (what the check parsed: the caller need not read the file again). On a
        SnapshotError the partial bytes are dropped (the fetch starts over)."""
        ...

    def delete_before(self, end_offset: int) -> list[SnapshotId]:
        """Remove the snapshots ending below `end_offset` (the log start): what went."""
        ...


class MemorySnapshotStore:
    """Snapshots as bytes in memory. Whole snapshots survive `crash()`; a partial
    download does not."""

    def __init__(self) -> None:
        self.snapshots: dict[SnapshotId, bytes] = {}
        self._partial: tuple[SnapshotId, bytearray] | None = None

    def add(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """A snapshot this node wrote of its own committed state."""
        self.snapshots[snapshot_id] = data

    def latest(self) -> SnapshotId | None:
        return max(self.snapshots, default=None)

    def size(self, snapshot_id: SnapshotId) -> int | None:
        data = self.snapshots.get(snapshot_id)
        return None if data is None else len(data)

    def read(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        return self.snapshots[snapshot_id][position:position + max_bytes]

    def download(self, snapshot_id: SnapshotId) -> int:
        if self._partial is None or self._partial[0] != snapshot_id:
            self._partial = (snapshot_id, bytearray())
        return len(self._partial[1])

    def write(self, snapshot_id: SnapshotId, position: int, data: bytes) -> None:
        held = self._held(snapshot_id)
        if position != len(held):
            raise ValueError(f"snapshot {snapshot_id}: write at {position}, held {len(held)}")
        held += data

    def finish(self, snapshot_id: SnapshotId) -> tuple[bytes, ...]:
        data = bytes(self._held(snapshot_id))
        self._partial = None
        _, records = parse_snapshot(data, snapshot_id.file_name, snapshot_id.epoch)
        self.snapshots[snapshot_id] = data
        return records

    def delete_before(self, end_offset: int) -> list[SnapshotId]:
        gone = [s for s in self.snapshots if s.end_offset < end_offset]
        for snapshot_id in gone:
            del self.snapshots[snapshot_id]
        return gone

    def crash(self) -> None:
        self._partial = None

    def _held(self, snapshot_id: SnapshotId) -> bytearray:
        if self._partial is None or self._partial[0] != snapshot_id:
            raise ValueError(f"snapshot {snapshot_id} is not being fetched")
        return self._partial[1]


class DiskSnapshotStore:
    """The snapshots of a partition directory (`raft.snapshot` names). A download goes to
    `<name>.part` (`DOWNLOAD_SUFFIX`), fsynced and renamed once checked whole."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._partial: tuple[SnapshotId, Path] | None = None

    def latest(self) -> SnapshotId | None:
        snapshots = list_snapshots(self.directory)
        return snapshots[0].snapshot_id if snapshots else None

    def size(self, snapshot_id: SnapshotId) -> int | None:
        try:
            return (self.directory / snapshot_id.file_name).stat().st_size
        except FileNotFoundError:
            return None

    def read(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        with open(self.directory / snapshot_id.file_name, "rb") as file:
            file.seek(position)
            return file.read(max_bytes)

    def download(self, snapshot_id: SnapshotId) -> int:
        path = self.directory / (snapshot_id.file_name + DOWNLOAD_SUFFIX)
        if self._partial is not None and self._partial[0] != snapshot_id:
            self._partial[1].unlink(missing_ok=True)
        if self._partial is None or self._partial[0] != snapshot_id:
            path.unlink(missing_ok=True)  # a download of an earlier process: start over
            os.close(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
            self._partial = (snapshot_id, path)
        return path.stat().st_size

    def write(self, snapshot_id: SnapshotId, position: int, data: bytes) -> None:
        path = self._held(snapshot_id)
        with open(path, "r+b") as file:
            held = file.seek(0, os.SEEK_END)
            if position != held:
                raise ValueError(f"{path}: write at {position}, held {held}")
            file.write(data)

    def finish(self, snapshot_id: SnapshotId) -> tuple[bytes, ...]:
        path = self._held(snapshot_id)
        self._partial = None
        try:
            _, records = parse_snapshot(path.read_bytes(), path, snapshot_id.epoch)
        except SnapshotError:
            path.unlink(missing_ok=True)
            raise
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(path, self.directory / snapshot_id.file_name)
        fsync_dir(self.directory)
        return records

    def delete_before(self, end_offset: int) -> list[SnapshotId]:
        gone = [s for s in list_snapshots(self.directory)
                if s.snapshot_id.end_offset < end_offset]
        for snapshot in gone:
            snapshot.path.unlink(missing_ok=True)
        if gone:
            fsync_dir(self.directory)
        return [s.snapshot_id for s in gone]

    def _held(self, snapshot_id: SnapshotId) -> Path:
        if self._partial is None or self._partial[0] != snapshot_id:
            raise ValueError(f"snapshot {snapshot_id} is not being fetched")
        return self._partial[1]
