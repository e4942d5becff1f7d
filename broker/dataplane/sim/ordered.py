"""KIP-253's ordered workload: resizes, ordered producers and an ordered consumer, with the
leaders' side of the consumer's requests (docs/kip-253.md).

- Resizes: every 1-3 s of the fault window, CreatePartitions to a count drawn from 2-8
  (a shrink marks; growth is refused while partitions are marked), decided by the real
  controller. The consumer's group, once it has delivered a marked partition to its
  end, deletes its records (DeleteRecords at its leader, up to the high watermark); the
  leader then reports it empty in its heartbeat and the controller removes it.
- Producers (`ordered_producer`): keyed records, routed by the count of the image they
  hold (from a random broker, refreshed after a refusal), acks=all, idempotent.
- The consumer (`ordered_consumer`) reads every partition and is checked record by
  record: each against its partition's committed log, and each key's records against
  the order they were acknowledged in (`invariants.KeyOrder`).
- The leaders answer the consumer's Fetch (the count checked, `count_mismatch`),
  OffsetForLeaderEpoch (fenced by the leader epoch the query carries:
  `check_partition`) and ListOffsets LATEST (of a marked partition, its log end once
  committed: `marked_end_answer`; else the high watermark).
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.dataplane.sim.invariants import KeyOrder
from broker.dataplane.sim.log import Record
from broker.dataplane.sim.node import TOPIC_ID, Broker, Life, Replica, Reply, life_of
from broker.dataplane.sim.ordered_consumer import EPOCH_END, OrderedConsumer, Query, layout
from broker.dataplane.sim.ordered_producer import RETRY_BACKOFF_MS, Attempt, OrderedProducer
from broker.dataplane.sim.producer import ACKS_ALL
from broker.dataplane.sim.world import World
from broker.kafka.ordered.gates import PartitionGates, deliverable
from broker.kafka.ordered.marked_end import MARKED_END_WAIT_S, marked_end_answer
from broker.kafka.ordered.rules import count_mismatch, is_marked_for_deletion
from broker.kafka.replication.replica import check_partition
from metadata.image import TopicImage
from raft.common.errors import ErrorCode

PRODUCER = -4
CONSUMER = -5
PRODUCERS = 3
KEYS_PER_PRODUCER = 3
FIRST_PRODUCER_ID = 2_000
PRODUCE_TICK_MS = 10
CONSUME_TICK_MS = 40
CONSUMER_FETCH_RECORDS = 4  # at most, and at least one: drawn per fetch
CONSUMER_PAUSE_MS = (300, 2_000)  # a slow consumer (processing, a GC pause), every 1-4 s
IDLE_FETCH_WAIT_MS = 500  # Kafka's fetch.max.wait.ms
METADATA_REFRESH_MS = 300  # the consumer's look at the topic's counts
MARKED_END_POLL_MS = 10
MAX_COUNT = 8
NO_EPOCH = -1


def _positions_ungated(own: Mapping[int, tuple[int, PartitionGates]],
                       reported: Mapping[int, int]) -> dict[int, int]:
    """`dp_gated_source_reports_position`: every position counts, gated or not."""
    return {**reported, **{p: position for p, (position, _) in own.items()}}


class OrderedWorkload:
    def __init__(self, world: World, key_order: KeyOrder) -> None:
        self.world = world
        self.key_order = key_order
        self.producers = [OrderedProducer(
            name=n, producer_id=FIRST_PRODUCER_ID + n,
            keys=tuple(f"key-{n * KEYS_PER_PRODUCER + k}".encode()
                       for k in range(KEYS_PER_PRODUCER))) for n in range(PRODUCERS)]
        self.consumer = OrderedConsumer()
        if world.plant.gated_positions_known:
            self.consumer.known = _positions_ungated
        self.refreshed_at = 0
        self.metadata_offset = -1  # of the image the consumer's metadata came from
        self.paused_until = 0
        for key in ("resizes_refused", "ordered_acked", "ordered_delivered", "generations",
                    "gate_errors", "records_deleted", "consumer_pauses"):
            world.stats[key] = 0

    def start(self, resize_until: int) -> None:
        """Resizes and consumer pauses until `resize_until`; the clients until the end."""
        self.world.at(self.world.rng.randint(500, 1500), self._resize_tick, resize_until)
        self.world.at(self.world.rng.randint(1000, 4000), self._pause, resize_until)
        self.world.at(0, self._produce_tick)
        self.world.at(0, self._consume_tick)

    # -- resizes --------------------------------------------------------------------

    def _resize_tick(self, until: int) -> None:
        world = self.world
        topic = world.committed_image.topic(TOPIC_ID)
        assert topic is not None
        counts = [c for c in range(2, MAX_COUNT + 1) if c != topic.undeleted_count]
        count = world.rng.choice(counts)
        if world.resize(count):
            world.stats["growths" if count > topic.undeleted_count else "shrinks"] += 1
        else:
            world.stats["resizes_refused"] += 1
        if world.now + 1000 < until:
            world.at(world.now + world.rng.randint(700, 2000), self._resize_tick, until)

    def _pause(self, until: int) -> None:
        world = self.world
        world.stats["consumer_pauses"] += 1
        self.paused_until = world.now + world.rng.randint(*CONSUMER_PAUSE_MS)
        if self.paused_until + 1000 < until:
            world.at(self.paused_until + world.rng.randint(1000, 4000), self._pause, until)

    # -- the producers --------------------------------------------------------------

    def _produce_tick(self) -> None:
        world = self.world
        for producer in self.producers:
            if producer.attempt is None and producer.unsent is None and world.producing:
                key, value = producer.next_record(world.new_value())
                world.keys[value] = key
            if producer.unsent is not None and producer.route_at <= world.now:
                if producer.metadata is None:
                    producer.metadata = world.client_broker().topic()
                if producer.metadata is not None and producer.route(world.now) is None:
                    producer.metadata = None  # no leader known: ask again
                    producer.route_at = world.now + RETRY_BACKOFF_MS
                if producer.attempt is not None:
                    self.key_order.on_sent(producer.attempt.key, producer.attempt.value)
                    self._send(producer)
            elif producer.due(world.now):
                world.stats["produce_retries"] += 1
                producer.resend(world.now)
                self._send(producer)
        world.at(world.now + PRODUCE_TICK_MS, self._produce_tick)

    def _send(self, producer: OrderedProducer) -> None:
        """To the partition's leader in the producer's metadata (its leader may have
        moved since: then that broker refuses, and the producer refreshes)."""
        attempt, metadata = producer.attempt, producer.metadata
        assert attempt is not None
        leader = None if metadata is None or attempt.partition >= len(metadata.partitions) \
            else self.world.brokers.get(metadata.partitions[attempt.partition].leader)
        if leader is None:  # none known: metadata again, and a resend after the backoff
            producer.metadata = self.world.client_broker().topic()
            attempt.resend_at = self.world.now + RETRY_BACKOFF_MS
            return
        number = attempt.number

        def reply(error: ErrorCode, first_offset: int, life: Life) -> None:
            self.world.send(leader.broker_id, PRODUCER, self._on_answer, producer,
                            attempt, number, error, first_offset, life)

        self.world.send(PRODUCER, leader.broker_id, self._on_produce, leader, attempt,
                        reply)

    def _on_produce(self, leader: Broker, attempt: Attempt, reply: Reply) -> None:
        self.world.produce(leader, attempt.partition, attempt.header, (attempt.value,),
                           acks=ACKS_ALL, reply=reply, client_count=attempt.count)

    def _on_answer(self, producer: OrderedProducer, attempt: Attempt, number: int,
                   error: ErrorCode, first_offset: int, life: Life) -> None:
        world = self.world
        if producer.attempt is not attempt or producer.attempt.number != number:
            return  # an answer to an attempt given up on
        if error == ErrorCode.NONE:
            acked = producer.on_acked()
            # by the life that stored it (a lagging leader may answer a retry stored in
            # a life the controller has removed since)
            world.lives[(acked.partition, life)].on_acked(first_offset, (acked.value,))
            self.key_order.on_acked(acked.key, acked.value)
            world.stats["ordered_acked"] += 1
            return
        producer.on_error(error, world.now)
        producer.metadata = world.client_broker().topic()

    # -- the consumer ---------------------------------------------------------------

    def _consume_tick(self) -> None:
        world, consumer = self.world, self.consumer
        source = world.client_broker()  # metadata never older than the last taken
        fresh, newer = source.topic(), source.image.last_applied_offset >= self.metadata_offset
        stale = consumer.metadata is None or (
            world.now - self.refreshed_at >= METADATA_REFRESH_MS and fresh is not None
            and layout(fresh) != layout(consumer.metadata))
        stuck = consumer.gates_of is None and \
            world.now - consumer.started_at > 1000 * MARKED_END_WAIT_S + 1000
        if fresh is not None and newer and (stale or stuck):
            self.metadata_offset = source.image.last_applied_offset
            self._start_generation(fresh)
        if world.now - self.refreshed_at >= METADATA_REFRESH_MS:
            self.refreshed_at = world.now
        for p in consumer.fetchable(world.now) if world.now >= self.paused_until else ():
            if consumer.gates_of is not None:
                self._fetch(p)
        self._delete_drained()
        world.at(world.now + CONSUME_TICK_MS, self._consume_tick)

    def _start_generation(self, topic: TopicImage) -> None:
        world, consumer = self.world, self.consumer
        world.stats["generations"] += 1
        queries = consumer.start_generation(topic, world.now)
        if not consumer.queries_have_leaders():
            consumer.invalidate()  # no leader to ask: metadata again next tick
            return
        for query in sorted(queries):
            kind, p, epoch = query
            partition = topic.partitions[p]
            fence = NO_EPOCH if world.plant.gate_queries_unfenced else partition.leader_epoch
            leader = world.brokers[partition.leader]
            handler = self._on_epoch_end if kind == EPOCH_END else self._on_latest
            world.send(CONSUMER, leader.broker_id, handler, leader, consumer.generation,
                       query, fence)

    def _on_gate_answer(self, generation: int, query: Query, error: ErrorCode,
                        offset: int) -> None:
        if generation != self.consumer.generation:
            return
        if error != ErrorCode.NONE:
            self.world.stats["gate_errors"] += 1
            self.consumer.invalidate()  # refresh and start the generation again
            return
        self.consumer.on_answer(generation, query, offset)

    def _fetch(self, p: int) -> None:
        consumer = self.consumer
        assert consumer.metadata is not None
        leader = self.world.brokers.get(consumer.leader_of(p))
        if leader is None:
            consumer.invalidate()
            return
        consumer.in_flight.add(p)
        position, life = consumer.positions[p]
        self.world.send(CONSUMER, leader.broker_id, self._on_fetch, leader,
                        consumer.generation, p, life, position,
                        layout(consumer.metadata)[0])

    def _on_consumed(self, generation: int, p: int, position: int, error: ErrorCode,
                     records: list[tuple[int, Record]], start: int) -> None:
        consumer, world = self.consumer, self.world
        if generation != consumer.generation:
            return
        consumer.in_flight.discard(p)
        if error == ErrorCode.OFFSET_OUT_OF_RANGE and start > position:
            consumer.positions[p] = (start, consumer.positions[p][1])  # ListOffsets EARLIEST
            return
        if error != ErrorCode.NONE:
            consumer.invalidate()
            return
        if consumer.positions[p][0] != position:
            return
        if not records:  # Fetch's max wait, as a pause before the next one
            consumer.idle_until[p] = world.now + IDLE_FETCH_WAIT_MS
        checker = world.checkers.get(p)
        for offset, record in records:
            if not deliverable(offset, consumer.limit(p)):
                break
            life = consumer.positions[p][1]
            if checker is not None and checker.life == life:
                checker.on_consumed(offset, [record])
            key = world.keys.get(record.value)
            if key is not None:
                self.key_order.on_delivered(key, record.value, f"partition {p} offset {offset}")
            world.stats["ordered_delivered"] += 1
            consumer.positions[p] = (offset + 1, life)

    def _delete_drained(self) -> None:
        """DeleteRecords of each marked partition the group has delivered to its end."""
        consumer = self.consumer
        if consumer.metadata is None or consumer.gates_of is None:
            return
        for p in consumer.metadata.marked_partitions:
            leader = self.world.brokers.get(consumer.leader_of(p))
            if leader is not None:
                position, life = consumer.positions[p]
                self.world.send(CONSUMER, leader.broker_id, self._on_delete_records,
                                leader, p, life, position)

    # -- the leaders' side --------------------------------------------------------------

    def _on_fetch(self, leader: Broker, generation: int, p: int, life: Life,
                  position: int, count: int) -> None:
        """A consumer's Fetch, with the count it partitioned by: up to the high watermark."""
        resolved = check_partition(leader.image, leader.broker_id, partition=p,
                                   topic_id=TOPIC_ID)
        error, replica = leader.replica(p, resolved.error)
        if replica is not None and replica.life != life:
            error, replica = ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        if replica is not None and count_mismatch(resolved.topic, count):
            error, replica = ErrorCode.INVALID_PARTITION_METADATA, None
        records: list[tuple[int, Record]] = []
        start = -1
        if replica is not None and replica.progress is not None:
            start = replica.log.log_start_offset
            if position < start:
                error = ErrorCode.OFFSET_OUT_OF_RANGE
            else:
                upper = min(replica.progress.high_watermark, position + self.world.rng.randint(
                    1, CONSUMER_FETCH_RECORDS))
                records = list(enumerate(replica.log.entries[position:upper],
                                         start=position))
        self.world.send(leader.broker_id, CONSUMER, self._on_consumed, generation, p,
                        position, error, records, start)

    def _on_epoch_end(self, leader: Broker, generation: int, query: Query, fence: int
                      ) -> None:
        """OffsetForLeaderEpoch: the end of the epoch asked, fenced by `fence`."""
        _, p, epoch = query
        resolved = check_partition(leader.image, leader.broker_id, partition=p,
                                   topic_id=TOPIC_ID, current_leader_epoch=fence)
        error, replica = leader.replica(p, resolved.error)
        end = -1 if replica is None else replica.log.end_offset_for_epoch(epoch)[1]
        self.world.send(leader.broker_id, CONSUMER, self._on_gate_answer, generation, query,
                        error, end)

    def _on_latest(self, leader: Broker, generation: int, query: Query, fence: int) -> None:
        """ListOffsets LATEST: the high watermark; of a marked partition, its log end once
        the high watermark reaches it (`marked_end`)."""
        p = query[1]
        resolved = check_partition(leader.image, leader.broker_id, partition=p,
                                   topic_id=TOPIC_ID, current_leader_epoch=fence)
        error, replica = leader.replica(p, resolved.error)
        if replica is None or replica.progress is None:
            self.world.send(leader.broker_id, CONSUMER, self._on_gate_answer, generation,
                            query, error, -1)
        elif resolved.topic is not None and is_marked_for_deletion(resolved.topic, p) and \
                not self.world.plant.marked_end_is_high_watermark:
            self._await_marked_end(leader, leader.incarnation, replica, generation, query,
                                   replica.log.log_end_offset,
                                   self.world.now + int(1000 * MARKED_END_WAIT_S))
        else:
            self.world.send(leader.broker_id, CONSUMER, self._on_gate_answer, generation,
                            query, ErrorCode.NONE, replica.progress.high_watermark)

    def _await_marked_end(self, leader: Broker, incarnation: int, replica: Replica,
                          generation: int, query: Query, end: int, deadline: int) -> None:
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
            world.send(leader.broker_id, CONSUMER, self._on_gate_answer, generation, query,
                       ErrorCode.NONE if answer is not None else ErrorCode.OFFSET_NOT_AVAILABLE,
                       -1 if answer is None else answer)
            return
        world.at(world.now + MARKED_END_POLL_MS, self._await_marked_end, leader, incarnation,
                 replica, generation, query, end, deadline)

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

