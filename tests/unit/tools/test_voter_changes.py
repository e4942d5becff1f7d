"""Voter changes sent to the leader (tools/voter_changes.py) over real TCP on 127.0.0.1,
against stand-in nodes: NOT_LEADER_OR_FOLLOWER is followed to the leader it names, a
REQUEST_TIMED_OUT change is asked again until it is made, any other refusal is final
after one answer, and a timeout ends in one error naming the last problem; with no
leader anywhere the change is asked until the timeout, then one line names each distinct
problem once; the cluster id comes from a node that knows of no leader."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from raft import messages
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from tests.support.standin_nodes import Answer, Node, standin_nodes
from tools.admin_client import problems_text
from tools.errors import CommandError
from tools.quorum_client import cluster_id_of
from tools.voter_changes import RETRY_S, remove_voter

REMOVE = "RemoveRaftVoterRequest"


@pytest.fixture
def nodes() -> Iterator[Callable[[Answer], Node]]:
    with standin_nodes() as start:
        yield start


def answer(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    body = messages.encode_message(messages.VoterChangeResponse(error_code=code,
                                                                error_message=message))[1]
    assert isinstance(body, dict)
    return body


def remove(addresses: list[str], timeout_s: float = 5.0) -> None:
    remove_voter(addresses, cluster_id="c", node_id=2, directory_id=Uuid.random(),
                 timeout_s=timeout_s)


def test_a_change_follows_the_redirect_and_is_asked_again_until_the_leader_makes_it(
        nodes: Callable[[Answer], Node]) -> None:
    answers = iter([answer(ErrorCode.REQUEST_TIMED_OUT, "not caught up"),
                    answer(ErrorCode.NONE)])
    leader = nodes(lambda frame: next(answers))
    follower = nodes(lambda frame: {"error_code": int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                    "leader_address": leader.address})
    started = time.monotonic()
    remove([follower.address])
    assert follower.received == [REMOVE]
    assert leader.received == [REMOVE, REMOVE]
    assert time.monotonic() - started >= RETRY_S  # asked again after a pause, not at once


def test_a_refusal_other_than_a_timeout_is_final_after_one_answer(
        nodes: Callable[[Answer], Node]) -> None:
    leader = nodes(lambda frame: answer(ErrorCode.VOTER_NOT_FOUND, "no such voter"))
    with pytest.raises(CommandError, match="^VOTER_NOT_FOUND: no such voter$"):
        remove([leader.address])
    assert leader.received == [REMOVE]


def test_a_change_never_made_gives_up_at_the_timeout_naming_the_last_answer(
        nodes: Callable[[Answer], Node]) -> None:
    leader = nodes(lambda frame: answer(ErrorCode.REQUEST_TIMED_OUT, "not caught up"))
    started = time.monotonic()
    with pytest.raises(CommandError, match="gave up after 1 s: REQUEST_TIMED_OUT: not caught"):
        remove([leader.address], timeout_s=1.0)
    assert time.monotonic() - started < 1.0 + RETRY_S + 1.0
    assert 2 <= len(leader.received) <= int(1.0 / RETRY_S) + 1


def test_an_unreadable_answer_is_retried_then_reported_as_maybe_applied(
        nodes: Callable[[Answer], Node]) -> None:
    """An error frame instead of a VoterChangeResponse: the change reached a node, so
    its outcome is unknown at the timeout."""
    odd = nodes(lambda frame: {"error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                               "error_message": "refused"})
    with pytest.raises(CommandError, match=r"may have been applied\): .*refused"):
        remove([odd.address], timeout_s=0.6)
    assert odd.received


def not_the_leader(frame: dict[str, Any]) -> dict[str, Any]:
    """A node that knows of no leader (an election, or too few voters up)."""
    return {"error_code": int(ErrorCode.NOT_LEADER_OR_FOLLOWER), "leader_address": None,
            "error_message": "not the leader", "cluster_id": "c1"}


def test_with_no_leader_a_change_waits_until_the_timeout_then_is_one_short_line(
        nodes: Callable[[Answer], Node]) -> None:
    first, second = nodes(not_the_leader), nodes(not_the_leader)
    started = time.monotonic()
    with pytest.raises(CommandError) as raised:
        remove([first.address, second.address], timeout_s=1.0)
    elapsed = time.monotonic() - started
    assert 1.0 - RETRY_S <= elapsed < 1.0 + 1.0
    assert len(first.received) >= 2  # each asked all along, not once
    assert len(second.received) >= 2
    assert str(raised.value) == (
        "no leader made the change within 1 s (it may have been applied): "
        f"{first.address}: not the leader; {second.address}: not the leader")


def test_the_cluster_id_comes_from_a_node_that_knows_of_no_leader(
        nodes: Callable[[Answer], Node]) -> None:
    assert cluster_id_of([nodes(not_the_leader).address], timeout_s=1.0) == "c1"


def test_problems_text_names_each_problem_once_in_the_order_first_met() -> None:
    assert problems_text(["a: refused", "b: not the leader", "a: refused",
                          "b: not the leader", "c: timed out"]) == \
        "a: refused; b: not the leader; c: timed out"
