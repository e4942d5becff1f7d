"""A small metadata log and snapshot checkpoints of it, written with the real DiskLog and
`raft.snapshot.write_snapshot`, for the tests of `kraft dump-log` and `kraft
metadata-shell --snapshot`.

The log: offsets 0-2 in epoch 1 (LeaderChange, broker 4 registered and unfenced), 3-5 in
epoch 2 (`orders` and its partitions 0 and 1), 6 in epoch 3 (`pending`).
"""

from __future__ import annotations

from pathlib import Path

from metadata import records as rec
from metadata.delta import replay
from metadata.image import MetadataImage
from metadata.image_snapshot import image_records
from raft.common.uuid import Uuid
from raft.log import DEFAULT_SEGMENT_BYTES, DiskLog
from raft.snapshot import SnapshotId, write_snapshot

ORDERS = Uuid.from_string("fmja9INwQxClI4eKGWbfrQ")
PENDING = Uuid.from_string("vS74fSS5RByP4NQw-tYbkQ")
INCARNATION = Uuid.from_string("AIoFpsRkQVmDJMmFm4EOdg")
LOG_TIMESTAMP_MS = 1_700_000_000_000
SMALL_BATCH_BYTES = 120  # a few records per batch, so a checkpoint has several

LOG: tuple[tuple[int, rec.Record], ...] = (  # (epoch, record), offsets from 0
    (1, rec.LeaderChange(leader_id=1, voters=(1, 2, 3))),
    (1, rec.RegisterBroker(broker_id=4, incarnation_id=INCARNATION, broker_epoch=1)),
    (1, rec.UnfenceBroker(broker_id=4, broker_epoch=1)),
    (2, rec.Topic(name="orders", topic_id=ORDERS)),
    *((2, rec.Partition(topic_id=ORDERS, partition=p, replicas=(4,), isr=(4,), leader=4))
      for p in (0, 1)),
    (3, rec.Topic(name="pending", topic_id=PENDING)),
)


def write_log(log_dir: Path, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> Path:
    """LOG in `log_dir`'s metadata partition, one batch per epoch; its directory."""
    with DiskLog.open_metadata_log(log_dir, segment_bytes=segment_bytes) as log:
        for epoch in sorted({epoch for epoch, _ in LOG}):
            log.append(epoch, [r.encode() for e, r in LOG if e == epoch])
        log.flush()
        return log.directory


def image_below(end_offset: int) -> MetadataImage:
    """The image of LOG's records below `end_offset`, as the log's replay builds it."""
    return replay((offset, record) for offset, (_, record) in enumerate(LOG[:end_offset]))


def write_checkpoint_of_log(directory: Path, end_offset: int) -> Path:
    """The snapshot of LOG below `end_offset` (1 or more), in the epoch of its last record."""
    snapshot_id = SnapshotId(end_offset, LOG[end_offset - 1][0])
    data = [r.encode() for r in image_records(image_below(end_offset))]
    return write_checkpoint(directory, snapshot_id, data)


def write_checkpoint(directory: Path, snapshot_id: SnapshotId, records: list[bytes]) -> Path:
    return write_snapshot(directory, snapshot_id, records,
                          last_contained_log_timestamp=LOG_TIMESTAMP_MS,
                          max_batch_bytes=SMALL_BATCH_BYTES)


def flip_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x40
    path.write_bytes(bytes(data))
