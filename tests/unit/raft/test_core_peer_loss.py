"""Peer loss as reported by the shell (`RaftCore.peer_unreachable`, `peer_disconnected`):
a voter whose leader's port refuses connections asks for pre-votes (KIP-996) at once; an
observer whose leader is lost, or whose Fetch stays unanswered past the long-poll wait,
asks the other voters who leads."""

from __future__ import annotations

from raft import messages as msg
from raft.common.errors import ErrorCode
from raft.core import RaftCore, Role
from raft.types import ElectionState, Envelope
from tests.support.core_harness import (
    CLUSTER_ID,
    Cluster,
    drain,
    make_core,
    make_leader,
    reply,
    sent,
)

VOTERS = (1, 2, 3)
LONG = 60_000  # a fetch timeout no test here waits out


def following(node: int = 2, leader: int = 1, epoch: int = 3, **config: object) -> RaftCore:
    return make_core(node, election=ElectionState(epoch=epoch, leader_id=leader,
                                                  voters=VOTERS), **config)


def leader_named(leader_id: int, epoch: int, error: ErrorCode = ErrorCode.NONE
                 ) -> msg.FetchResponse:
    return msg.FetchResponse(error_code=error, current_leader=msg.CurrentLeader(
        leader_id=leader_id, leader_epoch=epoch))


# --- voters -----------------------------------------------------------------------------

def test_follower_asks_for_pre_votes_at_once_when_its_leader_refuses_connections() -> None:
    """A refused connect means no process listens at the leader's address: the follower
    starts KIP-996's prospective state now, not after the fetch timeout, and persists
    nothing (the epoch stays)."""
    core = following(fetch_timeout_ms=LONG)
    drain(core)
    core.peer_unreachable(1, 100)
    ready = drain(core)
    assert core.role is Role.PROSPECTIVE
    assert core.epoch == 3
    assert ready.election is None
    votes = sent(ready, msg.VoteRequest)
    assert {e.dst for e in votes} == {1, 3}
    assert {(e.message.pre_vote, e.message.candidate_epoch) for e in votes} == {(True, 4)}


def test_second_follower_backs_the_first_and_stands_only_after_its_turn() -> None:
    """Both followers of a crashed leader hear it refuse at about the same time. The one
    ranked second (by id) does not stand at once, grants the first's pre-vote even though
    it fetched from the leader a moment ago, and stands itself one turn later if nobody
    has won by then: standing together, they would split the vote."""
    core = following(node=3, fetch_timeout_ms=LONG, election_timeout_ms=1000)
    [fetch] = sent(drain(core), msg.FetchRequest)
    reply(core, fetch, msg.FetchResponse(current_leader=msg.CurrentLeader(
        leader_id=1, leader_epoch=3), high_watermark=0), 50)
    drain(core)
    core.peer_unreachable(1, 100)
    assert sent(drain(core), msg.VoteRequest) == []
    assert core.role is Role.FOLLOWER
    core.step(Envelope(src=2, dst=3, correlation_id=7, message=msg.VoteRequest(
        cluster_id=CLUSTER_ID, candidate_epoch=4, candidate_id=2, last_offset_epoch=0,
        last_offset=0, pre_vote=True)), 150)
    [granted] = sent(drain(core), msg.VoteResponse)
    assert granted.message.vote_granted
    core.tick(220)  # its own turn (100 + 100 ms) was put back by the pre-vote it granted
    assert core.role is Role.FOLLOWER
    core.tick(260)
    assert core.role is Role.PROSPECTIVE
    assert core.epoch == 3


def test_follower_keeps_following_when_another_voter_refuses_connections() -> None:
    """Only the loss of its own leader matters to a follower."""
    core = following(fetch_timeout_ms=LONG)
    drain(core)
    core.peer_unreachable(3, 100)
    assert sent(drain(core), msg.VoteRequest) == []
    assert (core.role, core.leader_id) == (Role.FOLLOWER, 1)


def test_follower_waits_for_its_fetch_timeout_when_pre_vote_is_off() -> None:
    """Without pre-vote, acting on the report would bump the epoch on a mistaken one: the
    fetch timeout alone decides."""
    core = following(fetch_timeout_ms=LONG, pre_vote=False)
    drain(core)
    core.peer_unreachable(1, 100)
    assert sent(drain(core), msg.VoteRequest) == []
    assert (core.role, core.epoch) == (Role.FOLLOWER, 3)


