"""The metadata topic's ID and the cluster id on every RPC (KIP-516)."""

from __future__ import annotations

import pytest

from metadata.records import LeaderChange, MetadataTopic, decode
from raft.common.errors import ErrorCode
from raft.common.uuid import METADATA_TOPIC_ID, Uuid
from raft.core import Role
from raft.log import MemoryLog
from raft.messages import (
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    VoteRequest,
)
from raft.types import ElectionState
from tests.support.core_harness import (
    CLUSTER_ID,
    Cluster,
    deliver,
    drain,
    log_with,
    make_core,
    make_leader,
)

OTHER_ID = Uuid.from_string("c2xpcHBlcnlzbGlwcGVyeQ")


def test_first_leader_of_an_empty_log_names_the_metadata_topic_after_leader_change() -> None:
    """KIP-516: the first leader appends MetadataTopic{random id} right after LeaderChange."""
    leader = make_leader()
    records = [decode(r) for b in leader.log.read(0, 1 << 20) for r in b.records]
    assert isinstance(records[0], LeaderChange)
    assert isinstance(records[1], MetadataTopic)
    assert records[1].topic_id not in (METADATA_TOPIC_ID, Uuid(0))


def test_later_leader_does_not_rename_the_topic_when_log_is_not_empty() -> None:
    """KIP-516: the ID is assigned once; a leader of a non-empty log only adds LeaderChange."""
    leader = make_leader(log=log_with(1, 1), epoch=1)
    batch = leader.log.read(2, 1 << 20)[0]
    assert [type(decode(r)) for r in batch.records] == [LeaderChange]


def test_metadata_topic_ids_differ_when_seeds_differ() -> None:
    """KIP-516: the ID is random (from the injected rng), so clusters do not collide."""
    ids = set()
    for seed in range(5):
        leader = make_leader(seed=seed)
        ids.add(decode(leader.log.read(0, 1 << 20)[0].records[1]).topic_id)  # type: ignore[attr-defined]
    assert len(ids) == 5


def test_nodes_address_the_partition_by_its_id_when_it_is_committed() -> None:
    """KIP-516: once a node has seen MetadataTopic committed it uses that ID in requests
    (and until then the sentinel METADATA_TOPIC_ID)."""
    cluster = Cluster((1, 2, 3), observers=(4,))
    assert all(e.message.topic_id == METADATA_TOPIC_ID for e in cluster.sent)
    leader = cluster.elect()
    topic_id = decode(leader.log.read(0, 1 << 20)[0].records[1]).topic_id  # type: ignore[attr-defined]
    assert {c.metadata_topic_id for c in cluster.cores.values()} == {topic_id}
    cluster.sent.clear()
    cluster.run(1000)
    requests = [e.message for e in cluster.sent if isinstance(e.message, FetchRequest)]
    assert requests
    assert {m.topic_id for m in requests} == {topic_id}


def _requests(topic_id: Uuid, cluster_id: str = CLUSTER_ID) -> list[object]:
    return [
        VoteRequest(cluster_id=cluster_id, topic_id=topic_id, candidate_epoch=9,
                    candidate_id=2, last_offset_epoch=9, last_offset=99),
        BeginQuorumEpochRequest(cluster_id=cluster_id, topic_id=topic_id, leader_id=2,
                                leader_epoch=9),
        EndQuorumEpochRequest(cluster_id=cluster_id, topic_id=topic_id, leader_id=2,
                              leader_epoch=9),
        FetchRequest(cluster_id=cluster_id, replica_id=2, topic_id=topic_id,
                     current_leader_epoch=9, fetch_offset=0, last_fetched_epoch=0),
        DescribeQuorumRequest(cluster_id=cluster_id, topic_id=topic_id),
    ]


@pytest.mark.parametrize("index", range(5))
def test_unknown_topic_id_is_refused_without_state_change_when_node_knows_none(
        index: int) -> None:
    """KIP-516: a node that knows no metadata topic ID answers UNKNOWN_TOPIC_ID to any ID
    but the sentinel, and nothing changes (no epoch bump, no vote, no truncation)."""
    core = make_core(1, election=ElectionState(epoch=3, voters=(1, 2, 3)))
    drain(core)
    [response] = deliver(core, 2, _requests(OTHER_ID)[index], 10)
    assert response.error_code is ErrorCode.UNKNOWN_TOPIC_ID
    assert response.topic_id == OTHER_ID
    assert (core.epoch, core.voted_id, core.role) == (3, None, Role.UNATTACHED)
    assert not core.has_ready


