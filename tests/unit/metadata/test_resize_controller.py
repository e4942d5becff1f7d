"""KIP-253 resizes in the controller: growth bumps epochs and gives new partitions the
epochs before; a shrink marks partitions; heartbeats reporting empty marked partitions
remove them from the end. One rule per test, each refusal with its Kafka code."""

from __future__ import annotations

from typing import Any

import pytest

from metadata import records as rec
from metadata.admin import (
    AlterableConfig,
    AlterConfigsResource,
    BrokerHeartbeatRequest,
    CreatableTopic,
    CreatableTopicConfig,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    EmptyPartition,
    IncrementalAlterConfigsRequest,
    decode_response,
    encode_body,
)
from metadata.controller import Controller
from metadata.delta import replay
from metadata.image import TopicImage
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from tests.support.controller_harness import Harness

TOPIC_RESOURCE = 2


def resize(h: Harness, count: int, name: str = "t", **kwargs: Any) -> Any:
    decision = h.run(CreatePartitionsRequest(
        topics=(CreatePartitionsTopic(name=name, count=count, **kwargs),)))
    return decision, decision.response.results[0]  # type: ignore[union-attr]


def topic(h: Harness, name: str = "t") -> TopicImage:
    found = h.controller.committed.topic_by_name(name)
    assert found is not None
    return found


def set_config(h: Harness, key: str, value: str, name: str = "t") -> Any:
    return h.run(IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=name,
        configs=(AlterableConfig(name=key, value=value),)),),)).response.responses[0]  # type: ignore[union-attr]


def report_empty(h: Harness, broker_id: int, *reports: EmptyPartition) -> Any:
    return h.run(BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=h.epochs[broker_id],
        current_metadata_offset=len(h.log) - 1, empty_marked_partitions=reports))


def empty(t: TopicImage, partition: int, **overrides: int) -> tuple[int, EmptyPartition]:
    """(the leader, its report that `partition` is empty now)."""
    p = t.partitions[partition]
    fields = {"leader_epoch": p.leader_epoch, "log_start_offset": 7, "log_end_offset": 7,
              **overrides}
    return p.leader, EmptyPartition(topic_id=t.topic_id, partition=partition, **fields)


# --- growth -------------------------------------------------------------------------------


def test_growth_is_one_batch_of_count_bumps_and_new_partitions_with_prior_epochs() -> None:
    h = Harness()
    h.create("t", partitions=2, ordered=True)
    before = topic(h)
    decision, result = resize(h, 4)
    assert result.error_code == ErrorCode.NONE
    kinds = [type(r).__name__ for r in decision.records]
    assert kinds == ["PartitionCount", "PartitionChange", "PartitionChange", "Partition",
                     "Partition"]
    assert decision.records[0] == rec.PartitionCount(topic_id=before.topic_id,
                                                     undeleted_partition_count=4)
    prior = tuple((p.partition, p.leader_epoch) for p in before.partitions)
    after = topic(h)
    assert after.undeleted_partition_count == after.undeleted_count == 4
    assert [p.leader_epoch for p in after.partitions[:2]] == [e + 1 for _, e in prior]
    assert [p.leader_epoch_after_creation for p in after.partitions[2:]] == [prior, prior]
    assert after.partitions[0].leader_epoch_after_creation is None
    assert after.marked_partitions == ()


def test_growth_of_a_topic_without_initial_count_records_it() -> None:
    """A topic created before the count was recorded: its partitions then are initial."""
    h = Harness()
    topic_id = Uuid(77)
    h.log += [(len(h.log), rec.Topic(name="old", topic_id=topic_id)),
              (len(h.log) + 1, rec.Partition(topic_id=topic_id, partition=0, replicas=(1,),
                                             isr=(1,), leader=1)),
              (len(h.log) + 2, rec.Partition(topic_id=topic_id, partition=1, replicas=(2,),
                                             isr=(2,), leader=2))]
    h.commit()
    decision, result = resize(h, 3, name="old")
    assert result.error_code == ErrorCode.NONE
    assert decision.records[0] == rec.PartitionCount(
        topic_id=topic_id, undeleted_partition_count=3, initial_partition_count=2)
    assert topic(h, "old").initial_partition_count == 2


