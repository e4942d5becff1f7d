"""Replication by Fetch: validation, divergence, long polls, the high watermark
(KIP-595 Fetch, KIP-320 diverging epochs, Raft §5.3 / §5.4.2)."""

from __future__ import annotations

import pytest

from raft.common.errors import ErrorCode
from raft.core import RaftCore, RaftInvariantError, Role
from raft.log import MemoryLog
from raft.messages import (
    CurrentLeader,
    DivergingEpoch,
    FetchRequest,
    FetchResponse,
)
from raft.sim.planted import core_class
from raft.types import Batch, ElectionState, Envelope
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

NOW = 10_000
SOON = 100  # for followers started at 0: well within their fetch timeout


def fetch(offset: int, last_epoch: int, epoch: int, *, replica: int = 2,
          max_wait_ms: int = 0) -> FetchRequest:
    return FetchRequest(cluster_id=CLUSTER_ID, replica_id=replica, max_wait_ms=max_wait_ms,
                        current_leader_epoch=epoch, fetch_offset=offset,
                        last_fetched_epoch=last_epoch)


def test_fetch_from_offset_zero_epoch_zero_is_valid_when_log_is_anything() -> None:
    """KIP-595: (fetch_offset 0, last_fetched_epoch 0) is always a valid position."""
    leader = make_leader(log=log_with(1, 2, 3), epoch=3)
    [response] = deliver(leader, 2, fetch(0, 0, leader.epoch), NOW)
    assert response.error_code is ErrorCode.NONE
    assert response.diverging_epoch is None
    assert response.records[0].base_offset == 0


def test_leader_answers_diverging_epoch_when_last_fetched_epoch_ended_earlier() -> None:
    """KIP-595/KIP-320: the leader's epoch 2 ends at offset 2; a follower claiming epoch 2
    up to offset 4 is told {epoch 2, end_offset 2} and gets no records."""
    leader = make_leader(log=log_with(1, 2, 5), epoch=5)
    [response] = deliver(leader, 2, fetch(4, 2, leader.epoch), NOW)
    assert response.diverging_epoch == DivergingEpoch(epoch=2, end_offset=2)
    assert response.records == ()


def test_leader_answers_largest_lower_epoch_when_follower_epoch_is_unknown() -> None:
    """KIP-595: an epoch the leader never had maps to the largest epoch below it."""
    leader = make_leader(log=log_with(1, 1, 3), epoch=3)
    [response] = deliver(leader, 2, fetch(3, 2, leader.epoch), NOW)
    assert response.diverging_epoch == DivergingEpoch(epoch=1, end_offset=2)


def test_follower_truncates_then_fetches_again_when_told_it_diverged() -> None:
    """KIP-595: the follower cuts its log at the diverging end offset and fetches from
    there with the epoch of its new last entry."""
    core = make_core(2, log=log_with(1, 1, 2, 2), election=ElectionState(
        epoch=5, leader_id=1, voters=(1, 2, 3)))
    [first] = sent(drain(core), FetchRequest)
    assert (first.message.fetch_offset, first.message.last_fetched_epoch) == (4, 2)
    ready = reply(core, first, FetchResponse(
        high_watermark=0, diverging_epoch=DivergingEpoch(epoch=1, end_offset=2),
        current_leader=CurrentLeader(leader_id=1, leader_epoch=5)), SOON)
    assert ready.truncate_to == 2
    assert core.log.end_offset == 2
    [again] = sent(ready, FetchRequest)
    assert (again.message.fetch_offset, again.message.last_fetched_epoch) == (2, 1)


def test_follower_appends_records_and_takes_high_watermark_when_fetch_succeeds() -> None:
    """KIP-595: records continue the log; the HW is min(leader HW, own log end)."""
    core = make_core(2, election=ElectionState(epoch=1, leader_id=1, voters=(1, 2, 3)))
    [request] = sent(drain(core), FetchRequest)
    batch = Batch(base_offset=0, epoch=1, records=(b"a", b"b"))
    ready = reply(core, request, FetchResponse(
        high_watermark=5, current_leader=CurrentLeader(leader_id=1, leader_epoch=1),
        records=(batch,)), SOON)
    assert ready.entries == (batch,)
    assert ready.high_watermark == 2
    assert core.high_watermark == 2
    [again] = sent(ready, FetchRequest)
    assert again.message.fetch_offset == 2