@pytest.mark.parametrize("index", range(5))
def test_other_topic_id_gets_inconsistent_topic_id_when_node_knows_its_own(index: int) -> None:
    """KIP-516: a node that knows the metadata topic's ID answers INCONSISTENT_TOPIC_ID to
    a different one."""
    leader = make_leader()
    epoch = leader.epoch
    [response] = deliver(leader, 2, _requests(OTHER_ID)[index], 10_001)
    assert response.error_code is ErrorCode.INCONSISTENT_TOPIC_ID
    assert leader.is_leader
    assert leader.epoch == epoch


@pytest.mark.parametrize("index", range(5))
def test_wrong_cluster_id_gets_inconsistent_cluster_id_when_any_request_arrives(
        index: int) -> None:
    """KIP-595: cluster_id on every request; a foreign one is refused, state unchanged."""
    core = make_core(1, election=ElectionState(epoch=3, voters=(1, 2, 3)))
    drain(core)
    [response] = deliver(core, 2, _requests(METADATA_TOPIC_ID, "elsewhere")[index], 10)
    assert response.error_code is ErrorCode.INCONSISTENT_CLUSTER_ID
    assert (core.epoch, core.voted_id) == (3, None)


def test_sentinel_and_known_id_are_both_accepted_when_node_knows_the_id() -> None:
    """KIP-516: every node keeps accepting METADATA_TOPIC_ID."""
    cluster = Cluster((1, 2, 3))
    leader = cluster.elect()
    topic_id = leader.metadata_topic_id
    assert topic_id is not None
    for requested in (METADATA_TOPIC_ID, topic_id):
        [response] = deliver(leader, -5, DescribeQuorumRequest(
            cluster_id=CLUSTER_ID, topic_id=requested), cluster.now_ms)
        assert response.error_code is ErrorCode.NONE
        assert response.leader_id == leader.node_id


def test_restarted_node_accepts_the_id_in_its_log_when_its_high_watermark_is_zero() -> None:
    """A restarted node has forgotten its high watermark; followers that know the ID must
    still be able to fetch from it, so the ID in its own log counts as known."""
    cluster = Cluster((1, 2, 3))
    leader = cluster.elect()
    topic_id = leader.metadata_topic_id
    restarted = make_core(leader.node_id, log=cluster.logs[leader.node_id],
                          election=ElectionState(epoch=leader.epoch, voters=(1, 2, 3)))
    assert restarted.metadata_topic_id is None
    [response] = deliver(restarted, -1, DescribeQuorumRequest(
        cluster_id=CLUSTER_ID, topic_id=topic_id), 10)  # type: ignore[arg-type]
    assert response.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_describe_quorum_lists_voters_and_observers_when_asked_by_an_anonymous_tool() -> None:
    """KIP-595 DescribeQuorum: leader, epoch, HW and each replica's progress; tools have
    negative ids and are answered like anyone else."""
    cluster = Cluster((1, 2, 3), observers=(7,))
    leader = cluster.elect()
    [response] = deliver(leader, -3, DescribeQuorumRequest(cluster_id=CLUSTER_ID),
                         cluster.now_ms)
    assert (response.leader_id, response.leader_epoch) == (leader.node_id, leader.epoch)
    assert response.high_watermark == leader.high_watermark
    assert [r.replica_id for r in response.current_voters] == [1, 2, 3]
    assert [r.replica_id for r in response.observers] == [7]
    assert all(r.log_end_offset == leader.log.end_offset for r in response.current_voters)


def test_voter_with_empty_log_still_votes_when_candidate_knows_the_topic_id() -> None:
    """KIP-516 liveness: a voter that has not applied MetadataTopic answers
    UNKNOWN_TOPIC_ID to the real ID; the candidate then addresses it by the sentinel
    (always accepted), gets its vote and a leader is elected."""
    cluster = Cluster((1, 2, 3))
    cluster.down.add(2)
    old = cluster.elect()
    old.propose([b"x"], cluster.now_ms)
    cluster.flush(old.node_id)
    cluster.run(500)
    cluster.down.add(old.node_id)
    cluster.logs[2] = MemoryLog()
    cluster.elections[2] = None
    cluster.restart(2)
    cluster.run(10_000)
    [survivor] = [n for n in (1, 3) if n != old.node_id]
    assert cluster.leaders() == [survivor]
    assert cluster.cores[2].leader_id == survivor
    refused = [e for e in cluster.sent if e.src == 2
               and getattr(e.message, "error_code", None) is ErrorCode.UNKNOWN_TOPIC_ID]
    assert refused  # the real ID was refused first, then the sentinel worked
