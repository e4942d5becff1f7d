"""A process writing a partition log, SIGKILLed at a seeded point (tests/integration's
test_partition_log_kill.py and test_compaction_kill.py), and what the log it leaves must
be once reopened.

The writer prints one report line per step of its own; where it calls `pause()`
(PAUSE_SCRIPT, in its script) it prints "paced" and waits for a line on stdin, so a kill
read right after a "paced" line lands between two of the log's steps rather than
anywhere. `index_problems` checks every segment's `.index` and `.timeindex` against the
segment's batches read afresh (not through broker.kafka.partitions.partition_log's own
scan)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from broker.kafka.partitions.index_files import offset_index_path, time_index_path
from broker.kafka.partitions.partition_log import BatchInfo, split_batches
from broker.kafka.partitions.producer_state import read_header
from broker.kafka.partitions.segment_index import (
    OFFSET_INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    build,
    offset_index_problem,
    time_index_problem,
)
from broker.kafka.partitions.segments import RollLimits, segment_bases, segment_name

ROOT = Path(__file__).resolve().parents[2]
PAUSED = "paced"
PAUSE_SCRIPT = f"""
import sys
def pause(*_):
    print({PAUSED!r}, flush=True)
    sys.stdin.readline()
"""


def run_and_kill(script: str, directory: Path, lines: int, timeout_s: float) -> list[str]:
    """Run `script` (`python -c`, the log's directory its argument) and SIGKILL it, by its
    PID, once it printed `lines` lines, answering each "paced" but the last (a kill after
    it lands while the writer waits between steps). Every report line it printed (not
    "paced"), those printed before the kill landed included; a line the kill cut short
    is dropped."""
    writer = subprocess.Popen([sys.executable, "-c", script, str(directory)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              cwd=ROOT)
    assert writer.stdin is not None
    assert writer.stdout is not None
    reports: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        for number in range(lines):
            line = writer.stdout.readline()
            assert line, "the writer stopped early"
            assert time.monotonic() < deadline, "the writer is too slow"
            if line != PAUSED + "\n":
                reports.append(line.strip())
            elif number < lines - 1:
                writer.stdin.write("go\n")
                writer.stdin.flush()
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(10)
    reports += [line for line in writer.stdout.read().split("\n")[:-1] if line != PAUSED]
    writer.stdout.close()
    writer.stdin.close()
    return reports


def _segment_batches(path: Path, base: int) -> list[BatchInfo]:
    data = path.read_bytes()
    out, position = [], 0
    for batch in split_batches(data) if data else []:
        header = read_header(batch)
        first = int.from_bytes(batch[:8], "big")
        out.append(BatchInfo(base_offset=first, last_offset=first + header.last_offset_delta,
                             leader_epoch=0, position=position, size=len(batch),
                             max_timestamp=header.max_timestamp, segment=base))
        position += len(batch)
    return out


def index_problems(directory: Path, limits: RollLimits) -> list[str]:
    """Each index file of `directory` that is not exactly the index of its segment's
    batches (missing, torn, stale or wrong) or has no segment, as "FILE: why"."""
    names = os.listdir(directory)
    bases = segment_bases(names)
    problems = [f"{name}: no segment" for name in sorted(names)
                if name.endswith((OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX))
                and int(name.split(".")[0]) not in bases]
    for number, base in enumerate(bases):
        path = directory / segment_name(base)
        batches = _segment_batches(path, base)
        end = bases[number + 1] if number + 1 < len(bases) else \
            batches[-1].last_offset + 1 if batches else base
        expected = build(base, batches, limits.index_interval_bytes)
        offset_file, time_file = offset_index_path(directory, base), \
            time_index_path(directory, base)
        for file, problem in (
                (offset_file, offset_index_problem(_bytes(offset_file), expected,
                                                   end_offset=end, size=path.stat().st_size)),
                (time_file, time_index_problem(_bytes(time_file), expected, end_offset=end))):
            if problem is not None:
                problems.append(f"{file.name}: {problem}")
    return problems


def _bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None
