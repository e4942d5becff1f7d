"""Partition reassignments the controller decides (metadata/reassignments.py): start,
completion with the AlterPartition that brings the last adding replica into the ISR,
cancel, refusals with Kafka's codes; the state in the log alone (replay, a snapshot and a
new controller give the same image and resume). Scenarios through the real controller,
then the pure rules against a model with hypothesis."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from metadata import records as rec
from metadata.admin import (
    AlterPartitionData,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from metadata.controller import Controller, ControllerConfig
from metadata.delta import replay
from metadata.image import NO_LEADER, PartitionImage
from metadata.image_snapshot import image_from_records, image_records
from metadata.reassignments import cancel, isr_change, original_replicas, start, target_replicas
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from tests.support.controller_harness import Harness

TOPIC_ID = Uuid.from_string("AAAAAAAAAAAAAAAAAAAAAQ")


def _harness(partitions: int = 1) -> Harness:
    """Brokers 1-5; topic t with `partitions` partitions on [2, 3, 4], all in sync."""
    h = Harness(brokers=5)
    created = h.run(CreateTopicsRequest(topics=(CreatableTopic(
        name="t", assignments=tuple(CreatableReplicaAssignment(partition_index=i,
                                                               broker_ids=(2, 3, 4))
                                    for i in range(partitions))),))).response
    assert created.topics[0].error_code == 0, created  # type: ignore[union-attr]
    return h


def _partition(h: Harness, index: int = 0) -> PartitionImage:
    topic = h.controller.committed.topic_by_name("t")
    assert topic is not None
    return topic.partitions[index]


def _reassign(h: Harness, *targets: tuple[int, tuple[int, ...] | None], name: str = "t"
              ) -> dict[int, int]:
    decision = h.run(AlterPartitionReassignmentsRequest(topics=(ReassignableTopic(
        name=name, partitions=tuple(ReassignablePartition(partition_index=i, replicas=r)
                                    for i, r in targets)),)))
    assert isinstance(decision.response, AlterPartitionReassignmentsResponse)
    return {p.partition_index: p.error_code for t in decision.response.responses
            for p in t.partitions}


def _alter_isr(h: Harness, new_isr: tuple[int, ...], index: int = 0) -> int:
    part = _partition(h, index)
    topic = h.controller.committed.topic_by_name("t")
    assert topic is not None
    decision = h.run(AlterPartitionRequest(
        broker_id=part.leader, broker_epoch=h.epochs[part.leader], topics=(
            AlterPartitionTopic(topic_id=topic.topic_id, partitions=(AlterPartitionData(
                partition=index, leader_epoch=part.leader_epoch, new_isr=new_isr,
                partition_epoch=part.partition_epoch),)),)))
    assert isinstance(decision.response, AlterPartitionResponse)
    return decision.response.topics[0].partitions[0].error_code


def _state(part: PartitionImage) -> tuple[object, ...]:
    return (part.replicas, part.isr, part.leader, part.adding_replicas, part.removing_replicas)


def test_a_reassignment_starts_with_the_union_and_completes_with_the_isr_change() -> None:
    """[2,3,4] -> [3,4,5]: replicas [3,4,5,2], adding [5], removing [2]; the leader's
    AlterPartition taking 5 in completes it in that one record: the leader (2, removed)
    hands over to 3, the ISR loses 2."""
    h = _harness()
    assert _reassign(h, (0, (3, 4, 5))) == {0: ErrorCode.NONE}
    assert _state(_partition(h)) == ((3, 4, 5, 2), (2, 3, 4), 2, (5,), (2,))
    before = len(h.log)
    assert _alter_isr(h, (2, 3, 4, 5)) == ErrorCode.NONE
    assert len(h.log) == before + 1
    part = _partition(h)
    assert _state(part) == ((3, 4, 5), (3, 4, 5), 3, (), ())
    assert h.controller.committed.content_hash() == replay(h.log).content_hash()


def test_an_isr_change_without_the_adding_replicas_leaves_the_reassignment_ongoing() -> None:
    h = _harness()
    _reassign(h, (0, (3, 4, 5)))
    assert _alter_isr(h, (2, 3)) == ErrorCode.NONE
    assert _state(_partition(h)) == ((3, 4, 5, 2), (2, 3), 2, (5,), (2,))


def test_cancel_reverts_to_the_replicas_before_and_a_second_cancel_is_refused() -> None:
    """The replicas before, in the union's order (as Kafka's: target first)."""
    h = _harness()
    _reassign(h, (0, (5, 1, 4)))
    assert _partition(h).adding_replicas == (5, 1)
    assert _reassign(h, (0, None)) == {0: ErrorCode.NONE}
    assert _state(_partition(h)) == ((4, 2, 3), (2, 3, 4), 2, (), ())
    assert _reassign(h, (0, None)) == {0: ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}


def test_a_new_target_replaces_the_ongoing_one_from_the_replicas_before_it() -> None:
    h = _harness()
    _reassign(h, (0, (3, 4, 5)))
    assert _reassign(h, (0, (1, 3, 4))) == {0: ErrorCode.NONE}
    assert _state(_partition(h)) == ((1, 3, 4, 2), (2, 3, 4), 2, (1,), (2,))


def test_a_target_already_in_sync_completes_at_once_and_the_same_target_writes_nothing() -> None:
    h = _harness()
    before = len(h.log)
    assert _reassign(h, (0, (2, 3, 4))) == {0: ErrorCode.NONE}
    assert len(h.log) == before
    assert _reassign(h, (0, (4, 3))) == {0: ErrorCode.NONE}  # removes 2 only
    assert _state(_partition(h)) == ((4, 3), (3, 4), 4, (), ())  # target order


def test_bad_targets_and_unknown_partitions_are_refused_per_partition_writing_nothing() -> None:
    h = _harness(partitions=2)
    before = len(h.log)
    assert _reassign(h, (0, ()), (1, (3, 3, 4))) == {
        0: ErrorCode.INVALID_REPLICA_ASSIGNMENT, 1: ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert _reassign(h, (0, (3, 4, 9)), (5, (3, 4, 5))) == {
        0: ErrorCode.INVALID_REPLICA_ASSIGNMENT, 5: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert _reassign(h, (0, (1, 2, 3)), name="nope") == {
        0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert len(h.log) == before


def test_replay_and_a_snapshot_give_the_same_image_mid_reassignment() -> None:
    h = _harness(partitions=3)
    _reassign(h, (0, (3, 4, 5)), (1, (5, 1)), (2, (4, 2, 3)))
    committed = h.controller.committed
    assert committed.content_hash() == replay(h.log).content_hash()
    restored = image_from_records(image_records(committed), committed.last_applied_offset)
    assert restored.content_hash() == committed.content_hash()
    topic = restored.topic_by_name("t")
    assert topic is not None
    assert topic.partitions[1].adding_replicas == (5, 1)


def test_a_new_controller_resumes_the_reassignment_from_the_log_alone() -> None:
    h = _harness()
    _reassign(h, (0, (3, 4, 5)))
    h.controller = Controller(replay(h.log), now_ms=h.now_ms, config=ControllerConfig())
    assert _alter_isr(h, (2, 3, 4, 5)) == ErrorCode.NONE
    assert _state(_partition(h)) == ((3, 4, 5), (3, 4, 5), 3, (), ())
    assert h.controller.committed.content_hash() == replay(h.log).content_hash()


def test_a_cancel_or_replacement_leaving_no_in_sync_replica_to_lead_is_refused() -> None:
    """Only the adding replica is in sync (the original one fell out): going back would
    leave the partition no ISR, so nothing is written."""
    part = PartitionImage(partition=0, replicas=(2, 1), isr=(2,), leader=2,
                          adding_replicas=(2,), removing_replicas=(1,))
    assert cancel(TOPIC_ID, part, {1, 2}) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "cancelling would leave partition 0 no in-sync replica to lead")
    refused = start(TOPIC_ID, part, (3,), {1, 2, 3}, {1, 2, 3})
    assert isinstance(refused, tuple)
    assert refused[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT


# --- the pure rules against a model -------------------------------------------------------

BROKERS = range(1, 7)


@st.composite
def _partitions(draw: st.DrawFn) -> PartitionImage:
    replicas = tuple(draw(st.permutations(list(BROKERS)))[:draw(st.integers(1, 4))])
    isr = tuple(r for r in replicas if draw(st.booleans())) or replicas[:1]
    leader = draw(st.sampled_from((*isr, NO_LEADER)))
    return PartitionImage(partition=0, replicas=replicas, isr=isr, leader=leader)


def _applied(part: PartitionImage, change: rec.PartitionChange) -> PartitionImage:
    values = {f.name: getattr(change, f.name) for f in dataclasses.fields(change)
              if f.name in ("leader", "isr", "replicas", "adding_replicas",
                            "removing_replicas") and getattr(change, f.name) is not None}
    return dataclasses.replace(part, **values)


def _well_formed(part: PartitionImage) -> None:
    assert set(part.isr) <= set(part.replicas)
    assert part.leader == NO_LEADER or part.leader in part.isr
    assert set(part.adding_replicas) | set(part.removing_replicas) <= set(part.replicas)


@given(_partitions(), st.permutations(list(BROKERS)), st.integers(1, 4),
       st.frozensets(st.sampled_from(list(BROKERS))))
def test_start_then_catch_up_reaches_the_target_and_cancel_returns_to_the_start(
        part: PartitionImage, order: list[int], size: int, fenced: frozenset[int]) -> None:
    target = tuple(order[:size])
    unfenced = frozenset(BROKERS) - fenced
    started = start(TOPIC_ID, part, target, frozenset(BROKERS), unfenced)
    if started is None:
        assert target == part.replicas
        return
    assert not isinstance(started, tuple), started  # the ISR is a subset of the replicas
    ongoing = _applied(part, started)
    _well_formed(ongoing)
    if not ongoing.reassigning:  # completed at once: nothing to add, the ISR in target
        assert ongoing.replicas == target
        assert all(r in part.isr for r in target if r not in part.replicas)
        return
    assert target_replicas(ongoing) == target
    assert set(original_replicas(ongoing)) == set(part.replicas)
    assert ongoing.adding_replicas == tuple(r for r in target if r not in part.replicas)
    reverted = cancel(TOPIC_ID, ongoing, unfenced)
    if not isinstance(reverted, tuple):
        back = _applied(ongoing, reverted)
        _well_formed(back)
        assert (set(back.replicas), back.reassigning) == (set(part.replicas), False)
    caught_up = _applied(ongoing, isr_change(TOPIC_ID, ongoing, ongoing.replicas, unfenced))
    _well_formed(caught_up)
    if caught_up.reassigning:  # only while no unfenced target member can take over
        assert part.leader not in target
        assert not set(target) & unfenced
    else:
        assert (caught_up.replicas, caught_up.isr) == (target, target)


OPERATIONS = st.lists(st.tuples(st.sampled_from(("reassign", "cancel", "catch up", "shrink",
                                                 "failover")),
                                st.integers(0, 1), st.permutations([1, 2, 3, 4, 5]),
                                st.integers(1, 4)), max_size=12)


@settings(max_examples=40, deadline=None)
@given(OPERATIONS)
def test_any_sequence_keeps_the_invariants_and_replays_to_the_same_image(
        operations: list[tuple[str, int, list[int], int]]) -> None:
    """Through the controller: reassignments, cancels, the leader's ISR changes (every
    replica in sync, or itself alone) and controller failovers (a new controller from
    the log alone) in any order; after each, every partition is well formed, and the log
    replays to the committed image."""
    h = _harness(partitions=2)
    for kind, index, order, size in operations:
        part = _partition(h, index)
        if kind == "reassign":
            _reassign(h, (index, tuple(order[:size])))
        elif kind == "cancel":
            _reassign(h, (index, None))
        elif kind == "failover":
            h.controller = Controller(replay(h.log), now_ms=h.now_ms,
                                      config=ControllerConfig())
        elif part.leader != NO_LEADER:
            assert _alter_isr(h, part.replicas if kind == "catch up" else (part.leader,),
                              index) == ErrorCode.NONE
        for each in (_partition(h, 0), _partition(h, 1)):
            _well_formed(each)
            assert each.leader != NO_LEADER
            if each.reassigning:
                assert set(each.adding_replicas) <= set(target_replicas(each))
                assert not set(each.adding_replicas) <= set(each.isr) or \
                    each.leader not in target_replicas(each)
    assert h.controller.committed.content_hash() == replay(h.log).content_hash()