def test_follower_reports_the_leaders_high_watermark_beyond_its_own_log_end() -> None:
    """A catching-up node's own HW stops at its log end (2); the leader's (5) is what
    tells it how far it still has to go, and it is reported only when it rises."""
    core = make_core(2, election=ElectionState(epoch=1, leader_id=1, voters=(1, 2, 3)))
    assert core.leader_high_watermark is None
    [request] = sent(drain(core), FetchRequest)
    answer = FetchResponse(high_watermark=5, current_leader=CurrentLeader(
        leader_id=1, leader_epoch=1), records=(Batch(base_offset=0, epoch=1, records=(b"a",)),))
    ready = reply(core, request, answer, SOON)
    assert (ready.high_watermark, ready.leader_high_watermark) == (1, 5)
    assert core.leader_high_watermark == 5
    [again] = sent(ready, FetchRequest)
    ready = reply(core, again, FetchResponse(high_watermark=5, current_leader=CurrentLeader(
        leader_id=1, leader_epoch=1)), SOON)
    assert ready.leader_high_watermark is None  # not news


def test_leader_reports_its_own_high_watermark_as_the_leaders() -> None:
    leader = make_leader()
    leader.propose([b"a", b"b"], NOW)
    drain(leader)
    end = leader.log.end_offset
    deliver(leader, 2, fetch(end, leader.epoch, leader.epoch), NOW + 1)
    assert leader.high_watermark == end
    assert leader.leader_high_watermark == end


def test_empty_fetch_is_parked_until_new_data_arrives_when_caught_up() -> None:
    """KIP-595 long poll: an empty Fetch waits up to max_wait_ms; a proposal answers it.
    (Five voters, so this one fetch does not move the high watermark.)"""
    leader = make_leader(voters=(1, 2, 3, 4, 5), fetch_max_wait_ms=500)
    end = leader.log.end_offset
    assert deliver(leader, 2, fetch(end, leader.epoch, leader.epoch, max_wait_ms=500),
                   NOW) == []
    leader.propose([b"new"], NOW + 10)
    ready = drain(leader)
    [response] = [e.message for e in sent(ready, FetchResponse) if e.dst == 2]
    assert response.records[0].records == (b"new",)


def test_parked_fetch_is_answered_empty_when_the_wait_expires() -> None:
    """KIP-595 long poll: at most fetch_max_wait_ms, then an empty answer."""
    leader = make_leader(voters=(1, 2, 3, 4, 5), fetch_max_wait_ms=500)
    drain(leader)
    end = leader.log.end_offset
    leader.step(envelope(2, fetch(end, leader.epoch, leader.epoch, max_wait_ms=9999)), NOW)
    assert leader.next_deadline_ms() <= NOW + 500
    leader.tick(NOW + 499)
    assert sent(drain(leader), FetchResponse) == []
    leader.tick(NOW + 500)
    [response] = sent(drain(leader), FetchResponse)
    assert response.message.records == ()


def _parked_voters_at_new_hw(**config: object) -> tuple[RaftCore, int]:
    """Voters 2 and 3 of 5 parked at the log end; 3's fetch moved the HW there."""
    leader = make_leader(voters=(1, 2, 3, 4, 5), fetch_max_wait_ms=500, **config)
    leader.propose([b"x"], NOW)
    drain(leader)
    end = leader.log.end_offset
    assert deliver(leader, 2, fetch(end, leader.epoch, leader.epoch, max_wait_ms=500),
                   NOW + 1) == []  # 2 of 5 hold it: nothing new, parked
    leader.step(envelope(3, fetch(end, leader.epoch, leader.epoch, replica=3,
                                  max_wait_ms=500)), NOW + 2)
    assert leader.high_watermark == end
    return leader, end


