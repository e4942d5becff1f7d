"""The blocking leader client (tools/admin_client.py) over real TCP on 127.0.0.1, against
small stand-in nodes in threads: a refused connection is `Unsent` (a write that reached
nobody fails), a node that reads the request and never answers makes a write's outcome
unknown (a read's a failure), and NOT_LEADER_OR_FOLLOWER's hint is followed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from raft.common.errors import ErrorCode
from raft.common.leader_redirect import Done, Failed, Unknown
from tests.support.standin_nodes import Answer, Node, refused_address, standin_nodes
from tools.admin_client import (
    CREATE_DONE_ALREADY,
    GROW_DONE_ALREADY,
    LeaderClient,
    earlier_attempt_applied,
    may_prove_applied,
    raft_outcome,
)
from tools.quorum_client import ClusterError, append_records


@pytest.fixture
def nodes() -> Iterator[Callable[[Answer], Node]]:
    with standin_nodes() as start:
        yield start


def test_a_redirect_is_followed_to_the_hinted_leader(nodes: Callable[[Answer], Node]
                                                     ) -> None:
    leader = nodes(lambda frame: {"error_code": 0, "answered_by": "leader"})
    follower = nodes(lambda frame: {"error_code": int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                    "leader_address": leader.address})
    client = LeaderClient([follower.address], attempt_timeout_s=2.0, max_rounds=1)
    result = client.call("Append", {}, classify=raft_outcome, is_write=True)
    assert isinstance(result, Done)
    assert result.value["answered_by"] == "leader"
    assert result.maybe_applied_before  # the follower might have been a deposed leader
    assert client.preferred == leader.address


def test_a_write_nobody_received_fails_and_one_a_node_read_is_unknown(
        nodes: Callable[[Answer], Node]) -> None:
    refused = LeaderClient([refused_address()], attempt_timeout_s=1.0, backoff_s=0.05)
    result = refused.call("Append", {}, classify=raft_outcome, is_write=True,
                          deadline=time.monotonic() + 0.5)
    assert isinstance(result, Failed)

    silent = nodes(lambda frame: None)
    client = LeaderClient([silent.address], attempt_timeout_s=0.3, backoff_s=0.05)
    started = time.monotonic()
    result = client.call("Append", {}, classify=raft_outcome, is_write=True,
                         deadline=started + 0.6)
    assert isinstance(result, Unknown)
    assert silent.received  # it read the write: its outcome is not known
    read = client.call("DescribeQuorumRequest", {}, classify=raft_outcome, is_write=False,
                       deadline=time.monotonic() + 0.4)
    assert isinstance(read, Failed)


def test_append_records_says_when_the_outcome_is_unknown(nodes: Callable[[Answer], Node]
                                                         ) -> None:
    silent = nodes(lambda frame: None)
    with pytest.raises(ClusterError, match="append outcome unknown"):
        append_records([silent.address], 1, timeout_s=0.5)
    with pytest.raises(ClusterError, match="append failed"):
        append_records([refused_address()], 1, timeout_s=0.3)


@pytest.mark.parametrize(("code", "requested", "proof", "partitions_now", "applied"), [
    (ErrorCode.TOPIC_ALREADY_EXISTS, 3, CREATE_DONE_ALREADY, 3, True),  # the lost create
    (ErrorCode.INVALID_PARTITIONS, 5, GROW_DONE_ALREADY, 5, True),  # the lost grow made it
    (ErrorCode.TOPIC_ALREADY_EXISTS, 3, CREATE_DONE_ALREADY, 2, False),  # another's topic
    (ErrorCode.INVALID_PARTITIONS, 5, GROW_DONE_ALREADY, 4, False),  # a real refusal
    (ErrorCode.INVALID_PARTITIONS, 0, CREATE_DONE_ALREADY, 0, False),  # a create's bad count
    (ErrorCode.TOPIC_ALREADY_EXISTS, None, CREATE_DONE_ALREADY, 1, False),  # count not asked
    (ErrorCode.POLICY_VIOLATION, 3, CREATE_DONE_ALREADY, 3, False),  # proves nothing
])
def test_a_retried_writes_refusal_proves_it_applied_only_with_the_count_asked_for(
        code: ErrorCode, requested: int | None, proof: ErrorCode, partitions_now: int,
        applied: bool) -> None:
    assert may_prove_applied(code, requested, proof) == (requested is not None
                                                         and code == proof)
    assert earlier_attempt_applied(code, requested=requested, proof=proof,
                                   partitions_now=partitions_now) == applied
