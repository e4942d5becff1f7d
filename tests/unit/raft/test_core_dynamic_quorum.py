"""The dynamic quorum (KIP-853) in the pure core: replica keys in votes and fetch
progress, the voter set from the log (bootstrap, VotersRecord, truncation, snapshots),
and the leader's AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter rules, driven by a
small zero-latency harness with directory ids."""

from __future__ import annotations

import random

import pytest

from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from raft.control_records import Endpoint, KRaftVersionRecord, VotersRecord
from raft.core import RaftConfig, RaftCore
from raft.core._leader_state import LeaderState
from raft.core._replication import probe_targets
from raft.log import MemoryLog
from raft.messages import (
    AddRaftVoterRequest,
    CurrentLeader,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    NodeEndpoints,
    RemoveRaftVoterRequest,
    UpdateKRaftVersionRequest,
    UpdateRaftVoterRequest,
    VoterChangeResponse,
    VoteRequest,
    VoteResponse,
)
from raft.snapshot import encode_snapshot
from raft.types import ElectionState, Envelope, SnapshotId
from raft.voters import ReplicaKey, Voter, VoterHistory, VoterSet, voters_change_of
from tests.support.core_harness import CLUSTER_ID, Cluster, drain, reply, sent

CLIENT = -7  # a tool's connection: not a raft node


def dir_of(node: int, generation: int = 0) -> Uuid:
    return Uuid(1000 * (generation + 1) + node)


def voter_set(*nodes: int) -> VoterSet:
    return VoterSet(Voter(ReplicaKey(n, dir_of(n)),
                          (Endpoint(name="CONTROLLER", host="127.0.0.1", port=9000 + n),))
                    for n in nodes)


class DynCluster(Cluster):
    """Cores with directory ids, bootstrapped with `voters`; `spares` start as observers
    (formatted without initial controllers: they only know whom to ask). The answers to
    the tool's requests (to `CLIENT`, no core) are in `answers`."""

    def __init__(self, voters: tuple[int, ...] = (1, 2, 3), spares: tuple[int, ...] = (),
                 *, dynamic: bool = True, seed: int = 0) -> None:
        super().__init__(voters=(), seed=seed)  # no core yet: `start` makes them
        self.bootstrap = voter_set(*voters) if dynamic else None
        self.static_ids = voters
        self.generation = dict.fromkeys((*voters, *spares), 0)
        self.logs = {n: MemoryLog() for n in self.generation}
        self.elections = dict.fromkeys(self.generation)
        for node in self.generation:
            self.start(node, bootstrap=node in voters)

    @property
    def answers(self) -> list[VoterChangeResponse]:
        return [e.message for e in self.sent if e.dst == CLIENT]

    def start(self, node: int, *, bootstrap: bool,
              listeners: tuple[Endpoint, ...] = ()) -> None:
        config = RaftConfig(voters=self.static_ids,
                            bootstrap_voters=self.bootstrap if bootstrap else None)
        if not bootstrap and self.bootstrap is not None:
            # A spare knows no voters until it fetches them; it is not one of the
            # static ids either, so it is an observer.
            config = RaftConfig(voters=self.static_ids, bootstrap_voters=VoterSet(()))
        self.cores[node] = RaftCore(
            node_id=node, config=config, log=self.logs[node],
            election=self.elections[node], cluster_id=CLUSTER_ID,
            rng=random.Random(self.seed * 100 + node + 10 * self.generation[node]),
            now_ms=self.now_ms,
            directory_id=dir_of(node, self.generation[node]), listeners=listeners)
        self.flush(node)

    def restart_with(self, node: int, listeners: tuple[Endpoint, ...]) -> None:
        """The node's process comes back on the same disk, serving on `listeners`."""
        self.down.discard(node)
        self.start(node, bootstrap=True, listeners=listeners)

    def wipe(self, node: int) -> None:
        """The node's disk is lost and formatted anew: a new directory id."""
        self.generation[node] += 1
        self.logs[node] = MemoryLog()
        self.elections[node] = None
        self.start(node, bootstrap=False)

    def leader(self) -> RaftCore:
        for _ in range(200):
            leaders = [c for c in self.cores.values() if c.is_leader]
            if leaders:
                self.run(300)
                leaders = [c for c in self.cores.values() if c.is_leader]
                assert len(leaders) == 1
                return leaders[0]
            self.run(100)
        raise AssertionError("no leader")

    def request(self, message: object) -> VoterChangeResponse:
        leader = self.leader()
        before = len(self.answers)
        leader.step(Envelope(src=CLIENT, dst=leader.node_id, correlation_id=1,
                             message=message), self.now_ms)
        self.flush(leader.node_id)
        for _ in range(100):
            if len(self.answers) > before:
                return self.answers[-1]
            self.run(50)
        raise AssertionError("no answer")


