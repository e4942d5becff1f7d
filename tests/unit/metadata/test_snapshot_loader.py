"""Start-up from snapshots (metadata.snapshot_loader) on real files in a temp dir: the
image a node starts from equals a full replay of its log to the snapshot's end, the
replay of the rest gives the full image, a corrupt newest snapshot falls back (WARNING
naming it), and no valid snapshot or one ahead of the log stops the start, naming the
files."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

from metadata import records as rec
from metadata.delta import replay_bytes
from metadata.image import MetadataImage
from metadata.snapshot_loader import load_start_image
from metadata.snapshot_policy import SnapshotStartError
from metadata.snapshot_writer import write_image_snapshot
from raft.common.uuid import Uuid
from raft.log import DiskLog
from raft.snapshot import SnapshotId, write_snapshot
from raft.storage import write_high_watermark_checkpoint
from tests.support.snapshot_support import corrupt

RNG = random.Random(630)
BATCH_EPOCHS = (1, 1, 2, 2, 2, 3)  # six batches: SnapshotIds carry several epochs


def log_batches() -> list[list[bytes]]:
    """Six batches of topic churn and broker changes (deterministic)."""
    ids = [Uuid.random(RNG) for _ in range(12)]
    batches: list[list[bytes]] = [[
        rec.LeaderChange(leader_id=1, voters=(1, 2, 3)).encode(),
        rec.MetadataTopic(topic_id=Uuid.random(RNG)).encode(),
        rec.RegisterBroker(broker_id=4, incarnation_id=Uuid.random(RNG),
                           broker_epoch=2).encode()]]
    for b in range(1, len(BATCH_EPOCHS)):
        records = [rec.UnfenceBroker(broker_id=4, broker_epoch=2)] if b == 1 else []
        for t in range(2):
            topic_id = ids[2 * b + t]
            records += [rec.Topic(name=f"t{b}-{t}", topic_id=topic_id),
                        rec.Partition(topic_id=topic_id, partition=0, replicas=(4,),
                                      isr=(4,), leader=4)]
        if b >= 2:  # a topic of the batch before goes
            records.append(rec.RemoveTopic(topic_id=ids[2 * (b - 1)]))
        batches.append([r.encode() for r in records])
    return batches


def make_log(log_dir: Path) -> tuple[Path, list[bytes], list[int]]:
    """The node's partition dir, every record in offset order, and each batch's end."""
    records: list[bytes] = []
    ends: list[int] = []
    with DiskLog.open_metadata_log(log_dir) as disk_log:
        for epoch, batch in zip(BATCH_EPOCHS, log_batches(), strict=True):
            disk_log.append(epoch, batch)
            records += batch
            ends.append(disk_log.end_offset)
        disk_log.flush()
        directory = disk_log.directory
    write_high_watermark_checkpoint(directory, len(records))
    return directory, records, ends


def replayed(records: list[bytes], end_offset: int) -> MetadataImage:
    return replay_bytes(enumerate(records[:end_offset]))


def snapshot_at(directory: Path, records: list[bytes], end_offset: int) -> Path:
    """A snapshot of the replayed image as the node writes one."""
    ends = [0]
    for epoch, batch in zip(BATCH_EPOCHS, log_batches(), strict=True):
        ends.append(ends[-1] + len(batch))
        if ends[-2] < end_offset <= ends[-1]:
            snapshot_id = SnapshotId(end_offset, epoch)
    return write_image_snapshot(directory, snapshot_id, replayed(records, end_offset), 0)


def test_start_image_equals_a_full_replay_at_every_snapshot_end(tmp_path: Path) -> None:
    directory, records, ends = make_log(tmp_path)
    for end in [*ends, 5]:  # batch ends, and one inside a batch
        path = snapshot_at(directory, records, end)
        start = load_start_image(directory, log_end_offset=len(records))
        assert start.path == path
        assert start.replay_from == end
        assert start.image.content_hash() == replayed(records, end).content_hash()
        tail = replay_bytes(((o, records[o]) for o in range(end, len(records))), start.image)
        assert tail.content_hash() == replayed(records, len(records)).content_hash()
        path.unlink()


def test_start_without_snapshots_replays_from_offset_zero(tmp_path: Path) -> None:
    directory, records, _ = make_log(tmp_path)
    start = load_start_image(directory, log_end_offset=len(records))
    assert (start.snapshot_id, start.replay_from, start.epoch) == (None, 0, 0)
    assert start.image.content_hash() == MetadataImage.empty().content_hash()


def test_corrupt_newest_snapshot_falls_back_to_an_older_one_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory, records, ends = make_log(tmp_path)
    older = snapshot_at(directory, records, ends[2])
    newest = snapshot_at(directory, records, ends[4])
    corrupt(newest)
    with caplog.at_level(logging.INFO):
        start = load_start_image(directory, log_end_offset=len(records))
    assert start.path == older
    assert start.image.content_hash() == replayed(records, ends[2]).content_hash()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(newest) in w and "bad snapshot" in w for w in warnings)


def test_a_newest_snapshot_corrupt_in_its_last_batch_is_dropped_after_it_was_applied(
        tmp_path: Path) -> None:
    """The image is built as the file is checked (`raft.snapshot.stream_snapshot`): every
    record of the newest snapshot is applied before its footer's CRC fails, and the image
    built from them is dropped for the older snapshot's."""
    directory, records, ends = make_log(tmp_path)
    older = snapshot_at(directory, records, ends[2])
    newest = snapshot_at(directory, records, ends[4])
    data = bytearray(newest.read_bytes())
    data[-1] ^= 0xFF  # the footer batch's payload
    newest.write_bytes(bytes(data))
    start = load_start_image(directory, log_end_offset=len(records))
    assert start.path == older
    assert start.image.content_hash() == replayed(records, ends[2]).content_hash()


