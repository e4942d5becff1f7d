"""Leader elections the controller decides (pure): Kafka's ElectLeaders (API 43) and the
unclean election `unclean.leader.election.enable` allows (Kafka's
ReplicationControlManager.electLeaders and PartitionChangeBuilder, without ELR).

- PREFERRED (0): the partition's first replica leads, when it is in the ISR and unfenced.
  It already leads: ELECTION_NOT_NEEDED (84); it cannot: PREFERRED_LEADER_NOT_AVAILABLE
  (80). The ISR is unchanged.
- UNCLEAN (1): only a partition without a leader (one that has one:
  ELECTION_NOT_NEEDED). Its first unfenced ISR member in replica order leads, else its
  first unfenced replica outside the ISR, which becomes the whole ISR (its log is the
  truth from now on: records only the old ISR held are lost, as in Kafka). Neither:
  ELIGIBLE_LEADERS_NOT_AVAILABLE (83). As Kafka's (KIP-460), an explicit UNCLEAN
  election is the operator's decision and does not ask the topic's config: it is how a
  partition is brought back while `unclean.leader.election.enable` stays false.
- A request naming no topics (null) elects over every partition and, as Kafka, leaves
  out of the answer the partitions that needed no election.
- Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION (3), per partition.

The same leaderless rule runs wherever the controller looks for a leader after the
ISR's last unfenced member is gone (`metadata.broker_control`: fencing, unfencing):
without the config a partition stays leaderless (leader -1, the ISR keeping its last
member), with it (the topic's, else the controllers' key) a live out-of-ISR replica is
elected. Switching the config on elects nothing by itself: the next fencing or
unfencing does (or an UNCLEAN ElectLeaders, which needs no config). Every election
asserts that its leader is an unfenced replica and stays in its ISR.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from metadata import records as rec
from metadata.admin import (
    ElectionPartitionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ReplicaElectionResult,
)
from metadata.delta import MetadataDelta
from metadata.image import NO_LEADER, PartitionImage, TopicImage
from metadata.topic_configs import UNCLEAN_LEADER_ELECTION
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid

Emit = Callable[[rec.Record], int]  # applies a record to the batch, returns its offset

PREFERRED, UNCLEAN = 0, 1  # Kafka's ElectionType
ELECTION_TYPES = {PREFERRED: "PREFERRED", UNCLEAN: "UNCLEAN"}


def unclean_allowed(topic: TopicImage, cluster_default: bool) -> bool:
    """The topic's `unclean.leader.election.enable`, else the controllers' default."""
    value = topic.config(UNCLEAN_LEADER_ELECTION)
    return cluster_default if value is None else value == "true"


def leaderless_election(part: PartitionImage, unfenced: Collection[int], *,
                        unclean: bool) -> tuple[int, tuple[int, ...]] | None:
    """(leader, ISR) for a partition without a leader, or None: it stays leaderless."""
    clean = next((r for r in part.replicas if r in part.isr and r in unfenced), None)
    if clean is not None:
        return clean, part.isr
    if not unclean:
        return None
    outside = next((r for r in part.replicas if r in unfenced), None)
    return None if outside is None else (outside, (outside,))


def partition_change(topic_id: Uuid, part: PartitionImage, leader: int,
                     isr: tuple[int, ...], unfenced: Collection[int]) -> rec.PartitionChange:
    """The record electing `leader` with `isr`; the safety rules asserted."""
    assert leader in part.replicas, (part, leader)
    assert leader in unfenced, (part, leader)
    assert leader in isr, (part, leader, isr)
    assert set(isr) <= set(part.replicas), (part, isr)
    return rec.PartitionChange(topic_id=topic_id, partition=part.partition, leader=leader,
                               isr=None if isr == part.isr else isr)


def leaderless_changes(topic: TopicImage, unfenced: Collection[int], *,
                       cluster_default: bool) -> list[rec.PartitionChange]:
    """An election for each of `topic`'s leaderless partitions that can have one."""
    unclean = unclean_allowed(topic, cluster_default)
    changes = []
    for part in topic.partitions:
        if part.leader != NO_LEADER:
            continue
        elected = leaderless_election(part, unfenced, unclean=unclean)
        if elected is not None:
            changes.append(partition_change(topic.topic_id, part, *elected, unfenced))
    return changes


