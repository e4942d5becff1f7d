"""`kraft dump-log` and `kraft demo` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metadata.records import LeaderChange, RemoveTopic, Topic
from raft.common.uuid import Uuid
from raft.log import METADATA_PARTITION_DIR, DiskLog
from raft.segment import list_segments
from tools.cli import main

TOPIC_ID = Uuid.from_string("AIoFpsRkQVmDJMmFm4EOdg")


def _write(log_dir: Path, *extra: bytes) -> Path:
    with DiskLog.open_metadata_log(log_dir) as log:
        log.append(1, [LeaderChange(leader_id=1, voters=(1, 2, 3)).encode()])
        log.append(2, [Topic(name="orders", topic_id=TOPIC_ID).encode(),
                       RemoveTopic(topic_id=TOPIC_ID).encode(), *extra])
        log.flush()
        return log.directory


def test_dump_prints_batches_and_decoded_records_when_log_is_valid(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """dump-log shows every batch (offsets, epoch, count, CRC) and every record's fields."""
    _write(tmp_path)
    assert main(["dump-log", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "baseOffset: 1 lastOffset: 2 count: 2 epoch: 2" in out
    assert "crcOk: true" in out
    assert f'| offset: 1 epoch: 2 Topic {{"version": 0, "name": "orders", "topic_id": ' \
           f'"{TOPIC_ID}"' in out
    assert "| offset: 2 epoch: 2 RemoveTopic" in out


def test_dump_prints_one_json_object_per_record_when_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json: one object per record with offset, epoch, type and record (Uuids as text)."""
    partition_dir = _write(tmp_path)
    assert main(["dump-log", "--dir", str(partition_dir), "--json"]) == 0
    objects = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(o["offset"], o["epoch"], o["type"]) for o in objects] == \
        [(0, 1, "LeaderChange"), (1, 2, "Topic"), (2, 2, "RemoveTopic")]
    assert objects[2]["record"]["topic_id"] == str(TOPIC_ID)


def test_dump_shows_each_batchs_append_time_or_unknown_for_an_old_batch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """raft/segment.py: a timed batch shows the leader's append time; a batch written
    before batches were timed (here the log's first) shows it unknown, null in JSON."""
    with DiskLog.open_metadata_log(tmp_path) as log:
        log.append(1, [LeaderChange(leader_id=1, voters=(1, 2, 3)).encode()])
        log.append(1, [Topic(name="orders", topic_id=TOPIC_ID).encode()], 1_700_000_000_123)
        log.flush()
    assert main(["dump-log", "--dir", str(tmp_path)]) == 0
    headers = [line for line in capsys.readouterr().out.splitlines()
               if line.startswith("baseOffset")]
    assert [line.split("appendTime: ")[1].split()[0] for line in headers] == \
        ["unknown", "1700000000123"]
    assert main(["dump-log", "--dir", str(tmp_path), "--json"]) == 0
    objects = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["append_time_ms"] for o in objects] == [None, 1_700_000_000_123]


def test_dump_shows_raw_hex_when_record_is_undecodable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An undecodable record is shown as hex with an error marker, the dump goes on."""
    _write(tmp_path, b"\xc1garbage")
    assert main(["dump-log", "--dir", str(tmp_path), "--json"]) == 0
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert last["raw"] == b"\xc1garbage".hex()
    assert "undecodable" in last["error"]
    assert main(["dump-log", "--dir", str(tmp_path)]) == 0
    assert "ERROR undecodable record" in capsys.readouterr().out


def test_dump_exits_2_naming_file_and_offset_when_segment_is_corrupt(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """DESIGN: corruption before the tail is one error line naming file and offset."""
    _write(tmp_path)
    segment = list_segments(tmp_path / METADATA_PARTITION_DIR)[0]
    data = bytearray(segment.read_bytes())
    data[30] ^= 0x40  # inside the first batch's payload, a valid batch follows
    segment.write_bytes(bytes(data))
    assert main(["dump-log", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert f"{segment}: corrupt log at byte offset 0" in err[0]
    assert segment.read_bytes() == bytes(data)  # dump never repairs


def test_dump_warns_and_shows_valid_batches_when_tail_is_torn(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A torn tail is not corruption: earlier batches print, a warning names the tail."""
    _write(tmp_path)
    segment = list_segments(tmp_path / METADATA_PARTITION_DIR)[0]
    segment.write_bytes(segment.read_bytes()[:-4])
    assert main(["dump-log", "--dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "| offset: 0 epoch: 1 LeaderChange" in captured.out
    assert "offset: 1 " not in captured.out
    assert "torn tail" in captured.err


def test_dump_is_usage_error_when_dir_is_not_a_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A directory without a metadata log is bad input (exit 2)."""
    assert main(["dump-log", "--dir", str(tmp_path)]) == 2
    assert "neither a log directory" in capsys.readouterr().err
