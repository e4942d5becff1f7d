"""KIP-253's ordered workload: resizes, ordered producers and an ordered consumer group
(docs/kip-253.md).

- Resizes: every 0.7-2 s of the fault window, CreatePartitions to a count drawn from
  2-8 (a shrink marks; growth is refused while partitions are marked), decided by the
  real controller. The group (`ordered_group`), once it has delivered a marked
  partition to its end, deletes its records; the leader then reports it empty in its
  heartbeat and the controller removes it.
- Producers (`ordered_producer`): keyed records, routed by the count of the image they
  hold (from a random broker, refreshed after a refusal), acks=all, idempotent.
- The group's members (`ordered_consumer`) share the partitions and are checked record
  by record (`ordered_group`).
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.dataplane.sim.invariants import KeyOrder
from broker.dataplane.sim.node import TOPIC_ID, Broker, Life, Reply
from broker.dataplane.sim.ordered_group import OrderedGroup
from broker.dataplane.sim.ordered_producer import RETRY_BACKOFF_MS, Attempt, OrderedProducer
from broker.dataplane.sim.producer import ACKS_ALL
from broker.dataplane.sim.world import World
from broker.kafka.ordered.gates import PartitionGates
from raft.common.errors import ErrorCode

PRODUCER = -4
PRODUCERS = 3
KEYS_PER_PRODUCER = 3
FIRST_PRODUCER_ID = 2_000
PRODUCE_TICK_MS = 10
MAX_COUNT = 8


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
        self.group = OrderedGroup(world, key_order, known=_positions_ungated
                                  if world.plant.gated_positions_known else None)
        for key in ("resizes_refused", "ordered_acked"):
            world.stats[key] = 0

    def start(self, resize_until: int) -> None:
        """Resizes and the members' pauses until `resize_until`; the clients until the
        end."""
        self.world.next_resize_at = self.world.rng.randint(500, 1500)
        self.world.at(self.world.next_resize_at, self._resize_tick, resize_until)
        self.world.at(0, self._produce_tick)
        self.group.start(pause_until=resize_until)

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
            world.next_resize_at = world.now + world.rng.randint(700, 2000)
            world.at(world.next_resize_at, self._resize_tick, until)

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