def decide_election(topic: TopicImage, part: PartitionImage, election_type: int,
                    unfenced: Collection[int]) -> rec.PartitionChange | tuple[ErrorCode, str]:
    """One partition of an ElectLeaders request: its record, or (error, message)."""
    name = f"{topic.name}-{part.partition}"
    if election_type == PREFERRED:
        preferred = part.replicas[0]
        if part.leader == preferred:
            return (ErrorCode.ELECTION_NOT_NEEDED,
                    f"the preferred replica {preferred} already leads {name}")
        if preferred not in part.isr or preferred not in unfenced:
            why = "not in the ISR" if preferred not in part.isr else "fenced"
            return (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"the preferred replica {preferred} of {name} is {why}")
        return partition_change(topic.topic_id, part, preferred, part.isr, unfenced)
    if part.leader != NO_LEADER:
        return ErrorCode.ELECTION_NOT_NEEDED, f"{name} has a leader ({part.leader})"
    elected = leaderless_election(part, unfenced, unclean=True)
    if elected is None:
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"no replica of {name} is unfenced"
    return partition_change(topic.topic_id, part, *elected, unfenced)


def elect_leaders(delta: MetadataDelta, emit: Emit, request: ElectLeadersRequest
                  ) -> ElectLeadersResponse:
    """ElectLeaders over `delta`: the records emitted, the answer per partition (an
    unknown election type: INVALID_REQUEST for the whole request, as Kafka refuses it)."""
    if request.election_type not in ELECTION_TYPES:
        return ElectLeadersResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=(
            f"unknown election type {request.election_type} (0: PREFERRED, 1: UNCLEAN)"))
    unfenced = frozenset(delta.unfenced_broker_ids())
    every = request.topic_partitions is None
    wanted: list[tuple[str, tuple[int, ...]]]
    if request.topic_partitions is None:
        topics = sorted((t for t in map(delta.topic, delta.topic_ids()) if t is not None),
                        key=lambda t: t.name)
        wanted = [(t.name, tuple(p.partition for p in t.partitions)) for t in topics]
    else:
        wanted = [(t.topic, t.partitions) for t in request.topic_partitions]
    results = []
    for name, partitions in wanted:
        answers = []
        for index in partitions:
            code, message = _elect_one(delta, emit, name, index, request.election_type,
                                       unfenced)
            if not (every and code == ErrorCode.ELECTION_NOT_NEEDED):
                answers.append(ElectionPartitionResult(partition_id=index, error_code=code,
                                                       error_message=message))
        results.append(ReplicaElectionResult(topic=name, partition_result=tuple(answers)))
    return ElectLeadersResponse(replica_election_results=tuple(results))


def named_partition(delta: MetadataDelta, name: str, index: int
                    ) -> TopicImage | tuple[ErrorCode, str]:
    """The topic `name` when it has partition `index`, else UNKNOWN_TOPIC_OR_PARTITION."""
    topic_id = delta.topic_id_by_name(name)
    topic = None if topic_id is None else delta.topic(topic_id)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic named {name!r}"
    if not 0 <= index < len(topic.partitions):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {name}-{index}"
    return topic


def _elect_one(delta: MetadataDelta, emit: Emit, name: str, index: int, election_type: int,
               unfenced: Collection[int]) -> tuple[ErrorCode, str | None]:
    topic = named_partition(delta, name, index)
    if isinstance(topic, tuple):
        return topic
    decided = decide_election(topic, topic.partitions[index], election_type, unfenced)
    if isinstance(decided, tuple):
        return decided
    emit(decided)
    return ErrorCode.NONE, None