def test_growth_of_a_default_topic_writes_no_epoch_maps_nor_bumps_as_kafka() -> None:
    h = Harness()
    h.create("t", partitions=2)
    assert not topic(h).ordered_delivery
    decision, result = resize(h, 3)
    assert result.error_code == ErrorCode.NONE
    assert [type(r).__name__ for r in decision.records] == ["PartitionCount", "Partition"]
    assert decision.records[1].leader_epoch_after_creation is None
    assert [p.leader_epoch for p in topic(h).partitions] == [0, 0, 0]
    assert topic(h).undeleted_count == 3


def test_growth_fails_with_invalid_partitions_while_partitions_are_marked() -> None:
    h = Harness()
    h.create("t", partitions=2, ordered=True)
    resize(h, 4)
    resize(h, 3)
    decision, result = resize(h, 5)
    assert result.error_code == ErrorCode.INVALID_PARTITIONS
    assert "partitions marked for deletion (3)" in result.error_message
    assert "must be removed before the topic can grow" in result.error_message
    assert decision.records == ()


def test_growth_keeps_the_existing_limits() -> None:
    """Replication factor and the per-request limit still apply to growth."""
    h = Harness(brokers=2, max_partitions_per_request=3)
    h.create("t", partitions=1, factor=2)
    assert resize(h, 5)[1].error_code == ErrorCode.INVALID_PARTITIONS
    h.tick(100_000)  # every broker's session expired: all fenced
    assert resize(h, 2)[1].error_code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_same_count_fails_with_invalid_partitions() -> None:
    h = Harness()
    h.create("t", partitions=2)
    decision, result = resize(h, 2)
    assert result.error_code == ErrorCode.INVALID_PARTITIONS
    assert decision.records == ()


def test_validate_only_writes_nothing_for_growth_or_shrink() -> None:
    h = Harness()
    h.create("t", partitions=1, ordered=True)
    resize(h, 3)
    for count in (2, 5):
        decision = h.run(CreatePartitionsRequest(
            topics=(CreatePartitionsTopic(name="t", count=count),), validate_only=True))
        assert decision.response.results[0].error_code == 0  # type: ignore[union-attr]
        assert decision.records == ()


# --- shrink -------------------------------------------------------------------------------


def test_shrink_marks_partitions_with_the_staying_epochs_and_bumps_them() -> None:
    h = Harness()
    h.create("t", partitions=2, ordered=True)
    resize(h, 5)
    before = topic(h)
    decision, result = resize(h, 3)
    assert (result.error_code, result.assignment) == (ErrorCode.NONE, ())
    prior = tuple((p.partition, p.leader_epoch) for p in before.partitions[:3])
    assert decision.records[0] == rec.PartitionCount(topic_id=before.topic_id,
                                                     undeleted_partition_count=3)
    marks = [r for r in decision.records if isinstance(r, rec.PartitionChange)
             and r.leader_epoch_before_deletion is not None]
    assert [(m.partition, m.leader_epoch_before_deletion) for m in marks] == [
        (3, prior), (4, prior)]
    after = topic(h)
    assert after.marked_partitions == (3, 4)
    assert len(after.partitions) == 5  # still listed until removed
    assert [p.leader_epoch for p in after.partitions[:3]] == [e + 1 for _, e in prior]
    assert [p.leader_epoch for p in after.partitions[3:]] == [  # the marked ones too
        p.leader_epoch + 1 for p in before.partitions[3:]]


def test_a_second_shrink_marks_only_the_unmarked_partitions() -> None:
    h = Harness()
    h.create("t", partitions=1, ordered=True)
    resize(h, 4)
    resize(h, 3)
    first_mark = topic(h).partitions[3].leader_epoch_before_deletion
    decision, result = resize(h, 2)
    assert result.error_code == ErrorCode.NONE
    marked = [r.partition for r in decision.records if isinstance(r, rec.PartitionChange)
              and r.leader_epoch_before_deletion is not None]
    assert marked == [2]
    assert topic(h).partitions[3].leader_epoch_before_deletion == first_mark
    assert topic(h).marked_partitions == (2, 3)


