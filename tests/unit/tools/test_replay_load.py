"""How the replay's tasks share the cores: a log scanned in one task and indexed in
another (`tools.replay.job._first_pass`'s two jobs) gives what one task doing both would
give; the tasks that only index share the cores the scans leave, and a file indexed in
one is not walked again (`node_task` and `group_task` run in process, no Spark: the jobs
run in tests/replay)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from raft.segment import encode_batch
from tests.support.synthetic_logs import metadata_log
from tools.replay import load
from tools.replay.batch_index import IndexEntries, KnownFiles
from tools.replay.compiled import scan_module
from tools.replay.images import ReplayBase
from tools.replay.load import Task, group_task, node_task, task_groups


@pytest.mark.parametrize("base", [None, ReplayBase(end_offset=37)])
def test_a_scan_task_and_an_index_task_find_what_one_task_doing_both_finds(
        base: ReplayBase | None) -> None:
    """The scan task and the index task equal one task that scans (with the aggregates)
    and indexes, from offset 0 and from a base in the middle of a batch."""
    batches = metadata_log(records=400, batch_size=7, records_per_epoch=90, max_live=8,
                           seed=3)
    files = [("/log/00000000000000000000.log", b"".join(encode_batch(b) for b in batches))]
    plan = {"index": True, "scan": True, "analysis": True, "base": base}

    def run(node_plan: dict[str, Any]) -> dict[str, Any]:
        return next(node_task(1, files[-1][0], files, node_plan))

    whole = run(plan)
    scanned = run({**plan, "index": False})
    indexed = run({"index": True})
    assert isinstance(scanned["scan"], scan_module().ScanResult)  # compiled when built
    assert scanned["scan"].aggregates is not None
    assert scanned["scan"].aggregates.kind_counts  # gathered, not empty
    assert (scanned["index"], indexed["scan"]) == (None, None)
    assert scanned["scan"] == whole["scan"]
    assert indexed["index"] == whole["index"]
    assert scanned["corrupt"] == indexed["corrupt"] == whole["corrupt"] == []


def _task(node: int, plan: dict[str, Any]) -> Task:
    return (node, [f"/n{node}/a.log"], f"/n{node}/a.log", plan)


def test_scans_run_alone_and_index_tasks_share_the_cores_left():
    scan, index = {"scan": True}, {"index": True}
    tasks = [_task(1, scan), _task(1, index), _task(2, index), _task(3, index),
             _task(4, {"decode": {"p": [0]}})]
    assert task_groups(tasks, 2) == [[tasks[0]], [tasks[4]], tasks[1:4]]
    assert task_groups(tasks, 4) == [[tasks[0]], [tasks[4]], tasks[1:3], tasks[3:4]]
    assert task_groups(tasks, 16) == [[tasks[0]], [tasks[4]], *([t] for t in tasks[1:4])]
    assert task_groups(tasks[1:4], 1) == [tasks[1:4]]
    assert task_groups([], 2) == []


def _segments(root: Path, node: int, chunks: list[bytes]) -> list[str]:
    paths = []
    for at, chunk in enumerate(chunks):
        path = root / f"n{node}" / f"{at:020d}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(chunk)
        paths.append(str(path))
    return paths


def test_a_group_indexes_a_file_once_and_each_node_gets_its_own_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nodes 1 and 2 hold the same segment bytes, node 3 the same first file and a
    longer second one, node 4 a damaged copy of the first: each node's index (its own
    file names) and corrupt messages are what it gets alone; the shared files are walked
    once, and equal arrays are one object."""
    batches = [encode_batch(b) for b in metadata_log(records=300, batch_size=7, seed=5)]
    first, second = b"".join(batches[:20]), b"".join(batches[20:30])
    damaged = bytearray(first)
    damaged[len(batches[0]) + 30] ^= 0xFF
    files = {1: [first, second], 2: [first, second], 3: [first, b"".join(batches[20:])],
             4: [bytes(damaged), second]}
    tasks = [(node, paths, paths[-1], {"index": True}) for node, chunks in files.items()
             if (paths := _segments(tmp_path, node, chunks))]
    alone = {task[0]: next(node_task(task[0], task[2], load.read_segments(task[1]),
                                     task[3])) for task in tasks}
    walked = []
    walk = load._walk
    monkeypatch.setattr(load, "_walk", lambda view, path: walked.append(path) or walk(view, path))
    grouped = {result["node"]: result for result in group_task(tasks)}
    assert grouped == alone
    assert alone[4]["corrupt"][0].startswith(tasks[3][1][0])  # damaged: its own path
    assert walked == [tasks[0][1][0], tasks[0][1][1], tasks[2][1][1], tasks[3][1][0]]
    one, two, three = (grouped[n]["index"] for n in (1, 2, 3))
    assert two.files != one.files
    assert all(getattr(two, name) is getattr(one, name) for name in load._ARRAYS)
    assert three.offsets is not one.offsets


def test_a_known_file_changed_since_is_not_taken_for_a_copy(tmp_path: Path) -> None:
    """A live node's segment may change between the reads: a file of the known size is
    taken as a copy only while the known file is as it was and holds the same bytes."""
    known, entries = KnownFiles(), IndexEntries()
    path = tmp_path / "a.log"
    path.write_bytes(b"x" * 64)
    known.add(str(path), b"x" * 64, entries)
    assert known.entries(b"x" * 64) is entries
    assert known.entries(b"y" * 64) is None  # same size, other bytes
    path.write_bytes(b"x" * 65)  # appended to since
    assert known.entries(b"x" * 64) is None
    path.unlink()
    assert known.entries(b"x" * 64) is None
