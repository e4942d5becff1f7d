"""Partition reassignments the controller decides (pure): Kafka's
AlterPartitionReassignments (API 45, KIP-455; ReplicationControlManager and
PartitionChangeBuilder, without ELR).

- Start: a partition given a target replica list gets replicas := target, then the
  current ones not in it; adding := target - current, removing := current - target. The
  "current" replicas of a partition already being reassigned are its replicas before
  that one (replicas - adding): a new target replaces the ongoing one, as in Kafka.
  A target equal to the current replicas with nothing ongoing writes nothing.
- Complete: once every adding replica is in the ISR (at the start, or with the
  AlterPartition that brings the last one in: the same record), replicas := target,
  ISR := ISR ∩ target and adding/removing are cleared; a leader being removed hands over
  to the first unfenced member of the new ISR in target order. With no such member it
  waits (the ISR change alone is written).
- Cancel (a null target): replicas := replicas - adding (the union's order, as Kafka's:
  target first), ISR likewise trimmed, the
  leader moved as above if it was an adding one. Nothing ongoing:
  NO_REASSIGNMENT_IN_PROGRESS (85). A cancel, or a target replacing an ongoing one, that
  would leave no unfenced ISR member to lead: INVALID_REPLICA_ASSIGNMENT (39), nothing
  written.
- Below metadata.version 2 (`metadata.features`: the log may not hold the fields) every
  partition is UNSUPPORTED_VERSION (35), nothing written.
- An empty target, a repeated broker or one not registered: INVALID_REPLICA_ASSIGNMENT
  (39); an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION (3); a partition
  marked for deletion: INVALID_REPLICA_ASSIGNMENT. Each per partition.

The state is the image's (`PartitionImage.adding_replicas`, `removing_replicas`), so a
new controller resumes from the log alone. Every record asserts the safety rules:
leader (when any) in ISR ⊆ replicas, ISR not empty, and while ongoing target ⊆ replicas
with adding and removing disjoint.
"""

from __future__ import annotations

from collections.abc import Collection

from metadata import records as rec
from metadata.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResult,
    ReassignableTopicResult,
)
from metadata.delta import MetadataDelta
from metadata.elections import Emit, named_partition
from metadata.features import LEVEL_ERROR, REASSIGNMENTS_LEVEL, metadata_level, release_name
from metadata.image import NO_LEADER, PartitionImage
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid

Refusal = tuple[ErrorCode, str]


def original_replicas(part: PartitionImage) -> tuple[int, ...]:
    """The replicas before the ongoing reassignment (all of them when none)."""
    return tuple(r for r in part.replicas if r not in part.adding_replicas)


def target_replicas(part: PartitionImage) -> tuple[int, ...]:
    """The replicas the ongoing reassignment ends with (all of them when none)."""
    return tuple(r for r in part.replicas if r not in part.removing_replicas)


def start(topic_id: Uuid, part: PartitionImage, target: tuple[int, ...],
          registered: Collection[int], unfenced: Collection[int]
          ) -> rec.PartitionChange | Refusal | None:
    """The record reassigning `part` to `target` (completed at once when nothing is to
    be added), a refusal, or None: `target` is already its replicas."""
    if not target or len(set(target)) != len(target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"invalid target replicas {list(target)}"
    unknown = [r for r in target if r not in registered]
    if unknown:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"brokers {unknown} are not registered"
    if part.marked_for_deletion:
        return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"partition {part.partition} is marked for deletion")
    current = original_replicas(part)
    if target == current and not part.reassigning:
        return None
    replicas = target + tuple(r for r in current if r not in target)
    # a replaced reassignment's adding replicas not in `target` leave the ISR too
    trimmed = _trimmed(part, replicas, unfenced)
    if trimmed is None:
        return (ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {part.partition} would "
                "keep no in-sync replica to lead")
    isr, leader = trimmed
    adding = tuple(r for r in target if r not in current)
    removing = tuple(r for r in current if r not in target)
    moved = _completed(replicas, isr, leader, adding, removing, unfenced)
    if moved is not None:
        replicas, isr, leader = moved
        adding = removing = ()
    return _change(topic_id, part, replicas, isr, leader, adding, removing)


def cancel(topic_id: Uuid, part: PartitionImage, unfenced: Collection[int]
           ) -> rec.PartitionChange | Refusal:
    """The record reverting `part`'s ongoing reassignment, or a refusal."""
    if not part.reassigning:
        return (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                f"no reassignment of partition {part.partition} is in progress")
    replicas = original_replicas(part)
    trimmed = _trimmed(part, replicas, unfenced)
    if trimmed is None:
        return (ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"cancelling would leave partition "
                f"{part.partition} no in-sync replica to lead")
    return _change(topic_id, part, replicas, *trimmed, (), ())


