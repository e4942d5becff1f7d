"""A simulated KIP-253 ordered consumer group member, deciding as `tools.client.consumer`
does with the same pure rules (`broker.kafka.ordered.gates`,
`partitioner.deletion_blockers`); pure: the group (`ordered_group`) sends its queries,
fetches and position exchanges and hands it the answers.

A member holds its own metadata (from a random broker: the members of one generation may
hold different images, one lagging behind the others) and owns the partitions the group
leader assigned it. At a generation's start its positions come from the group's
committed ones of the same life of a partition (`gates.committed_position`; a new life
starts at offset 0), then each owned partition's gates are built from the leaders'
answers (OffsetForLeaderEpoch for the recorded epochs' ends, ListOffsets LATEST for a
marked partition's end), each query carrying the leader epoch of the member's image.
Every heartbeat interval it exchanges positions with the group through the coordinator:
it reports its position of each partition another member waits on when
`gates.should_report` says so (only a position `gates.known_positions` allows) and asks
for those its gates watch. Records are delivered in offset order up to
`gates.delivery_limit`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
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
Committed = Mapping[int, tuple[int, Life]]  # the group's: partition -> (offset, life)
# which positions the gates go by: (own: partition -> (position, gates), reported) -> known
KnownPositions = Callable[[Mapping[int, tuple[int, gates.PartitionGates]], Mapping[int, int]],
                          dict[int, int]]


def layout(topic: TopicImage) -> Layout:
    """What the group's assignment and its members' gates depend on."""
    return (undeleted_count(topic), tuple(life_of(p) for p in topic.partitions),
            topic.marked_partitions)


def _epoch_map(pairs: tuple[tuple[int, int], ...] | None) -> dict[int, int]:
    return dict(pairs or ())


def gate_queries(topic: TopicImage, committed: Mapping[int, int], owned: Iterable[int]
                 ) -> set[Query]:
    """What the leaders must answer before the `owned` partitions' gates can be built."""
    queries: set[Query] = set()
    initial, count = initial_count(topic), undeleted_count(topic)
    for p1 in owned:
        created_after = _epoch_map(topic.partitions[p1].leader_epoch_after_creation)
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


def build_gates(topic: TopicImage, committed: Mapping[int, int], owned: Iterable[int],
                answers: Mapping[Query, int]) -> dict[int, gates.PartitionGates]:
    """Each owned partition's gates from the answers to `gate_queries`."""
    out = {}
    initial, count = initial_count(topic), undeleted_count(topic)
    for p1 in owned:
        created_after = _epoch_map(topic.partitions[p1].leader_epoch_after_creation)
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


def committed_of(topic: TopicImage, committed: Committed, owned: Iterable[int]
                 ) -> dict[int, int]:
    """The group's committed positions of the owned partitions' lives in `topic`
    (`gates.committed_position`)."""
    out = {}
    for p in owned:
        held = committed.get(p)
        life = gates.incarnation(topic.topic_id, _epoch_map(
            topic.partitions[p].leader_epoch_after_creation))
        position = gates.committed_position(None if held is None else (
            held[0], gates.incarnation(topic.topic_id, _epoch_map(held[1]))), life)
        if position is not None:
            out[p] = position
    return out


