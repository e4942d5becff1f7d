"""Snapshot files across real process deaths: a child writes snapshots in a loop and is
SIGKILLed at 20 seeded random points, mid-file, between the last batch and the rename,
or just after; a power cut at each of those instants is reconstructed too."""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from raft.snapshot import (
    PARTIAL_SUFFIX,
    SnapshotId,
    list_snapshots,
    newest_valid,
    read_snapshot,
)
from tests.support.killed_child import run_until_killed

pytestmark = pytest.mark.integration

KILLS = 20
SEED = 630
PROGRESS_EVERY = 100  # records between the child's "progress" lines

# The child writes snapshots first, first + 1, ... forever (bounded), printing "begin n",
# "progress n k" each time the writer has taken k * PROGRESS_EVERY records, and "done n"
# once write_snapshot returned. raft.common.durable's `os` and `fsync_dir` are wrapped (as
# tests/integration/test_log_crash.py does for raft.log) so that every fsync reports,
# before it returns, what it made durable: "fsync <inode> <size>" for a file,
# "fsync_dir <name>:<inode>..." for the directory. A SIGKILL keeps the page cache; these
# reports tell what a power cut would have kept.
CHILD = """
import os
import sys

import raft.common.durable as durable
from raft.snapshot import write_snapshot
from tests.integration.test_snapshot_crash import PROGRESS_EVERY, records_of, snapshot_id_of

real_fsync_dir = durable.fsync_dir


class ReportingOs:
    def __getattr__(self, name):
        return getattr(os, name)

    def fsync(self, fd):
        os.fsync(fd)
        stat = os.fstat(fd)
        print("fsync", stat.st_ino, stat.st_size, flush=True)


def fsync_dir(path):
    real_fsync_dir(path)
    print("fsync_dir", *sorted(f"{e.name}:{e.inode()}" for e in os.scandir(path)), flush=True)


def reporting(n, records):
    for index, record in enumerate(records):
        if index % PROGRESS_EVERY == 0:
            print("progress", n, index // PROGRESS_EVERY, flush=True)
        yield record


durable.os, durable.fsync_dir = ReportingOs(), fsync_dir
directory, first = sys.argv[1], int(sys.argv[2])
for n in range(first, first + 1000):
    print("begin", n, flush=True)
    write_snapshot(directory, snapshot_id_of(n), reporting(n, records_of(n)),
                   last_contained_log_timestamp=n, max_batch_bytes=2048)
    print("done", n, flush=True)
"""