def test_follower_fetches_again_at_once_when_its_connection_to_the_leader_closes() -> None:
    """A closed connection alone (the reconnect may well succeed) starts no election; the
    Fetch that was in flight on it will never be answered, so it goes out again now."""
    core = following(fetch_timeout_ms=LONG)
    [first] = sent(drain(core), msg.FetchRequest)
    core.peer_disconnected(1, 100)
    ready = drain(core)
    [again] = sent(ready, msg.FetchRequest)
    assert again.dst == 1
    assert again.correlation_id != first.correlation_id
    assert sent(ready, msg.VoteRequest) == []
    assert core.role is Role.FOLLOWER
    # The answer to the lost Fetch, should it come after all, counts for nothing: the
    # fetch timeout still runs from the last answer that counted.
    reply(core, first, leader_named(1, 3), 150)
    core.tick(LONG)
    assert core.role is Role.PROSPECTIVE


def test_leader_stays_and_no_epoch_moves_when_a_follower_reports_it_unreachable_by_mistake(
) -> None:
    """A mistaken report while the leader lives: the other voter fetched from it
    recently and refuses the pre-vote, the leader refuses it too, and the follower goes
    back to following; every epoch stays where it was."""
    cluster = Cluster(fetch_timeout_ms=LONG)
    leader = cluster.elect()
    epoch = leader.epoch
    follower = next(c for c in cluster.cores.values() if c is not leader)
    follower.peer_unreachable(leader.node_id, cluster.now_ms)
    assert follower.role is Role.PROSPECTIVE
    cluster.flush(follower.node_id)
    cluster.deliver()
    assert (follower.role, follower.leader_id) == (Role.FOLLOWER, leader.node_id)
    cluster.run(500)
    assert cluster.leader() is leader
    assert {c.epoch for c in cluster.cores.values()} == {epoch}


def test_dead_leader_is_replaced_long_before_the_fetch_timeout_when_its_port_refuses(
) -> None:
    """Both followers see the dead leader refuse: a successor is elected in the next
    epoch within a few election rounds, the fetch timeout (60 s) far away."""
    cluster = Cluster(fetch_timeout_ms=LONG)
    old = cluster.elect()
    epoch = old.epoch
    cluster.crash(old.node_id)
    for node, core in cluster.cores.items():
        if node != old.node_id:
            core.peer_unreachable(old.node_id, cluster.now_ms)
            cluster.flush(node)
    cluster.deliver()
    cluster.run(3000)  # both asked at the same instant here: a split vote may cost a backoff
    new = cluster.leader()
    assert new is not old
    assert new.epoch > epoch


def test_prospective_asks_again_when_the_leader_still_refuses_after_a_rejection() -> None:
    """A voter that had not yet seen the crash refuses the first round; the next refused
    reconnect starts another round, which that voter, now unsure of the leader too,
    grants. Without a rejection the round in progress is left to finish."""
    core = following(fetch_timeout_ms=LONG)
    drain(core)
    core.peer_unreachable(1, 100)
    [_, to_3] = sorted(sent(drain(core), msg.VoteRequest), key=lambda e: e.dst)
    core.peer_unreachable(1, 150)
    assert sent(drain(core), msg.VoteRequest) == []  # no answer yet: the round goes on
    reply(core, to_3, msg.VoteResponse(leader_id=1, leader_epoch=3, vote_granted=False), 160)
    assert core.role is Role.PROSPECTIVE  # 1 of 3 refused: not a majority
    core.peer_unreachable(1, 200)
    again = sent(drain(core), msg.VoteRequest)
    assert {e.dst for e in again} == {1, 3}
    reply(core, next(e for e in again if e.dst == 3),
          msg.VoteResponse(leader_id=1, leader_epoch=3, vote_granted=True), 210)
    assert (core.role, core.epoch) == (Role.CANDIDATE, 4)


def test_leader_repeats_begin_quorum_epoch_at_once_when_the_connection_to_a_voter_closes(
) -> None:
    """What was in flight on a closed connection is retried now, not at its timeout."""
    outbox: list[Envelope] = []
    leader = make_leader(fetch_timeout_ms=LONG, outbox=outbox)
    drain(leader)
    leader.peer_disconnected(2, 10_001)
    [begin] = sent(drain(leader), msg.BeginQuorumEpochRequest)
    assert begin.dst == 2
    assert leader.is_leader


# --- observers --------------------------------------------------------------------------

def observer_of(leader: int = 1, epoch: int = 3, **config: object) -> RaftCore:
    return make_core(9, election=ElectionState(epoch=epoch, leader_id=leader,
                                               voters=VOTERS), fetch_timeout_ms=LONG,
                     **config)