@dataclass(slots=True, eq=False)
class OrderedMember:
    name: str
    # the broker its metadata comes from while that one is up: the last it fetched from
    # (Kafka's client asks its least loaded node, often one it is connected to), so a
    # member lags with the leader it reads
    home: int
    metadata: TopicImage | None = None  # its own image, this generation's (None: stopped)
    latest: TopicImage | None = None  # the image it last took (the next generation's)
    metadata_offset: int = -1  # of that image: it never takes an older one
    group_generation: int = -1  # the group's generation it runs in (-1: none)
    attempt: int = 0  # answers sent for an earlier start or stop are dropped
    owned: tuple[int, ...] = ()
    # its positions of the owned partitions, each with the life it belongs to, and where
    # each started this generation (only a position that moved is committed)
    positions: dict[int, tuple[int, Life]] = field(default_factory=dict)
    started: dict[int, int] = field(default_factory=dict)
    answers: dict[Query, int] = field(default_factory=dict)
    queries: set[Query] = field(default_factory=set)
    gates_of: dict[int, gates.PartitionGates] | None = None  # None: being built
    started_at: int = 0
    in_flight: set[int] = field(default_factory=set)  # partitions being fetched
    idle_until: dict[int, int] = field(default_factory=dict)  # fetched nothing: wait
    # the position exchange: the group's positions of the partitions this member's gates
    # watch, what it last reported, which of its partitions others wait on, and for
    # `gates.should_report` the last Fetch's high watermark and delivered record's epoch
    group_positions: dict[int, int] = field(default_factory=dict)
    reports: dict[int, gates.ReportState] = field(default_factory=dict)
    wanted: set[int] = field(default_factory=set)
    high_watermarks: dict[int, int] = field(default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)
    paused_until: int = 0
    # the positions the gates go by (`gates.known_positions`: a planted bug swaps it)
    known: KnownPositions = gates.known_positions

    def describe(self) -> str:
        return f"member {self.name}(gen {self.group_generation})"

    def start_generation(self, topic: TopicImage, generation: int, owned: Iterable[int],
                         committed: Committed, now: int) -> bool:
        """Start on `owned` in the group's `generation` with the image `topic`: whether
        the image has every owned partition (else the member asks for a rebalance)."""
        self.stop()
        owned = tuple(sorted(owned))
        if any(p >= len(topic.partitions) for p in owned):
            return False
        mine = committed_of(topic, committed, owned)
        self.metadata, self.group_generation, self.owned = topic, generation, owned
        self.started_at = now
        self.positions = {p: (mine.get(p, 0), life_of(topic.partitions[p])) for p in owned}
        self.started = {p: position for p, (position, _) in self.positions.items()}
        self.reports = {p: gates.ReportState() for p in owned}
        # a start at offset 0 is the earliest: gated as if nothing were committed
        self.queries, self.answers = gate_queries(topic, self.started, owned), {}
        if not self.queries:
            self.gates_of = build_gates(topic, self.started, owned, {})
        return True

    def stop(self) -> None:
        """End its generation (a rebalance): answers to what it sent are dropped."""
        self.attempt += 1
        self.metadata, self.owned, self.gates_of, self.in_flight = None, (), None, set()
        self.group_positions, self.wanted = {}, set()
        self.high_watermarks, self.epochs = {}, {}

    def moved(self) -> dict[int, tuple[int, Life]]:
        """The positions to commit: those that moved since the generation started."""
        return {p: held for p, held in self.positions.items()
                if p in self.owned and held[0] > self.started[p]}

    def leader_of(self, partition: int) -> int:
        assert self.metadata is not None
        return self.metadata.partitions[partition].leader

    def queries_have_leaders(self) -> bool:
        return all(self.leader_of(p) != NO_LEADER for _, p, _ in self.queries)

    def on_answer(self, attempt: int, query: Query, offset: int) -> None:
        if attempt != self.attempt or self.gates_of is not None:
            return
        self.answers[query] = offset
        if set(self.answers) == self.queries:
            assert self.metadata is not None
            self.gates_of = build_gates(self.metadata, self.started, self.owned,
                                        self.answers)

    def _own(self) -> dict[int, tuple[int, gates.PartitionGates]]:
        assert self.gates_of is not None
        return {p: (self.positions[p][0], g) for p, g in self.gates_of.items()}

    def limit(self, partition: int) -> int | None:
        """The first offset of `partition` not deliverable yet (None: no limit)."""
        assert self.gates_of is not None
        return gates.delivery_limit(self.gates_of[partition],
                                    self.known(self._own(), self.group_positions))

    def fetchable(self, now: int) -> list[int]:
        if self.gates_of is None or now < self.paused_until:
            return []
        return [p for p in self.owned if p not in self.in_flight and
                self.idle_until.get(p, 0) <= now and
                gates.deliverable(self.positions[p][0], self.limit(p))]

    def position_exchange(self) -> tuple[dict[int, int], set[int]] | None:
        """What to report (partition -> position) and ask for in this heartbeat's
        ConsumerGroupPosition (None: its gates are not built yet)."""
        if self.gates_of is None:
            return None
        known = self.known(self._own(), self.group_positions)
        report = {p: self.positions[p][0] for p in sorted(self.wanted & set(known))
                  if p in self.positions and gates.should_report(
                      self.reports[p], position=self.positions[p][0],
                      high_watermark=self.high_watermarks.get(p, -1),
                      epoch_before_position=self.epochs.get(p, -1))}
        watched = set().union(*(g.watched() for g in self.gates_of.values()))
        return report, watched - set(self.owned)

    def on_positions(self, attempt: int, report: Mapping[int, int],
                     positions: Mapping[int, int], wanted: Iterable[int]) -> None:
        """The coordinator's answer: the group's positions asked for, and which of this
        member's partitions others wait on."""
        if attempt != self.attempt:
            return
        for p, position in report.items():
            self.reports[p] = gates.ReportState(position, self.epochs.get(p, -1), True)
        self.group_positions.update(positions)
        self.wanted = set(wanted) & set(self.owned)
