"""How `tools.replay.load.run_tasks` shares a job between the cores: a node both scanned
and indexed gets two tasks, the scan first, and their results merge back into one per
node, the same as one task doing both would give (`node_task` run in process, no
Spark: the job runs in tests/replay)."""

from __future__ import annotations

from typing import Any

import pytest

from raft.segment import encode_batch
from tests.support.synthetic_logs import metadata_log
from tools.replay.compiled import scan_module
from tools.replay.images import ReplayBase
from tools.replay.load import merge_results, node_task, split_plans


def _result(node: int, **fields: Any) -> dict[str, Any]:
    return {"node": node, "index": None, "scan": None, "decoded": {}, "corrupt": [],
            **fields}


def test_a_scanned_and_indexed_node_gets_its_scan_task_first_and_its_index_task_next():
    plans = {1: {"index": True, "scan": True, "analysis": True, "base": "b"},
             2: {"index": True}, 3: {"scan": True, "decode": {"p": [0]}}}
    assert split_plans(plans) == [
        (1, {"index": False, "scan": True, "analysis": True, "base": "b"}),
        (1, {"index": True}), (2, {"index": True}),
        (3, {"scan": True, "decode": {"p": [0]}})]


def test_split_results_merge_into_one_per_node_with_each_corrupt_message_once():
    merged = merge_results([
        _result(1, scan="scan", decoded={("a", 0): [1]}, corrupt=["f: bad", "g: short"]),
        _result(2, index="index-2"),
        _result(1, index="index-1", decoded={("b", 8): [2]}, corrupt=["f: bad"])])
    assert merged == {
        1: _result(1, index="index-1", scan="scan", decoded={("a", 0): [1], ("b", 8): [2]},
                   corrupt=["f: bad", "g: short"]),
        2: _result(2, index="index-2")}


@pytest.mark.parametrize("base", [None, ReplayBase(end_offset=37)])
def test_split_tasks_find_what_one_task_scanning_and_indexing_finds(
        base: ReplayBase | None) -> None:
    """The scan task and the index task, merged, equal one task that scans (with the
    aggregates) and indexes, from offset 0 and from a base in the middle of a batch."""
    batches = metadata_log(records=400, batch_size=7, records_per_epoch=90, max_live=8,
                           seed=3)
    files = [("/log/00000000000000000000.log", b"".join(encode_batch(b) for b in batches))]
    plan = {"index": True, "scan": True, "analysis": True, "base": base}

    def run(node_plan: dict[str, Any]) -> dict[str, Any]:
        return next(node_task(1, files[-1][0], files, node_plan))

    whole = merge_results([run(plan)])[1]
    split = merge_results([run(task_plan) for _, task_plan in split_plans({1: plan})])[1]
    assert isinstance(split["scan"], scan_module().ScanResult)  # compiled when built
    assert split["scan"].aggregates is not None
    assert split["scan"].aggregates.kind_counts  # gathered, not empty
    assert split["scan"] == whole["scan"]
    assert split["index"] == whole["index"]
    assert split["corrupt"] == whole["corrupt"] == []