def _trimmed(part: PartitionImage, replicas: tuple[int, ...], unfenced: Collection[int]
             ) -> tuple[tuple[int, ...], int] | None:
    """(ISR, leader) of `part` once its replicas are `replicas`: the ISR cut to them, a
    leader cut off replaced by the first unfenced one left (a leaderless partition stays
    so); None when none is left."""
    isr = tuple(r for r in part.isr if r in replicas)
    if part.leader in isr or (isr and part.leader == NO_LEADER):
        return isr, part.leader
    successor = _first_unfenced(isr, replicas, unfenced)
    return None if successor == NO_LEADER else (isr, successor)


def isr_change(topic_id: Uuid, part: PartitionImage, new_isr: tuple[int, ...],
               unfenced: Collection[int]) -> rec.PartitionChange:
    """The record of an accepted AlterPartition: the ISR alone, or, when it brings in the
    last adding replica, the reassignment's completion in the same record."""
    moved = _completed(part.replicas, new_isr, part.leader, part.adding_replicas,
                       part.removing_replicas, unfenced) if part.reassigning else None
    if moved is None:
        return rec.PartitionChange(topic_id=topic_id, partition=part.partition, isr=new_isr)
    replicas, isr, leader = moved
    return _change(topic_id, part, replicas, isr, leader, (), ())


def _completed(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int,
               adding: tuple[int, ...], removing: tuple[int, ...],
               unfenced: Collection[int]) -> tuple[tuple[int, ...], tuple[int, ...], int] | None:
    """(replicas, ISR, leader) once the reassignment completes; None: not yet."""
    if not all(r in isr for r in adding):
        return None
    target = tuple(r for r in replicas if r not in removing)
    new_isr = tuple(r for r in isr if r in target)
    if not new_isr:
        return None
    if leader in new_isr or leader == NO_LEADER:
        return target, new_isr, leader
    successor = _first_unfenced(new_isr, target, unfenced)
    return None if successor == NO_LEADER else (target, new_isr, successor)


def _first_unfenced(isr: tuple[int, ...], order: tuple[int, ...],
                    unfenced: Collection[int]) -> int:
    return next((r for r in order if r in isr and r in unfenced), NO_LEADER)


def _change(topic_id: Uuid, part: PartitionImage, replicas: tuple[int, ...],
            isr: tuple[int, ...], leader: int, adding: tuple[int, ...],
            removing: tuple[int, ...]) -> rec.PartitionChange:
    """The record taking `part` to this state (unchanged fields left None); the safety
    rules asserted."""
    assert isr, (part, replicas)
    assert set(isr) <= set(replicas), (part, replicas, isr)
    assert leader == NO_LEADER or leader in isr, (part, leader, isr)
    assert len(set(replicas)) == len(replicas), (part, replicas)
    assert not set(adding) & set(removing), (adding, removing)
    assert set(adding) | set(removing) <= set(replicas), (replicas, adding, removing)
    return rec.PartitionChange(
        topic_id=topic_id, partition=part.partition,
        leader=None if leader == part.leader else leader,
        isr=None if isr == part.isr else isr,
        replicas=None if replicas == part.replicas else replicas,
        adding_replicas=None if adding == part.adding_replicas else adding,
        removing_replicas=None if removing == part.removing_replicas else removing)


def alter_partition_reassignments(delta: MetadataDelta, emit: Emit,
                                  request: AlterPartitionReassignmentsRequest
                                  ) -> AlterPartitionReassignmentsResponse:
    """AlterPartitionReassignments over `delta`: the records emitted, an answer per
    partition."""
    registered = frozenset(delta.brokers())
    unfenced = frozenset(delta.unfenced_broker_ids())
    level = metadata_level(delta.finalized_features)
    refusal: Refusal | None = None if level >= REASSIGNMENTS_LEVEL else (
        LEVEL_ERROR, f"partition reassignments need metadata.version {REASSIGNMENTS_LEVEL} "
        f"({release_name(REASSIGNMENTS_LEVEL)}); the finalized level is {level}")
    results = []
    for topic in request.topics:
        answers = []
        for entry in topic.partitions:
            code, message = refusal or _reassign_one(
                delta, emit, topic.name, entry.partition_index, entry.replicas, registered,
                unfenced)
            answers.append(ReassignablePartitionResult(
                partition_index=entry.partition_index, error_code=code,
                error_message=message))
        results.append(ReassignableTopicResult(name=topic.name, partitions=tuple(answers)))
    return AlterPartitionReassignmentsResponse(responses=tuple(results))


def _reassign_one(delta: MetadataDelta, emit: Emit, name: str, index: int,
                  target: tuple[int, ...] | None, registered: Collection[int],
                  unfenced: Collection[int]) -> tuple[ErrorCode, str | None]:
    topic = named_partition(delta, name, index)
    if isinstance(topic, tuple):
        return topic
    part = topic.partitions[index]
    decided = (cancel(topic.topic_id, part, unfenced) if target is None
               else start(topic.topic_id, part, target, registered, unfenced))
    if isinstance(decided, tuple):
        return decided
    if decided is not None:
        emit(decided)
    return ErrorCode.NONE, None
