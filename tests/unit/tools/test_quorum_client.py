"""The blocking quorum client's reads (tools/quorum_client.py) over real TCP on 127.0.0.1
against stand-in nodes: while the nodes answer but name no leader (an election) the read
is asked again until one does; when every address refuses the connection it fails at
once instead of waiting out its timeout."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from raft.common.errors import ErrorCode
from tests.support.standin_nodes import Answer, Node, refused_address, standin_nodes
from tools.quorum_client import ClusterError, request_leader

NO_LEADER = {"error_code": int(ErrorCode.NOT_LEADER_OR_FOLLOWER)}


@pytest.fixture
def nodes() -> Iterator[Callable[[Answer], Node]]:
    with standin_nodes() as start:
        yield start


def test_a_read_during_an_election_is_asked_again_until_a_leader_answers(
        nodes: Callable[[Answer], Node]) -> None:
    answers = iter([NO_LEADER, NO_LEADER, {"error_code": 0, "leader_id": 2}])
    node = nodes(lambda frame: next(answers))
    reply: Any = request_leader([node.address], "DescribeQuorum", {}, timeout_s=5.0)
    assert reply == {"error_code": 0, "leader_id": 2}
    assert node.received == ["DescribeQuorum"] * 3


def test_a_read_fails_at_once_when_every_address_refuses_the_connection() -> None:
    started = time.monotonic()
    with pytest.raises(ClusterError):
        request_leader([refused_address(), refused_address()], "DescribeQuorum", {},
                       timeout_s=5.0)
    assert time.monotonic() - started < 2.0  # not the 5 s timeout


def test_a_read_no_node_answers_for_ends_at_its_timeout(
        nodes: Callable[[Answer], Node]) -> None:
    node = nodes(lambda frame: NO_LEADER)
    started = time.monotonic()
    with pytest.raises(ClusterError, match="not the leader"):
        request_leader([node.address], "DescribeQuorum", {}, timeout_s=1.0)
    # asked until less than a backoff (0.1 s) is left, never past the timeout
    assert 0.85 <= time.monotonic() - started < 1.5
