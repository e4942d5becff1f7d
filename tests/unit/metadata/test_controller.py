"""The controller's topic decisions, one rule per test, each error with its exact Kafka code."""

from __future__ import annotations

import random

import pytest

from metadata import records as rec
from metadata.admin import (
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DeleteTopicState,
    RenameTopicRequest,
)
from raft.common.errors import ErrorCode
from raft.common.uuid import METADATA_TOPIC_ID, ZERO_UUID, Uuid
from tests.support.controller_harness import TIMEOUT_MS, Harness

# --- CreateTopics -----------------------------------------------------------------------


def test_create_replies_with_id_partitions_factor_and_assignment_when_valid() -> None:
    """KIP-516: the CreateTopics reply carries the new topic's ID (and the assignment)."""
    h = Harness()
    result = h.create("orders", partitions=3, factor=2)
    assert result.error_code == ErrorCode.NONE
    assert result.num_partitions == 3
    assert result.replication_factor == 2
    assert len(result.assignment) == 3
    assert all(len(set(r)) == 2 for r in result.assignment)
    topic = h.controller.committed.topic_by_name("orders")
    assert topic is not None
    assert topic.topic_id == result.topic_id
    assert tuple(p.replicas for p in topic.partitions) == result.assignment
    assert all(p.leader == p.replicas[0] and p.isr == p.replicas for p in topic.partitions)


def test_replicas_are_placed_round_robin_when_brokers_are_unfenced() -> None:
    """Round-robin over the sorted unfenced brokers: consecutive partitions shift by one."""
    h = Harness(brokers=4)
    assignment = h.create("t", partitions=8, factor=3).assignment
    firsts = [r[0] for r in assignment]
    assert [(b - firsts[0]) % 4 for b in firsts] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert all(r == tuple(((r[0] - 1 + j) % 4) + 1 for j in range(3)) for r in assignment)


def test_fenced_brokers_get_no_replicas_when_a_topic_is_created() -> None:
    """Replicas are placed over unfenced brokers only."""
    h = Harness(brokers=3)
    h.now_ms = 5000
    h.heartbeat(1), h.heartbeat(3)
    h.tick(TIMEOUT_MS)  # broker 2 last heartbeated at 0
    assert h.controller.committed.unfenced_broker_ids() == (1, 3)
    assignment = h.create("t", partitions=4, factor=2).assignment
    assert {b for r in assignment for b in r} == {1, 3}


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "has space", "slash/", "ümlaut",
                                  "__cluster_metadata"])
def test_create_fails_with_invalid_topic_exception_when_the_name_is_illegal(name: str) -> None:
    """Kafka's name rules: 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'."""
    h = Harness()
    result = h.create(name)
    assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION == 17
    assert h.log[-1][1].TYPE != rec.RecordType.TOPIC


@pytest.mark.parametrize("name", ["a" * 249, "a", "A.b_c-9", "...", "-x"])
def test_create_succeeds_when_the_name_is_at_the_edge_of_legal(name: str) -> None:
    """249 characters and any mix of the legal ones are fine."""
    assert Harness().create(name).error_code == ErrorCode.NONE


def test_create_fails_with_topic_already_exists_when_the_name_is_live() -> None:
    """CreateTopics: TOPIC_ALREADY_EXISTS (36); no records."""
    h = Harness()
    h.create("orders")
    before = len(h.log)
    assert h.create("orders").error_code == ErrorCode.TOPIC_ALREADY_EXISTS == 36
    assert len(h.log) == before


def test_second_create_conflicts_when_the_first_is_still_in_flight() -> None:
    """The controller decides against committed + pending: two creates of one name in flight
    cannot both win, and the loser's reply waits for the pending write."""
    h = Harness()
    first = h.run(CreateTopicsRequest(topics=(CreatableTopic(name="t", num_partitions=1,
                                                             replication_factor=1),)),
                  commit=False)
    second = h.run(CreateTopicsRequest(topics=(CreatableTopic(name="t", num_partitions=1,
                                                              replication_factor=1),)),
                   commit=False)
    assert first.response.topics[0].error_code == ErrorCode.NONE  # type: ignore[union-attr]
    assert second.response.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS  # type: ignore[union-attr]
    assert second.records == ()
    assert second.wait_offset == first.wait_offset
    assert h.controller.committed.topic_by_name("t") is None


