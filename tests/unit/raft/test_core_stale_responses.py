"""Responses naming an epoch below the node's are dropped, as KafkaRaftClient drops them;
the request they seem to answer stays in flight for its own answer. A restarted node's
correlation ids start where its shell says, so the replies its last incarnation's
requests still get match nothing of the next one's."""

from __future__ import annotations

import random

from raft.core import RaftConfig, RaftCore
from raft.messages import CurrentLeader, FetchRequest, FetchResponse, VoteRequest, VoteResponse
from raft.types import Batch, ElectionState, Envelope
from tests.support.core_harness import CLUSTER_ID, drain, log_with, make_core, reply, sent


def test_vote_granted_in_an_older_epoch_not_counted_then_own_answer_counts() -> None:
    core = make_core(1, pre_vote=False, election=ElectionState(epoch=2, voters=(1, 2, 3)))
    core.tick(10_000)  # election timeout: a candidate in epoch 3
    requests = sent(drain(core), VoteRequest)
    assert core.epoch == 3
    assert len(requests) == 2
    reply(core, requests[0], VoteResponse(leader_epoch=2, vote_granted=True), 10_001)
    assert not core.is_leader
    reply(core, requests[0], VoteResponse(leader_epoch=3, vote_granted=True), 10_002)
    assert core.is_leader


def fetch_answer(epoch: int, records: tuple[Batch, ...]) -> FetchResponse:
    return FetchResponse(high_watermark=0, records=records,
                         current_leader=CurrentLeader(leader_id=1, leader_epoch=epoch))


def test_fetch_answer_of_an_older_epoch_not_appended_then_own_answer_is() -> None:
    follower = make_core(2, log=log_with(), election=ElectionState(
        epoch=5, leader_id=1, voters=(1, 2, 3)))
    fetch, = sent(drain(follower), FetchRequest)
    records = (Batch(base_offset=0, epoch=4, records=(b"stale",)),)
    reply(follower, fetch, fetch_answer(4, records), 1)
    assert follower.log.end_offset == 0
    reply(follower, fetch, fetch_answer(5, records), 2)
    assert follower.log.end_offset == 1


def test_reply_to_last_incarnation_ignored_when_restarted_in_same_epoch() -> None:
    """A follower of epoch 5 asks its leader, crashes and comes back in epoch 5. The
    leader's answer to the old Fetch (sent from a longer log or a shorter one, the
    records no longer what that incarnation asked for) reaches the new one: with ids
    from where the shell starts them, it matches no request and changes nothing."""
    log, election = log_with(), ElectionState(epoch=5, leader_id=1, voters=(1, 2, 3))
    before = make_core(2, log=log, election=election)
    old_fetch, = sent(drain(before), FetchRequest)
    after = RaftCore(node_id=2, config=RaftConfig(voters=(1, 2, 3)), log=log,
                     election=election, cluster_id=CLUSTER_ID, rng=random.Random(2),
                     now_ms=0, first_correlation_id=1 << 24)  # as a shell starts it
    new_fetch, = sent(drain(after), FetchRequest)
    assert new_fetch.correlation_id != old_fetch.correlation_id
    after.step(Envelope(src=1, dst=2, correlation_id=old_fetch.correlation_id,
                        message=fetch_answer(5, (Batch(base_offset=0, epoch=5,
                                                       records=(b"old",)),))), 3)
    drain(after)
    assert after.log.end_offset == 0
    reply(after, new_fetch, fetch_answer(5, (Batch(base_offset=0, epoch=5,
                                                   records=(b"new",)),)), 4)
    assert after.log.end_offset == 1
