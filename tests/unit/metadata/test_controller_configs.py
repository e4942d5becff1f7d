"""The controller's topic-config and manual-assignment decisions: CreateTopics with configs
and assignments, CreatePartitions with assignments, IncrementalAlterConfigs; each error
with Kafka's code."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata import records as rec
from metadata.admin import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    TOPIC_RESOURCE,
    AlterableConfig,
    AlterConfigsResource,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    IncrementalAlterConfigsRequest,
    RenameTopicRequest,
)
from metadata.controller import describe_topic
from raft.common.errors import ErrorCode
from tests.support.controller_harness import TIMEOUT_MS, Harness


def create(h: Harness, name: str = "t", *, configs: dict[str, str | None] | None = None,
           assignments: list[tuple[int, ...]] | None = None, partitions: int = -1,
           factor: int = -1, validate_only: bool = False) -> Any:
    topic = CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=factor,
        configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()),
        assignments=tuple(CreatableReplicaAssignment(partition_index=i, broker_ids=r)
                          for i, r in enumerate(assignments or [])) or None)
    return h.run(CreateTopicsRequest(topics=(topic,), validate_only=validate_only)
                 ).response.topics[0]  # type: ignore[union-attr]


def alter(h: Harness, name: str, *ops: tuple[str, int, str | None],
          validate_only: bool = False, resource_type: int = TOPIC_RESOURCE) -> Any:
    return h.run(IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=tuple(AlterableConfig(name=k, config_operation=op, value=v)
                      for k, op, v in ops)),), validate_only=validate_only)
                 ).response.responses[0]  # type: ignore[union-attr]


def configs_of(h: Harness, name: str = "t") -> tuple[tuple[str, str], ...]:
    topic = h.controller.committed.topic_by_name(name)
    assert topic is not None
    return topic.configs


# --- CreateTopics: configs -----------------------------------------------------------


def test_configs_are_written_in_the_topics_batch_when_created() -> None:
    h = Harness()
    before = len(h.log)
    result = create(h, configs={"retention.ms": "1000", "min.insync.replicas": "02"})
    assert result.error_code == ErrorCode.NONE
    kinds = [type(r).__name__ for _, r in h.log[before:]]
    assert kinds == ["Topic", "Partition", "TopicConfig", "TopicConfig"]
    assert configs_of(h) == (("min.insync.replicas", "2"), ("retention.ms", "1000"))
    assert {(c.name, c.value) for c in result.configs or ()} == set(configs_of(h))


@pytest.mark.parametrize(("configs", "words"), [
    ({"no.such.key": "1"}, "unknown topic config"),
    ({"cleanup.policy": "purge"}, "configuration cleanup.policy"),
    ({"min.cleanable.dirty.ratio": "1.01"}, "configuration min.cleanable.dirty.ratio"),
    ({"min.compaction.lag.ms": "-1"}, "configuration min.compaction.lag.ms"),
    ({"max.compaction.lag.ms": "-1"}, "configuration max.compaction.lag.ms"),
    ({"min.insync.replicas": "0"}, "between 1"),
    ({"segment.bytes": None}, "no value"),
])
def test_create_fails_with_invalid_config_and_no_records_when_a_config_is_bad(
        configs: dict[str, str | None], words: str) -> None:
    h = Harness()
    before = len(h.log)
    result = create(h, configs=configs)
    assert result.error_code == ErrorCode.INVALID_CONFIG
    assert words in result.error_message
    assert len(h.log) == before


def test_a_compacted_topic_is_created_with_canonical_configs_and_altered_by_key() -> None:
    h = Harness()
    result = create(h, configs={"cleanup.policy": "delete,compact",
                                "enable.ordered.delivery": "false",
                                "min.cleanable.dirty.ratio": ".1"})
    assert result.error_code == ErrorCode.NONE
    assert configs_of(h) == (("cleanup.policy", "compact,delete"),
                             ("enable.ordered.delivery", "false"),
                             ("min.cleanable.dirty.ratio", "0.1"))
    refused = alter(h, "t", ("delete.retention.ms", OP_SET, "-1"))
    assert refused.error_code == ErrorCode.INVALID_CONFIG
    assert "configuration delete.retention.ms" in refused.error_message
    assert alter(h, "t", ("delete.retention.ms", OP_SET, "0")).error_code == ErrorCode.NONE


def test_validate_only_writes_nothing_when_configs_are_valid() -> None:
    h = Harness()
    before = len(h.log)
    result = create(h, configs={"retention.ms": "5"}, validate_only=True)
    assert result.error_code == ErrorCode.NONE
    assert len(h.log) == before


# --- CreateTopics: manual assignments ------------------------------------------------


def test_manual_assignment_is_honoured_when_valid() -> None:
    h = Harness(brokers=3)
    result = create(h, assignments=[(3, 1), (2, 3), (1, 2)])
    assert result.error_code == ErrorCode.NONE
    assert (result.num_partitions, result.replication_factor) == (3, 2)
    topic = h.controller.committed.topic_by_name("t")
    assert topic is not None
    assert [p.replicas for p in topic.partitions] == [(3, 1), (2, 3), (1, 2)]
    assert [p.leader for p in topic.partitions] == [3, 2, 1]


def test_fenced_replicas_are_left_out_of_the_isr_when_assigned() -> None:
    h = Harness(brokers=3)
    h.now_ms = 5000
    h.heartbeat(1), h.heartbeat(3)
    h.tick(TIMEOUT_MS)  # broker 2 fenced
    result = create(h, assignments=[(2, 1, 3)])
    assert result.error_code == ErrorCode.NONE
    topic = h.controller.committed.topic_by_name("t")
    assert topic is not None
    assert topic.partitions[0].isr == (1, 3)
    assert topic.partitions[0].leader == 1
    assert create(h, "u", assignments=[(2,)]).error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


@pytest.mark.parametrize(("assignments", "words"), [
    ([(1, 9)], "no such broker"),
    ([(1, 1)], "twice"),
    ([(1, 2), (3,)], "other partitions"),
    ([()], "empty"),
])
def test_create_fails_with_invalid_replica_assignment_when_the_assignment_is_bad(
        assignments: list[tuple[int, ...]], words: str) -> None:
    h = Harness()
    before = len(h.log)
    result = create(h, assignments=assignments)
    assert result.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert words in result.error_message
    assert len(h.log) == before


def test_partition_indexes_must_be_contiguous_when_assigned() -> None:
    h = Harness()
    topic = CreatableTopic(name="t", assignments=(
        CreatableReplicaAssignment(partition_index=0, broker_ids=(1,)),
        CreatableReplicaAssignment(partition_index=2, broker_ids=(2,))))
    result: Any = h.run(CreateTopicsRequest(topics=(topic,))).response
    result = result.topics[0]
    assert result.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


@pytest.mark.parametrize(("partitions", "factor"), [(3, -1), (-1, 2), (1, 1)])
def test_create_fails_with_invalid_request_when_counts_and_assignments_are_both_given(
        partitions: int, factor: int) -> None:
    result = create(Harness(), assignments=[(1,)], partitions=partitions, factor=factor)
    assert result.error_code == ErrorCode.INVALID_REQUEST


# --- CreatePartitions: manual assignments --------------------------------------------


def grow(h: Harness, count: int, assignments: list[tuple[int, ...]] | None) -> Any:
    return h.run(CreatePartitionsRequest(topics=(CreatePartitionsTopic(
        name="t", count=count,
        assignments=None if assignments is None else tuple(assignments)),))
    ).response.results[0]  # type: ignore[union-attr]


def test_new_partitions_follow_their_assignment_when_given() -> None:
    h = Harness()
    create(h, assignments=[(1, 2)])
    result = grow(h, 3, [(3, 1), (2, 3)])
    assert result.error_code == ErrorCode.NONE
    topic = h.controller.committed.topic_by_name("t")
    assert topic is not None
    assert [p.replicas for p in topic.partitions] == [(1, 2), (3, 1), (2, 3)]


@pytest.mark.parametrize(("assignments", "words"), [
    ([(3, 1)], "but 1 assignments"),
    ([(3,), (1,)], "other partitions"),
    ([(3, 9), (1, 2)], "no such broker"),
])
def test_grow_fails_with_invalid_replica_assignment_when_the_assignment_is_bad(
        assignments: list[tuple[int, ...]], words: str) -> None:
    h = Harness()
    create(h, assignments=[(1, 2)])
    result = grow(h, 3, assignments)
    assert result.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert words in result.error_message


# --- IncrementalAlterConfigs ---------------------------------------------------------


def test_set_and_delete_change_the_configs_when_altered() -> None:
    h = Harness()
    create(h, configs={"retention.ms": "5"})
    result = alter(h, "t", ("retention.ms", OP_DELETE, None),
                   ("min.insync.replicas", OP_SET, "2"))
    assert result.error_code == ErrorCode.NONE
    assert configs_of(h) == (("min.insync.replicas", "2"),)


def replace(h: Harness, name: str, configs: dict[str, str | None],
            validate_only: bool = False) -> Any:
    """Kafka's legacy AlterConfigs: `configs` is the topic's whole new set."""
    return h.run(IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=name,
        configs=tuple(AlterableConfig(name=k, value=v) for k, v in configs.items())),),
        validate_only=validate_only, replace=True)).response.responses[0]  # type: ignore[union-attr]


def test_legacy_alter_replaces_the_whole_set_when_keys_are_left_out() -> None:
    """AlterConfigs (API 33): named keys set, a null value and every key left out unset,
    in one batch."""
    h = Harness()
    create(h, configs={"retention.ms": "5", "segment.bytes": "1048576",
                       "min.insync.replicas": "2"})
    result = replace(h, "t", {"max.message.bytes": "2000", "min.insync.replicas": None})
    assert result.error_code == ErrorCode.NONE
    assert configs_of(h) == (("max.message.bytes", "2000"),)


@pytest.mark.parametrize("validate_only", [False, True])
def test_legacy_alter_changes_nothing_when_refused_or_only_validated(
        validate_only: bool) -> None:
    h = Harness()
    create(h, configs={"retention.ms": "5"})
    before = len(h.log)
    bad = replace(h, "t", {"min.insync.replicas": "0"})
    assert bad.error_code == ErrorCode.INVALID_CONFIG
    assert replace(h, "t", {}, validate_only=True).error_code == ErrorCode.NONE
    assert len(h.log) == before
    assert configs_of(h) == (("retention.ms", "5"),)


def test_configs_follow_a_renamed_topic_when_altered_and_renamed() -> None:
    h = Harness()
    topic_id = create(h).topic_id
    alter(h, "t", ("retention.ms", OP_SET, "7"))
    h.run(RenameTopicRequest(topic_id=topic_id, new_name="u"))
    assert configs_of(h, "u") == (("retention.ms", "7"),)


def test_alter_writes_nothing_when_nothing_changes() -> None:
    h = Harness()
    create(h, configs={"retention.ms": "5"})
    before = len(h.log)
    assert alter(h, "t", ("retention.ms", OP_SET, "5"),
                 ("segment.bytes", OP_DELETE, None)).error_code == ErrorCode.NONE
    assert len(h.log) == before


@pytest.mark.parametrize(("ops", "code"), [
    ([("no.such", OP_SET, "1")], ErrorCode.INVALID_CONFIG),
    ([("no.such", OP_DELETE, None)], ErrorCode.INVALID_CONFIG),
    ([("cleanup.policy", OP_SET, "compact,purge")], ErrorCode.INVALID_CONFIG),
    ([("min.cleanable.dirty.ratio", OP_SET, "-1")], ErrorCode.INVALID_CONFIG),
    ([("min.compaction.lag.ms", OP_SET, "-5")], ErrorCode.INVALID_CONFIG),
    ([("max.compaction.lag.ms", OP_SET, "-5")], ErrorCode.INVALID_CONFIG),
    ([("retention.ms", OP_APPEND, "1")], ErrorCode.INVALID_CONFIG),  # no list
    ([("no.such", OP_SUBTRACT, "1")], ErrorCode.INVALID_CONFIG),
    ([("cleanup.policy", OP_APPEND, "purge")], ErrorCode.INVALID_CONFIG),
    ([("cleanup.policy", OP_SUBTRACT, "delete")], ErrorCode.INVALID_CONFIG),  # empty
    ([("retention.ms", 9, "1")], ErrorCode.INVALID_REQUEST),
    ([("retention.ms", OP_SET, "1"), ("retention.ms", OP_SET, "2")], ErrorCode.INVALID_REQUEST),
    # all or nothing: the good SET is not written either
    ([("retention.ms", OP_SET, "1"), ("min.insync.replicas", OP_SET, "0")],
     ErrorCode.INVALID_CONFIG),
])
def test_alter_is_refused_whole_when_one_config_is_bad(
        ops: list[tuple[str, int, str | None]], code: ErrorCode) -> None:
    h = Harness()
    create(h)
    before = len(h.log)
    assert alter(h, "t", *ops).error_code == code
    assert len(h.log) == before
    assert configs_of(h) == ()


def test_append_and_subtract_change_a_list_config_from_its_value_or_default() -> None:
    """Kafka's APPEND adds the items a list config lacks (to its default when unset: how
    librdkafka's 0011_produce_batch makes a topic compacted), SUBTRACT removes items."""
    h = Harness()
    create(h)
    assert alter(h, "t", ("cleanup.policy", OP_APPEND, "compact")).error_code == 0
    assert configs_of(h) == (("cleanup.policy", "compact,delete"),)
    before = len(h.log)
    assert alter(h, "t", ("cleanup.policy", OP_APPEND, "delete,compact")).error_code == 0
    assert len(h.log) == before  # both there already: nothing written
    assert alter(h, "t", ("cleanup.policy", OP_SUBTRACT, "delete")).error_code == 0
    assert configs_of(h) == (("cleanup.policy", "compact"),)


