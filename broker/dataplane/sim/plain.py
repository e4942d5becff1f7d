"""Kafka's own clients on partition 0 (they send no partition count: KIP-253 checks
nothing for them). Three producers (`producer`: idempotent or not, acks 0, 1 or all,
drawn per producer from the seed; the first sends acks=all, whose writes must never be
lost) send batches to the leader a random broker's image names and retry as Kafka's
clients do; a consumer reads the partition in order, each record checked against the
committed log.
"""

from __future__ import annotations

from broker.dataplane.sim.log import Record
from broker.dataplane.sim.node import TOPIC_ID, Broker, Life
from broker.dataplane.sim.producer import (
    ACKS_ALL,
    ACKS_LEADER,
    ACKS_NONE,
    MAX_BATCH_RECORDS,
    ProducerBatch,
    SimProducer,
)
from broker.dataplane.sim.world import World
from broker.kafka.partitions.producer_state import NO_PRODUCER_ID
from broker.kafka.replication.replica import check_partition
from metadata.image import NO_LEADER
from raft.common.errors import ErrorCode

PRODUCER = -2
CONSUMER = -3
PARTITION = 0
PRODUCE_INTERVAL_MS = 15  # a new batch from one of the producers
PRODUCER_REQUEST_TIMEOUT_MS = 2_500  # then the client sends it again
PRODUCERS = 3
FIRST_PRODUCER_ID = 1_000


class PlainClients:
    def __init__(self, world: World) -> None:
        self.world = world
        self.producers = [self._new_producer(name) for name in range(PRODUCERS)]
        self.consumed = 0  # the consumer's position

    def start(self) -> None:
        self.world.at(0, self._produce_tick)
        self.world.at(0, self._consume_tick)

    # the producers

    def _new_producer(self, name: int) -> SimProducer:
        """Idempotent or not, acks drawn from the seed; the first sends acks=all."""
        rng = self.world.rng
        acks = ACKS_ALL if name == 0 else rng.choice((ACKS_ALL, ACKS_LEADER, ACKS_NONE))
        idempotent = rng.random() < 0.75
        return SimProducer(name=name, acks=acks, producer_id=FIRST_PRODUCER_ID + name
                           if idempotent else NO_PRODUCER_ID)

    def _produce_tick(self) -> None:
        """Each producer's retries that are due, and a new batch from one of them."""
        world = self.world
        if world.producing:
            for producer in self.producers:
                for batch in producer.due(world.now, PRODUCER_REQUEST_TIMEOUT_MS):
                    world.stats["produce_retries"] += 1
                    self._send_batch(producer, batch)
            producer = world.rng.choice(self.producers)
            if producer.can_send_new() and self._client_leader() is not None:
                count = world.rng.randint(1, MAX_BATCH_RECORDS)
                values = tuple(world.new_value() for _ in range(count))
                world.stats["sent_no_ack"] += producer.acks == ACKS_NONE
                self._send_batch(producer, producer.new_batch(values, world.now))
        world.at(world.now + PRODUCE_INTERVAL_MS, self._produce_tick)

    def _client_leader(self) -> Broker | None:
        """The leader a random broker's image names (a client's metadata may be stale)."""
        partition = self.world.client_broker().partition(PARTITION)
        if partition is None or partition.leader == NO_LEADER:
            return None
        return self.world.brokers[partition.leader]

    def _send_batch(self, producer: SimProducer, batch: ProducerBatch) -> None:
        """No leader known: the batch times out and is sent again."""
        leader = self._client_leader()
        if leader is not None:
            self.world.send(PRODUCER, leader.broker_id, self._on_produce, leader, producer,
                            batch, batch.attempt)

    def _on_produce(self, leader: Broker, producer: SimProducer, batch: ProducerBatch,
                    attempt: int) -> None:
        def reply(error: ErrorCode, first_offset: int, life: Life) -> None:
            # acks=0 gets nothing but a refusal's closed connection
            if producer.acks != ACKS_NONE or error != ErrorCode.NONE:
                self.world.send(leader.broker_id, PRODUCER, self._on_produce_answer,
                                producer, batch, attempt, error, first_offset)

        self.world.produce(leader, PARTITION, batch.header, batch.values,
                           acks=producer.acks, reply=reply)

    def _on_produce_answer(self, producer: SimProducer, batch: ProducerBatch, attempt: int,
                           error: ErrorCode, first_offset: int) -> None:
        world = self.world
        if producer.acks == ACKS_ALL and error == ErrorCode.NONE:
            # the leader vouches for it, whether or not the client still waits for it
            world.checkers[PARTITION].on_acked(first_offset, batch.values)
            world.stats["acked"] += 1
        if producer.acks == ACKS_NONE:
            producer.on_closed(batch.header, error)
        elif not producer.is_current(batch, attempt):
            return  # an answer to an attempt given up on (its connection was closed)
        elif error == ErrorCode.NONE:
            world.stats["acked_leader"] += producer.acks == ACKS_LEADER
            producer.on_acked(batch)
        elif not producer.on_error(batch, error, world.now):
            world.stats["epoch_bumps"] += 1

    # the consumer

    def _consume_tick(self) -> None:
        """Fetch from the position on, from the leader a random broker's image names."""
        world = self.world
        partition = world.client_broker().partition(PARTITION)
        if partition is not None and partition.leader != NO_LEADER:
            world.send(CONSUMER, partition.leader, self._on_consumer_fetch,
                       world.brokers[partition.leader], partition.leader_epoch,
                       self.consumed)
        world.at(world.now + 4 * PRODUCE_INTERVAL_MS, self._consume_tick)

    def _on_consumer_fetch(self, leader: Broker, epoch: int, position: int) -> None:
        """A consumer's Fetch: records from `position` up to the high watermark (the
        log end for a follower's Fetch only)."""
        world = self.world
        resolved = check_partition(leader.image, leader.broker_id, partition=PARTITION,
                                   topic_id=TOPIC_ID,
                                   current_leader_epoch=epoch)
        _, replica = leader.replica(PARTITION, resolved.error)
        if replica is None or replica.progress is None:
            return
        upper = world.plant.consumer_upper(replica) if world.plant.consumer_upper \
            is not None else replica.progress.high_watermark
        entries = replica.log.entries[position:upper]
        world.send(leader.broker_id, CONSUMER, self._on_consumed, position, entries)

    def _on_consumed(self, position: int, entries: list[Record]) -> None:
        if position != self.consumed:
            return  # an answer to an older position
        self.world.checkers[PARTITION].on_consumed(position, entries)
        self.consumed += len(entries)