def test_parked_voter_fetches_hear_a_moved_high_watermark_within_the_news_wait() -> None:
    """KIP-595 long poll: a moving high watermark is news, but a voter waits up to
    fetch_hw_news_wait_ms for records to carry it with: the fetch that moved it is not
    answered empty at once only to be followed by another."""
    leader, end = _parked_voters_at_new_hw(fetch_hw_news_wait_ms=5)
    assert sent(drain(leader), FetchResponse) == []
    assert leader.next_deadline_ms() == NOW + 2 + 5
    leader.tick(NOW + 6)
    assert sent(drain(leader), FetchResponse) == []
    leader.tick(NOW + 7)
    answers = sent(drain(leader), FetchResponse)
    assert {e.dst for e in answers} == {2, 3}
    assert all(e.message.high_watermark == end for e in answers)


def test_parked_voter_fetches_carry_a_moved_high_watermark_with_the_next_records() -> None:
    leader, end = _parked_voters_at_new_hw(fetch_hw_news_wait_ms=5)
    drain(leader)
    leader.propose([b"y"], NOW + 3)
    answers = sent(drain(leader), FetchResponse)
    assert {e.dst for e in answers} == {2, 3}
    for answer in answers:
        assert answer.message.high_watermark == end
        assert answer.message.records[0].records == (b"y",)


def test_parked_observer_fetch_is_answered_when_the_high_watermark_moves() -> None:
    """Observers (brokers) publish what they hold below the HW: told at once."""
    leader = make_leader(voters=(1, 2, 3), fetch_max_wait_ms=500)
    leader.propose([b"x"], NOW)
    drain(leader)
    end = leader.log.end_offset
    observer = fetch(end, leader.epoch, leader.epoch, replica=9, max_wait_ms=500)
    for cid in (1, 2):  # the first is answered at once: it has not heard the HW yet
        leader.step(envelope(9, observer, correlation_id=cid), NOW + 1)
        drain(leader)
    leader.step(envelope(2, fetch(end, leader.epoch, leader.epoch, max_wait_ms=500)),
                NOW + 2)
    ready = drain(leader)
    assert leader.high_watermark == end
    [answer] = sent(ready, FetchResponse)
    assert answer.dst == 9
    assert answer.message.high_watermark == end


def test_high_watermark_is_the_majority_offset_when_followers_fetch() -> None:
    """Raft §5.3: committed = held by a majority of voters (leader counted when flushed)."""
    leader = make_leader(voters=(1, 2, 3, 4, 5))
    leader.propose([b"a", b"b", b"c"], NOW)
    drain(leader)
    end = leader.log.end_offset
    deliver(leader, 2, fetch(end, leader.epoch, leader.epoch, replica=2), NOW + 1)
    assert leader.high_watermark == 0  # leader + one follower: 2 of 5
    deliver(leader, 3, fetch(end - 2, leader.epoch, leader.epoch, replica=3), NOW + 2)
    assert leader.high_watermark == end - 2  # 3 of 5 hold end - 2
    deliver(leader, 4, fetch(end, leader.epoch, leader.epoch, replica=4), NOW + 3)
    assert leader.high_watermark == end


def test_high_watermark_waits_for_own_epoch_when_majority_holds_only_old_entries() -> None:
    """Raft §5.4.2: entries of an older epoch are never committed by counting replicas;
    the HW moves once a majority holds an entry of the leader's own epoch."""
    leader = make_leader(log=log_with(1, 1, 1), epoch=1)  # leader of epoch 2
    old_end = 3
    deliver(leader, 2, fetch(old_end, 1, leader.epoch), NOW)
    assert leader.high_watermark == 0
    deliver(leader, 2, fetch(leader.log.end_offset, leader.epoch, leader.epoch), NOW + 1)
    assert leader.high_watermark == leader.log.end_offset


def test_high_watermark_counts_old_epoch_when_planted_bug_is_on() -> None:
    """The planted bug really commits an older epoch by counting (for the simulator)."""
    leader = make_leader(log=log_with(1, 1, 1), epoch=1,
                         core_class=core_class("commit_old_epoch_by_count"))
    deliver(leader, 2, fetch(3, 1, leader.epoch), NOW)
    assert leader.high_watermark == 3