def test_shrink_below_the_initial_count_fails_with_invalid_partitions() -> None:
    h = Harness()
    h.create("t", partitions=2, ordered=True)
    resize(h, 4)
    decision, result = resize(h, 1)
    assert result.error_code == ErrorCode.INVALID_PARTITIONS
    assert "cannot shrink below the initial partition count 2" in result.error_message
    assert decision.records == ()


def test_shrink_without_ordered_delivery_fails_as_in_kafka() -> None:
    h = Harness()
    h.create("t", partitions=1)
    resize(h, 3)
    decision, result = resize(h, 2)
    assert result.error_code == ErrorCode.INVALID_PARTITIONS
    assert "can only grow" in result.error_message
    assert decision.records == ()


def test_shrink_with_assignments_fails_with_invalid_replica_assignment() -> None:
    h = Harness()
    h.create("t", partitions=1, ordered=True)
    resize(h, 3)
    assert resize(h, 2, assignments=((1,),))[1].error_code == \
        ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_shrink_needs_no_brokers() -> None:
    h = Harness()
    h.create("t", partitions=1, ordered=True)
    resize(h, 3)
    h.tick(100_000)
    assert h.controller.committed.unfenced_broker_ids() == ()
    assert resize(h, 2)[1].error_code == ErrorCode.NONE


# --- removal by heartbeat -----------------------------------------------------------------


def shrunk(count: int = 4, to: int = 2) -> Harness:
    h = Harness()
    h.create("t", partitions=1, ordered=True)
    resize(h, count)
    resize(h, to)
    return h


def test_an_empty_last_marked_partition_reported_by_its_leader_is_removed() -> None:
    h = shrunk()
    leader, report = empty(topic(h), 3)
    decision = report_empty(h, leader, report)
    assert decision.records == (rec.RemovePartition(
        topic_id=report.topic_id, partition=3, leader_epoch=report.leader_epoch,
        log_start_offset=7, log_end_offset=7),)
    assert [p.partition for p in topic(h).partitions] == [0, 1, 2]
    assert topic(h).undeleted_count == 2


def test_reports_from_the_top_down_remove_several_in_one_heartbeat() -> None:
    h = Harness(brokers=1)
    h.create("t", partitions=1, ordered=True)
    resize(h, 4)
    resize(h, 1)
    t = topic(h)
    reports = [empty(t, p)[1] for p in (1, 2, 3)]  # lowest first: sorted by the controller
    decision = report_empty(h, 1, *reports)
    assert [r.partition for r in decision.records] == [3, 2, 1]
    assert len(topic(h).partitions) == 1
    assert topic(h).marked_partitions == ()


@pytest.mark.parametrize("stale", ["not_last", "other_epoch", "not_empty", "not_leader",
                                   "not_marked", "unknown_topic"])
def test_stale_reports_are_ignored(stale: str) -> None:
    h = shrunk()
    t = topic(h)
    leader, report = empty(t, 3)
    if stale == "not_last":
        leader, report = empty(t, 2)
    elif stale == "other_epoch":
        leader, report = empty(t, 3, leader_epoch=t.partitions[3].leader_epoch + 1)
    elif stale == "not_empty":
        leader, report = empty(t, 3, log_end_offset=8)
    elif stale == "not_leader":
        leader = next(b for b in h.epochs if b != leader)
    elif stale == "not_marked":
        h.create("u", partitions=2)
        leader, report = empty(topic(h, "u"), 1)
    else:
        report = EmptyPartition(topic_id=Uuid(999), partition=3, leader_epoch=0,
                                log_start_offset=0, log_end_offset=0)
    decision = report_empty(h, leader, report)
    assert decision.response.error_code == 0
    assert not any(isinstance(r, rec.RemovePartition) for r in decision.records)
    assert len(topic(h).partitions) == 4


