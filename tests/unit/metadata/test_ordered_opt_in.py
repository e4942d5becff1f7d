"""Ordered delivery is asked for, never assumed: the controller's creation rule (the
topic's own value, else the controllers' `enable.ordered.delivery`, recorded when on),
turning it on and off later, and the image reading logs written when it was the default."""

from __future__ import annotations

from typing import Any

import pytest

from metadata import records as rec
from metadata.admin import (
    OP_DELETE,
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
)
from metadata.controller import Controller
from metadata.delta import replay
from metadata.image import TopicImage
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from tests.support.controller_harness import Harness

TOPIC_RESOURCE = 2
ORDERED = "enable.ordered.delivery"


def create(h: Harness, value: str | None = None, name: str = "t") -> Any:
    configs = None if value is None else (CreatableTopicConfig(name=ORDERED, value=value),)
    decision = h.run(CreateTopicsRequest(topics=(CreatableTopic(
        name=name, num_partitions=2, replication_factor=1, configs=configs),)))
    return decision, decision.response.topics[0]  # type: ignore[union-attr]


def topic(h: Harness, name: str = "t") -> TopicImage:
    found = h.controller.committed.topic_by_name(name)
    assert found is not None
    return found


def alter(h: Harness, value: str | None, *, validate_only: bool = False) -> Any:
    """SET `value`, or DELETE the key when None."""
    config = AlterableConfig(name=ORDERED, value=value) if value is not None else \
        AlterableConfig(name=ORDERED, value=None, config_operation=OP_DELETE)
    decision = h.run(IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name="t", configs=(config,)),),
        validate_only=validate_only))
    return decision, decision.response.responses[0]  # type: ignore[union-attr]


def resize(h: Harness, count: int) -> Any:
    return h.run(CreatePartitionsRequest(topics=(CreatePartitionsTopic(
        name="t", count=count),))).response.results[0]  # type: ignore[union-attr]


# --- creation -----------------------------------------------------------------------------


@pytest.mark.parametrize(("cluster", "given", "recorded", "ordered"), [
    (False, None, None, False),      # Kafka's behaviour: nothing recorded, not ordered
    (True, None, "true", True),      # the controllers' key, recorded with the topic
    (False, "true", "true", True),   # asked for at creation
    (True, "false", "false", False),  # the topic's own value wins over the cluster's
    (False, "FALSE", "false", False),
])
def test_creation_takes_the_topics_value_else_the_cluster_default_and_records_it(
        cluster: bool, given: str | None, recorded: str | None, ordered: bool) -> None:
    h = Harness(ordered_delivery_default=cluster)
    decision, result = create(h, given)
    assert result.error_code == ErrorCode.NONE
    configs = [r for r in decision.records if isinstance(r, rec.TopicConfig)]
    assert [(c.key, c.value) for c in configs] == \
        ([] if recorded is None else [(ORDERED, recorded)])
    assert topic(h).ordered_delivery is ordered
    assert topic(h).config(ORDERED) == recorded
    # what the topic is comes from the log alone: a replay knows no cluster default
    assert replay(h.log).topic_by_name("t").ordered_delivery is ordered  # type: ignore[union-attr]


def test_a_validate_only_creation_answers_with_the_resolved_value() -> None:
    h = Harness(ordered_delivery_default=True)
    decision = h.run(CreateTopicsRequest(topics=(CreatableTopic(
        name="t", num_partitions=1, replication_factor=1),), validate_only=True))
    result = decision.response.topics[0]  # type: ignore[union-attr]
    assert (decision.records, result.configs) == (
        (), (CreatableTopicConfig(name=ORDERED, value="true"),))


def test_a_cluster_default_changed_later_leaves_existing_topics_as_they_are() -> None:
    h = Harness(ordered_delivery_default=True)
    create(h)
    h.controller = Controller(h.controller.committed, now_ms=h.now_ms)  # default: off
    create(h, name="u")
    assert (topic(h).ordered_delivery, topic(h, "u").ordered_delivery) == (True, False)


# --- IncrementalAlterConfigs --------------------------------------------------------------


def test_ordered_delivery_turned_on_then_off_on_a_topic_at_its_initial_count() -> None:
    h = Harness()
    create(h)
    _, result = alter(h, "TRUE")
    assert result.error_code == ErrorCode.NONE
    assert (topic(h).config(ORDERED), topic(h).ordered_delivery) == ("true", True)
    assert resize(h, 3).error_code == ErrorCode.NONE  # an ordered growth: maps and bumps
    assert topic(h).partitions[2].leader_epoch_after_creation == ((0, 0), (1, 0))
    assert [p.leader_epoch for p in topic(h).partitions[:2]] == [1, 1]
    _, result = alter(h, "false")
    assert result.error_code == ErrorCode.NONE
    assert not topic(h).ordered_delivery