def add(node: int, generation: int = 0) -> AddRaftVoterRequest:
    return AddRaftVoterRequest(cluster_id=CLUSTER_ID, voter_id=node,
                               voter_directory_id=dir_of(node, generation))


def remove(node: int, generation: int = 0) -> RemoveRaftVoterRequest:
    return RemoveRaftVoterRequest(cluster_id=CLUSTER_ID, voter_id=node,
                                  voter_directory_id=dir_of(node, generation))


def test_first_leader_writes_bootstrap_voters_when_log_is_empty() -> None:
    cluster = DynCluster(spares=(4,))
    leader = cluster.leader()
    cluster.run(500)
    changes = [voters_change_of(r) for b in leader.log.read(0, 1 << 20) for r in b.records]
    assert KRaftVersionRecord(kraft_version=1) in changes
    assert voter_set(1, 2, 3).to_record() in changes
    for core in cluster.cores.values():
        assert core.voter_set == voter_set(1, 2, 3)
        assert core.kraft_version == 1
    assert not cluster.cores[4].is_voter


def test_add_voter_commits_and_every_node_uses_new_set_when_observer_caught_up() -> None:
    cluster = DynCluster(spares=(4,))
    cluster.leader()
    cluster.run(1000)
    answer = cluster.request(add(4))
    assert answer.error_code == ErrorCode.NONE, answer
    cluster.run(500)
    assert all(c.voter_set.ids == (1, 2, 3, 4) for c in cluster.cores.values())
    assert cluster.cores[4].is_voter


def test_add_voter_refused_when_observer_not_caught_up() -> None:
    cluster = DynCluster(spares=(4,))
    cluster.leader()
    cluster.run(500)
    answer = cluster.request(add(5))  # nobody fetched with that key
    assert answer.error_code == ErrorCode.REQUEST_TIMED_OUT
    answer = cluster.request(add(4, generation=1))  # 4 fetches with another directory
    assert answer.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert cluster.leader().voter_set.ids == (1, 2, 3)


def test_add_voter_refused_when_id_is_voter_already() -> None:
    cluster = DynCluster()
    cluster.leader()
    cluster.run(500)
    assert cluster.request(add(2, generation=1)).error_code == ErrorCode.DUPLICATE_VOTER


def test_second_change_refused_when_first_not_committed() -> None:
    cluster = DynCluster(spares=(4,))
    leader = cluster.leader()
    cluster.run(500)
    leader.step(Envelope(src=CLIENT, dst=leader.node_id, correlation_id=1,
                         message=remove(3)), cluster.now_ms)
    leader.step(Envelope(src=CLIENT, dst=leader.node_id, correlation_id=2,
                         message=remove(2)), cluster.now_ms)
    cluster.flush(leader.node_id)
    assert [a.error_code for a in cluster.answers] == [ErrorCode.REQUEST_TIMED_OUT]
    cluster.run(500)
    assert cluster.answers[-1].error_code == ErrorCode.NONE
    assert leader.voter_set.ids == (1, 2)


def test_remove_voter_refused_when_directory_differs() -> None:
    cluster = DynCluster()
    cluster.leader()
    cluster.run(500)
    assert cluster.request(remove(3, generation=1)).error_code == ErrorCode.VOTER_NOT_FOUND


