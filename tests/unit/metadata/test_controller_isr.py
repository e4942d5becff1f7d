"""The controller's AlterPartition decisions (KIP-497, KIP-841 eligibility): one rule
per test, and the happy paths (shrink, expand, answered with the state after commit)."""

from __future__ import annotations

from metadata import records as rec
from metadata.admin import (
    AlterPartitionData,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
    CreatableTopicResult,
)
from metadata.image import PartitionImage
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from tests.support.controller_harness import TIMEOUT_MS, Harness


def _setup() -> tuple[Harness, Uuid, PartitionImage]:
    h = Harness(brokers=3)
    created = h.create("t", partitions=1, factor=3)
    assert isinstance(created, CreatableTopicResult)
    topic = h.controller.committed.topic(created.topic_id)
    assert topic is not None
    return h, created.topic_id, topic.partitions[0]


def _alter(h: Harness, topic_id: Uuid, new_isr: tuple[int, ...], *, broker_id: int | None = None,
           broker_epoch: int | None = None, leader_epoch: int | None = None,
           partition_epoch: int | None = None, partition: int = 0, commit: bool = True
           ) -> tuple[AlterPartitionResponse, tuple[rec.Record, ...]]:
    topic = h.controller.view.topic(topic_id)
    part = topic.partitions[0] if topic is not None else None
    leader = part.leader if part is not None else 1
    broker = leader if broker_id is None else broker_id
    decision = h.run(AlterPartitionRequest(
        broker_id=broker,
        broker_epoch=h.epochs[broker] if broker_epoch is None else broker_epoch,
        topics=(AlterPartitionTopic(topic_id=topic_id, partitions=(AlterPartitionData(
            partition=partition,
            leader_epoch=(part.leader_epoch if part else 0) if leader_epoch is None
            else leader_epoch,
            partition_epoch=(part.partition_epoch if part else 0) if partition_epoch is None
            else partition_epoch,
            new_isr=new_isr),)),)), commit=commit)
    assert isinstance(decision.response, AlterPartitionResponse)
    return decision.response, decision.records


def _only(response: AlterPartitionResponse) -> AlterPartitionPartitionResult:
    (topic,) = response.topics
    (result,) = topic.partitions
    return result


def test_isr_shrinks_when_the_leader_asks() -> None:
    """KIP-497: the leader's new ISR is written as a PartitionChange; the answer carries
    the state after it (partition epoch bumped, leader epoch kept)."""
    h, topic_id, part = _setup()
    follower = next(r for r in part.replicas if r != part.leader)
    new_isr = tuple(r for r in part.isr if r != follower)
    response, records = _alter(h, topic_id, new_isr)
    assert records == (rec.PartitionChange(topic_id=topic_id, partition=0, isr=new_isr),)
    result = _only(response)
    assert (result.error_code, result.isr, result.leader_id) == (0, new_isr, part.leader)
    assert (result.leader_epoch, result.partition_epoch) == (
        part.leader_epoch, part.partition_epoch + 1)
    committed = h.controller.committed.topic(topic_id)
    assert committed is not None
    assert committed.partitions[0].isr == new_isr


def test_isr_expands_when_the_added_replica_is_unfenced() -> None:
    """KIP-841: an unfenced replica may rejoin the ISR."""
    h, topic_id, part = _setup()
    follower = next(r for r in part.replicas if r != part.leader)
    _alter(h, topic_id, tuple(r for r in part.isr if r != follower))
    response, records = _alter(h, topic_id, part.isr)
    assert len(records) == 1
    assert _only(response).isr == part.isr
    assert _only(response).partition_epoch == part.partition_epoch + 2


def test_no_record_when_the_isr_is_unchanged() -> None:
    h, topic_id, part = _setup()
    response, records = _alter(h, topic_id, part.isr)
    assert records == ()
    assert (_only(response).error_code, _only(response).partition_epoch) == (
        0, part.partition_epoch)


def test_refused_with_stale_broker_epoch_when_the_leader_registered_again() -> None:
    """STALE_BROKER_EPOCH (77): an earlier incarnation of the leader changes nothing."""
    h, topic_id, part = _setup()
    response, records = _alter(h, topic_id, (part.leader,),
                               broker_epoch=h.epochs[part.leader] - 1)
    assert records == ()
    assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert _only(response).error_code == ErrorCode.STALE_BROKER_EPOCH


