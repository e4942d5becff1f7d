"""A review of the dynamic quorum (KIP-853) core: cases a reconfiguration can get
wrong, each driven through the pure core with the zero-latency harness of
`test_core_dynamic_quorum` (directory ids, bootstrap voters, a tool's requests)."""

from __future__ import annotations

from raft.common.errors import ErrorCode
from raft.core import RaftCore
from raft.types import Envelope
from tests.unit.raft.test_core_dynamic_quorum import CLIENT, DynCluster, remove


class CutCluster(DynCluster):
    """`DynCluster` whose `isolated` nodes neither send nor receive anything."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.isolated: set[int] = set()
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def deliver(self) -> None:
        self.queue = type(self.queue)(e for e in self.queue if e.src not in self.isolated
                                      and e.dst not in self.isolated)
        for _ in range(100_000):
            if not self.queue:
                return
            envelope = self.queue.popleft()
            if envelope.src in self.isolated or envelope.dst in self.isolated:
                continue
            if envelope.dst in self.cores:
                self.cores[envelope.dst].step(envelope, self.now_ms)
                self.flush(envelope.dst)
        raise AssertionError("livelock")

    def leaders(self) -> list[RaftCore]:
        return [c for c in self.cores.values() if c.is_leader]


def test_leader_elected_when_removed_leader_resigned_before_its_removal_committed() -> None:
    """Voters 1-4, one of them (not the leader) lost its disk. The leader appends its own
    removal, is cut off before anyone copies it, and check-quorum makes it resign. Now
    only it holds the new set {the other three}, whose live voters (two) are a majority
    of it; the other voters, with the old set, need its vote and it refuses them (its
    log is longer). Raft's thesis (4.2.2): a server not in its latest configuration
    still stands for election until that configuration commits, not counting its own
    vote; without that the quorum never has a leader again."""
    cluster = CutCluster(voters=(1, 2, 3, 4))
    leader = cluster.leader()
    cluster.run(500)
    old = leader.node_id
    lost = next(n for n in (1, 2, 3, 4) if n != old)
    cluster.wipe(lost)  # a new directory id: its old key never votes again
    cluster.run(500)
    assert cluster.cores[old].is_leader
    leader.step(Envelope(src=CLIENT, dst=old, correlation_id=1, message=remove(old)),
                cluster.now_ms)
    cluster.isolated.add(old)  # before its flush: the VotersRecord reaches nobody
    cluster.flush(old)
    cluster.run(6000)  # check-quorum (1.5 fetch timeouts) resigns it
    assert not cluster.leaders()
    cluster.isolated.clear()
    cluster.run(15_000)
    leaders = cluster.leaders()
    assert len(leaders) == 1
    assert leaders[0].node_id != old  # its removal committed, then it handed over
    assert leaders[0].voter_set.ids == tuple(n for n in (1, 2, 3, 4) if n != old)
    assert leaders[0].high_watermark == leaders[0].log.end_offset
    assert ErrorCode.NONE not in [a.error_code for a in cluster.answers]  # it resigned


class FreezeOnLeader(CutCluster):
    """Cuts every other node off the moment a leader is elected, before any follower
    can copy (and so commit) the new leader's first record."""

    frozen = False

    def deliver(self) -> None:
        while self.queue:
            envelope = self.queue.popleft()
            if envelope.src in self.isolated or envelope.dst in self.isolated:
                continue
            if envelope.dst in self.cores:
                self.cores[envelope.dst].step(envelope, self.now_ms)
                self.flush(envelope.dst)
                leaders = self.leaders()
                if leaders and not self.frozen:
                    self.frozen = True  # once: the test heals the cut itself
                    self.isolated = set(self.cores) - {leaders[0].node_id}