def test_removed_leader_resigns_and_another_leads_when_removal_commits() -> None:
    cluster = DynCluster()
    leader = cluster.leader()
    cluster.run(500)
    old = leader.node_id
    answer = cluster.request(remove(old))
    assert answer.error_code == ErrorCode.NONE
    cluster.run(5000)
    new = cluster.leader()
    assert new.node_id != old
    assert not cluster.cores[old].is_voter
    assert new.voter_set.ids == tuple(n for n in (1, 2, 3) if n != old)
    assert cluster.cores[old].leader_id == new.node_id  # it follows as an observer


def test_changes_refused_with_unsupported_version_when_kraft_version_0() -> None:
    cluster = DynCluster(spares=(4,), dynamic=False)
    cluster.leader()
    cluster.run(500)
    assert cluster.request(add(4)).error_code == ErrorCode.UNSUPPORTED_VERSION
    update = UpdateRaftVoterRequest(cluster_id=CLUSTER_ID, current_leader_epoch=0,
                                    voter_id=1, voter_directory_id=dir_of(1))
    assert cluster.request(update).error_code in (ErrorCode.UNSUPPORTED_VERSION,
                                                  ErrorCode.FENCED_LEADER_EPOCH)


def test_wiped_voter_refuses_vote_when_request_names_old_directory() -> None:
    """The old vote belonged to the old key; the new key is no voter until added."""
    cluster = DynCluster()
    leader = cluster.leader()
    cluster.run(500)
    victim = next(n for n in (1, 2, 3) if n != leader.node_id)
    cluster.wipe(victim)
    core = cluster.cores[victim]
    assert not core.is_voter
    request = VoteRequest(cluster_id=CLUSTER_ID, candidate_epoch=leader.epoch,
                          candidate_id=leader.node_id, last_offset_epoch=leader.log.last_epoch,
                          last_offset=leader.log.end_offset,
                          candidate_directory_id=dir_of(leader.node_id),
                          voter_directory_id=dir_of(victim))
    core.step(Envelope(src=leader.node_id, dst=victim, correlation_id=5, message=request),
              cluster.now_ms)
    ready = core.ready()
    answers = [e.message for e in ready.messages if isinstance(e.message, VoteResponse)]
    assert answers
    assert answers[0].error_code == ErrorCode.INVALID_VOTER_KEY
    assert not answers[0].vote_granted
    assert ready.election is None or ready.election.voted_id is None


def test_wiped_voter_fetches_count_as_observer_when_directory_differs() -> None:
    cluster = DynCluster()
    leader = cluster.leader()
    cluster.run(500)
    victim = next(n for n in (1, 2, 3) if n != leader.node_id)
    cluster.wipe(victim)
    cluster.run(1000)
    state = leader._state  # noqa: SLF001 (white box: the leader's progress by key)
    assert isinstance(state, LeaderState)
    assert state.voter_progress[victim].directory_id == dir_of(victim)
    assert state.observer_progress[victim].directory_id == dir_of(victim, 1)


def test_replace_wiped_voter_when_old_key_removed_then_new_key_added() -> None:
    cluster = DynCluster()
    leader = cluster.leader()
    cluster.run(500)
    victim = next(n for n in (1, 2, 3) if n != leader.node_id)
    cluster.wipe(victim)
    cluster.run(1000)
    assert cluster.request(remove(victim)).error_code == ErrorCode.NONE
    cluster.run(500)
    assert cluster.request(add(victim, generation=1)).error_code == ErrorCode.NONE
    cluster.run(500)
    assert cluster.cores[victim].is_voter
    assert cluster.leader().voter_set.directory_of(victim) == dir_of(victim, 1)


def test_vote_recorded_as_replica_key_when_granted() -> None:
    cluster = DynCluster()
    core = cluster.cores[2]
    request = VoteRequest(cluster_id=CLUSTER_ID, candidate_epoch=5, candidate_id=1,
                          last_offset_epoch=0, last_offset=0,
                          candidate_directory_id=dir_of(1), voter_directory_id=dir_of(2))
    core.step(Envelope(src=1, dst=2, correlation_id=1, message=request), 0)
    cluster.flush(2)
    assert cluster.elections[2] is not None
    assert (cluster.elections[2].voted_id, cluster.elections[2].voted_directory_id) == (
        1, dir_of(1))
    again = VoteRequest(cluster_id=CLUSTER_ID, candidate_epoch=5, candidate_id=1,
                        last_offset_epoch=0, last_offset=0,
                        candidate_directory_id=dir_of(1, 1), voter_directory_id=dir_of(2))
    core.step(Envelope(src=1, dst=2, correlation_id=2, message=again), 0)
    ready = core.ready()
    granted = [e.message.vote_granted for e in ready.messages
               if isinstance(e.message, VoteResponse)]
    assert granted == [False]


