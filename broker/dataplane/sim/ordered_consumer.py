"""A simulated KIP-253 ordered consumer: one group member owning every partition, deciding
as `tools.client.consumer` does with the same pure rules (`broker.kafka.ordered.gates`,
`partitioner.deletion_blockers`); pure: the world sends its queries and fetches and
hands it the answers.

A generation starts whenever the topic's layout in its metadata (undeleted count,
partitions and their lives, marks) changes: positions carry over for the same life of a
partition (`gates.committed_position`), a new life starts at offset 0; then each
partition's gates are built from the leaders' answers (OffsetForLeaderEpoch for the
recorded epochs' ends, ListOffsets LATEST for a marked partition's end), each query
carrying the leader epoch of the image the epoch maps come from. Any error starts the
generation again with fresh metadata. Records are delivered in offset order up to
`gates.delivery_limit`, over the positions `gates.known_positions` allows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from broker.dataplane.sim.node import Life, life_of
from broker.dataplane.sim.ordered_producer import initial_count
from broker.kafka.ordered import gates
from broker.kafka.ordered.partitioner import deletion_blockers
from broker.kafka.ordered.rules import undeleted_count
from metadata.image import NO_LEADER, TopicImage

EPOCH_END, LATEST = "epoch-end", "latest"
Query = tuple[str, int, int]  # (kind, partition, leader epoch asked: EPOCH_END only)
Layout = tuple[int, tuple[Life, ...], tuple[int, ...]]


def layout(topic: TopicImage) -> Layout:
    """What the member's partitions and gates depend on."""
    return (undeleted_count(topic), tuple(life_of(p) for p in topic.partitions),
            topic.marked_partitions)


def _epoch_map(pairs: tuple[tuple[int, int], ...] | None) -> dict[int, int]:
    return dict(pairs or ())


def gate_queries(topic: TopicImage, committed: Mapping[int, int]) -> set[Query]:
    """What the leaders must answer before each partition's gates can be built."""
    queries: set[Query] = set()
    initial, count = initial_count(topic), undeleted_count(topic)
    for partition in topic.partitions:
        p1, created_after = partition.partition, _epoch_map(
            partition.leader_epoch_after_creation)
        if gates.needs_creation_gate(p1, initial, committed.get(p1), 0) and created_after:
            source = gates.creation_source(p1, initial, created_after)
            if source in created_after:
                queries.add((EPOCH_END, source, created_after[source]))
        for p3 in deletion_blockers(p1, topic.marked_partitions, initial, count):
            queries.add((LATEST, p3, -1))
            epoch = _epoch_map(topic.partitions[p3].leader_epoch_before_deletion).get(p1)
            if epoch is not None:
                queries.add((EPOCH_END, p1, epoch))
    return queries


def build_gates(topic: TopicImage, committed: Mapping[int, int],
                answers: Mapping[Query, int]) -> dict[int, gates.PartitionGates]:
    """Each partition's gates from the answers to `gate_queries` (`_gates_for`)."""
    out = {}
    initial, count = initial_count(topic), undeleted_count(topic)
    for partition in topic.partitions:
        p1, created_after = partition.partition, _epoch_map(
            partition.leader_epoch_after_creation)
        creation = None
        if gates.needs_creation_gate(p1, initial, committed.get(p1), 0) and created_after:
            source = gates.creation_source(p1, initial, created_after)
            if source in created_after:
                creation = gates.CreationGate(
                    source, max(0, answers[(EPOCH_END, source, created_after[source])]))
        deletions = []
        for p3 in deletion_blockers(p1, topic.marked_partitions, initial, count):
            epoch = _epoch_map(topic.partitions[p3].leader_epoch_before_deletion).get(p1)
            upper = -1 if epoch is None else \
                gates.epoch_end_gate(answers[(EPOCH_END, p1, epoch)])
            deletions.append(gates.DeletionGate(p3, upper, answers[(LATEST, p3, -1)]))
        out[p1] = gates.PartitionGates(creation, tuple(deletions))
    return out


@dataclass(slots=True, eq=False)
class OrderedConsumer:
    # the group's positions, each with the life of the partition it belongs to
    positions: dict[int, tuple[int, Life]] = field(default_factory=dict)
    metadata: TopicImage | None = None  # this generation's
    generation: int = 0
    answers: dict[Query, int] = field(default_factory=dict)
    queries: set[Query] = field(default_factory=set)
    gates_of: dict[int, gates.PartitionGates] | None = None  # None: being built
    started_at: int = 0
    in_flight: set[int] = field(default_factory=set)  # partitions being fetched
    idle_until: dict[int, int] = field(default_factory=dict)  # fetched nothing: wait
    # the positions the gates go by (`gates.known_positions`: a planted bug swaps it)
    known: Callable[[Mapping[int, tuple[int, gates.PartitionGates]], Mapping[int, int]],
                    dict[int, int]] = gates.known_positions

    def describe(self) -> str:
        return f"consumer(gen {self.generation})"

    def committed(self, topic: TopicImage) -> dict[int, int]:
        """The positions of the partitions' current lives (`gates.committed_position`)."""
        out = {}
        for partition in topic.partitions:
            held = self.positions.get(partition.partition)
            life = gates.incarnation(topic.topic_id, _epoch_map(
                partition.leader_epoch_after_creation))
            position = gates.committed_position(None if held is None else (
                held[0], gates.incarnation(topic.topic_id, _epoch_map(held[1]))), life)
            if position is not None:
                out[partition.partition] = position
        return out

    def start_generation(self, topic: TopicImage, now: int) -> set[Query]:
        """A new generation on `topic`: the gate queries to send (none: gates built)."""
        committed = self.committed(topic)
        self.generation += 1
        self.metadata, self.started_at, self.in_flight = topic, now, set()
        self.positions = {p.partition: (committed.get(p.partition, 0), life_of(p))
                          for p in topic.partitions}
        self.queries, self.answers = gate_queries(topic, committed), {}
        self.gates_of = None
        if not self.queries:
            self.gates_of = build_gates(topic, committed, {})
        return self.queries

    def invalidate(self) -> None:
        """End the generation (an error): fresh metadata and a new one follow."""
        self.metadata, self.gates_of = None, None
        self.generation += 1

    def leader_of(self, partition: int) -> int:
        assert self.metadata is not None
        return self.metadata.partitions[partition].leader

    def queries_have_leaders(self) -> bool:
        return all(self.leader_of(p) != NO_LEADER for _, p, _ in self.queries)

    def on_answer(self, generation: int, query: Query, offset: int) -> None:
        if generation != self.generation or self.gates_of is not None:
            return
        self.answers[query] = offset
        if set(self.answers) == self.queries:
            assert self.metadata is not None
            self.gates_of = build_gates(self.metadata, self.committed(self.metadata),
                                     self.answers)

    def limit(self, partition: int) -> int | None:
        """The first offset of `partition` not deliverable yet (None: no limit)."""
        assert self.gates_of is not None
        own = {p: (self.positions[p][0], g) for p, g in self.gates_of.items()}
        return gates.delivery_limit(self.gates_of[partition], self.known(own, {}))

    def fetchable(self, now: int) -> list[int]:
        if self.gates_of is None:
            return []
        return [p for p in sorted(self.gates_of) if p not in self.in_flight and
                self.idle_until.get(p, 0) <= now and
                gates.deliverable(self.positions[p][0], self.limit(p))]