def test_no_valid_snapshot_stops_the_start_naming_every_file(tmp_path: Path) -> None:
    directory, records, ends = make_log(tmp_path)
    paths = [snapshot_at(directory, records, end) for end in ends[1:3]]
    for path in paths:
        corrupt(path)
    with pytest.raises(SnapshotStartError) as info:
        load_start_image(directory, log_end_offset=len(records))
    assert str(info.value).startswith("cannot start: ")
    for path in paths:
        assert str(path) in str(info.value)


def test_a_log_starting_above_zero_without_a_snapshot_stops_the_start(tmp_path: Path) -> None:
    directory, records, ends = make_log(tmp_path)
    snapshot_at(directory, records, ends[0])  # below the start: cannot be continued
    with pytest.raises(SnapshotStartError, match="starts at offset 7 and no valid") as info:
        load_start_image(directory, log_start_offset=7, log_end_offset=len(records))
    assert str(directory) in str(info.value)


def test_snapshot_above_the_checkpoint_is_not_used(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The node cannot prove those records committed: it starts from an older one."""
    directory, records, ends = make_log(tmp_path)
    older = snapshot_at(directory, records, ends[1])
    unproven = snapshot_at(directory, records, ends[3])
    write_high_watermark_checkpoint(directory, ends[2])
    with caplog.at_level(logging.WARNING):
        start = load_start_image(directory, log_end_offset=len(records))
    assert start.path == older
    assert [getattr(r, "file", None) for r in caplog.records] == [str(unproven)]
    assert unproven.exists()  # kept, just not used


def test_snapshot_of_an_image_that_does_not_replay_stops_the_start(tmp_path: Path) -> None:
    """CRC-whole but written wrong (a Partition of no topic): no guessing."""
    directory, records, _ = make_log(tmp_path)
    bad = rec.Partition(topic_id=Uuid.random(RNG), partition=0, replicas=(4,), isr=(4,),
                        leader=4)
    path = write_snapshot(directory, SnapshotId(3, 1), [bad.encode()],
                          last_contained_log_timestamp=0)
    with pytest.raises(SnapshotStartError, match="holds no valid image") as info:
        load_start_image(directory, log_end_offset=len(records))
    assert str(path) in str(info.value)