@pytest.mark.parametrize("off", ["false", None])
def test_turning_off_while_partitions_are_marked_is_refused(off: str | None) -> None:
    h = Harness()
    create(h, "true")
    resize(h, 4)
    resize(h, 3)
    for validate_only in (True, False):
        decision, result = alter(h, off, validate_only=validate_only)
        assert result.error_code == ErrorCode.INVALID_CONFIG
        assert result.error_message == (
            "enable.ordered.delivery cannot be turned off while topic 't' has partitions "
            "marked for deletion (3); they are removed once empty")
        assert decision.records == ()
    assert topic(h).ordered_delivery


def test_turning_on_after_a_growth_without_it_is_refused() -> None:
    h = Harness()
    create(h)
    assert resize(h, 4).error_code == ErrorCode.NONE
    decision, result = alter(h, "true")
    assert result.error_code == ErrorCode.INVALID_CONFIG
    assert "cannot be turned on for topic 't': partitions 2, 3 were added without it" in \
        result.error_message
    assert decision.records == ()
    assert not topic(h).ordered_delivery


def test_setting_the_value_a_topic_has_changes_no_ordering() -> None:
    """An explicit false on an unordered grown topic is recorded; nothing is switched."""
    h = Harness()
    create(h)
    resize(h, 3)
    decision, result = alter(h, "false")
    assert result.error_code == ErrorCode.NONE
    assert decision.records == (rec.TopicConfig(topic_id=topic(h).topic_id, key=ORDERED,
                                                value="false"),)


# --- a log written when ordered delivery was the default ----------------------------------


def old_topic_records() -> list[rec.Record]:
    """What the controller wrote before the default changed, for a topic created without
    the key, grown 2 -> 4 and shrunk to 3 (ordered then): no TopicConfig at all."""
    t = Uuid(4242)
    return [
        rec.Topic(name="t", topic_id=t, initial_partition_count=2),
        rec.Partition(topic_id=t, partition=0, replicas=(1,), isr=(1,), leader=1),
        rec.Partition(topic_id=t, partition=1, replicas=(1,), isr=(1,), leader=1),
        rec.PartitionCount(topic_id=t, undeleted_partition_count=4),
        rec.PartitionChange(topic_id=t, partition=0, bump_leader_epoch=True),
        rec.PartitionChange(topic_id=t, partition=1, bump_leader_epoch=True),
        rec.Partition(topic_id=t, partition=2, replicas=(1,), isr=(1,), leader=1,
                      leader_epoch_after_creation=((0, 0), (1, 0))),
        rec.Partition(topic_id=t, partition=3, replicas=(1,), isr=(1,), leader=1,
                      leader_epoch_after_creation=((0, 0), (1, 0))),
        rec.PartitionCount(topic_id=t, undeleted_partition_count=3),
        rec.PartitionChange(topic_id=t, partition=3,
                            leader_epoch_before_deletion=((0, 1), (1, 1), (2, 0))),
        *(rec.PartitionChange(topic_id=t, partition=p, bump_leader_epoch=True)
          for p in range(3)),
    ]


def with_old_topic(h: Harness) -> Harness:
    h.log += enumerate(old_topic_records(), start=len(h.log))
    h.commit()
    return h


def test_an_old_log_replays_without_anomaly_and_its_default_topic_reads_unordered() -> None:
    h = with_old_topic(Harness(brokers=1))
    image = replay(h.log)
    assert image.anomaly_count == 0
    assert image.content_hash() == h.controller.committed.content_hash()
    t = image.topic_by_name("t")
    assert t is not None
    assert (t.configs, t.ordered_delivery) == ((), False)
    assert (t.undeleted_count, t.marked_partitions) == (3, (3,))
    assert [p.leader_epoch for p in t.partitions] == [2, 2, 1, 0]


def test_an_old_topic_keeps_its_marks_removed_and_can_be_ordered_again() -> None:
    """Read unordered, it shrinks no more, its marked partition still goes once empty,
    and (its added partitions have their maps) ordered delivery may be turned on again."""
    h = with_old_topic(Harness(brokers=1))
    assert resize(h, 2).error_code == ErrorCode.INVALID_PARTITIONS
    t = topic(h)
    decision = h.run(BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=h.epochs[1], current_metadata_offset=len(h.log) - 1,
        empty_marked_partitions=(EmptyPartition(
            topic_id=t.topic_id, partition=3, leader_epoch=t.partitions[3].leader_epoch,
            log_start_offset=5, log_end_offset=5),)))
    assert [type(r) for r in decision.records] == [rec.RemovePartition]
    assert topic(h).marked_partitions == ()
    _, result = alter(h, "true")
    assert result.error_code == ErrorCode.NONE
    assert topic(h).ordered_delivery
