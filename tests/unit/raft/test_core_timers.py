"""Timers and leadership changes: fetch timeout, check-quorum, graceful resignation,
epochs (KIP-595 BeginQuorumEpoch / EndQuorumEpoch, quorum.fetch.timeout.ms)."""

from __future__ import annotations

from raft import messages as msg
from raft.common.errors import ErrorCode
from raft.core import Role
from raft.types import ElectionState, Envelope
from tests.support.core_harness import (
    CLUSTER_ID,
    Cluster,
    deliver,
    drain,
    envelope,
    make_core,
    make_leader,
    reply,
    sent,
)

NOW = 10_000


def following(node: int = 2, leader: int = 1, epoch: int = 3, **config: object):  # type: ignore[no-untyped-def]
    return make_core(node, election=ElectionState(epoch=epoch, leader_id=leader,
                                                  voters=(1, 2, 3)), **config)


def test_follower_starts_prospective_when_no_fetch_succeeds_within_fetch_timeout() -> None:
    """KIP-595: no successful Fetch within quorum.fetch.timeout.ms starts an election
    (KIP-996: as a prospective, asking for pre-votes)."""
    core = following(fetch_timeout_ms=2000)
    drain(core)
    core.tick(1999)
    assert core.role is Role.FOLLOWER
    core.tick(2000)
    ready = drain(core)
    assert core.role is Role.PROSPECTIVE
    assert {e.dst for e in sent(ready, msg.VoteRequest)} == {1, 3}


def test_successful_fetch_resets_fetch_timeout_when_leader_answers() -> None:
    """KIP-595: each successful Fetch pushes the fetch timeout out again."""
    core = following(fetch_timeout_ms=2000)
    [request] = sent(drain(core), msg.FetchRequest)
    reply(core, request, msg.FetchResponse(current_leader=msg.CurrentLeader(
        leader_id=1, leader_epoch=3)), 1500)
    core.tick(2500)
    assert core.role is Role.FOLLOWER
    core.tick(3500)
    assert core.role is Role.PROSPECTIVE


def test_follower_becomes_candidate_directly_when_pre_vote_is_off() -> None:
    """KIP-595 without KIP-996: the fetch timeout makes a candidate of the next epoch."""
    core = following(pre_vote=False)
    drain(core)
    core.tick(5000)
    assert core.role is Role.CANDIDATE
    assert core.epoch == 4


def test_observer_asks_the_voters_instead_of_campaigning_when_fetches_time_out() -> None:
    """KIP-595 observers never become candidates: one whose leader went silent asks the
    other voters who leads (tests/unit/raft/test_core_peer_loss.py), in its epoch, and
    keeps fetching from the old leader meanwhile."""
    core = make_core(7, election=ElectionState(epoch=3, leader_id=1, voters=(1, 2, 3)))
    drain(core)
    core.tick(5000)
    ready = drain(core)
    assert (core.role, core.epoch, core.leader_id) == (Role.FOLLOWER, 3, 1)
    assert sent(ready, msg.VoteRequest) == []
    assert sorted(e.dst for e in sent(ready, msg.FetchRequest)) == [1, 2]


def test_observer_of_a_single_voter_looks_for_a_leader_again_when_fetches_time_out() -> None:
    """With no other voter to ask, an observer goes back to discovery."""
    core = make_core(7, voters=(1,), election=ElectionState(epoch=3, leader_id=1,
                                                            voters=(1,)))
    drain(core)
    core.tick(5000)
    ready = drain(core)
    assert (core.role, core.epoch) == (Role.UNATTACHED, 3)
    assert sent(ready, msg.VoteRequest) == []
    assert len(sent(ready, msg.FetchRequest)) == 1


def test_leader_resigns_when_no_majority_fetches_within_check_quorum_timeout() -> None:
    """KIP-595 check-quorum: a leader not fetched by a majority within 1.5 fetch
    timeouts (Kafka's check-quorum timer) steps down."""
    leader = make_leader(fetch_timeout_ms=2000, voters=(1, 2, 3, 4, 5))
    drain(leader)
    start = NOW
    deliver(leader, 2, _fetch(leader, 2), start + 1500)
    leader.tick(start + 2999)
    assert leader.is_leader  # 3, 4 and 5 count as heard from at the epoch start...
    leader.tick(start + 3000)
    assert leader.role is Role.RESIGNED  # ...and leader + 2 alone are not a majority of 5
    assert leader.leader_id is None


def test_leader_stays_when_a_majority_keeps_fetching() -> None:
    """KIP-595 check-quorum: a majority of fetching voters keeps the leader in place."""
    leader = make_leader(fetch_timeout_ms=2000)
    drain(leader)
    for t in range(NOW + 500, NOW + 10_000, 500):
        deliver(leader, 2, _fetch(leader, 2), t)
        leader.tick(t)
    assert leader.is_leader