def test_alter_fails_with_unknown_topic_when_the_name_is_not_live() -> None:
    result = alter(Harness(), "nope", ("retention.ms", OP_SET, "1"))
    assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_validate_only_writes_nothing_when_altered() -> None:
    h = Harness()
    create(h)
    before = len(h.log)
    assert alter(h, "t", ("retention.ms", OP_SET, "1"), validate_only=True).error_code == 0
    assert len(h.log) == before


def test_describe_carries_the_configs_set() -> None:
    h = Harness()
    create(h, configs={"retention.ms": "5"})
    topic = h.controller.committed.topic_by_name("t")
    assert topic is not None
    assert [(c.name, c.value) for c in describe_topic(topic).configs or ()] == [
        ("retention.ms", "5")]


_OPS = st.tuples(st.sampled_from(["retention.ms", "min.insync.replicas", "bogus"]),
                 st.sampled_from([OP_SET, OP_DELETE]),
                 st.sampled_from(["1", "0", "-1", "x"]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_OPS, max_size=3), max_size=6))
def test_configs_match_a_model_when_alters_are_random(batches: list[list[Any]]) -> None:
    """Every alter is all or nothing, and the image holds what a dict model says."""
    h = Harness(brokers=1)
    create(h)
    model: dict[str, str] = {}
    for ops in batches:
        keys = [k for k, _, _ in ops]
        result = alter(h, "t", *[(k, op, v if op == OP_SET else None) for k, op, v in ops])
        valid = len(set(keys)) == len(keys) and all(
            k != "bogus" and (op == OP_DELETE or v == "1" or (v in ("0", "-1")
                                                              and k == "retention.ms"))
            for k, op, v in ops)
        assert (result.error_code == ErrorCode.NONE) == valid, (ops, result)
        if valid:
            for k, op, v in ops:
                if op == OP_SET:
                    model[k] = v
                else:
                    model.pop(k, None)
        assert dict(configs_of(h)) == model
    assert all(isinstance(r, rec.Record) for _, r in h.log)
