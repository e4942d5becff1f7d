"""The disk log across real process deaths: SIGKILL mid-stream, power cuts, torn tails,
corruption."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from raft.log import DiskLog, LogCorruptionError
from raft.segment import iter_batches, list_segments
from tests.support.killed_child import run_until_killed

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SEGMENT_BYTES = 4096  # small, so the child rolls segments while it runs

# The child appends and flushes forever (bounded), printing "ack <end offset>" after each
# flush. raft.log's `os` and `fsync_dir` are wrapped (as tests/support/crash_disk.py does
# in process) so that every fsync reports, before it returns, what it made durable:
# "fsync <file> <size>" for a file, "fsync_dir <names...>" for the directory. A SIGKILL
# keeps the page cache, so the files alone cannot tell a flush that fsyncs from one that
# does not; these reports can. They go through the same pipe as the acks, in order.
CHILD = """
import os
import sys

import raft.log
from raft.common.durable import fsync_dir as real_fsync_dir
from raft.log import DiskLog


class ReportingOs:
    def __init__(self):
        self.names = {}

    def __getattr__(self, name):
        return getattr(os, name)

    def open(self, path, flags, mode=0o777):
        fd = os.open(path, flags, mode)
        self.names[fd] = os.path.basename(path)
        return fd

    def fsync(self, fd):
        os.fsync(fd)
        print("fsync", self.names[fd], os.fstat(fd).st_size, flush=True)


def fsync_dir(path):
    real_fsync_dir(path)
    print("fsync_dir", *sorted(os.listdir(path)), flush=True)


raft.log.os, raft.log.fsync_dir = ReportingOs(), fsync_dir
log = DiskLog(sys.argv[1], segment_bytes=int(sys.argv[2]))
for n in range(1_000_000):
    start = log.end_offset
    log.append(1 + n // 50, [f"record-{start + i}".encode() * (1 + i % 4)
                             for i in range(1 + n % 7)])
    log.flush()
    print("ack", log.end_offset, flush=True)
"""


def _expected_record(offset: int, index: int) -> bytes:
    return f"record-{offset}".encode() * (1 + index % 4)


def _check_contents(log: DiskLog) -> None:
    batches = log.read(0, 1 << 40)
    assert batches[0].base_offset == 0
    for batch in batches:
        assert batch.records == tuple(_expected_record(batch.base_offset + i, i)
                                      for i in range(len(batch.records)))


@dataclass
class Durability:
    """What the child's fsyncs made durable, from its reports."""

    synced_bytes: dict[str, int] = field(default_factory=dict)  # file -> size at its fsync
    names: set[str] = field(default_factory=set)  # the directory at its last fsync
    acks: list[int] = field(default_factory=list)
    # per ack: the fsyncs reported since the ack before it
    fsyncs_before_ack: list[int] = field(default_factory=list)
    _pending: int = 0

    def feed(self, line: str) -> None:
        kind, *rest = line.split()
        if kind == "ack":
            self.acks.append(int(rest[0]))
            self.fsyncs_before_ack.append(self._pending)
            self._pending = 0
        elif kind == "fsync":
            name, size = rest
            self.synced_bytes[name] = max(self.synced_bytes.get(name, 0), int(size))
            self._pending += 1
        else:
            assert kind == "fsync_dir", line
            self.names = set(rest)
            self._pending += 1

    def power_cut(self, directory: Path, target: Path) -> Path:
        """Into `target`: what a power cut would leave of `directory`, the names its last
        directory fsync saw, each file as long as its last fsync left it (the child only
        ever appends, so that is a prefix of the file now)."""
        target.mkdir()
        for name in self.names:
            data = (directory / name).read_bytes()
            (target / name).write_bytes(data[:self.synced_bytes.get(name, 0)])
        return target


@pytest.mark.timeout(120)
@pytest.mark.parametrize("flushes", [1, 150, 600])
def test_every_flushed_batch_survives_when_writer_is_sigkilled_or_loses_power(
        tmp_path: Path, flushes: int) -> None:
    """Durability: every batch whose flush() returned is present and intact after kill -9
    (the page cache survives) and after a power cut (only what was fsynced survives: each
    acknowledged flush was preceded by an fsync, and the log rebuilt from the fsynced
    bytes alone holds every acknowledged batch)."""
    directory = tmp_path / "log"
    directory.mkdir()
    durability = Durability()
    run_until_killed(CHILD, [str(directory), str(SEGMENT_BYTES)], durability.feed,
                     stop=lambda _line: len(durability.acks) >= flushes)
    acknowledged = durability.acks[flushes - 1]
    assert all(count > 0 for count in durability.fsyncs_before_ack), \
        "a flush returned without any fsync"
    cut = durability.power_cut(directory, tmp_path / "power-cut")
    with DiskLog(cut, segment_bytes=SEGMENT_BYTES) as log:
        assert log.end_offset >= acknowledged, "acknowledged batches lost in a power cut"
        _check_contents(log)
    with DiskLog(directory, segment_bytes=SEGMENT_BYTES) as log:
        assert log.end_offset >= acknowledged
        _check_contents(log)
        if flushes > 100:
            assert len(list_segments(directory)) > 1
            assert len(list_segments(cut)) > 1


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