def snapshot_id_of(n: int) -> SnapshotId:
    return SnapshotId(end_offset=1000 * (n + 1), epoch=1 + n // 3)


def records_of(n: int) -> list[bytes]:
    count = random.Random(n).randint(1, 2500)
    return [f"snapshot {n} record {i};".encode() * (1 + i % 5) for i in range(count)]


def number_of(snapshot_id: SnapshotId) -> int:
    return snapshot_id.end_offset // 1000 - 1


def assert_intact(path: Path) -> int:
    """The snapshot in `path` reads whole and holds what the child wrote; its number."""
    snapshot = read_snapshot(path)
    n = number_of(snapshot.snapshot_id)
    assert snapshot.snapshot_id == snapshot_id_of(n)
    assert snapshot.records == tuple(records_of(n)), path
    assert snapshot.header.last_contained_log_timestamp == n
    return n


@dataclass
class Reports:
    """What one child said before it died, and what its fsyncs made durable. At its start
    everything in the directory was durable: the parent's newest_valid synced it."""

    directory: Path
    names: dict[str, int] = field(default_factory=dict)  # at the last directory fsync
    synced: dict[int, int] = field(default_factory=dict)  # inode -> size at its last fsync
    done: list[int] = field(default_factory=list)
    events: list[tuple[str, ...]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for entry in os.scandir(self.directory):
            self.names[entry.name] = entry.inode()
            self.synced[entry.inode()] = entry.stat().st_size

    def feed(self, line: str) -> None:
        kind, *rest = line.split()
        self.events.append((kind, *rest))
        if kind == "fsync":
            self.synced[int(rest[0])] = int(rest[1])
        elif kind == "fsync_dir":
            self.names = {name: int(inode) for name, inode in
                          (item.rsplit(":", 1) for item in rest)}
        elif kind == "done":
            self.done.append(int(rest[0]))

    def assert_synced_before_done(self) -> None:
        """Each finished snapshot: its whole file fsynced, then a directory fsync that
        holds its name, both before write_snapshot returned."""
        for n in self.done:
            name = snapshot_id_of(n).file_name
            path = self.directory / name
            inode, size = path.stat().st_ino, path.stat().st_size
            end = self.events.index(("done", str(n)))
            synced_at = self.events.index(("fsync", str(inode), str(size)), 0, end)
            assert any(kind == "fsync_dir" and f"{name}:{inode}" in rest
                       for kind, *rest in self.events[synced_at:end]), name

    def power_cut(self, target: Path) -> Path:
        """Into `target`: the names of the last directory fsync, each file as long as its
        last fsync left it (files are only ever appended to, then renamed)."""
        by_inode = {e.inode(): Path(e.path) for e in os.scandir(self.directory)}
        target.mkdir()
        for name, inode in self.names.items():
            data = by_inode[inode].read_bytes()
            (target / name).write_bytes(data[:self.synced.get(inode, 0)])
        return target


def run_child_until(directory: Path, first: int, stop_after: str) -> Reports:
    """Start a child writing snapshots `first`, `first + 1`, ...; SIGKILL it (by its PID)
    right after it prints the line `stop_after`; its reports."""
    reports = Reports(directory)
    run_until_killed(CHILD, [str(directory), str(first)], reports.feed,
                     stop=lambda line: line.strip() == stop_after)
    return reports


def kill_point(rng: random.Random, first: int) -> str:
    """A line after which to kill: in one of the next three snapshots, as it starts, at
    any progress line (the last one often: the footer, fsync and rename follow it), or
    once it is done."""
    n = first + rng.randrange(3)
    last = (len(records_of(n)) - 1) // PROGRESS_EVERY
    choice = rng.choice(["begin", "progress", "last", "last", "done"])
    if choice == "progress":
        return f"progress {n} {rng.randint(0, last)}"
    return f"progress {n} {last}" if choice == "last" else f"{choice} {n}"


def check_directory(directory: Path, done: list[int]) -> int | None:
    """Every snapshot named in `directory` is intact, every finished one among them, and
    newest_valid returns the newest; its number."""
    numbers = [assert_intact(f.path) for f in list_snapshots(directory)]
    assert set(done) <= set(numbers)
    loaded = newest_valid(directory, read_snapshot)
    if loaded is None:
        assert not numbers
        return None
    assert loaded.snapshot_id == snapshot_id_of(max(numbers))
    assert loaded.records == tuple(records_of(max(numbers)))
    return max(numbers)


@pytest.mark.timeout(240)
def test_no_corrupt_snapshot_is_loaded_when_the_writer_is_killed_at_random_points(
        tmp_path: Path) -> None:
    """After every kill -9 (page cache kept) and every power cut (only fsynced data kept)
    the newest snapshot loads intact, every snapshot whose write returned is there and
    intact, and partial files are gone once the directory is opened."""
    rng = random.Random(SEED)
    directory = tmp_path / "__cluster_metadata-0"
    directory.mkdir()
    next_number, partial_kills, all_done = 0, 0, []
    for kill in range(KILLS):
        reports = run_child_until(directory, next_number, kill_point(rng, next_number))
        all_done.extend(reports.done)
        reports.assert_synced_before_done()
        cut = reports.power_cut(tmp_path / f"power-cut-{kill}")
        check_directory(cut, all_done)
        shutil.rmtree(cut)
        partial_kills += any(n.endswith(PARTIAL_SUFFIX) for n in os.listdir(directory))
        newest = check_directory(directory, all_done)
        assert not [n for n in os.listdir(directory) if n.endswith(PARTIAL_SUFFIX)]
        next_number = next_number if newest is None else newest + 1
    assert len(all_done) >= KILLS // 2, all_done
    assert partial_kills >= KILLS // 4, f"only {partial_kills} kills landed mid-write"