def test_change_refused_when_new_leader_has_not_committed_a_record_of_its_epoch() -> None:
    """Ongaro's single-server change bug (2015): a new leader must commit a record of
    its own epoch before it changes the voters, else a VotersRecord of an older leader
    that it never saw can still commit and the two changes' majorities need not meet."""
    cluster = FreezeOnLeader(voters=(1, 2, 3))
    cluster.frozen = True
    first = cluster.leader()  # writes and commits the bootstrap VotersRecord
    cluster.run(500)
    cluster.frozen = False
    first.resign(cluster.now_ms)  # the next leader is caught just elected
    cluster.flush(first.node_id)
    for _ in range(100):
        if cluster.leaders():
            break
        cluster.run(100)
    [leader] = cluster.leaders()
    assert leader.node_id != first.node_id
    latest = leader.voter_history.latest_offset
    assert latest is not None
    assert latest < leader.high_watermark  # the bootstrap VotersRecord committed
    assert leader.high_watermark < leader.log.end_offset  # its LeaderChange pends
    other = next(n for n in (1, 2, 3) if n != leader.node_id)
    leader.step(Envelope(src=CLIENT, dst=leader.node_id, correlation_id=1,
                         message=remove(other)), cluster.now_ms)
    cluster.flush(leader.node_id)
    assert [a.error_code for a in cluster.answers] == [ErrorCode.REQUEST_TIMED_OUT]
    assert leader.voter_set.ids == (1, 2, 3)
    cluster.isolated.clear()
    cluster.run(500)  # its epoch's first record commits: now a change may start
    assert leader.is_leader
    assert leader.high_watermark == leader.log.end_offset
    assert cluster.request(remove(other)).error_code == ErrorCode.NONE


def test_removed_voter_never_stands_when_its_removal_is_known_committed() -> None:
    """The other side of `_may_stand`: a replica whose removal it knows committed (and
    a spare that never was a voter) stays out of elections even with no leader."""
    cluster = CutCluster(voters=(1, 2, 3), spares=(4,))
    leader = cluster.leader()
    cluster.run(500)
    gone = next(n for n in (1, 2, 3) if n != leader.node_id)
    assert cluster.request(remove(gone)).error_code == ErrorCode.NONE
    cluster.run(1000)
    removed = cluster.cores[gone]
    assert not removed.is_voter
    assert removed.high_watermark > removed.voter_history.latest_offset  # type: ignore[operator]
    cluster.isolated.add(leader.node_id)  # no leader: the remaining voter cannot win
    roles = set()
    for _ in range(100):
        cluster.run(100)
        roles |= {cluster.cores[gone].role.value, cluster.cores[4].role.value}
    assert roles <= {"follower", "unattached"}


def test_follower_reverts_to_previous_voters_when_uncommitted_voters_record_truncated() -> None:
    """The voter set in force is the log's latest VotersRecord, uncommitted included;
    a new leader that never had it makes its followers cut it, and with it the set."""
    cluster = CutCluster(voters=(1, 2, 3, 4, 5))
    leader = cluster.leader()
    cluster.run(500)
    old = leader.node_id
    follower, *rest = [n for n in (1, 2, 3, 4, 5) if n != old]
    cluster.isolated = set(rest)  # only the follower hears the leader
    leader.step(Envelope(src=CLIENT, dst=old, correlation_id=1, message=remove(rest[-1])),
                cluster.now_ms)
    cluster.flush(old)
    cluster.run(300)
    copied = cluster.cores[follower]
    offset = copied.voter_history.latest_offset
    assert offset is not None
    assert rest[-1] not in copied.voter_set.ids  # in force on arrival, uncommitted
    assert copied.high_watermark <= offset
    cluster.isolated = {old, follower}  # the three others elect one of them
    cluster.run(6000)
    [new] = cluster.leaders()
    assert new.node_id in rest
    cluster.isolated = {old}
    cluster.run(3000)
    assert copied.leader_id == new.node_id
    assert copied.voter_set.ids == (1, 2, 3, 4, 5)
    assert all(rest[-1] in voters.ids for _, voters in copied.voter_history.sets)
    assert copied.is_voter
