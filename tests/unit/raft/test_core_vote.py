"""Voting rules: KIP-595 Vote, Raft §5.2 / §5.4.1, KIP-996 pre-vote."""

from __future__ import annotations

import pytest

from raft.common.errors import ErrorCode
from raft.core import Role
from raft.messages import CurrentLeader, FetchRequest, FetchResponse, VoteRequest, VoteResponse
from raft.sim.planted import core_class
from raft.types import ElectionState
from tests.support.core_harness import (
    CLUSTER_ID,
    deliver,
    drain,
    envelope,
    log_with,
    make_core,
    make_leader,
    reply,
    sent,
)


def vote(candidate: int, epoch: int, last_epoch: int, last_offset: int, *,
         pre_vote: bool = False) -> VoteRequest:
    return VoteRequest(cluster_id=CLUSTER_ID, candidate_epoch=epoch, candidate_id=candidate,
                       last_offset_epoch=last_epoch, last_offset=last_offset,
                       pre_vote=pre_vote)


def at_epoch(epoch: int, **kwargs: object) -> ElectionState:
    return ElectionState(epoch=epoch, voters=(1, 2, 3), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("last_epoch", "last_offset"), [(2, 3), (3, 1), (2, 9)])
def test_vote_granted_when_candidate_log_is_at_least_as_up_to_date(
        last_epoch: int, last_offset: int) -> None:
    """Raft §5.4.1: grant when (last epoch, end offset) >= ours; ours is (2, 3)."""
    core = make_core(1, log=log_with(1, 1, 2), election=at_epoch(2))
    [response] = deliver(core, 2, vote(2, 3, last_epoch, last_offset), 10)
    assert isinstance(response, VoteResponse)
    assert response.vote_granted
    assert core.voted_id == 2
    assert core.epoch == 3


@pytest.mark.parametrize(("last_epoch", "last_offset"), [(1, 9), (2, 2), (0, 0)])
def test_vote_rejected_when_candidate_log_is_behind(last_epoch: int, last_offset: int) -> None:
    """Raft §5.4.1 election restriction: a candidate missing entries cannot win our vote;
    the epoch still moves up (a node learning a higher epoch persists it)."""
    core = make_core(1, log=log_with(1, 1, 2), election=at_epoch(2))
    [response] = deliver(core, 2, vote(2, 3, last_epoch, last_offset), 10)
    assert not response.vote_granted
    assert core.voted_id is None
    assert core.epoch == 3
    assert core.role is Role.UNATTACHED


@pytest.mark.parametrize(("candidate_epoch", "last_epoch", "last_offset"),
                         [(3, 4, 9), (3, -1, 0), (3, 2, -1)])
@pytest.mark.parametrize("pre_vote", [False, True])
def test_vote_refused_as_invalid_when_candidate_log_cannot_exist(
        candidate_epoch: int, last_epoch: int, last_offset: int, pre_vote: bool) -> None:
    """Kafka's checks: a log ending before offset 0, or holding an epoch above the
    candidate's own, is INVALID_REQUEST, refused before it moves this node's epoch."""
    core = make_core(1, log=log_with(1, 1, 2), election=at_epoch(2))
    [response] = deliver(core, 2, vote(2, candidate_epoch, last_epoch, last_offset,
                                       pre_vote=pre_vote), 10)
    assert response.error_code == ErrorCode.INVALID_REQUEST
    assert not response.vote_granted
    assert core.epoch == 2
    assert core.voted_id is None


def test_vote_granted_when_log_check_is_skipped_by_planted_bug() -> None:
    """The simulator's planted bug really removes the §5.4.1 check (so the checker has
    something to catch)."""
    core = make_core(1, log=log_with(1, 1, 2), election=at_epoch(2),
                     core_class=core_class("vote_without_log_check"))
    [response] = deliver(core, 2, vote(2, 3, 0, 0), 10)
    assert response.vote_granted


def test_only_one_vote_per_epoch_when_two_candidates_ask() -> None:
    """Raft §5.2: at most one vote per epoch; the same candidate may ask again."""
    core = make_core(1, election=at_epoch(4))
    [first] = deliver(core, 2, vote(2, 5, 0, 0), 10)
    [second] = deliver(core, 3, vote(3, 5, 0, 0), 11)
    [again] = deliver(core, 2, vote(2, 5, 0, 0), 12)
    assert first.vote_granted
    assert not second.vote_granted
    assert again.vote_granted
    assert core.voted_id == 2


