"""The disk log across real process deaths: SIGKILL mid-stream, torn tails, corruption."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from raft.log import DiskLog, LogCorruptionError
from raft.segment import iter_batches, list_segments

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SEGMENT_BYTES = 4096  # small, so the child rolls segments while it runs

# The child appends and flushes forever (bounded), printing each flushed end offset.
CHILD = """
import sys
from raft.log import DiskLog
log = DiskLog(sys.argv[1], segment_bytes=int(sys.argv[2]))
for n in range(1_000_000):
    start = log.end_offset
    log.append(1 + n // 50, [f"record-{start + i}".encode() * (1 + i % 4)
                             for i in range(1 + n % 7)])
    log.flush()
    print(log.end_offset, flush=True)
"""


def _expected_record(offset: int, index: int) -> bytes:
    return f"record-{offset}".encode() * (1 + index % 4)


def _run_child(directory: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", CHILD, str(directory), str(SEGMENT_BYTES)],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def _check_contents(log: DiskLog) -> None:
    batches = log.read(0, 1 << 40)
    assert batches[0].base_offset == 0
    for batch in batches:
        assert batch.records == tuple(_expected_record(batch.base_offset + i, i)
                                      for i in range(len(batch.records)))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("flushes", [1, 150, 600])
def test_every_flushed_batch_survives_when_writer_is_sigkilled(tmp_path: Path,
                                                               flushes: int) -> None:
    """Durability: every batch whose flush() returned is present and intact after kill -9."""
    child = _run_child(tmp_path)
    acknowledged = 0
    try:
        assert child.stdout is not None
        for _ in range(flushes):
            line = child.stdout.readline()
            assert line, f"child exited early with {child.poll()}"
            acknowledged = int(line)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    with DiskLog(tmp_path, segment_bytes=SEGMENT_BYTES) as log:
        assert log.end_offset >= acknowledged
        _check_contents(log)
        if flushes > 100:
            assert len(list_segments(tmp_path)) > 1


def test_earlier_batches_intact_when_tail_is_torn_at_any_length(tmp_path: Path) -> None:
    """Recovery: a segment cut at any byte keeps exactly the whole batches before the cut."""
    source = tmp_path / "source"
    with DiskLog(source) as log:
        for _ in range(5):
            log.append(1, [_expected_record(log.end_offset + i, i) for i in range(3)])
        log.flush()
    segment = list_segments(source)[0]
    data = segment.read_bytes()
    ends = {stored.position + stored.size: stored.batch.next_offset
            for stored in iter_batches(data)}
    for length in range(0, len(data) + 1, 3):
        torn = tmp_path / f"torn-{length}"
        torn.mkdir()
        (torn / segment.name).write_bytes(data[:length])
        expected_end = max((end for size, end in ends.items() if size <= length), default=0)
        with DiskLog(torn) as log:
            assert log.end_offset == expected_end
            if expected_end:
                _check_contents(log)
            log.append(2, [b"after recovery"])
            log.flush()
        with DiskLog(torn) as log:
            assert log.read(expected_end, 0)[0].records == (b"after recovery",)


def test_open_and_dump_report_file_and_offset_when_middle_segment_is_corrupt(
        tmp_path: Path) -> None:
    """DESIGN: a bad CRC before the tail names file and offset; dump-log exits 2."""
    with DiskLog(tmp_path / "__cluster_metadata-0", segment_bytes=300) as log:
        for _ in range(20):
            log.append(1, [_expected_record(log.end_offset + i, i) for i in range(3)])
        log.flush()
    segments = list_segments(tmp_path / "__cluster_metadata-0")
    assert len(segments) >= 3
    victim = segments[1]
    data = bytearray(victim.read_bytes())
    data[-5] ^= 0x10  # the last batch of a middle segment: not a tail
    victim.write_bytes(bytes(data))
    with pytest.raises(LogCorruptionError) as info:
        DiskLog(tmp_path / "__cluster_metadata-0", segment_bytes=300)
    assert info.value.path == str(victim)
    assert 0 < info.value.position < len(data)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "tools.cli", "dump-log", "--dir",
                             str(tmp_path)], capture_output=True, text=True, env=env,
                            cwd=ROOT, timeout=60, check=False)
    assert result.returncode == 2
    assert f"{victim}: corrupt log at byte offset {info.value.position}" in result.stderr