def test_refused_with_unknown_topic_id_when_the_topic_is_gone() -> None:
    h, topic_id, part = _setup()
    h.delete("t")
    response, records = _alter(h, topic_id, (1,), broker_id=part.leader, leader_epoch=0,
                               partition_epoch=0)
    assert records == ()
    assert _only(response).error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_refused_with_unknown_partition_when_the_partition_does_not_exist() -> None:
    h, topic_id, part = _setup()
    response, records = _alter(h, topic_id, part.isr, partition=5)
    assert records == ()
    assert _only(response).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_refused_with_not_leader_when_a_follower_asks() -> None:
    """NOT_LEADER_OR_FOLLOWER (6): only the leader proposes ISR changes."""
    h, topic_id, part = _setup()
    follower = next(r for r in part.replicas if r != part.leader)
    response, records = _alter(h, topic_id, (follower,), broker_id=follower)
    assert records == ()
    result = _only(response)
    assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (result.leader_id, result.isr) == (part.leader, part.isr)


def test_refused_with_fenced_leader_epoch_when_leadership_moved_on() -> None:
    """FENCED_LEADER_EPOCH (74): a request from an older leader epoch."""
    h, topic_id, part = _setup()
    h.now_ms = TIMEOUT_MS  # the leader's session expires: leadership moves
    for broker_id in part.replicas:
        if broker_id != part.leader:
            h.heartbeat(broker_id)
    h.tick(TIMEOUT_MS)
    topic = h.controller.committed.topic(topic_id)
    assert topic is not None
    assert topic.partitions[0].leader_epoch == part.leader_epoch + 1
    response, records = _alter(h, topic_id, part.isr, broker_id=part.leader,
                               leader_epoch=part.leader_epoch)
    assert records == ()
    assert _only(response).error_code == ErrorCode.FENCED_LEADER_EPOCH


def test_refused_with_invalid_update_version_when_the_partition_epoch_is_stale() -> None:
    """INVALID_UPDATE_VERSION (95): the leader decided on state the controller has since
    changed (here: its own earlier, still pending, change)."""
    h, topic_id, part = _setup()
    follower = next(r for r in part.replicas if r != part.leader)
    _alter(h, topic_id, tuple(r for r in part.isr if r != follower), commit=False)
    response, records = _alter(h, topic_id, (part.leader,),
                               partition_epoch=part.partition_epoch)
    assert records == ()
    assert _only(response).error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert _only(response).partition_epoch == part.partition_epoch + 1


def test_refused_with_invalid_request_when_the_isr_names_a_non_replica() -> None:
    h, topic_id, part = _setup()
    h.start_broker(9)
    response, records = _alter(h, topic_id, (*part.isr, 9))
    assert records == ()
    assert _only(response).error_code == ErrorCode.INVALID_REQUEST


def test_refused_with_invalid_request_when_the_isr_leaves_out_the_leader() -> None:
    h, topic_id, part = _setup()
    response, records = _alter(h, topic_id, tuple(r for r in part.isr if r != part.leader))
    assert records == ()
    assert _only(response).error_code == ErrorCode.INVALID_REQUEST


def test_refused_with_invalid_request_when_the_isr_repeats_a_broker() -> None:
    h, topic_id, part = _setup()
    response, records = _alter(h, topic_id, (part.leader, part.leader))
    assert records == ()
    assert _only(response).error_code == ErrorCode.INVALID_REQUEST


def test_refused_with_ineligible_replica_when_adding_a_fenced_broker() -> None:
    """KIP-841 INELIGIBLE_REPLICA (107): a fenced broker may not join the ISR (fencing
    already took it out)."""
    h, topic_id, part = _setup()
    follower = next(r for r in part.replicas if r != part.leader)
    h.now_ms = TIMEOUT_MS
    for broker_id in part.replicas:
        if broker_id != follower:
            h.heartbeat(broker_id)
    h.tick(TIMEOUT_MS)
    assert h.controller.committed.brokers[follower].fenced
    topic = h.controller.committed.topic(topic_id)
    assert topic is not None
    assert follower not in topic.partitions[0].isr
    response, records = _alter(h, topic_id, part.isr)
    assert records == ()
    assert _only(response).error_code == ErrorCode.INELIGIBLE_REPLICA


def test_alter_partition_messages_round_trip_through_the_admin_codec() -> None:
    from metadata.admin import (
        AlterPartitionTopicResult,
        decode_request,
        decode_response,
        encode_body,
    )

    topic_id = Uuid.random()
    request = AlterPartitionRequest(broker_id=1, broker_epoch=4, topics=(AlterPartitionTopic(
        topic_id=topic_id, partitions=(AlterPartitionData(
            partition=0, leader_epoch=2, partition_epoch=3, new_isr=(1, 2)),)),))
    response = AlterPartitionResponse(topics=(AlterPartitionTopicResult(
        topic_id=topic_id, partitions=(AlterPartitionPartitionResult(
            partition=0, leader_id=1, leader_epoch=2, partition_epoch=4, isr=(1, 2)),)),))
    assert decode_request("AlterPartition", encode_body(request)) == request
    assert decode_response("AlterPartition", encode_body(response)) == response