def test_resign_sends_end_quorum_epoch_with_successors_ordered_by_offset() -> None:
    """KIP-595 graceful shutdown: EndQuorumEpoch names preferred successors, the best
    replicated first."""
    leader = make_leader(voters=(1, 2, 3, 4))
    leader.propose([b"a", b"b"], NOW)
    drain(leader)
    end = leader.log.end_offset
    deliver(leader, 4, _fetch(leader, 4, end), NOW + 1)
    deliver(leader, 2, _fetch(leader, 2, end - 2), NOW + 2)
    leader.resign(NOW + 3)
    ready = drain(leader)
    ends = sent(ready, msg.EndQuorumEpochRequest)
    assert {e.dst for e in ends} == {2, 3, 4}
    assert ends[0].message.preferred_successors == (4, 2, 3)
    assert leader.role is Role.RESIGNED
    assert leader.propose([b"late"], NOW + 4) is None


def test_preferred_successor_campaigns_at_once_when_leader_resigns() -> None:
    """KIP-595 EndQuorumEpoch: the first preferred successor starts an election at once."""
    core = following(node=2)
    drain(core)
    to_leader = deliver(core, 1, msg.EndQuorumEpochRequest(
        cluster_id=CLUSTER_ID, leader_id=1, leader_epoch=3, preferred_successors=(2, 3)), 100)
    [response] = [m for m in to_leader if isinstance(m, msg.EndQuorumEpochResponse)]
    assert response.error_code is ErrorCode.NONE
    assert any(isinstance(m, msg.VoteRequest) and not m.pre_vote for m in to_leader)
    assert core.role is Role.CANDIDATE
    assert core.epoch == 4


def test_other_successor_waits_a_backoff_when_leader_resigns() -> None:
    """KIP-595 EndQuorumEpoch: later successors wait longer, leaving the best one room,
    but far less than the fetch timeout."""
    core = following(node=3, fetch_timeout_ms=2000, election_backoff_max_ms=1000)
    drain(core)
    deliver(core, 1, msg.EndQuorumEpochRequest(
        cluster_id=CLUSTER_ID, leader_id=1, leader_epoch=3, preferred_successors=(2, 3)), 100)
    assert core.role is Role.FOLLOWER
    assert core.next_deadline_ms() < 100 + 2000
    core.tick(core.next_deadline_ms())
    assert core.role is Role.PROSPECTIVE


def test_follower_grants_prevotes_when_its_leader_resigned() -> None:
    """KIP-996 + EndQuorumEpoch: once the leader said it is leaving, its followers stop
    protecting it from pre-votes."""
    core = following(node=3)
    [request] = sent(drain(core), msg.FetchRequest)
    reply(core, request, msg.FetchResponse(current_leader=msg.CurrentLeader(
        leader_id=1, leader_epoch=3)), 50)
    deliver(core, 1, msg.EndQuorumEpochRequest(
        cluster_id=CLUSTER_ID, leader_id=1, leader_epoch=3, preferred_successors=(2, 3)), 100)
    [answer] = deliver(core, 2, msg.VoteRequest(
        cluster_id=CLUSTER_ID, candidate_epoch=4, candidate_id=2, last_offset_epoch=0,
        last_offset=0, pre_vote=True), 101)
    assert answer.vote_granted


def test_node_follows_new_leader_and_persists_epoch_when_begin_quorum_epoch_arrives() -> None:
    """KIP-595 BeginQuorumEpoch: a higher epoch's leader is followed, and the new epoch
    and leader are persisted before the acknowledgement leaves."""
    core = make_core(2, election=ElectionState(epoch=3, voters=(1, 2, 3)))
    drain(core)
    core.step(envelope(3, msg.BeginQuorumEpochRequest(cluster_id=CLUSTER_ID, leader_id=3,
                                                      leader_epoch=5), dst=2), 100)
    ready = drain(core)
    assert ready.election == ElectionState(epoch=5, leader_id=3, voters=(1, 2, 3))
    [ack] = sent(ready, msg.BeginQuorumEpochResponse)
    assert ack.message.error_code is ErrorCode.NONE
    assert (core.role, core.leader_id, core.epoch) == (Role.FOLLOWER, 3, 5)
    assert [e.dst for e in sent(ready, msg.FetchRequest)] == [3]


def test_begin_quorum_epoch_gets_fenced_when_its_epoch_is_lower() -> None:
    """KIP-595: a request from a lower epoch is answered FENCED_LEADER_EPOCH."""
    core = make_core(2, election=ElectionState(epoch=6, leader_id=1, voters=(1, 2, 3)))
    drain(core)
    [ack] = deliver(core, 3, msg.BeginQuorumEpochRequest(cluster_id=CLUSTER_ID, leader_id=3,
                                                         leader_epoch=5), 100)
    assert ack.error_code is ErrorCode.FENCED_LEADER_EPOCH
    assert (ack.leader_id, ack.leader_epoch) == (1, 6)
    assert (core.leader_id, core.epoch) == (1, 6)


