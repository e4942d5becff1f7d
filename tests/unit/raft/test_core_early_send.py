"""`Ready.early_messages`: the leader's fetch answers may leave before its own flush
(Raft thesis §10.2.1); nothing else may, and nothing before an election is persisted."""

from __future__ import annotations

from raft.core import RaftCore
from raft.messages import (
    CurrentLeader,
    FetchRequest,
    FetchResponse,
    VoteRequest,
)
from raft.types import Batch, ElectionState, Envelope, Ready
from tests.support.core_harness import (
    CLUSTER_ID,
    drain,
    envelope,
    make_core,
    make_leader,
    sent,
)

NOW = 10_000
SOON = 100


def fetch(offset: int, epoch: int, *, replica: int = 2, max_wait_ms: int = 500) -> FetchRequest:
    return FetchRequest(cluster_id=CLUSTER_ID, replica_id=replica, max_wait_ms=max_wait_ms,
                        current_leader_epoch=epoch, fetch_offset=offset,
                        last_fetched_epoch=epoch)


def _early_of(ready: Ready, message_type: type) -> list[Envelope]:
    return [e for e in ready.early_messages if isinstance(e.message, message_type)]


def _leader_with_parked_fetch() -> RaftCore:
    leader = make_leader(fetch_max_wait_ms=500)
    drain(leader)
    end = leader.log.end_offset
    for cid in (900, 901):  # the first is answered at once, to carry the HW
        leader.step(envelope(2, fetch(end, leader.epoch), correlation_id=cid), NOW)
        drain(leader)
    assert leader.ready().messages == ()
    return leader


def test_leader_sends_records_before_its_flush_when_a_fetch_is_parked() -> None:
    leader = _leader_with_parked_fetch()
    leader.propose([b"x"], NOW + 1)
    ready = leader.ready()
    assert ready.needs_flush
    assert ready.election is None
    [answer] = _early_of(ready, FetchResponse)
    assert answer.dst == 2
    assert answer.message.records[0].records == (b"x",)
    assert answer not in ready.late_messages


def test_leader_counts_its_own_records_only_once_flushed_when_sent_early() -> None:
    """The follower holds the records before the leader does: 1 of 3 durable, not 2."""
    leader = _leader_with_parked_fetch()
    hw = leader.high_watermark
    leader.propose([b"x"], NOW + 1)
    ready = leader.ready()
    assert _early_of(ready, FetchResponse)
    end = leader.log.end_offset
    assert leader.log.flushed_end_offset < end
    # The follower's acknowledgement arrives while the leader's fsync still runs.
    leader.step(envelope(2, fetch(end, leader.epoch), correlation_id=1001), NOW + 2)
    assert leader.high_watermark == hw
    leader.log.flush()
    leader.advance(ready)
    assert leader.high_watermark == end
    drain(leader)
    assert not leader.has_ready


def test_follower_fetch_waits_for_its_flush() -> None:
    core = make_core(2, election=ElectionState(epoch=1, leader_id=1, voters=(1, 2, 3)))
    [request] = sent(drain(core), FetchRequest)
    batch = Batch(base_offset=0, epoch=1, records=(b"a",))
    core.step(Envelope(src=1, dst=2, correlation_id=request.correlation_id,
                       message=FetchResponse(
                           high_watermark=0, records=(batch,),
                           current_leader=CurrentLeader(leader_id=1, leader_epoch=1))), SOON)
    ready = core.ready()
    assert ready.entries == (batch,)
    assert ready.early == 0
    assert ready.early_messages == ()
    [again] = sent(ready, FetchRequest)
    assert again.message.fetch_offset == 1
    assert again in ready.late_messages


def test_vote_request_waits_for_the_election_to_be_persisted() -> None:
    core = make_core(1, election=ElectionState(epoch=0, voters=(1, 2, 3)), pre_vote=False)
    core.tick(NOW)
    ready = core.ready()
    assert ready.election is not None
    assert ready.election.voted_id == 1
    assert sent(ready, VoteRequest)
    assert ready.early_messages == ()


def test_leader_answers_wait_for_an_election_write_in_the_same_ready() -> None:
    """A leader that answered a fetch and then saw a newer epoch: its answer leaves only
    after quorum-state's fsync, with everything else."""
    leader = make_leader()
    drain(leader)
    leader.step(envelope(2, fetch(leader.log.end_offset, leader.epoch, max_wait_ms=0)), NOW)
    leader.step(envelope(3, VoteRequest(
        cluster_id=CLUSTER_ID, candidate_epoch=leader.epoch + 1, candidate_id=3,
        last_offset_epoch=leader.epoch, last_offset=leader.log.end_offset),
        correlation_id=1001), NOW + 1)
    ready = leader.ready()
    assert ready.election is not None
    assert ready.early == 0
    assert sent(ready, FetchResponse)
    leader.advance(ready)
    assert not leader.has_ready


def test_early_answers_are_acknowledged_once_by_advance() -> None:
    leader = _leader_with_parked_fetch()
    leader.propose([b"x"], NOW + 1)
    ready = leader.ready()
    leader.log.flush()
    leader.advance(ready)
    assert _early_of(leader.ready(), FetchResponse) == []
    assert sent(leader.ready(), FetchResponse) == []


def test_messages_hold_the_early_ones_first() -> None:
    """`Ready.messages` holds the early ones too (first), so drivers that send all of
    them after the flush stay correct, only slower."""
    leader = _leader_with_parked_fetch()
    leader.propose([b"x"], NOW + 1)
    ready = leader.ready()
    assert ready.messages[:ready.early] == ready.early_messages
    assert set(ready.messages) == set(ready.early_messages) | set(ready.late_messages)