def test_quorum_state_roundtrips_voted_directory_id() -> None:
    state = ElectionState(epoch=3, voted_id=2, voted_directory_id=dir_of(2))
    assert ElectionState.from_json(state.to_json()) == state
    assert "voted_directory_id" not in ElectionState(epoch=3, voted_id=2).to_json()


def test_update_voter_changes_endpoints_when_key_matches() -> None:
    cluster = DynCluster()
    leader = cluster.leader()
    cluster.run(500)
    endpoint = Endpoint(name="CONTROLLER", host="127.0.0.1", port=19_002)
    update = UpdateRaftVoterRequest(cluster_id=CLUSTER_ID, current_leader_epoch=leader.epoch,
                                    voter_id=2, voter_directory_id=dir_of(2),
                                    listeners=(endpoint,))
    assert cluster.request(update).error_code == ErrorCode.NONE
    voter = leader.voter_set.voter(2)
    assert voter is not None
    assert voter.endpoints == (endpoint,)


# --- VoterHistory -------------------------------------------------------------------------


def test_history_reverts_to_previous_set_when_truncated_below_record() -> None:
    history = VoterHistory(voter_set(1, 2, 3), kraft_version=1)
    history.on_records(5, [b"x", voter_set(1, 2, 3, 4).to_record().encode()])
    assert history.latest.ids == (1, 2, 3, 4)
    assert history.latest_offset == 6
    history.truncate_to(7)
    assert history.latest.ids == (1, 2, 3, 4)
    history.truncate_to(6)
    assert list(history.latest.ids) == [1, 2, 3]
    assert history.latest_offset is None


def test_history_takes_snapshot_voters_when_reset_to_snapshot() -> None:
    history = VoterHistory(VoterSet(()), kraft_version=0)
    records = [KRaftVersionRecord(kraft_version=1).encode(),
               voter_set(1, 2).to_record().encode(), b"other"]
    history.reset_to(10, records)
    assert history.latest == voter_set(1, 2)
    assert history.kraft_version == 1
    assert history.base_offset == 10


def test_voters_change_of_ignores_other_records() -> None:
    assert voters_change_of(b"") is None
    assert voters_change_of(b"\x83\xa4type\x13garbage") is None
    record = VotersRecord(voters=voter_set(3).to_record().voters)
    assert voters_change_of(record.encode()) == record


@pytest.mark.parametrize("text", ["1@h:1", "x@h:1:AAAAAAAAAAAAAAAAAAAAAA", "1@:1:Zz", ""])
def test_parse_controllers_refuses_when_entry_malformed(text: str) -> None:
    from raft.voters import parse_controllers
    with pytest.raises(ValueError, match="initial-controllers"):
        parse_controllers(text)


def endpoints_of(*nodes: int) -> tuple[NodeEndpoints, ...]:
    return tuple(NodeEndpoints(node_id=n, listeners=(
        Endpoint(name="CONTROLLER", host="127.0.0.1", port=9000 + n),)) for n in nodes)


def test_kraft_version_upgrade_turns_static_voters_into_log_voters_when_all_heard() -> None:
    cluster = DynCluster(spares=(4,), dynamic=False)
    cluster.leader()
    cluster.run(500)
    upgrade = UpdateKRaftVersionRequest(cluster_id=CLUSTER_ID, kraft_version=1,
                                        nodes=endpoints_of(1, 2, 3))
    assert cluster.request(upgrade).error_code == ErrorCode.NONE
    cluster.run(500)
    for core in cluster.cores.values():
        assert core.kraft_version == 1
        assert core.voter_set == voter_set(1, 2, 3)
    assert cluster.request(add(4)).error_code == ErrorCode.NONE
    assert cluster.leader().voter_set.ids == (1, 2, 3, 4)
    assert cluster.request(upgrade).error_code == ErrorCode.NONE  # already at 1


