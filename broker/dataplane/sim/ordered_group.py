"""KIP-253's ordered consumer group in the simulator: its members (`ordered_consumer`), a
modelled coordinator, and the leaders' side of the members' requests (docs/kip-253.md).

- The group: 2 or 3 members (drawn from the seed), each taking its metadata every
  heartbeat from the broker it last fetched from (`OrderedMember.home`), so members of
  one generation may hold different images, one lagging with the leader it reads. A
  member asks for a rebalance when its image's layout changes, when it has no image of
  a partition assigned to it, on any error a leader answers and when its gates are not
  built in time; the classic protocol's eager rebalance follows
  one heartbeat interval later: every member commits the positions it moved (the real
  consumer commits synchronously before it joins again, so a clean rebalance
  redelivers nothing) and stops, the leader (the first member by name) assigns with its
  own image by the real rule (`broker.kafka.ordered.assignment.assign`), and each member
  starts on its share with its own image.
- The coordinator keeps the committed positions, each with the life of the partition
  it belongs to, and answers ConsumerGroupPosition with its real pure state
  (`broker.kafka.groups.group_positions.GroupPositions`), exchanged by every member
  every heartbeat interval (a request of an older generation is refused).
- The leaders answer a member's Fetch (the count checked, `count_mismatch`),
  OffsetForLeaderEpoch (fenced by the leader epoch the query carries:
  `check_partition`) and ListOffsets LATEST (of a marked partition, its log end once
  committed: `marked_end_answer`; else the high watermark). A member deletes the records
  of a marked partition it owns once it delivered them (DeleteRecords up to the high
  watermark), so that the leader reports it empty and the controller removes it.
- Each record delivered is checked against its partition's committed log, and each key's
  records, over the whole group, against the order they were acknowledged in
  (`invariants.KeyOrder`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.dataplane.sim.invariants import KeyOrder
from broker.dataplane.sim.log import Record
from broker.dataplane.sim.node import TOPIC_ID, Broker, Life, Replica, life_of
from broker.dataplane.sim.ordered_consumer import (
    EPOCH_END,
    KnownPositions,
    OrderedMember,
    Query,
    layout,
)
from broker.dataplane.sim.world import World
from broker.kafka.groups.group_positions import GroupPositions
from broker.kafka.ordered import gates
from broker.kafka.ordered.assignment import assign
from broker.kafka.ordered.marked_end import MARKED_END_WAIT_S, marked_end_answer
from broker.kafka.ordered.rules import count_mismatch, is_marked_for_deletion
from broker.kafka.replication.replica import check_partition
from raft.common.errors import ErrorCode

CONSUMER = -5
COORDINATOR = -6
MEMBERS = (2, 3)  # the group's size, drawn per seed
CONSUME_TICK_MS = 40
HEARTBEAT_INTERVAL_MS = 300  # position exchanges, metadata; a rebalance waits this long
CONSUMER_FETCH_RECORDS = 4  # at most, and at least one: drawn per fetch
CONSUMER_PAUSE_MS = (300, 2_000)  # a slow member (processing, a GC pause), every 1-4 s
IDLE_FETCH_WAIT_MS = 500  # Kafka's fetch.max.wait.ms
MARKED_END_POLL_MS = 10
NO_EPOCH = -1


@dataclass(slots=True)
class Coordinator:
    generation: int = 0
    committed: dict[int, tuple[int, Life]] = field(default_factory=dict)
    positions: GroupPositions = field(default_factory=GroupPositions)
    rebalance_at: int | None = None  # a rebalance asked for, due then


class OrderedGroup:
    def __init__(self, world: World, key_order: KeyOrder,
                 known: KnownPositions | None = None) -> None:
        self.world, self.key_order = world, key_order
        self.members = [OrderedMember(name=f"m{n}", home=world.rng.choice(sorted(world.brokers)))
                        for n in range(world.rng.choice(MEMBERS))]
        if known is not None:
            for member in self.members:
                member.known = known
        self.coordinator = Coordinator()
        for key in ("ordered_delivered", "generations", "rebalances_asked", "gate_errors",
                    "records_deleted", "consumer_pauses"):
            world.stats[key] = 0

    def start(self, pause_until: int) -> None:
        """Each member's ticks, and its pauses until `pause_until`."""
        world = self.world
        self.coordinator.rebalance_at = 0
        world.at(0, self._rebalance)
        for member in self.members:
            world.at(world.rng.randint(0, CONSUME_TICK_MS), self._consume_tick, member)
            world.at(world.rng.randint(0, HEARTBEAT_INTERVAL_MS), self._heartbeat, member)
            world.at(world.rng.randint(1000, 4000), self._pause, member, pause_until)

    def _pause(self, member: OrderedMember, until: int) -> None:
        world = self.world
        world.stats["consumer_pauses"] += 1
        member.paused_until = world.now + world.rng.randint(*CONSUMER_PAUSE_MS)
        if member.paused_until + 1000 < until:
            world.at(member.paused_until + world.rng.randint(1000, 4000), self._pause,
                     member, until)

    # -- the group: rebalances and the coordinator ------------------------------------

    def _take_metadata(self, member: OrderedMember) -> None:
        """Its home broker's image (a random one's while that one is down), unless older
        than the one the member last took."""
        home = self.world.brokers[member.home]
        source = home if home.alive else self.world.client_broker()
        topic = source.topic()
        if topic is not None and source.image.last_applied_offset >= member.metadata_offset:
            member.latest, member.metadata_offset = topic, source.image.last_applied_offset

    def _ask_rebalance(self, member: OrderedMember) -> None:
        """The member commits what it moved and stops; the group rebalances next
        heartbeat."""
        coordinator = self.coordinator
        self.world.stats["rebalances_asked"] += 1
        coordinator.committed.update(member.moved())
        member.stop()
        if coordinator.rebalance_at is None:
            coordinator.rebalance_at = self.world.now + HEARTBEAT_INTERVAL_MS
            self.world.at(coordinator.rebalance_at, self._rebalance)

    def _rebalance(self) -> None:
        world, coordinator = self.world, self.coordinator
        coordinator.rebalance_at = None
        for member in self.members:
            coordinator.committed.update(member.moved())
            member.stop()
        coordinator.generation += 1
        world.stats["generations"] += 1
        for member in self.members:
            self._take_metadata(member)
        leader = self.members[0].latest
        if leader is None:
            self._ask_rebalance(self.members[0])
            return
        shares = assign([m.name for m in self.members], range(len(leader.partitions)),
                        leader.marked_partitions)
        for member in self.members:
            if member.latest is None or not member.start_generation(
                    member.latest, coordinator.generation, shares[member.name],
                    coordinator.committed, world.now) or not member.queries_have_leaders():
                self._ask_rebalance(member)
                continue
            self._send_gate_queries(member)

    def _heartbeat(self, member: OrderedMember) -> None:
        """Every heartbeat interval, as the real consumer's background loop:
        ConsumerGroupPosition once the gates are built, then a look at the topic's
        layout in the member's metadata (changed: a rebalance)."""
        exchange = member.position_exchange()
        if exchange is not None:
            report, ask = exchange
            self.world.send(CONSUMER, COORDINATOR, self._on_exchange, member,
                            member.attempt, member.group_generation, report, ask)
        if member.metadata is not None:
            seen = layout(member.metadata)
            self._take_metadata(member)
            if member.latest is not None and layout(member.latest) != seen:
                self._ask_rebalance(member)
        self.world.at(self.world.now + HEARTBEAT_INTERVAL_MS, self._heartbeat, member)

    def _on_exchange(self, member: OrderedMember, attempt: int, generation: int,
                     report: dict[int, int], ask: set[int]) -> None:
        """The coordinator: a member's reports and asks (`GroupPositions.exchange`)."""
        if generation != self.coordinator.generation:
            return  # ILLEGAL_GENERATION: the member is stopped already
        asked = sorted(ask - set(report))
        entries = self.coordinator.positions.exchange(
            generation=generation, member_id=member.name,
            reports=[((TOPIC_ID, p), position) for p, position in sorted(report.items())],
            asks=[(TOPIC_ID, p) for p in asked])
        positions = {entry.key[1]: entry.position for entry in entries
                     if not entry.need_position and entry.key[1] in asked}
        wanted = {entry.key[1] for entry in entries if entry.need_position}
        self.world.send(COORDINATOR, CONSUMER, member.on_positions, attempt, report,
                        positions, wanted)

    # -- a member -----------------------------------------------------------------------

    def _consume_tick(self, member: OrderedMember) -> None:
        world = self.world
        stuck = member.owned and member.gates_of is None and \
            world.now - member.started_at > 1000 * MARKED_END_WAIT_S + 1000
        if stuck:
            self._ask_rebalance(member)
        for p in member.fetchable(world.now):
            if member.metadata is None:
                break  # a partition without a leader: stopped for a rebalance
            self._fetch(member, p)
        self._delete_drained(member)
        world.at(world.now + CONSUME_TICK_MS, self._consume_tick, member)

    def _send_gate_queries(self, member: OrderedMember) -> None:
        world, topic = self.world, member.metadata
        assert topic is not None
        for query in sorted(member.queries):
            kind, p, _ = query
            partition = topic.partitions[p]
            fence = NO_EPOCH if world.plant.lagging_leader_unfenced else partition.leader_epoch
            leader = world.brokers[partition.leader]
            handler = self._on_epoch_end if kind == EPOCH_END else self._on_latest
            world.send(CONSUMER, leader.broker_id, handler, leader, member, member.attempt,
                       query, fence)

    def _on_gate_answer(self, member: OrderedMember, attempt: int, query: Query,
                        error: ErrorCode, offset: int) -> None:
        if attempt != member.attempt:
            return
        if error != ErrorCode.NONE:
            self.world.stats["gate_errors"] += 1
            self._ask_rebalance(member)  # fresh metadata, and the gates built again
            return
        member.on_answer(attempt, query, offset)

    def _fetch(self, member: OrderedMember, p: int) -> None:
        assert member.metadata is not None
        leader = self.world.brokers.get(member.leader_of(p))
        if leader is None:
            self._ask_rebalance(member)
            return
        member.in_flight.add(p)
        member.home = leader.broker_id
        position, life = member.positions[p]
        self.world.send(CONSUMER, leader.broker_id, self._on_fetch, leader, member,
                        member.attempt, p, life, position, layout(member.metadata)[0],
                        NO_EPOCH if self.world.plant.member_fetch_unfenced
                        else member.metadata.partitions[p].leader_epoch)

    def _on_consumed(self, member: OrderedMember, attempt: int, p: int, position: int,
                     error: ErrorCode, records: list[tuple[int, Record]], start: int,
                     high_watermark: int) -> None:
        world = self.world
        if attempt != member.attempt:
            return
        member.in_flight.discard(p)
        if error == ErrorCode.OFFSET_OUT_OF_RANGE and start > position:
            member.positions[p] = (start, member.positions[p][1])  # ListOffsets EARLIEST
            return
        if error != ErrorCode.NONE:
            self._ask_rebalance(member)
            return
        if member.positions[p][0] != position:
            return
        member.high_watermarks[p] = high_watermark
        if not records:  # Fetch's max wait, as a pause before the next one
            member.idle_until[p] = world.now + IDLE_FETCH_WAIT_MS
        checker = world.checkers.get(p)
        for offset, record in records:
            if not gates.deliverable(offset, member.limit(p)):
                break
            life = member.positions[p][1]
            if checker is not None and checker.life == life:
                checker.on_consumed(offset, [record])
            key = world.keys.get(record.value)
            if key is not None:
                self.key_order.on_delivered(key, record.value, f"{member.name} partition "
                                            f"{p} offset {offset}")
            world.stats["ordered_delivered"] += 1
            member.positions[p] = (offset + 1, life)
            member.epochs[p] = record.leader_epoch

    def _delete_drained(self, member: OrderedMember) -> None:
        """DeleteRecords of each owned marked partition it has delivered to its end."""
        if member.metadata is None or member.gates_of is None:
            return
        for p in member.metadata.marked_partitions:
            leader = self.world.brokers.get(member.leader_of(p))
            if leader is not None and p in member.owned:
                position, life = member.positions[p]
                self.world.send(CONSUMER, leader.broker_id, self._on_delete_records,
                                leader, p, life, position)

    # -- the leaders' side --------------------------------------------------------------

    def _on_fetch(self, leader: Broker, member: OrderedMember, attempt: int, p: int,
                  life: Life, position: int, count: int, epoch: int) -> None:
        """A member's Fetch, with the count it partitioned by: up to the high watermark."""
        resolved = check_partition(leader.image, leader.broker_id, partition=p,
                                   topic_id=TOPIC_ID, current_leader_epoch=epoch)
        error, replica = leader.replica(p, resolved.error)
        if replica is not None and replica.life != life:
            error, replica = ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        if replica is not None and count_mismatch(resolved.topic,
                                                  self.world.checked_count(leader, count)):
            error, replica = ErrorCode.INVALID_PARTITION_METADATA, None
        records: list[tuple[int, Record]] = []
        start = high_watermark = -1
        if replica is not None and replica.progress is not None:
            start, high_watermark = replica.log.log_start_offset, \
                replica.progress.high_watermark
            if position < start:
                error = ErrorCode.OFFSET_OUT_OF_RANGE
            else:
                upper = min(high_watermark, position + self.world.rng.randint(
                    1, CONSUMER_FETCH_RECORDS))
                records = list(enumerate(replica.log.entries[position:upper],
                                         start=position))
        self.world.send(leader.broker_id, CONSUMER, self._on_consumed, member, attempt, p,
                        position, error, records, start, high_watermark)

    def _on_epoch_end(self, leader: Broker, member: OrderedMember, attempt: int,
                      query: Query, fence: int) -> None:
        """OffsetForLeaderEpoch: the end of the epoch asked, fenced by `fence`."""
        _, p, epoch = query
        resolved = check_partition(leader.image, leader.broker_id, partition=p,
                                   topic_id=TOPIC_ID, current_leader_epoch=fence)
        error, replica = leader.replica(p, resolved.error)
        end = -1 if replica is None else replica.log.end_offset_for_epoch(epoch)[1]
        self.world.send(leader.broker_id, CONSUMER, self._on_gate_answer, member, attempt,
                        query, error, end)

    def _on_latest(self, leader: Broker, member: OrderedMember, attempt: int, query: Query,
                   fence: int) -> None:
        """ListOffsets LATEST: the high watermark; of a marked partition, its log end once
        the high watermark reaches it (`marked_end`)."""
        p = query[1]
        resolved = check_partition(leader.image, leader.broker_id, partition=p,
                                   topic_id=TOPIC_ID, current_leader_epoch=fence)
        error, replica = leader.replica(p, resolved.error)
        if replica is None or replica.progress is None:
            self.world.send(leader.broker_id, CONSUMER, self._on_gate_answer, member,
                            attempt, query, error, -1)
        elif resolved.topic is not None and is_marked_for_deletion(resolved.topic, p) and \
                not self.world.plant.marked_end_is_high_watermark:
            self._await_marked_end(leader, leader.incarnation, replica, member, attempt,
                                   query, replica.log.log_end_offset,
                                   self.world.now + int(1000 * MARKED_END_WAIT_S))
        else:
            self.world.send(leader.broker_id, CONSUMER, self._on_gate_answer, member,
                            attempt, query, ErrorCode.NONE, replica.progress.high_watermark)

    def _await_marked_end(self, leader: Broker, incarnation: int, replica: Replica,
                          member: OrderedMember, attempt: int, query: Query, end: int,
                          deadline: int) -> None:
        """Asked again every few ms, as the handler waits on its partition's changes."""
        world = self.world
        current = leader.partition(query[1])
        alive = world.current(leader, incarnation) and \
            leader.replicas.get(query[1]) is replica and current is not None and \
            current.leader == leader.broker_id and life_of(current) == replica.life
        progress = replica.progress if alive else None
        if progress is not None and current is not None:
            progress.maybe_advance_high_watermark(current, leader.broker_id)
        answer = None if progress is None else marked_end_answer(end, progress.high_watermark)
        if answer is not None or progress is None or world.now >= deadline:
            world.send(leader.broker_id, CONSUMER, self._on_gate_answer, member, attempt,
                       query,
                       ErrorCode.NONE if answer is not None else ErrorCode.OFFSET_NOT_AVAILABLE,
                       -1 if answer is None else answer)
            return
        world.at(world.now + MARKED_END_POLL_MS, self._await_marked_end, leader, incarnation,
                 replica, member, attempt, query, end, deadline)

    def _on_delete_records(self, leader: Broker, p: int, life: Life, offset: int) -> None:
        resolved = check_partition(leader.image, leader.broker_id, partition=p,
                                   topic_id=TOPIC_ID)
        _, replica = leader.replica(p, resolved.error)
        if replica is None or replica.life != life or replica.progress is None or \
                resolved.topic is None or not is_marked_for_deletion(resolved.topic, p):
            return
        before = replica.log.log_start_offset
        replica.log.delete_records(min(offset, replica.progress.high_watermark))
        self.world.stats["records_deleted"] += replica.log.log_start_offset - before