def test_create_fails_with_invalid_request_when_a_name_repeats_in_one_request() -> None:
    """Kafka answers INVALID_REQUEST (42) for every duplicate of a name in one request."""
    h = Harness()
    decision = h.run(CreateTopicsRequest(topics=(CreatableTopic(name="t"),
                                                 CreatableTopic(name="t"))))
    assert [t.error_code for t in decision.response.topics] == [42, 42]  # type: ignore[union-attr]
    assert decision.records == ()


@pytest.mark.parametrize("partitions", [0, -2])
def test_create_fails_with_invalid_partitions_when_count_is_below_one(partitions: int) -> None:
    """partitions >= 1, else INVALID_PARTITIONS (37)."""
    assert Harness().create("t", partitions=partitions).error_code == 37


def test_create_fails_with_invalid_partitions_when_over_the_request_limit() -> None:
    """One request may not create more than max_partitions_per_request partitions."""
    h = Harness(max_partitions_per_request=10)
    assert h.create("a", partitions=11).error_code == ErrorCode.INVALID_PARTITIONS


def test_create_uses_the_defaults_when_partitions_and_factor_are_minus_one() -> None:
    """Kafka: -1 means num.partitions / default.replication.factor."""
    h = Harness(default_num_partitions=2, default_replication_factor=3)
    result = h.create("t", partitions=-1, factor=-1)
    assert (result.num_partitions, result.replication_factor) == (2, 3)


@pytest.mark.parametrize("factor", [0, 4, -5])
def test_create_fails_with_invalid_replication_factor_when_out_of_range(factor: int) -> None:
    """1 <= replication factor <= unfenced brokers, else INVALID_REPLICATION_FACTOR (38)."""
    assert Harness(brokers=3).create("t", factor=factor).error_code == 38


def test_create_fails_with_invalid_replication_factor_when_no_broker_is_registered() -> None:
    """No unfenced broker: no replica can be placed."""
    assert Harness(brokers=0).create("t").error_code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_validate_only_writes_nothing_when_the_request_is_valid() -> None:
    """validate_only checks every rule and proposes no record."""
    h = Harness()
    decision = h.run(CreateTopicsRequest(topics=(CreatableTopic(name="t", num_partitions=2,
                                                                replication_factor=1),),
                                         validate_only=True))
    assert decision.records == ()
    assert decision.response.topics[0].error_code == 0  # type: ignore[union-attr]
    assert h.controller.view.topic_by_name("t") is None


class ScriptedRandom(random.Random):
    """getrandbits(128) returns the given values first: forces Uuid.random's candidates."""

    def __init__(self, values: list[int]) -> None:
        super().__init__(0)
        self.values = list(values)

    def getrandbits(self, k: int) -> int:
        if k == 128 and self.values:
            return self.values.pop(0)
        return super().getrandbits(k)


def test_topic_id_is_never_one_used_before_when_rng_repeats_it() -> None:
    """KIP-516: an ID is never reused in the life of the cluster, even after deletion."""
    h = Harness()
    old = h.create("t").topic_id
    h.delete(name="t")
    h.rng = ScriptedRandom([old.value, old.value])
    new = h.create("t").topic_id
    assert new != old
    assert new not in (ZERO_UUID, METADATA_TOPIC_ID)


def test_decisions_are_identical_when_replayed_with_the_same_seed() -> None:
    """Pure and deterministic: rng and now_ms are inputs."""
    def script(seed: int) -> list[tuple[int, rec.Record]]:
        h = Harness(seed=seed)
        h.create("a", 3, 2), h.create("b", 2, 3), h.delete(name="a"), h.tick(TIMEOUT_MS)
        return h.log
    assert script(5) == script(5)
    assert script(5) != script(6)


# --- DeleteTopics -------------------------------------------------------------------------


def test_delete_by_id_replies_with_name_and_id_when_the_id_is_live() -> None:
    """KIP-516 DeleteTopics v6: by ID; the reply carries both name and ID."""
    h = Harness()
    topic_id = h.create("t").topic_id
    result = h.delete(topic_id=topic_id)
    assert (result.error_code, result.name, result.topic_id) == (0, "t", topic_id)
    assert h.log[-1][1] == rec.RemoveTopic(topic_id=topic_id)


def test_delete_by_name_replies_with_the_id_when_the_id_is_zero() -> None:
    """KIP-516: ZERO_UUID means "use the name"."""
    h = Harness()
    topic_id = h.create("t").topic_id
    result = h.delete(name="t")
    assert (result.error_code, result.name, result.topic_id) == (0, "t", topic_id)


