"""How `tools.replay.load.run_tasks` shares a job between the cores: a node both scanned
and indexed gets two tasks, the scan first, and their results merge back into one per
node (pure functions, no Spark: the job runs in tests/replay)."""

from __future__ import annotations

from typing import Any

from tools.replay.load import merge_results, split_plans


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
