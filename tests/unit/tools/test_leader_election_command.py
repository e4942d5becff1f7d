"""tools.commands.leader_election: kafka-leader-election.sh's JSON file, options and
lines; and tools.client.admin's reading of an ElectLeaders answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metadata.admin import (
    ElectionPartitionResult,
    ElectionTopic,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ReplicaElectionResult,
)
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build, response_class
from tools.cli import main
from tools.client.admin import elect_from_response
from tools.commands.leader_election import (
    election_request,
    parse_partitions,
    result_json,
    result_lines,
)


def test_the_json_file_is_kafkas_and_malformed_ones_say_what_is_wrong() -> None:
    assert parse_partitions('{"partitions": [{"topic": "a", "partition": 1}]}') == [("a", 1)]
    for text, words in (("{", "not JSON"), ('{"partitions": []}', "at least one"),
                        ('{"partitions": [{"topic": "a", "partition": -1}]}', r"partitions\[0\]"),
                        ('{"partitions": [{"topic": "a", "partition": 0}, '
                         '{"topic": "a", "partition": 0}]}', "more than once")):
        with pytest.raises(ValueError, match=words):
            parse_partitions(text)


def test_the_request_groups_partitions_by_topic_and_knows_two_election_types() -> None:
    assert election_request("unclean", [("a", 0), ("b", 2), ("a", 1)]) == ElectLeadersRequest(
        election_type=1, topic_partitions=(ElectionTopic(topic="a", partitions=(0, 1)),
                                           ElectionTopic(topic="b", partitions=(2,))))
    assert election_request("PREFERRED", None) == ElectLeadersRequest(election_type=0)
    with pytest.raises(ValueError, match="PREFERRED or UNCLEAN"):
        election_request("dirty", None)


def test_result_lines_as_kafka_leader_election_prints_them() -> None:
    response = ElectLeadersResponse(replica_election_results=(ReplicaElectionResult(
        topic="t", partition_result=(
            ElectionPartitionResult(partition_id=0),
            ElectionPartitionResult(partition_id=1, error_code=ErrorCode.ELECTION_NOT_NEEDED),
            ElectionPartitionResult(partition_id=2, error_code=ErrorCode.NONE),
            ElectionPartitionResult(partition_id=3,
                                    error_code=ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                    error_message="fenced"))),))
    lines, failed = result_lines("preferred", response)
    assert lines == [
        "Successfully completed leader election (PREFERRED) for partitions t-0, t-2",
        "Valid replica already elected for partitions t-1",
        "Error completing leader election (PREFERRED) for partition: t-3: "
        "PREFERRED_LEADER_NOT_AVAILABLE: fenced"]
    assert failed == 1
    rows = json.loads(result_json("preferred", response))["partitions"]
    assert [r["error"] for r in rows] == [None, "ELECTION_NOT_NEEDED", None,
                                          "PREFERRED_LEADER_NOT_AVAILABLE"]


def test_an_elect_leaders_answer_reads_as_the_controllers() -> None:
    wire = build(response_class(43, 2), {
        "throttle_time": 0, "error_code": 0, "replica_election_results": [
            {"topic": "t", "partition_result": [
                {"partition_id": 0, "error_code": 84, "error_message": "led"}]}]})
    assert elect_from_response(wire) == ElectLeadersResponse(replica_election_results=(
        ReplicaElectionResult(topic="t", partition_result=(ElectionPartitionResult(
            partition_id=0, error_code=84, error_message="led"),)),))


@pytest.mark.parametrize(("argv", "words"), [
    (["--election-type", "dirty", "--all-topic-partitions"], "PREFERRED or UNCLEAN"),
    (["--election-type", "preferred", "--topic", "t"], "go together"),
    (["--election-type", "preferred", "--all-topic-partitions", "--topic", "t",
      "--partition", "0"], "exactly one"),
    (["--election-type", "preferred", "--path-to-json-file", "{missing}"], "missing"),
])
def test_bad_input_is_one_line_on_stderr_and_exit_2_before_anything_is_sent(
        argv: list[str], words: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.format(missing=tmp_path / "missing.json") for a in argv]
    # nothing listens on port 9: reaching the network would fail otherwise
    assert main(["leader-election", "--bootstrap-server", "127.0.0.1:9", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert words in err[0]
