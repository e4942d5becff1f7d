"""tools.commands.reassign_partitions: kafka-reassign-partitions.sh's JSON files, the
proposal of --generate, the request and the lines; bad input is one line and exit 2
before anything is sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metadata.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignablePartitionResult,
    ReassignableTopic,
    ReassignableTopicResult,
)
from raft.common.errors import ErrorCode
from tools.cli import main
from tools.commands.reassign_partitions import (
    cleared_throttles,
    document,
    failures,
    parse_brokers,
    parse_reassignment,
    parse_topics,
    propose,
    request_for,
    throttles,
    unknown_error,
    verify_lines,
)

MOVE = {("t", 0): (3, 4, 5), ("t", 1): (4, 5, 3)}
CURRENT = {("t", 0): (2, 3, 4), ("t", 1): (3, 4, 2), ("u", 0): (2,)}


def test_the_reassignment_file_is_kafkas_and_round_trips_through_document() -> None:
    assert parse_reassignment(json.dumps(document(MOVE))) == MOVE
    assert parse_reassignment('{"version": 1, "partitions": [{"topic": "t", "partition": 0, '
                              '"replicas": [5, 1]}]}') == {("t", 0): (5, 1)}


@pytest.mark.parametrize(("text", "words"), [
    ("{", "not JSON"),
    ('{"partitions": []}', "at least one"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}', r"partitions\[0\]"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}', "repeats"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}, '
     '{"topic": "t", "partition": 0, "replicas": [2]}]}', "more than once"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1], '
     '"log_dirs": ["/d"]}]}', "log_dirs"),
])
def test_a_malformed_reassignment_file_says_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_reassignment(text)


def test_unknown_partitions_and_brokers_are_named() -> None:
    assert unknown_error(MOVE, CURRENT, {2, 3, 4, 5}) is None
    assert unknown_error({("t", 7): (1,)}, CURRENT, {1}) == "t-7: no such partition"
    assert "[5]" in (unknown_error(MOVE, CURRENT, {2, 3, 4}) or "")


def test_generate_keeps_each_replication_factor_over_the_broker_list() -> None:
    assert parse_topics('{"version": 1, "topics": [{"topic": "t"}, {"topic": "u"}]}') == \
        ["t", "u"]
    assert parse_brokers("3,4,5") == [3, 4, 5]
    assert propose(CURRENT, ["t", "u"], [3, 4, 5]) == {
        ("t", 0): (3, 4, 5), ("t", 1): (4, 5, 3), ("u", 0): (3,)}
    with pytest.raises(ValueError, match="more than"):
        propose(CURRENT, ["t"], [3, 4])
    with pytest.raises(ValueError, match="no topic"):
        propose(CURRENT, ["nope"], [3])
    with pytest.raises(ValueError, match="repeats"):
        parse_brokers("3,3")


def test_the_request_groups_by_topic_and_a_cancel_is_a_null_target() -> None:
    assert request_for({("t", 1): None, ("t", 0): (3, 4)}) == \
        AlterPartitionReassignmentsRequest(topics=(ReassignableTopic(name="t", partitions=(
            ReassignablePartition(partition_index=0, replicas=(3, 4)),
            ReassignablePartition(partition_index=1, replicas=None))),))


def test_refused_partitions_carry_kafkas_error_name() -> None:
    refused = ReassignablePartitionResult(
        partition_index=1, error_code=ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
        error_message="none")
    response = AlterPartitionReassignmentsResponse(responses=(ReassignableTopicResult(
        name="t", partitions=(ReassignablePartitionResult(partition_index=0), refused)),))
    assert failures(response) == {"t-1": "NO_REASSIGNMENT_IN_PROGRESS: none"}


def test_verify_says_in_progress_completed_or_neither_as_kafka() -> None:
    assert verify_lines(MOVE, {("t", 0): (3, 4, 5), ("t", 1): (3, 4, 2)}, set()) == [
        "Reassignment of partition t-0 is completed.",
        "There is no active reassignment of partition t-1, but replica set is [3, 4, 2] "
        "rather than [4, 5, 3]."]
    assert verify_lines(MOVE, CURRENT, {("t", 0)})[0] == \
        "Reassignment of partition t-0 is still in progress."


def test_throttles_are_kafkas_rates_on_every_broker_involved_and_replicas_per_topic() -> None:
    current = {("t", 0): (1, 2), ("t", 1): (2, 3), ("u", 0): (1,)}
    targets = {("t", 0): (2, 4), ("t", 1): (2, 3), ("u", 0): (5,)}
    rate = [("leader.replication.throttled.rate", "100"),
            ("follower.replication.throttled.rate", "100")]
    assert throttles(targets, current, 100) == [
        (4, "1", rate), (4, "2", rate), (4, "3", rate), (4, "4", rate), (4, "5", rate),
        (2, "t", [("leader.replication.throttled.replicas", "0:1,0:2,1:2,1:3"),
                  ("follower.replication.throttled.replicas", "0:4")]),
        (2, "u", [("leader.replication.throttled.replicas", "0:1"),
                  ("follower.replication.throttled.replicas", "0:5")])]
    assert cleared_throttles(targets, {1, 7}) == [
        (4, "1", [("leader.replication.throttled.rate", None),
                  ("follower.replication.throttled.rate", None)]),
        (4, "7", [("leader.replication.throttled.rate", None),
                  ("follower.replication.throttled.rate", None)]),
        (2, "t", [("leader.replication.throttled.replicas", None),
                  ("follower.replication.throttled.replicas", None)]),
        (2, "u", [("leader.replication.throttled.replicas", None),
                  ("follower.replication.throttled.replicas", None)])]


@pytest.mark.parametrize(("argv", "words"), [
    (["--execute"], "--reassignment-json-file"),
    (["--generate", "--broker-list", "1"], "--topics-to-move-json-file"),
    (["--execute", "--reassignment-json-file", "{missing}"], "missing"),
    (["--execute", "--reassignment-json-file", "{bad}"], "repeats"),
    (["--generate", "--topics-to-move-json-file", "{bad}", "--broker-list", "1"], "expected"),
    (["--verify", "--reassignment-json-file", "{bad}", "--throttle", "10"],
     "--throttle goes with --execute"),
])
def test_bad_input_is_one_line_on_stderr_and_exit_2_before_anything_is_sent(
        argv: list[str], words: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}')
    argv = [a.format(missing=tmp_path / "missing.json", bad=bad) for a in argv]
    # nothing listens on port 9: reaching the network would fail otherwise
    assert main(["reassign-partitions", "--bootstrap-server", "127.0.0.1:9", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert words in err[0]
