"""`tools/log_dump/`: a partition directory's segments and checkpoints dumped in name
order, a checkpoint's batches and records (the snapshot header and footer named), files
named one by one, and damage raised (never printed) with the file and byte offset."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from metadata import records as rec
from metadata.image_snapshot import image_records
from raft.log import LogCorruptionError
from raft.segment import iter_batches, list_segments
from raft.snapshot import SnapshotError, SnapshotId
from tests.support.checkpoints import (
    LOG_TIMESTAMP_MS,
    ORDERS,
    flip_byte,
    image_below,
    write_checkpoint,
    write_checkpoint_of_log,
    write_log,
)
from tools.commands.dump_log import resolve_partition_dir
from tools.log_dump.files import checkpoint_lines, dump_lines, files_lines, why_not_dumpable

SEGMENT_BYTES = 150  # one segment per epoch of the test log: 0.log, 3.log, 6.log


def dumped_names(lines: list[str]) -> list[str]:
    return [Path(line.removeprefix("Dumping ")).name for line in lines
            if line.startswith("Dumping ")]


def test_checkpoint_text_shows_its_id_every_batch_and_records_between_header_and_footer(
        tmp_path: Path) -> None:
    path = write_checkpoint_of_log(tmp_path, 6)
    lines = list(checkpoint_lines(path))
    assert lines[:2] == [f"Dumping {path}", "Snapshot end offset: 6, epoch: 2"]
    batches = list(iter_batches(path.read_bytes()))
    assert len(batches) > 3  # header, several batches of records, footer
    headers = [line for line in lines if line.startswith("baseOffset: ")]
    assert headers == [
        f"baseOffset: {s.batch.base_offset} lastOffset: {s.batch.last_offset} "
        f"count: {len(s.batch.records)} epoch: 2 appendTime: unknown position: {s.position} "
        f"size: {s.size} crc: {s.crc:#010x} crcOk: true" for s in batches]
    records = [line for line in lines if line.startswith("| ")]
    assert records[0] == ('| offset: 0 epoch: 2 SnapshotHeader {"version": 0, '
                          f'"last_contained_log_timestamp": {LOG_TIMESTAMP_MS}}}')
    expected = [type(r).__name__ for r in image_records(image_below(6))]
    assert expected == ["Topic", "Partition", "Partition", "RegisterBroker", "UnfenceBroker"]
    assert [line.split()[5] for line in records[1:-1]] == expected
    assert records[1].startswith(f'| offset: 1 epoch: 2 Topic {{"version": 0, "name": '
                                 f'"orders", "topic_id": "{ORDERS}"')
    assert records[-1] == '| offset: 6 epoch: 2 SnapshotFooter {"version": 0}'


def test_checkpoint_json_objects_name_the_checkpoint_and_count_its_records_from_0(
        tmp_path: Path) -> None:
    path = write_checkpoint_of_log(tmp_path, 6)
    objects = [json.loads(line) for line in checkpoint_lines(path, as_json=True)]
    assert [o["offset"] for o in objects] == list(range(len(objects)))
    assert [o["type"] for o in objects][::len(objects) - 1] == ["SnapshotHeader",
                                                                "SnapshotFooter"]
    for obj in objects:
        assert (obj["checkpoint"], obj["snapshot_end_offset"], obj["epoch"]) == \
            (path.name, 6, 2)
        assert obj["crc_ok"] is True
        assert "segment" not in obj
    topic = next(o for o in objects if o["type"] == "Topic")
    assert topic["record"] == {"version": 0, "name": "orders", "topic_id": str(ORDERS)}


def test_directory_lists_checkpoints_with_segments_in_name_order(tmp_path: Path) -> None:
    """A checkpoint whose end offset is a segment's base offset comes first, as in `ls`."""
    partition_dir = write_log(tmp_path, segment_bytes=SEGMENT_BYTES)
    assert len(list_segments(partition_dir)) == 3
    for end_offset in (7, 3, 6, 1):
        write_checkpoint_of_log(partition_dir, end_offset)
    names = dumped_names(list(dump_lines(partition_dir)))
    assert names == sorted(os.listdir(partition_dir))
    assert names[1:3] == ["00000000000000000001-0000000001.checkpoint",
                          "00000000000000000003-0000000001.checkpoint"]
    objects = [json.loads(line) for line in dump_lines(partition_dir, as_json=True)]
    log_offsets = [o["offset"] for o in objects if "segment" in o]
    assert log_offsets == list(range(7))  # the log's records, each once
    assert {o["checkpoint"] for o in objects if "checkpoint" in o} == set(names) - {
        p.name for p in list_segments(partition_dir)}