def test_leader_steps_down_when_a_vote_request_has_a_higher_epoch() -> None:
    """Raft §5.1: a higher epoch makes a leader step down (and here vote)."""
    leader = make_leader()
    epoch = leader.epoch
    [answer] = deliver(leader, 2, msg.VoteRequest(
        cluster_id=CLUSTER_ID, candidate_epoch=epoch + 1, candidate_id=2,
        last_offset_epoch=epoch, last_offset=leader.log.end_offset), NOW)
    assert answer.vote_granted
    assert leader.role is Role.VOTED
    assert leader.epoch == epoch + 1


def test_candidate_steps_down_when_a_response_names_a_higher_epoch() -> None:
    """KIP-595: a node learning a higher epoch from any message moves there and persists it."""
    core = make_core(1, election=ElectionState(epoch=3, voters=(1, 2, 3)), pre_vote=False)
    core.tick(5000)
    requests = sent(drain(core), msg.VoteRequest)
    ready = reply(core, requests[0], msg.VoteResponse(
        error_code=ErrorCode.FENCED_LEADER_EPOCH, leader_id=3, leader_epoch=9), 5001)
    assert ready.election == ElectionState(epoch=9, leader_id=3, voters=(1, 2, 3))
    assert (core.role, core.leader_id) == (Role.FOLLOWER, 3)


def test_restarted_leader_resigns_its_old_epoch_when_it_comes_back() -> None:
    """KIP-595: a leader cannot resume its epoch after a restart; it waits for the next."""
    core = make_core(1, election=ElectionState(epoch=4, leader_id=1, voted_id=1,
                                               voters=(1, 2, 3)))
    assert core.role is Role.RESIGNED
    assert core.leader_id is None
    assert core.propose([b"x"], 1) is None


def test_same_outputs_when_run_twice_with_the_same_seed() -> None:
    """Determinism: same inputs and seed give the same messages and states."""
    def run() -> list[object]:
        cluster = Cluster((1, 2, 3), observers=(4,), seed=11)
        leader = cluster.elect()
        leader.propose([b"r"], cluster.now_ms)
        cluster.flush(leader.node_id)
        cluster.run(1000)
        return [(e.src, e.dst, e.correlation_id, e.message) for e in cluster.sent]
    assert run() == run()


def _fetch(leader, replica: int, offset: int | None = None) -> msg.FetchRequest:  # type: ignore[no-untyped-def]
    offset = leader.log.end_offset if offset is None else offset
    return msg.FetchRequest(cluster_id=CLUSTER_ID, replica_id=replica, max_wait_ms=0,
                            current_leader_epoch=leader.epoch, fetch_offset=offset,
                            last_fetched_epoch=leader.log.epoch_at(offset - 1))


def test_leader_repeats_begin_quorum_epoch_when_a_voter_has_not_answered() -> None:
    """KIP-595 BeginQuorumEpoch: repeated (well within the fetch timeout) to voters that
    neither acknowledged nor fetched, and no longer once they have."""
    outbox: list[Envelope] = []
    leader = make_leader(voters=(1, 2, 3), fetch_timeout_ms=2000, outbox=outbox)
    begins = [e for e in outbox if isinstance(e.message, msg.BeginQuorumEpochRequest)]
    reply(leader, begins[0], msg.BeginQuorumEpochResponse(leader_id=1, leader_epoch=leader.epoch),
          NOW + 1)
    leader.tick(NOW + 500)
    again = sent(drain(leader), msg.BeginQuorumEpochRequest)
    assert [e.dst for e in again] == [begins[1].dst]


def test_leader_tells_a_silent_voter_again_and_steps_into_the_later_epoch_it_answers() -> None:
    """As Kafka's leader: every half fetch timeout, BeginQuorumEpoch again to each voter
    that has not fetched for that long (not to one that fetches). A voter that campaigned
    in a later epoch and lost answers FENCED_LEADER_EPOCH with that epoch, and the leader
    steps into it: otherwise the voter ignores this leader's older-epoch answers and its
    pre-votes are refused, and neither ever learns of the other."""
    outbox: list[Envelope] = []
    leader = make_leader(voters=(1, 2, 3), fetch_timeout_ms=2000, outbox=outbox)
    for begin in (e for e in outbox if isinstance(e.message, msg.BeginQuorumEpochRequest)):
        reply(leader, begin, msg.BeginQuorumEpochResponse(leader_id=1, leader_epoch=leader.epoch),
              NOW + 1)
    epoch = leader.epoch
    announced: list[Envelope] = []
    for t in range(NOW + 250, NOW + 1250, 250):
        deliver(leader, 2, _fetch(leader, 2), t)
        leader.tick(t)
        announced += sent(drain(leader), msg.BeginQuorumEpochRequest)
    assert [e.dst for e in announced] == [3]  # voter 2 fetches: not asked
    reply(leader, announced[0], msg.BeginQuorumEpochResponse(
        error_code=ErrorCode.FENCED_LEADER_EPOCH, leader_id=-1, leader_epoch=epoch + 1),
        NOW + 1300)
    assert (leader.is_leader, leader.epoch) == (False, epoch + 1)