def test_growth_is_allowed_again_once_marked_partitions_are_removed() -> None:
    h = shrunk(count=3, to=2)
    leader, report = empty(topic(h), 2)
    report_empty(h, leader, report)
    before = topic(h)
    _, result = resize(h, 3)
    assert result.error_code == ErrorCode.NONE
    assert topic(h).partitions[2].leader_epoch_after_creation == tuple(
        (p.partition, p.leader_epoch) for p in before.partitions)


def test_a_new_controller_from_the_committed_image_continues_removing() -> None:
    """Failover: each step is one committed batch and removal is driven by heartbeats,
    so a controller built from the committed image alone picks up where it was."""
    h = shrunk(count=4, to=1)
    leader, report = empty(topic(h), 3)
    report_empty(h, leader, report)
    committed = replay(h.log)  # what a new leader's image is made of: the log
    assert committed.content_hash() == h.controller.committed.content_hash()
    h.controller = Controller(committed, now_ms=h.now_ms)
    t = topic(h)
    assert t.marked_partitions == (1, 2)
    for partition in (2, 1):
        leader, report = empty(topic(h), partition)
        decision = report_empty(h, leader, report)
        assert [type(r) for r in decision.records] == [rec.RemovePartition]
    assert len(topic(h).partitions) == 1
    assert resize(h, 2)[1].error_code == ErrorCode.NONE


# --- describe and configs -----------------------------------------------------------------


def test_describe_shows_counts_and_epoch_maps_and_they_survive_the_wire() -> None:
    h = shrunk(count=3, to=2)
    response = h.describe(names=("t",))
    (described,) = response.topics  # type: ignore[attr-defined]
    t = topic(h)
    assert (described.initial_partition_count, described.undeleted_partition_count) == (1, 2)
    assert [p.leader_epoch_after_creation for p in described.partitions] == [
        p.leader_epoch_after_creation for p in t.partitions]
    assert described.partitions[2].leader_epoch_before_deletion == \
        t.partitions[2].leader_epoch_before_deletion is not None
    assert decode_response("DescribeTopics", encode_body(response)) == response


def create_with(h: Harness, name: str, **configs: str) -> Any:
    return h.run(CreateTopicsRequest(topics=(CreatableTopic(
        name=name, num_partitions=1, replication_factor=1,
        configs=tuple(CreatableTopicConfig(name=k.replace("_", "."), value=v)
                      for k, v in configs.items())),),)).response.topics[0]  # type: ignore[union-attr]


def test_compaction_alone_creates_a_compacted_topic_without_ordered_delivery() -> None:
    h = Harness()
    assert create_with(h, "c", cleanup_policy="compact").error_code == ErrorCode.NONE
    assert topic(h, "c").configs == (("cleanup.policy", "compact"),)
    assert not topic(h, "c").ordered_delivery


def test_ordered_delivery_goes_with_compaction_at_creation_and_alteration() -> None:
    """Compacted ordered topics are served: the producer leaves split tombstones
    (broker/kafka/ordered/split_tombstones.py), so the controller refuses neither way."""
    h = Harness()
    result = create_with(h, "c", cleanup_policy="compact", enable_ordered_delivery="true")
    assert result.error_code == ErrorCode.NONE
    assert topic(h, "c").ordered_delivery
    h.create("t", ordered=True)
    assert set_config(h, "cleanup.policy", "compact").error_code == ErrorCode.NONE
    create_with(h, "k", cleanup_policy="compact")
    assert set_config(h, "enable.ordered.delivery", "true", name="k").error_code == \
        ErrorCode.NONE
    assert topic(h, "k").ordered_delivery
    assert set_config(h, "enable.ordered.delivery", "maybe").error_code == \
        ErrorCode.INVALID_CONFIG


def test_the_cluster_default_orders_a_compacted_topic_unless_it_says_otherwise() -> None:
    h = Harness(ordered_delivery_default=True)
    assert create_with(h, "c", cleanup_policy="compact").error_code == ErrorCode.NONE
    assert topic(h, "c").ordered_delivery
    assert create_with(h, "d", cleanup_policy="compact",
                       enable_ordered_delivery="false").error_code == ErrorCode.NONE
    assert not topic(h, "d").ordered_delivery
