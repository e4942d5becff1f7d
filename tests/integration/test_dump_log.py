"""`kraft dump-log` through the real CLI, in a subprocess: a checkpoint listed with the
segments of `--dir`, files named with `--files`, text and `--json`, a corrupt checkpoint
as one error line (exit 2), and a reader that stops early. The log is written with
DiskLog and the checkpoints with raft.snapshot's writer (nothing is started)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from metadata import records as rec
from raft.log import DiskLog
from raft.segment import iter_batches, list_segments
from tests.support.checkpoints import (
    LOG_TIMESTAMP_MS,
    flip_byte,
    write_checkpoint_of_log,
    write_log,
)

pytestmark = pytest.mark.integration


def dump_log(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.cli", "dump-log", *map(str, args)],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """A node's log directory: one segment (offsets 0-6) and the checkpoint below 6."""
    write_checkpoint_of_log(write_log(tmp_path), 6)
    return tmp_path


def partition_files(log_dir: Path) -> tuple[Path, Path]:
    partition_dir = next(log_dir.iterdir())
    [segment] = list_segments(partition_dir)
    [checkpoint] = partition_dir.glob("*.checkpoint")
    return segment, checkpoint


def test_dir_dumps_the_checkpoint_after_the_segment_with_header_and_footer(
        log_dir: Path) -> None:
    segment, checkpoint = partition_files(log_dir)
    result = dump_log("--dir", log_dir)
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("Dumping")] == \
        [f"Dumping {segment}", f"Dumping {checkpoint}"]
    at = lines.index(f"Dumping {checkpoint}")
    header_batch = next(iter_batches(checkpoint.read_bytes()))
    assert lines[at + 1:at + 3] == [
        "Snapshot end offset: 6, epoch: 2",
        f"baseOffset: 0 lastOffset: 0 count: 1 epoch: 2 appendTime: unknown position: 0 "
        f"size: {header_batch.size} crc: {header_batch.crc:#010x} crcOk: true"]
    assert lines[at + 3] == ('| offset: 0 epoch: 2 SnapshotHeader {"version": 0, '
                             f'"last_contained_log_timestamp": {LOG_TIMESTAMP_MS}}}')
    assert lines[-1] == '| offset: 6 epoch: 2 SnapshotFooter {"version": 0}'


def test_dir_json_tags_each_record_with_its_segment_or_checkpoint(log_dir: Path) -> None:
    segment, checkpoint = partition_files(log_dir)
    result = dump_log("--dir", log_dir, "--json")
    assert result.returncode == 0, result.stderr
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    from_segment = [(o["offset"], o["type"]) for o in objects if o.get("segment") == segment.name]
    from_checkpoint = [(o["offset"], o["type"]) for o in objects
                       if o.get("checkpoint") == checkpoint.name]
    assert len(from_segment) + len(from_checkpoint) == len(objects)
    assert [offset for offset, _ in from_segment] == list(range(7))
    assert from_checkpoint == [(0, "SnapshotHeader"), (1, "Topic"), (2, "Partition"),
                               (3, "Partition"), (4, "RegisterBroker"), (5, "UnfenceBroker"),
                               (6, "SnapshotFooter")]
    assert {o["snapshot_end_offset"] for o in objects if "checkpoint" in o} == {6}


def test_files_dumps_each_named_file_in_turn(log_dir: Path) -> None:
    segment, checkpoint = partition_files(log_dir)
    result = dump_log("--files", checkpoint, segment)
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("Dumping")] == \
        [f"Dumping {checkpoint}", f"Dumping {segment}"]
    only = dump_log("--files", checkpoint, "--json")
    assert [json.loads(line)["type"] for line in only.stdout.splitlines()][::6] == \
        ["SnapshotHeader", "SnapshotFooter"]


@pytest.mark.parametrize("mode", ["--dir", "--files"])
def test_corrupt_checkpoint_is_one_error_line_naming_file_and_byte_exit_2(
        log_dir: Path, mode: str) -> None:
    segment, checkpoint = partition_files(log_dir)
    second = list(iter_batches(checkpoint.read_bytes()))[1]
    flip_byte(checkpoint, second.position + 30)
    result = dump_log(mode, *([log_dir] if mode == "--dir" else [segment, checkpoint]))
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {checkpoint}: bad snapshot at byte offset "
                           f"{second.position}: CRC mismatch")
    assert f"Dumping {segment}" in result.stdout  # what came before it is still shown
    assert "Snapshot end offset" not in result.stdout
    as_json = dump_log(mode, *([log_dir] if mode == "--dir" else [checkpoint]), "--json")
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout.splitlines()[-1])["error"].startswith(
        f"{checkpoint}: bad snapshot at byte offset {second.position}")


def test_files_of_unknown_kind_are_refused_before_anything_is_dumped(log_dir: Path) -> None:
    segment, _ = partition_files(log_dir)
    notes = log_dir / "notes.txt"
    notes.write_text("not a log")
    result = dump_log("--files", segment, notes)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"error: {notes}: neither a segment (.log) nor a checkpoint (.checkpoint)"]
    both = dump_log("--dir", log_dir, "--files", segment)
    assert both.returncode == 2
    assert "not allowed with argument" in both.stderr


def test_a_reader_that_stops_early_ends_the_dump_quietly(tmp_path: Path) -> None:
    """`kraft dump-log ... | head`: no traceback once head has what it wanted."""
    with DiskLog.open_metadata_log(tmp_path) as log:
        for _ in range(100):
            log.append(1, [rec.NoOp().encode()] * 50)  # far more than a pipe buffers
        log.flush()
    process = subprocess.Popen([sys.executable, "-m", "tools.cli", "dump-log", "--dir",
                                str(tmp_path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stderr is not None
    assert process.stdout.readline().startswith("Dumping ")
    process.stdout.close()
    stderr = process.stderr.read()
    assert (process.wait(timeout=60), stderr) == (0, "")