def test_delete_checks_the_id_first_when_both_id_and_name_are_given() -> None:
    """KIP-516: the ID is checked first; the name is then ignored."""
    h = Harness()
    id_a = h.create("a").topic_id
    id_b = h.create("b").topic_id
    result = h.delete(name="b", topic_id=id_a)
    assert (result.name, result.topic_id) == ("a", id_a)
    assert set(h.controller.committed.topics) == {id_b}


def test_delete_fails_with_unknown_topic_id_when_the_id_is_unknown_even_if_the_name_exists(
) -> None:
    """KIP-516: an unknown ID gets UNKNOWN_TOPIC_ID (100), whatever the name says."""
    h = Harness()
    h.create("t")
    result = h.delete(name="t", topic_id=Uuid.random(random.Random(99)))
    assert result.error_code == ErrorCode.UNKNOWN_TOPIC_ID == 100
    assert h.controller.committed.topic_by_name("t") is not None


def test_delete_fails_with_unknown_topic_or_partition_when_the_name_is_unknown() -> None:
    """An unknown name gets UNKNOWN_TOPIC_OR_PARTITION (3)."""
    assert Harness().delete(name="nope").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3


def test_delete_fails_with_invalid_request_when_neither_id_nor_name_is_given() -> None:
    """An entry must name a topic somehow."""
    assert Harness().delete().error_code == ErrorCode.INVALID_REQUEST


def test_delete_fails_with_invalid_request_when_one_topic_appears_twice() -> None:
    """By name and by ID in one request, resolving to one topic: INVALID_REQUEST, nothing
    written."""
    h = Harness()
    topic_id = h.create("t").topic_id
    decision = h.run(DeleteTopicsRequest(topics=(DeleteTopicState(name="t"),
                                                 DeleteTopicState(topic_id=topic_id))))
    assert [r.error_code for r in decision.response.responses] == [42, 42]  # type: ignore[union-attr]
    assert decision.records == ()


def test_name_is_free_with_a_new_id_when_the_delete_has_committed() -> None:
    """KIP-516: deleted as soon as RemoveTopic commits; the name is reusable at once and the
    new topic gets a new ID; the old ID is UNKNOWN_TOPIC_ID from then on."""
    h = Harness()
    old = h.create("t").topic_id
    h.delete(topic_id=old)
    new = h.create("t")
    assert new.error_code == 0
    assert new.topic_id != old
    assert h.delete(topic_id=old).error_code == ErrorCode.UNKNOWN_TOPIC_ID
    described = h.describe(topic_ids=(old,)).topics[0]
    assert described.error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_delete_sees_a_create_that_is_still_in_flight() -> None:
    """Pending writes are part of the controller's view."""
    h = Harness()
    created = h.create("t", commit=False)
    result = h.delete(name="t")
    assert result.topic_id == created.topic_id
    assert h.controller.committed.topics == {}


# --- DescribeTopics ----------------------------------------------------------------------


def test_describe_by_names_carries_ids_and_partitions_when_topics_exist() -> None:
    """KIP-516: describe results carry the topic ID, partitions with leader, epoch, ISR."""
    h = Harness()
    created = h.create("t", partitions=2, factor=2)
    response = h.describe(names=("t", "missing"))
    found, missing = response.topics
    assert (found.name, found.topic_id, found.error_code) == ("t", created.topic_id, 0)
    assert [(p.partition, p.leader, p.leader_epoch, p.replicas, p.isr) for p in found.partitions] \
        == [(i, r[0], 0, r, r) for i, r in enumerate(created.assignment)]
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_by_ids_fails_with_unknown_topic_id_when_an_id_is_unknown() -> None:
    """KIP-516: describing an unknown ID gets UNKNOWN_TOPIC_ID (100); known IDs get names."""
    h = Harness()
    topic_id = h.create("t").topic_id
    unknown = Uuid.random(random.Random(42))
    results = h.describe(topic_ids=(topic_id, unknown, ZERO_UUID)).topics
    assert [(r.name, r.error_code) for r in results] == [("t", 0), (None, 100), (None, 100)]
    assert results[1].topic_id == unknown


def test_describe_lists_every_live_topic_by_name_when_no_collection_is_given() -> None:
    """Neither names nor IDs: all live topics, sorted by name."""
    h = Harness()
    for name in ("b", "a", "c"):
        h.create(name)
    h.delete(name="c")
    assert [t.name for t in h.describe().topics] == ["a", "b"]