def test_high_watermark_never_goes_back_when_a_new_leader_reports_less() -> None:
    """KIP-595: a node's high watermark is monotonic."""
    core = make_core(2, election=ElectionState(epoch=1, leader_id=1, voters=(1, 2, 3)))
    [request] = sent(drain(core), FetchRequest)
    batch = Batch(base_offset=0, epoch=1, records=(b"a", b"b", b"c"))
    ready = reply(core, request, FetchResponse(
        high_watermark=3, current_leader=CurrentLeader(leader_id=1, leader_epoch=1),
        records=(batch,)), SOON)
    [request] = sent(ready, FetchRequest)
    ready = reply(core, request, FetchResponse(
        high_watermark=1, current_leader=CurrentLeader(leader_id=1, leader_epoch=1)), SOON + 1)
    assert core.high_watermark == 3
    assert ready.high_watermark is None


def test_fetch_gets_fenced_leader_epoch_when_its_epoch_is_lower() -> None:
    """KIP-595: a lower epoch is fenced; the response names the current leader."""
    leader = make_leader(epoch=4)
    [response] = deliver(leader, 2, fetch(0, 0, 3), NOW)
    assert response.error_code is ErrorCode.FENCED_LEADER_EPOCH
    assert response.current_leader == CurrentLeader(leader_id=1, leader_epoch=5)


def test_fetch_to_a_follower_gets_not_leader_with_the_leader_when_misdirected() -> None:
    """KIP-595: NOT_LEADER_OR_FOLLOWER carries current_leader {leader_id, leader_epoch}."""
    core = make_core(2, election=ElectionState(epoch=3, leader_id=1, voters=(1, 2, 3)))
    drain(core)
    [response] = deliver(core, 5, fetch(0, 0, 3, replica=5), NOW)
    assert response.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert response.current_leader == CurrentLeader(leader_id=1, leader_epoch=3)


def test_observer_finds_the_leader_when_probing_voters_round_robin() -> None:
    """KIP-595 discovery: an observer with no leader fetches from voters in turn; a
    response naming the leader makes it follow that leader."""
    observer = make_core(9, voters=(1, 2, 3))
    [probe] = sent(drain(observer), FetchRequest)
    assert probe.dst == 1
    ready = reply(observer, probe, FetchResponse(
        error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
        current_leader=CurrentLeader(leader_id=-1, leader_epoch=0)), NOW)
    assert sent(ready, FetchRequest) == []
    observer.tick(NOW + 100)
    [probe] = sent(drain(observer), FetchRequest)
    assert probe.dst == 2
    ready = reply(observer, probe, FetchResponse(
        error_code=ErrorCode.FENCED_LEADER_EPOCH,
        current_leader=CurrentLeader(leader_id=3, leader_epoch=6)), NOW + 101)
    assert observer.role is Role.FOLLOWER
    assert (observer.leader_id, observer.epoch) == (3, 6)
    [fetch_to_leader] = sent(ready, FetchRequest)
    assert fetch_to_leader.dst == 3
    assert not observer.is_voter


def test_follower_resends_fetch_when_the_request_times_out() -> None:
    """A lost Fetch is retried after request_timeout_ms (+ the long-poll wait)."""
    core = make_core(2, election=ElectionState(epoch=1, leader_id=1, voters=(1, 2, 3)),
                     request_timeout_ms=1000, fetch_max_wait_ms=500, fetch_timeout_ms=5000)
    [first] = sent(drain(core), FetchRequest)
    core.tick(1499)
    assert sent(drain(core), FetchRequest) == []
    core.tick(1500)
    [second] = sent(drain(core), FetchRequest)
    assert second.correlation_id != first.correlation_id
    late = reply(core, first, FetchResponse(current_leader=CurrentLeader(
        leader_id=1, leader_epoch=1), records=(Batch(base_offset=0, epoch=1,
                                                    records=(b"x",)),)), 1501)
    assert late.entries == ()  # the stale response is ignored


def test_follower_stops_when_told_to_truncate_committed_records() -> None:
    """Raft §5.4 (committed entries are never lost): a diverging epoch below the high
    watermark means the leader is broken; following it would lose committed data, and
    refusing silently would leave the node stuck: the core raises its invariant error."""
    core = make_core(2, election=ElectionState(epoch=1, leader_id=1, voters=(1, 2, 3)))
    [request] = sent(drain(core), FetchRequest)
    batch = Batch(base_offset=0, epoch=1, records=(b"a", b"b", b"c"))
    leader = CurrentLeader(leader_id=1, leader_epoch=1)
    ready = reply(core, request, FetchResponse(high_watermark=2, current_leader=leader,
                                               records=(batch,)), SOON)
    [request] = sent(ready, FetchRequest)
    with pytest.raises(RaftInvariantError, match="below the high watermark 2"):
        reply(core, request, FetchResponse(
            high_watermark=2, current_leader=leader,
            diverging_epoch=DivergingEpoch(epoch=0, end_offset=0)), SOON + 1)
    assert core.log.end_offset == 3


