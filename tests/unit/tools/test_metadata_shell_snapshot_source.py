"""`tools/metadata_shell/snapshot_source.py`: a checkpoint file (written with
raft.snapshot's writer) loaded into the image the shell shows, checked whole first; a
damaged or self-contradicting file is one error naming it, exit code 2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from metadata import records as rec
from metadata.delta import replay_bytes
from metadata.image_snapshot import image_records
from raft.common.uuid import Uuid
from raft.segment import iter_batches
from raft.snapshot import SnapshotId
from tests.support.checkpoints import (
    ORDERS,
    flip_byte,
    image_below,
    write_checkpoint,
    write_checkpoint_of_log,
)
from tools.errors import CommandError
from tools.metadata_shell.snapshot_source import load_snapshot_image


def load_error(path: Path) -> CommandError:
    with pytest.raises(CommandError) as caught:
        load_snapshot_image(path)
    assert caught.value.exit_code == 2
    return caught.value


def test_image_is_the_logs_up_to_the_end_offset_with_its_provenance(tmp_path: Path) -> None:
    path = write_checkpoint_of_log(tmp_path, 6)
    loaded = load_snapshot_image(path)
    expected = image_below(6)
    assert loaded.image.content_hash() == expected.content_hash()
    assert loaded.image.last_applied_offset == 5
    assert (loaded.provenance.offset, loaded.provenance.epoch) == (5, 2)
    assert sorted(loaded.image.topic_ids_by_name) == ["orders"]
    assert loaded.header == (f"snapshot {path}: the state of the log below offset 6, in 5 "
                             "records; image at offset 5, epoch 2")
    assert loaded.warnings == ()


def test_empty_snapshot_gives_an_empty_image_before_offset_0(tmp_path: Path) -> None:
    loaded = load_snapshot_image(write_checkpoint(tmp_path, SnapshotId(0, 0), []))
    assert loaded.image.topics == {}
    assert (loaded.provenance.offset, loaded.provenance.epoch) == (-1, 0)


def test_corrupt_checkpoint_names_file_and_byte_offset(tmp_path: Path) -> None:
    path = write_checkpoint_of_log(tmp_path, 6)
    second = list(iter_batches(path.read_bytes()))[1]
    flip_byte(path, second.position + second.size - 1)
    message = str(load_error(path))
    assert message.startswith(f"{path}: bad snapshot at byte offset {second.position}: CRC")


def test_undecodable_record_names_its_offset_as_dump_log_shows_it(tmp_path: Path) -> None:
    topic = rec.Topic(name="orders", topic_id=ORDERS).encode()
    path = write_checkpoint(tmp_path, SnapshotId(4, 1), [topic, b"\xc1"])
    assert str(load_error(path)).startswith(
        f"{path}: the record at offset 2 of the checkpoint does not decode: ")


def test_records_that_contradict_each_other_are_refused(tmp_path: Path) -> None:
    orphan = rec.Partition(topic_id=Uuid.random(), partition=0, replicas=(4,), isr=(4,),
                           leader=4)
    path = write_checkpoint(tmp_path, SnapshotId(4, 1), [orphan.encode()])
    assert re.match(re.escape(f"{path}: snapshot record 0 (Partition) does not apply: ") +
                    r".*\(`kraft dump-log` shows snapshot record N at offset N \+ 1\)$",
                    str(load_error(path)))


def test_missing_file_and_a_name_that_is_no_snapshots_are_exit_code_2(
        tmp_path: Path) -> None:
    assert str(load_error(tmp_path / "absent.checkpoint")) == \
        f"{tmp_path / 'absent.checkpoint'}: no such snapshot file"
    odd = tmp_path / "metadata-image.checkpoint"
    odd.write_text("{}")
    assert "not a snapshot file name" in str(load_error(odd))


def test_anomalies_the_snapshot_carries_are_a_warning(tmp_path: Path) -> None:
    # replay skips a topic created twice under one name: an anomaly the image keeps
    with_anomaly = replay_bytes(enumerate([
        rec.Topic(name="orders", topic_id=ORDERS).encode(),
        rec.Topic(name="orders", topic_id=Uuid.random()).encode()]))
    assert with_anomaly.anomaly_count == 1
    path = write_checkpoint(tmp_path, SnapshotId(2, 1),
                            [r.encode() for r in image_records(with_anomaly)])
    loaded = load_snapshot_image(path)
    assert loaded.image.content_hash() == with_anomaly.content_hash()
    assert loaded.warnings == ("warning: the snapshot says replay of its log skipped 1 "
                               "record(s) that contradict the image",)