def test_corrupt_checkpoint_raises_naming_file_and_batch_after_the_files_before_it(
        tmp_path: Path) -> None:
    partition_dir = write_log(tmp_path)
    path = write_checkpoint_of_log(partition_dir, 6)
    third = list(iter_batches(path.read_bytes()))[2]
    flip_byte(path, third.position + third.size - 1)
    shown = []
    with pytest.raises(SnapshotError) as caught:
        shown.extend(dump_lines(partition_dir))
    assert (caught.value.path, caught.value.position) == (str(path), third.position)
    assert f"{path}: bad snapshot at byte offset {third.position}: CRC mismatch" in \
        str(caught.value)
    assert dumped_names(shown) == ["00000000000000000000.log"]  # nothing of the checkpoint


def test_checkpoint_cut_at_a_batch_boundary_raises_for_its_missing_footer(
        tmp_path: Path) -> None:
    path = write_checkpoint_of_log(tmp_path, 6)
    last = list(iter_batches(path.read_bytes()))[-1]
    path.write_bytes(path.read_bytes()[:last.position])
    with pytest.raises(SnapshotError, match="holds no SnapshotFooter") as caught:
        list(checkpoint_lines(path))
    assert caught.value.position is not None


def test_half_written_checkpoint_is_a_warning_and_left_in_place(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    partition_dir = write_log(tmp_path)
    partial = partition_dir / "00000000000000000006-0000000002.checkpoint.tmp"
    partial.write_bytes(b"half")
    assert dumped_names(list(dump_lines(partition_dir))) == ["00000000000000000000.log"]
    assert capsys.readouterr().err == (f"warning: {partial}: a checkpoint whose writing "
                                       "never finished (not dumped; opening the directory "
                                       "deletes it)\n")
    assert partial.exists()


def test_files_are_dumped_in_the_order_named_each_by_its_extension(tmp_path: Path) -> None:
    partition_dir = write_log(tmp_path, segment_bytes=SEGMENT_BYTES)
    checkpoint = write_checkpoint_of_log(partition_dir, 7)
    segment = list_segments(partition_dir)[1]
    lines = list(files_lines([checkpoint, segment]))
    assert dumped_names(lines) == [checkpoint.name, segment.name]
    segment_records = lines[lines.index(f"Dumping {segment}"):]
    assert [line.split()[2] for line in segment_records if line.startswith("| ")] == \
        ["3", "4", "5"]


def test_segment_named_alone_warns_of_a_torn_tail_but_a_hole_raises(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [segment] = list_segments(write_log(tmp_path))
    data = segment.read_bytes()
    segment.write_bytes(data[:-3])
    assert sum(line.startswith("baseOffset") for line in files_lines([segment])) == 2
    assert "torn tail at byte offset" in capsys.readouterr().err
    segment.write_bytes(data)
    flip_byte(segment, 30)  # inside the first batch, whole batches after it
    with pytest.raises(LogCorruptionError, match="corrupt log at byte offset 0"):
        list(files_lines([segment]))


def test_why_not_dumpable_names_missing_files_and_unknown_names(tmp_path: Path) -> None:
    partition_dir = write_log(tmp_path)
    [segment] = list_segments(partition_dir)
    checkpoint = write_checkpoint_of_log(partition_dir, 3)
    odd_checkpoint = tmp_path / "metadata-image.checkpoint"
    odd_segment = tmp_path / "notes.log"
    other = tmp_path / "quorum-state.json"
    for path in (odd_checkpoint, odd_segment, other):
        path.write_text("{}")
    assert why_not_dumpable(segment) is None
    assert why_not_dumpable(checkpoint) is None
    assert why_not_dumpable(tmp_path / "absent.log") == f"{tmp_path / 'absent.log'}: no such file"
    assert "not a snapshot file name" in (why_not_dumpable(odd_checkpoint) or "")
    assert why_not_dumpable(odd_segment) == \
        f"{odd_segment}: not a segment name (expected <base offset, 20 digits>.log)"
    assert why_not_dumpable(other) == \
        f"{other}: neither a segment (.log) nor a checkpoint (.checkpoint)"


def test_a_directory_of_checkpoints_only_is_a_partition_directory(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, SnapshotId(1, 1), [rec.NoOp().encode()])
    assert resolve_partition_dir(tmp_path) == tmp_path
    assert dumped_names(list(dump_lines(tmp_path))) == \
        ["00000000000000000001-0000000001.checkpoint"]