def test_kraft_version_upgrade_refused_when_an_endpoint_or_version_is_wrong() -> None:
    cluster = DynCluster(dynamic=False)
    cluster.leader()
    cluster.run(500)
    missing = UpdateKRaftVersionRequest(cluster_id=CLUSTER_ID, kraft_version=1,
                                        nodes=endpoints_of(1, 2))
    assert cluster.request(missing).error_code == ErrorCode.INVALID_REQUEST
    two = UpdateKRaftVersionRequest(cluster_id=CLUSTER_ID, kraft_version=2,
                                    nodes=endpoints_of(1, 2, 3))
    assert cluster.request(two).error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert cluster.leader().kraft_version == 0


def test_removed_voter_keeps_its_vote_when_the_one_voter_left_is_unreachable() -> None:
    """{1, 2}: the leader won its epoch with the other's vote, then removed it. The
    removed voter, now an observer of a one-voter quorum, loses the leader past the fetch
    timeout: it looks for the leader again without taking its vote back (a second vote
    in one epoch stops a node with RaftInvariantError)."""
    cluster = DynCluster(voters=(1, 2))
    leader = cluster.leader()
    cluster.run(500)
    other = 3 - leader.node_id
    removed = cluster.cores[other]
    vote = removed._state.voted_id
    assert vote == leader.node_id  # two voters: the leader needed this vote
    assert cluster.request(remove(other)).error_code == ErrorCode.NONE
    cluster.run(1000)
    assert not removed.is_voter
    epoch = removed.epoch
    cluster.cut.add(frozenset((1, 2)))
    cluster.run(5000)  # far past the fetch timeout
    assert removed.epoch == epoch
    assert removed._state.voted_id == vote
    cluster.cut.clear()
    cluster.run(2000)
    assert removed.leader_id == leader.node_id


def test_wiped_replica_probes_the_others_never_itself_when_it_knows_no_voters() -> None:
    """A voter wiped and formatted anew (no initial controllers) knows no voters: it asks
    the bootstrap servers other than itself who leads, and follows the leader they
    name. It never sends a Fetch to itself (it used to ask the configured ids in turn,
    itself first)."""
    cluster = DynCluster(voters=(1, 2, 3))
    leader = cluster.leader()
    victim = 1 if leader.node_id != 1 else 2
    cluster.wipe(victim)
    since = len(cluster.sent)
    cluster.cut.update(frozenset((victim, n)) for n in (1, 2, 3) if n != victim)
    cluster.run(5000)  # unanswered probes: it asks each one it knows in turn
    cluster.cut.clear()
    cluster.run(2000)
    probes = [e.dst for e in cluster.sent[since:]
              if e.src == victim and isinstance(e.message, FetchRequest)]
    assert set(probes) == {1, 2, 3} - {victim}
    assert cluster.cores[victim].leader_id == leader.node_id


def test_probe_targets_are_voters_else_last_known_then_bootstrap_without_self() -> None:
    """Whom an observer asks: the voters in force; else the last voters it knew (a cut
    of its log took the voter records away); then the bootstrap servers; never itself."""
    assert probe_targets(4, (1, 2), (9,), (1, 3)) == (1, 2, 3)
    assert probe_targets(4, (), (5, 6), (1, 4)) == (5, 6, 1)
    assert probe_targets(1, (), (), (1,)) == ()
    assert probe_targets(1, (1, 2), (), (1, 3)) == (2, 3)  # its old key still votes


def test_history_refuses_set_at_when_offset_below_its_base() -> None:
    """Below the base the records that decided the set are gone: no answer, rather than
    the base (the set at the base offset, perhaps changed since)."""
    history = VoterHistory(voter_set(1, 2, 3), kraft_version=1)
    history.reset_to(20, [KRaftVersionRecord(kraft_version=1).encode(),
                          voter_set(1, 2, 4).to_record().encode()])
    assert history.set_at(20) == voter_set(1, 2, 4)
    with pytest.raises(ValueError, match="offset 6 is no longer known"):
        history.set_at(6)