def test_vote_is_persisted_in_the_same_ready_as_its_response_when_granted() -> None:
    """KIP-595 / types.py: the vote is in `Ready.election`, which the shell persists
    before it sends `Ready.messages`, so a granted vote is never forgotten."""
    core = make_core(1, election=at_epoch(4))
    drain(core)
    core.step(envelope(2, vote(2, 5, 0, 0)), 10)
    ready = core.ready()
    assert ready.election == ElectionState(epoch=5, voted_id=2, voters=(1, 2, 3))
    [response] = sent(ready, VoteResponse)
    assert response.message.vote_granted


def test_vote_rejected_with_fenced_leader_epoch_when_candidate_epoch_is_lower() -> None:
    """KIP-595: a request from a lower epoch gets FENCED_LEADER_EPOCH and changes nothing."""
    core = make_core(1, election=at_epoch(7, leader_id=3))
    drain(core)
    [response] = deliver(core, 2, vote(2, 6, 6, 9), 10)
    assert response.error_code is ErrorCode.FENCED_LEADER_EPOCH
    assert not response.vote_granted
    assert (response.leader_id, response.leader_epoch) == (3, 7)
    assert core.epoch == 7


def test_vote_rejected_when_candidate_is_not_a_voter() -> None:
    """KIP-595: only voters may become candidates (INCONSISTENT_VOTER_SET)."""
    core = make_core(1, election=at_epoch(1))
    [response] = deliver(core, 9, vote(9, 2, 2, 5), 10)
    assert response.error_code is ErrorCode.INCONSISTENT_VOTER_SET
    assert core.epoch == 1


def test_observer_never_votes_when_asked() -> None:
    """KIP-595 observers: they follow epochs but never grant a vote."""
    core = make_core(4, election=at_epoch(1))
    [response] = deliver(core, 2, vote(2, 2, 2, 5), 10)
    assert not response.vote_granted
    assert core.voted_id is None
    assert core.epoch == 2


def test_follower_rejects_real_vote_when_it_knows_the_leader_of_that_epoch() -> None:
    """Raft §5.2: a leader already exists in this epoch, so no vote is free."""
    core = make_core(1, election=at_epoch(3, leader_id=2))
    [response] = deliver(core, 3, vote(3, 3, 3, 9), 10)
    assert not response.vote_granted


def test_prevote_changes_neither_epoch_nor_vote_when_granted() -> None:
    """KIP-996: a pre-vote is advisory; nothing is persisted."""
    core = make_core(1, election=at_epoch(3))
    drain(core)
    core.step(envelope(2, vote(2, 4, 0, 0, pre_vote=True)), 10)
    ready = core.ready()
    [response] = sent(ready, VoteResponse)
    assert response.message.vote_granted
    assert ready.election is None
    assert (core.epoch, core.voted_id) == (3, None)


def test_follower_rejects_prevote_when_it_fetched_from_the_leader_recently() -> None:
    """KIP-996: a follower that hears from its leader does not help disrupt it."""
    core = make_core(1, election=at_epoch(3, leader_id=2))
    [fetch] = sent(drain(core), FetchRequest)
    reply(core, fetch, FetchResponse(high_watermark=0, current_leader=CurrentLeader(
        leader_id=2, leader_epoch=3)), 100)
    [recent] = deliver(core, 3, vote(3, 4, 3, 9, pre_vote=True), 200)
    answers = deliver(core, 3, vote(3, 4, 3, 9, pre_vote=True), 100 + 2000)
    [stale] = [m for m in answers if isinstance(m, VoteResponse)]
    assert not recent.vote_granted
    assert stale.vote_granted


def test_leader_rejects_prevote_when_it_is_alive() -> None:
    """KIP-996: pre-votes cannot disrupt a live leader."""
    leader = make_leader()
    [response] = deliver(leader, 2, vote(2, leader.epoch + 1, 99, 99, pre_vote=True), 10_001)
    assert not response.vote_granted
    assert leader.is_leader