def _follower_with_epochs(*runs: tuple[int, int], epoch: int = 5) -> RaftCore:
    """A follower of leader 1 in `epoch` whose log holds `count` records of each
    (epoch, count) of `runs`, in order."""
    log = MemoryLog()
    for run_epoch, count in runs:
        log.append(run_epoch, [f"e{run_epoch}@{log.end_offset + i}".encode()
                               for i in range(count)])
    log.flush()
    return make_core(2, voters=(1, 2, 3, 4, 5), log=log, election=ElectionState(
        epoch=epoch, leader_id=1, voters=(1, 2, 3, 4, 5)))


def test_follower_keeps_its_high_watermark_when_the_fetch_answer_diverges() -> None:
    """KIP-595 (Kafka's KafkaRaftClient takes the high watermark only from a Fetch answer
    that did not diverge): the follower holds epochs [(1, 0), (4, 8)], the leader
    [(1, 0), (3, 2), (5, 10)] with high watermark 12. Told {epoch 3, end 10} the
    follower cuts to 8, where its epoch 1 still differs from the leader's epoch 3:
    taking min(12, 8) would publish records that were never committed."""
    core = _follower_with_epochs((1, 8), (4, 4))
    [request] = sent(drain(core), FetchRequest)
    assert (request.message.fetch_offset, request.message.last_fetched_epoch) == (12, 4)
    ready = reply(core, request, FetchResponse(
        high_watermark=12, current_leader=CurrentLeader(leader_id=1, leader_epoch=5),
        diverging_epoch=DivergingEpoch(epoch=3, end_offset=10)), SOON)
    assert ready.truncate_to == 8
    assert ready.high_watermark is None
    assert core.high_watermark == 0
    [again] = sent(ready, FetchRequest)
    assert (again.message.fetch_offset, again.message.last_fetched_epoch) == (8, 1)


def test_follower_converges_on_the_leader_log_when_divergence_takes_two_rounds() -> None:
    """The same logs against a real leader: two diverging rounds, then the leader's
    records; the follower's high watermark only ever covers records it shares with the
    leader."""
    leader_log = MemoryLog()
    for epoch, count in ((1, 2), (3, 8), (5, 2)):
        leader_log.append(epoch, [f"e{epoch}@{leader_log.end_offset + i}".encode()
                                  for i in range(count)])
    leader_log.flush()
    leader = make_leader(voters=(1, 2, 3, 4, 5), log=leader_log, epoch=5)
    follower = _follower_with_epochs((1, 8), (4, 4), epoch=leader.epoch)
    for node in (3, 4):  # a majority holds the leader's log: the HW moves past 12
        deliver(leader, node, fetch(leader.log.end_offset, leader.epoch, leader.epoch,
                                    replica=node), NOW)
    assert leader.high_watermark == leader.log.end_offset
    follower_ready = drain(follower)
    rounds = 0
    while follower.high_watermark < leader.high_watermark:
        rounds += 1
        assert rounds <= 4, "the follower does not converge"
        [request] = sent(follower_ready, FetchRequest)
        [response] = deliver(leader, 2, request.message, NOW)
        follower.step(Envelope(src=1, dst=2, correlation_id=request.correlation_id,
                               message=response), SOON)
        follower_ready = drain(follower)
        held = follower.log.read(0, 1 << 30)
        ours = [(b.epoch, r) for b in held for r in b.records][:follower.high_watermark]
        theirs = [(b.epoch, r) for b in leader.log.read(0, 1 << 30) for r in b.records]
        assert ours == theirs[:follower.high_watermark]
    assert rounds == 3  # (12, 4) diverges, (8, 1) diverges, (2, 1) gets the records
    assert follower.log.end_offset == leader.log.end_offset