def test_snapshot_records_refused_below_a_snapshot_loaded_since() -> None:
    """A follower applied offsets 0-4 under voters {1, 2, 3}, then loads the leader's
    snapshot ending at 20 under {1, 2, 4}. Raft's records for a snapshot of its old image
    (ending at 5) are no longer known: refused, where they used to be the loaded
    snapshot's voters, which were not in force at 5."""
    log = MemoryLog()
    log.append(1, [b"r%d" % i for i in range(5)])
    log.flush()
    follower = RaftCore(
        node_id=2, config=RaftConfig(voters=(1, 2, 3), bootstrap_voters=voter_set(1, 2, 3)),
        log=log, election=ElectionState(epoch=2, leader_id=1, voters=()),
        cluster_id=CLUSTER_ID, rng=random.Random(2), now_ms=0, directory_id=dir_of(2))
    image_end = log.end_offset
    assert follower.snapshot_control_records(image_end)[1] == \
        voter_set(1, 2, 3).to_record().encode()
    fetch, = sent(drain(follower), FetchRequest)
    snapshot_id = SnapshotId(20, 2)
    leader = CurrentLeader(leader_id=1, leader_epoch=2)
    request, = sent(reply(follower, fetch, FetchResponse(
        high_watermark=20, current_leader=leader, snapshot_id=snapshot_id), 1),
        FetchSnapshotRequest)
    loaded = [KRaftVersionRecord(kraft_version=1).encode(),
              voter_set(1, 2, 4).to_record().encode()]
    data = encode_snapshot(snapshot_id, loaded)
    reply(follower, request, FetchSnapshotResponse(
        current_leader=leader, snapshot_id=snapshot_id, size=len(data), position=0,
        unaligned_records=data), 2)
    assert follower.log.start_offset == 20
    assert follower.snapshot_control_records(20) == loaded
    with pytest.raises(ValueError, match="no longer known"):
        follower.snapshot_control_records(image_end)


def listening(node: int, port: int) -> tuple[Endpoint, ...]:
    return (Endpoint(name="CONTROLLER", host="127.0.0.1", port=port),)


def test_voter_restarted_with_new_listeners_has_its_entry_updated_by_the_leader() -> None:
    """KIP-853: a voter back with other endpoints than its entry names asks the leader
    (UpdateRaftVoter, on its own) and the voter set, and DescribeQuorum, then name the
    new ones; nothing else about the set changes."""
    cluster = DynCluster(voters=(1, 2, 3))
    leader = cluster.leader()
    cluster.run(500)
    follower = 1 if leader.node_id != 1 else 2
    cluster.crash(follower)
    cluster.restart_with(follower, listening(follower, 9500))
    cluster.run(3000)
    updates = [e for e in cluster.sent if isinstance(e.message, UpdateRaftVoterRequest)]
    assert [(e.src, e.dst) for e in updates][:1] == [(follower, leader.node_id)]
    expected = voter_set(1, 2, 3).replaced(
        Voter(ReplicaKey(follower, dir_of(follower)), listening(follower, 9500)))
    for core in cluster.cores.values():
        assert core.voter_set == expected
    described = leader.describe_quorum(cluster.now_ms)
    assert described.kraft_version == 1
    assert NodeEndpoints(node_id=follower, listeners=listening(follower, 9500)) in \
        described.nodes


def test_sole_voter_restarted_with_new_listeners_updates_its_own_entry() -> None:
    """The leader's own entry: it appends the update itself once it may change voters."""
    cluster = DynCluster(voters=(1,))
    cluster.leader()
    cluster.crash(1)
    cluster.restart_with(1, listening(1, 9501))
    cluster.run(3000)
    assert cluster.cores[1].is_leader
    assert cluster.cores[1].voter_set == VoterSet(
        [Voter(ReplicaKey(1, dir_of(1)), listening(1, 9501))])


def test_describe_quorum_names_kraft_version_when_static() -> None:
    cluster = DynCluster(voters=(1, 2, 3), dynamic=False)
    assert cluster.leader().describe_quorum(cluster.now_ms).kraft_version == 0