def test_observer_asks_other_voters_who_leads_when_its_fetch_stays_unanswered() -> None:
    """A live leader answers a parked Fetch within the long-poll wait (500 ms): past it
    and a margin (250 ms) the observer asks the other voters in turn, one at a time and
    paced, and follows the newer leader the first one names."""
    observer = observer_of()
    [fetch] = sent(drain(observer), msg.FetchRequest)
    assert fetch.dst == 1
    assert observer.next_deadline_ms() == 750
    observer.tick(749)
    assert sent(drain(observer), msg.FetchRequest) == []
    observer.tick(750)
    [probe] = sent(drain(observer), msg.FetchRequest)
    assert probe.dst == 2
    reply(observer, probe, leader_named(1, 3, ErrorCode.NOT_LEADER_OR_FOLLOWER), 760)
    assert (observer.leader_id, observer.epoch) == (1, 3)
    observer.tick(1009)
    assert sent(drain(observer), msg.FetchRequest) == []  # paced
    observer.tick(1010)
    [probe] = sent(drain(observer), msg.FetchRequest)
    assert probe.dst == 3
    ready = reply(observer, probe, leader_named(3, 4, ErrorCode.FENCED_LEADER_EPOCH), 1020)
    assert (observer.role, observer.leader_id, observer.epoch) == (Role.FOLLOWER, 3, 4)
    assert [e.dst for e in sent(ready, msg.FetchRequest)] == [3]


def test_observer_keeps_its_leader_and_stops_asking_when_the_leader_answers() -> None:
    """The old Fetch is kept while the observer asks: a late answer from the leader
    keeps it there, and answered fetches raise no more questions."""
    observer = observer_of()
    [fetch] = sent(drain(observer), msg.FetchRequest)
    observer.tick(750)
    [probe] = sent(drain(observer), msg.FetchRequest)
    ready = reply(observer, fetch, leader_named(1, 3), 800)
    [fetch] = sent(ready, msg.FetchRequest)
    assert fetch.dst == 1
    reply(observer, probe, leader_named(1, 3, ErrorCode.NOT_LEADER_OR_FOLLOWER), 810)
    assert (observer.leader_id, observer.epoch) == (1, 3)
    for now in range(1300, 6000, 400):  # each long poll answered within its wait
        observer.tick(now)
        [fetch] = sent(reply(observer, fetch, leader_named(1, 3), now), msg.FetchRequest)
        assert fetch.dst == 1
        observer.tick(now + 399)
        assert sent(drain(observer), msg.FetchRequest) == []


def test_observer_asks_other_voters_at_once_when_its_leader_is_lost() -> None:
    """A refused connect, or a closed connection, to the leader: the observer asks
    another voter now, and sends its Fetch again on the next connection."""
    observer = observer_of()
    drain(observer)
    observer.peer_unreachable(1, 100)
    [probe] = sent(drain(observer), msg.FetchRequest)
    assert probe.dst == 2
    assert observer.role is Role.FOLLOWER

    observer = observer_of()
    drain(observer)
    observer.peer_disconnected(1, 100)
    assert sorted(e.dst for e in sent(drain(observer), msg.FetchRequest)) == [1, 2]


def test_observer_keeps_one_probe_in_flight_and_paced_while_the_leader_is_silent() -> None:
    """No probe storm: with the leader silent for 10 s and every voter asked naming it
    still, one probe at a time and at most one per 250 ms."""
    observer = observer_of()
    drain(observer)
    probes: list[int] = []
    for now in range(0, 10_000, 5):
        observer.tick(now)
        requests = [e for e in sent(drain(observer), msg.FetchRequest) if e.dst != 1]
        assert len(requests) <= 1
        for probe in requests:
            probes.append(now)
            reply(observer, probe, leader_named(1, 3, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                  now)
    assert probes
    assert min(b - a for a, b in zip(probes, probes[1:], strict=False)) >= 250
    assert len(probes) <= 10_000 // 250


def test_voter_follower_never_asks_other_voters_when_its_fetch_stays_unanswered() -> None:
    """A paused leader is left to the fetch timeout: voters do not probe."""
    core = following(fetch_timeout_ms=LONG)
    drain(core)
    for now in range(0, 5000, 50):
        core.tick(now)
        assert [e.dst for e in sent(drain(core), msg.FetchRequest)] in ([], [1])


def test_discovering_observer_asks_the_next_voter_at_once_when_one_refuses() -> None:
    """An observer looking for the leader does not wait on a voter that is gone."""
    observer = make_core(9, voters=VOTERS)
    [probe] = sent(drain(observer), msg.FetchRequest)
    assert probe.dst == 1
    observer.peer_unreachable(1, 10)
    [probe] = sent(drain(observer), msg.FetchRequest)
    assert probe.dst == 2