def test_prospective_bumps_epoch_only_after_prevote_majority() -> None:
    """KIP-996: a prospective asks for pre-votes in epoch + 1 without bumping its own; a
    majority makes it a candidate, which persists the new epoch and its own vote."""
    core = make_core(1, election=at_epoch(3))
    drain(core)
    core.tick(5_000)
    ready = drain(core)
    requests = sent(ready, VoteRequest)
    assert core.role is Role.PROSPECTIVE
    assert core.epoch == 3
    assert {e.dst for e in requests} == {2, 3}
    assert all(e.message.pre_vote and e.message.candidate_epoch == 4 for e in requests)
    ready = reply(core, requests[0], VoteResponse(leader_epoch=3, vote_granted=True), 5_001)
    assert core.role is Role.CANDIDATE
    assert ready.election == ElectionState(epoch=4, voted_id=1, voters=(1, 2, 3))
    assert all(not e.message.pre_vote for e in sent(ready, VoteRequest))


def test_candidate_becomes_leader_when_a_majority_grants() -> None:
    """Raft §5.2: votes from a majority (itself included) win the epoch."""
    core = make_core(1, election=at_epoch(3), pre_vote=False)
    core.tick(5_000)
    requests = sent(drain(core), VoteRequest)
    assert core.role is Role.CANDIDATE
    reply(core, requests[0], VoteResponse(leader_epoch=4, vote_granted=False), 5_001)
    assert core.role is Role.CANDIDATE
    reply(core, requests[1], VoteResponse(leader_epoch=4, vote_granted=True), 5_002)
    assert core.is_leader
    assert core.epoch == 4


def test_election_timeouts_are_randomised_in_t_to_2t_when_seeds_differ() -> None:
    """Raft §5.2: randomised election timeouts in [t, 2t) make split votes rare."""
    deadlines = set()
    for seed in range(40):
        core = make_core(1, seed=seed, election_timeout_ms=1000)
        drain(core)
        deadline = core.next_deadline_ms()
        assert 1000 <= deadline < 2000
        deadlines.add(deadline)
    assert len(deadlines) > 20


def test_stale_vote_response_is_ignored_when_correlation_id_is_unknown() -> None:
    """Responses whose correlation id is not outstanding count for nothing."""
    core = make_core(1, election=at_epoch(3))
    core.tick(5_000)
    drain(core)
    for src in (2, 3):
        core.step(envelope(src, VoteResponse(leader_epoch=3, vote_granted=True), 999_999),
                  5_001)
    assert core.role is Role.PROSPECTIVE



def test_rejected_candidate_does_not_reset_election_timer_when_it_bumps_the_epoch() -> None:
    """Raft §5.2: only a granted vote (or a live leader) resets the election timer, so a
    candidate with a stale log cannot keep everyone else from campaigning."""
    core = make_core(1, log=log_with(1, 1, 2), election=at_epoch(2), pre_vote=False)
    drain(core)
    deadline = core.next_deadline_ms()
    [response] = deliver(core, 2, vote(2, 3, 0, 0), deadline - 10)
    assert not response.vote_granted
    assert core.epoch == 3
    assert core.next_deadline_ms() == deadline
    core.tick(deadline)
    assert core.role is Role.CANDIDATE
    assert core.epoch == 4


def test_granted_vote_resets_election_timer_when_candidate_is_up_to_date() -> None:
    """Raft §5.2: granting a vote gives that candidate a full election timeout."""
    core = make_core(1, election=at_epoch(2), pre_vote=False)
    drain(core)
    deadline = core.next_deadline_ms()
    deliver(core, 2, vote(2, 3, 0, 0), deadline - 10)
    assert core.next_deadline_ms() >= deadline - 10 + 1000


def test_candidate_does_not_win_with_votes_queued_behind_its_timeout() -> None:
    """Timers fire in time order: a candidate whose election already timed out (the shell
    was paused) starts over instead of winning the old epoch with late votes."""
    core = make_core(1, election=at_epoch(3), pre_vote=False)
    core.tick(5_000)
    requests = sent(drain(core), VoteRequest)
    deadline = core.next_deadline_ms()
    reply(core, requests[0], VoteResponse(leader_epoch=4, vote_granted=True), deadline + 1)
    assert not core.is_leader
    assert core.epoch == 5
    assert core.role is Role.CANDIDATE
