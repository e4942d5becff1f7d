"""The per-node checks merged across nodes (tools/replay/checks.py), without Spark: a
node's rows from its view of a scan, one violation per record however many nodes hold
it, examples in offset order with their nodes, epoch, reason and record, the note of a
capped count, the leader claims judged across nodes, and a result's JSON."""

from __future__ import annotations

from typing import Any

from metadata.records import LeaderChange, PartitionChange, Topic
from raft.common.uuid import Uuid
from tools.replay.checks import NODE_CHECKS, CheckResult, node_checks, node_views
from tools.replay.sequential import MAX_KEPT, NodeScan, record_hash

A, B = Uuid(2), Uuid(3)
VOTERS = (1, 2, 3)


def _violation(check: str, node: int, offset: int | None, *, digest: int = 7,
               reason: str = "why") -> tuple[Any, ...]:
    return ("violation", check, node, offset, 2, digest, reason, {"record_type": "NO_OP"})


def _result(results: list[CheckResult], name: str) -> CheckResult:
    return next(r for r in results if r.name == name)


def test_node_views_gives_a_nodes_violations_claims_and_a_missing_metadata_topic_id():
    """A log that creates a topic without ever assigning the metadata topic ID: reported
    at the node's last offset and highest epoch (`end`), counted like any violation."""
    topic, dead = Topic(name="a", topic_id=A).encode(), PartitionChange(topic_id=B,
                                                                        partition=0).encode()
    leader = LeaderChange(leader_id=1, voters=VOTERS).encode()
    scan = NodeScan()
    scan.batch(0, 0, 1, [topic, dead])
    scan.batch(1, 2, 4, [leader])
    rows, counts = node_views(scan.result(), 2, 9, (2, 4))
    assert rows == [
        ("violation", "records_name_live_topic", 9, 1, 1, record_hash(dead),
         "no live topic with this ID here",
         {"record_type": "PARTITION_CHANGE", "topic_id": str(B), "partition": 0}),
        ("leader", 4, 1, 9, 2, record_hash(leader)),
        ("violation", "metadata_topic_once", 9, 2, 4, 0,
         "the log creates topics but never assigns the metadata topic ID", {})]
    assert counts == {"records_name_live_topic": 1, "metadata_topic_once": 1}
    # the first batch alone holds no claim; the ID is still missing there
    rows, counts = node_views(scan.result(), 1, 9, (1, 1))
    assert [r[:4] for r in rows] == [("violation", "records_name_live_topic", 9, 1),
                                     ("violation", "metadata_topic_once", 9, 1)]


def test_node_checks_counts_a_violation_held_by_several_nodes_once_listing_them():
    rows = [_violation("records_decodable", 3, 4), _violation("records_decodable", 1, 4),
            _violation("records_decodable", 2, 4, digest=8)]
    results = node_checks(rows, {1: {"records_decodable": 1}, 3: {"records_decodable": 1},
                                 2: {"records_decodable": 1}}, VOTERS, True)
    assert [r.name for r in results] == list(NODE_CHECKS)
    decodable = _result(results, "records_decodable")
    assert decodable == CheckResult(
        name="records_decodable", description=NODE_CHECKS["records_decodable"], violations=2,
        examples=({"nodes": [1, 3], "offset": 4, "epoch": 2, "reason": "why",
                   "record": {"record_type": "NO_OP"}},
                  {"nodes": [2], "offset": 4, "epoch": 2, "reason": "why",
                   "record": {"record_type": "NO_OP"}}),
        note="")
    assert all(r.passed and r.examples == () for r in results if r.name != "records_decodable")


def test_node_checks_lists_examples_by_offset_with_no_offset_last():
    rows = [_violation("offsets_contiguous", 1, offset, digest=offset or 0)
            for offset in (1, None, 0)]
    examples = _result(node_checks(rows, {}, VOTERS, True), "offsets_contiguous").examples
    assert [e["offset"] for e in examples] == [0, 1, None]


def test_node_checks_notes_a_lower_bound_when_a_node_counted_more_than_it_kept():
    """Past MAX_KEPT violations of a check on one node, the scan stops keeping them: the
    count is a lower bound, and the note says so (not at exactly MAX_KEPT)."""
    rows = [_violation("records_decodable", 1, 0), _violation("offsets_contiguous", 1, 0)]
    counts = {1: {"records_decodable": MAX_KEPT + 1}, 2: {"offsets_contiguous": MAX_KEPT}}
    results = node_checks(rows, counts, VOTERS, True)
    assert _result(results, "records_decodable").note == \
        "over 10,000 on one node: the count is a lower bound"
    assert _result(results, "offsets_contiguous").note == ""


def test_node_checks_flags_two_leaders_in_one_epoch_and_a_leader_not_a_voter():
    """Claims are ("leader", epoch, leader, node, offset, hash) rows: nodes 1 and 2 hold
    leader 1's claim of epoch 1, node 3 leader 2's; leader 9 claims epoch 2."""
    rows = [("leader", 1, 1, 1, 0, 11), ("leader", 1, 1, 2, 0, 11), ("leader", 1, 2, 3, 0, 12),
            ("leader", 2, 9, 1, 5, 13)]
    check = _result(node_checks(rows, {}, VOTERS, True), "one_leader_per_epoch")
    assert check.violations == 3
    assert list(check.examples) == [
        {"nodes": [1, 2], "offset": 0, "epoch": 1, "reason": "2 different leaders claim epoch 1",
         "record": {"record_type": "LEADER_CHANGE", "leader_id": 1}},
        {"nodes": [3], "offset": 0, "epoch": 1, "reason": "2 different leaders claim epoch 1",
         "record": {"record_type": "LEADER_CHANGE", "leader_id": 2}},
        {"nodes": [1], "offset": 5, "epoch": 2, "reason": "leader 9 is not a voter",
         "record": {"record_type": "LEADER_CHANGE", "leader_id": 9}}]
    # voters not known (taken as all nodes): only the two claims of epoch 1
    unknown = _result(node_checks(rows, {}, VOTERS, False), "one_leader_per_epoch")
    assert [e["reason"] for e in unknown.examples] == ["2 different leaders claim epoch 1"] * 2


def test_check_result_json_is_what_the_report_shows():
    failed = CheckResult(name="n", description="d", violations=2, examples=({"offset": 1},),
                         note="lower bound")
    assert failed.to_json() == {"name": "n", "description": "d", "passed": False,
                                "skipped": False, "violations": 2, "examples": [{"offset": 1}],
                                "note": "lower bound"}
    skipped = CheckResult(name="n", description="d", violations=0, skipped=True)
    assert skipped.to_json() == {"name": "n", "description": "d", "passed": True,
                                 "skipped": True, "violations": 0, "examples": [], "note": ""}