def test_describe_shows_only_committed_topics_when_a_create_is_pending() -> None:
    """Reads use the committed image: nothing uncommitted is ever shown."""
    h = Harness()
    h.create("t", commit=False)
    assert h.describe().topics == ()
    h.commit()
    assert [t.name for t in h.describe().topics] == ["t"]


# --- CreatePartitions, rename --------------------------------------------------------------


def test_create_partitions_adds_partitions_when_the_count_grows() -> None:
    """CreatePartitions: new partitions are placed round-robin like new topics."""
    h = Harness()
    topic_id = h.create("t", partitions=2, factor=2).topic_id
    decision = h.run(CreatePartitionsRequest(topics=(CreatePartitionsTopic(name="t", count=5),)))
    result = decision.response.results[0]  # type: ignore[union-attr]
    assert (result.error_code, result.topic_id, len(result.assignment)) == (0, topic_id, 3)
    topic = h.controller.committed.topics[topic_id]
    assert [p.partition for p in topic.partitions] == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 2 for p in topic.partitions)


@pytest.mark.parametrize("count", [1, 2])
def test_create_partitions_fails_with_invalid_partitions_when_the_count_does_not_grow(
        count: int) -> None:
    """Not below the initial count, nor the same count: INVALID_PARTITIONS (37)."""
    h = Harness()
    h.create("t", partitions=2)
    decision = h.run(CreatePartitionsRequest(topics=(CreatePartitionsTopic(name="t",
                                                                           count=count),)))
    assert decision.response.results[0].error_code == 37  # type: ignore[union-attr]
    assert decision.records == ()


def test_create_partitions_fails_with_unknown_topic_when_the_name_is_unknown() -> None:
    """UNKNOWN_TOPIC_OR_PARTITION (3)."""
    decision = Harness().run(CreatePartitionsRequest(
        topics=(CreatePartitionsTopic(name="nope", count=3),)))
    assert decision.response.results[0].error_code == 3  # type: ignore[union-attr]


def test_create_partitions_fails_with_invalid_replication_factor_when_brokers_are_fenced(
) -> None:
    """New partitions need replication-factor unfenced brokers: INVALID_REPLICATION_FACTOR."""
    h = Harness(brokers=2)
    h.create("t", factor=2)
    h.now_ms = 5000
    h.heartbeat(1)
    h.tick(TIMEOUT_MS + 1)  # broker 2 is fenced
    decision = h.run(CreatePartitionsRequest(topics=(CreatePartitionsTopic(name="t", count=2),)))
    assert decision.response.results[0].error_code == 38  # type: ignore[union-attr]


def test_rename_keeps_the_id_and_partitions_when_the_new_name_is_free() -> None:
    """KIP-516 makes rename by ID possible: the ID and the data stay; the old name is free."""
    h = Harness()
    created = h.create("old", partitions=3)
    response = h.run(RenameTopicRequest(topic_id=created.topic_id, new_name="new")).response
    assert (response.error_code, response.old_name) == (0, "old")  # type: ignore[union-attr]
    topic = h.controller.committed.topic_by_name("new")
    assert topic is not None
    assert topic.topic_id == created.topic_id
    assert len(topic.partitions) == 3
    assert h.create("old").error_code == 0


@pytest.mark.parametrize(("new_name", "code"), [("taken", 36), ("bad name", 17), ("", 17)])
def test_rename_fails_when_the_new_name_is_taken_or_illegal(new_name: str, code: int) -> None:
    """TOPIC_ALREADY_EXISTS (36) for a live name, INVALID_TOPIC_EXCEPTION (17) for bad ones."""
    h = Harness()
    topic_id = h.create("t").topic_id
    h.create("taken")
    decision = h.run(RenameTopicRequest(topic_id=topic_id, new_name=new_name))
    assert decision.response.error_code == code  # type: ignore[union-attr]
    assert decision.records == ()


def test_rename_fails_with_unknown_topic_id_when_the_id_is_unknown() -> None:
    """UNKNOWN_TOPIC_ID (100)."""
    decision = Harness().run(RenameTopicRequest(topic_id=Uuid.random(random.Random(3)),
                                                new_name="x"))
    assert decision.response.error_code == 100  # type: ignore[union-attr]


def test_rename_writes_nothing_when_the_name_is_unchanged() -> None:
    """Renaming a topic to its own name is a successful no-op."""
    h = Harness()
    topic_id = h.create("t").topic_id
    decision = h.run(RenameTopicRequest(topic_id=topic_id, new_name="t"))
    assert (decision.response.error_code, decision.records) == (0, ())  # type: ignore[union-attr]


