"""Helpers for the snapshot tests: a node's log read as recovery reads it (read-only, so a
running node's too), the image its replay gives up to an offset, the image a snapshot
file holds, and a corrupted file."""

from __future__ import annotations

from pathlib import Path

from metadata import records as rec
from metadata.delta import replay_bytes
from metadata.image import MetadataImage
from metadata.image_snapshot import image_from_records
from raft.log import METADATA_PARTITION_DIR, scan_log_dir
from raft.snapshot import read_snapshot


def partition_dir(data_dir: str | Path) -> Path:
    return Path(data_dir) / METADATA_PARTITION_DIR


def log_records(directory: Path) -> list[tuple[int, int, bytes]]:
    """(offset, epoch, record) of every whole record in a partition dir's log."""
    return [(stored.batch.base_offset + i, stored.batch.epoch, record)
            for _, scan in scan_log_dir(directory) for stored in scan.batches
            for i, record in enumerate(stored.batch.records)]


def replayed(directory: Path, end_offset: int) -> MetadataImage:
    """The image of a full replay of the log below `end_offset`."""
    records = [(o, r) for o, _, r in log_records(directory) if o < end_offset]
    assert len(records) == end_offset, f"{directory}: the log ends below {end_offset}"
    return replay_bytes(records)


def corrupt(path: Path) -> None:
    """Change the byte in the middle of the file: its CRC no longer matches (again after
    a second call, which a flipped bit would undo)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] = (data[len(data) // 2] + 1) % 256
    path.write_bytes(bytes(data))


def image_of(path: Path) -> MetadataImage:
    """The image a snapshot file holds (read and checked whole)."""
    snapshot = read_snapshot(path)
    return image_from_records([rec.decode(r) for r in snapshot.records],
                              snapshot.snapshot_id.end_offset - 1)
