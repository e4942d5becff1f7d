"""The simulated cluster: a controller, brokers and producers exchanging messages over a
seeded network, one event at a time (time in simulated ms, no wall clock).

Each broker does what the Kafka handlers do, with the same pure rules:
- as leader, answers a follower's fetch (`check_partition` fences stale epochs,
  `diverging_epoch`, then the follower's progress and the high watermark, whole
  batches) and a produce (acks=all refused below `min.insync.replicas`; checked against
  the log's producer state, `ProducerStates.check`: a retry already stored is answered
  with its offsets and not stored again; appended in its image's leader epoch; acks=1
  answered then, acks=all by `acks_all_verdict` as the high watermark and its image
  move), and proposes ISR changes every half lag time (`isr_proposal`, one
  AlterPartition in flight);
- as follower, fetches from the leader its image names, truncates by
  `truncation_offset`, appends (its producer state follows each batch stored), and takes
  min(leader's high watermark, its log end);
- heartbeats, and registers again (a new incarnation) after a crash, with the producer
  state rebuilt from its log.
The producers (`producer`: idempotent or not, acks 0, 1 or all, drawn per producer from
the seed; the first sends acks=all, whose writes must never be lost) send batches to the
leader a random broker's image names, and retry as Kafka's clients do.
"""

from __future__ import annotations

import collections
import heapq
import random
from collections.abc import Callable
from typing import Any

from broker.dataplane.acks import acks_all_verdict
from broker.dataplane.divergence import diverging_epoch, truncation_offset
from broker.dataplane.progress import LeaderProgress
from broker.dataplane.sim.invariants import Checker
from broker.dataplane.sim.log import Record, SimLog
from broker.dataplane.sim.node import TOPIC_ID, Broker, Pending
from broker.dataplane.sim.planted import Plant
from broker.dataplane.sim.producer import (
    ACKS_ALL,
    ACKS_LEADER,
    ACKS_NONE,
    MAX_BATCH_RECORDS,
    ProducerBatch,
    SimProducer,
)
from broker.kafka.partitions.producer_state import NO_PRODUCER_ID, Duplicate, Reject
from broker.kafka.replication.replica import check_partition
from metadata import records as rec
from metadata.admin import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerHeartbeatRequest,
    RegisterBrokerRequest,
)
from metadata.broker_control import broker_heartbeat, fence_broker, register_broker
from metadata.delta import MetadataDelta
from metadata.image import NO_LEADER, MetadataImage, PartitionImage
from metadata.isr import alter_partition
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid

CONTROLLER = 0
PRODUCER = -2
CONSUMER = -3
MIN_ISR = 2
HEARTBEAT_MS = 100
SESSION_TIMEOUT_MS = 600
LAG_TIME_MAX_MS = 500
FETCH_BACKOFF_MS = 20
PRODUCE_INTERVAL_MS = 15  # a new batch from one of the producers
PRODUCE_TIMEOUT_MS = 2_000
PRODUCER_REQUEST_TIMEOUT_MS = PRODUCE_TIMEOUT_MS + 500  # then the client sends it again
REQUEST_TIMEOUT_MS = 400  # a fetch or AlterPartition unanswered this long is sent again
FETCH_MAX_RECORDS = 50
PRODUCERS = 3
FIRST_PRODUCER_ID = 1_000


class World:
    def __init__(self, *, brokers: int, seed: int, plant: Plant, trace_size: int = 40
                 ) -> None:
        self.rng = random.Random(seed)
        self.plant = plant
        self.now = 0
        self._queue: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self.brokers = {b: Broker(b) for b in range(1, brokers + 1)}
        self.cuts: dict[frozenset[int], int] = {}  # link -> how many faults cut it
        self.delta = MetadataDelta(MetadataImage.empty())
        self.next_offset = 0
        self.committed_image = MetadataImage.empty()
        self.heartbeats: dict[int, int] = {}
        self.value = 0  # the last record's value (each record made gets a new one)
        self.producers = [self._new_producer(name) for name in range(PRODUCERS)]
        self.consumed = 0  # the consumer's position
        self.producing = True
        self.stats = {"leader_changes": 0, "isr_changes": 0, "truncations": 0,
                      "acked": 0, "acked_leader": 0, "sent_no_ack": 0, "refused": 0,
                      "produce_retries": 0, "duplicates": 0, "epoch_bumps": 0,
                      "crashes": 0, "cuts": 0, "slow": 0, "metadata_lag": 0}
        self.checker = Checker(TOPIC_ID)  # the invariants
        self.trace: collections.deque[str] = collections.deque(maxlen=trace_size)
        self._create_topic(brokers)

    # -- the event loop ------------------------------------------------------------------

    def at(self, time: int, action: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (time, self._seq, action, args))

    def run_until(self, end: int) -> None:
        while self._queue and self._queue[0][0] <= end:
            time, _, action, args = heapq.heappop(self._queue)
            self.now = time
            self.trace.append(f"{time:>6} {_describe(action, args)}")
            action(*args)
            self.checker.after_event(self.brokers, self.committed_image)
        self.now = end

    def start(self) -> None:
        for broker in self.brokers.values():
            self._boot(broker)
        self.at(0, self._controller_tick)
        self.at(0, self._produce_tick)
        self.at(0, self._consume_tick)

    # -- the network ---------------------------------------------------------------------

    def linked(self, a: int, b: int) -> bool:
        return not self.cuts.get(frozenset((a, b)))

    def send(self, src: int, dst: int, handler: Callable[..., None], *args: Any,
             extra_ms: int = 0) -> None:
        """Deliver `handler(*args)` at `dst` after the link's delay, if the link holds
        when it is sent and when it arrives, and `dst` (a broker) is up then."""
        if not self.linked(src, dst):
            return
        delay = self.rng.randint(1, 5) + extra_ms
        self.at(self.now + delay, self._arrive, src, dst, handler, args)

    def _arrive(self, src: int, dst: int, handler: Callable[..., None],
                args: tuple[Any, ...]) -> None:
        if not self.linked(src, dst):
            return
        broker = self.brokers.get(dst)
        if broker is not None and not broker.alive:
            return
        handler(*args)

    # -- the controller (the real pure controller code) ---------------------------------

    def _emit(self, record: rec.Record) -> int:
        offset = self.next_offset
        assert self.delta.apply(record, offset) is None, record
        self.next_offset += 1
        return offset

    def _commit(self) -> None:
        """The records emitted so far are committed: every broker is sent the image."""
        before = self.committed_image.topic(TOPIC_ID)
        self.committed_image = self.delta.build()
        after = self.committed_image.topic(TOPIC_ID)
        if before is not None and after is not None:
            old, new = before.partitions[0], after.partitions[0]
            self.stats["leader_changes"] += new.leader_epoch != old.leader_epoch
            self.stats["isr_changes"] += new.isr != old.isr
        for broker in self.brokers.values():
            lag = self.rng.randint(200, 1500) if broker.metadata_lag_until > self.now else 0
            self.send(CONTROLLER, broker.broker_id, self._on_image, broker,
                      self.committed_image, extra_ms=lag)

    def _create_topic(self, count: int) -> None:
        replicas = tuple(range(1, count + 1))
        self._emit(rec.Topic(name="sim", topic_id=TOPIC_ID))
        self._emit(rec.Partition(topic_id=TOPIC_ID, partition=0, replicas=replicas,
                                 isr=replicas, leader=NO_LEADER))
        self._commit()

    def _controller_tick(self) -> None:
        """Fence the brokers whose session ran out."""
        for broker_id, last in sorted(self.heartbeats.items()):
            registered = self.delta.broker(broker_id)
            if registered is not None and not registered.fenced and \
                    self.now - last > SESSION_TIMEOUT_MS:
                fence_broker(self.delta, self._emit, broker_id)
                self._commit()
        self.at(self.now + 50, self._controller_tick)

    def _on_register(self, broker: Broker, incarnation: int) -> None:
        registered = self.delta.broker(broker.broker_id)
        alive = self.now - self.heartbeats.get(broker.broker_id, -SESSION_TIMEOUT_MS - 1) \
            <= SESSION_TIMEOUT_MS
        answer = register_broker(self.delta, self._emit, RegisterBrokerRequest(
            broker_id=broker.broker_id, incarnation_id=Uuid(incarnation)),
            session_alive=alive and registered is not None and not registered.fenced,
            next_offset=self.next_offset)
        self._commit()
        if answer.error_code == 0:
            self.heartbeats[broker.broker_id] = self.now
        self.send(CONTROLLER, broker.broker_id, self._on_registered, broker, incarnation,
                  answer.broker_epoch if answer.error_code == 0 else -1)

    def _on_heartbeat(self, broker_id: int, broker_epoch: int, applied: int) -> None:
        answer = broker_heartbeat(self.delta, self._emit, BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=broker_epoch, current_metadata_offset=applied),
            high_watermark=self.next_offset - 1)
        if answer.error_code == 0:
            self.heartbeats[broker_id] = self.now
        self._commit()

    def _on_alter_partition(self, broker: Broker, partition: PartitionImage,
                            request: AlterPartitionRequest) -> None:
        answer = alter_partition(self.delta, self._emit, request)
        self._commit()
        result = answer.topics[0].partitions[0]
        self.send(CONTROLLER, broker.broker_id, self._on_alter_answer, broker,
                  broker.incarnation, partition, result.error_code, result.partition_epoch)

    # -- a broker -------------------------------------------------------------------------

    def _boot(self, broker: Broker) -> None:
        broker.alive = True
        broker.incarnation = self.rng.getrandbits(62) + 1
        broker.broker_epoch = -1
        broker.image = MetadataImage.empty()
        broker.log.producers = (self.plant.producer_state or SimLog.rebuilt_producers)(
            broker.log)
        broker.progress = LeaderProgress(log=broker.log, opened_at=self.now) \
            if self.plant.progress is None else self.plant.progress(broker.log, self.now)
        broker.fetch_sent = broker.alter_sent = -(1 << 40)
        broker.pending = []
        self.send(broker.broker_id, CONTROLLER, self._on_register, broker, broker.incarnation)
        self.at(self.now + HEARTBEAT_MS, self._broker_tick, broker, broker.incarnation)

    def crash(self, broker: Broker, down_ms: int) -> None:
        if not broker.alive:
            return
        self.stats["crashes"] += 1
        broker.alive = False
        broker.progress = None
        self.at(self.now + down_ms, self._boot, broker)

    def _current(self, broker: Broker, incarnation: int) -> bool:
        return broker.alive and broker.incarnation == incarnation

    def _on_registered(self, broker: Broker, incarnation: int, broker_epoch: int) -> None:
        if not self._current(broker, incarnation):
            return
        broker.broker_epoch = broker_epoch  # -1: refused (the old session is alive)

    def _broker_tick(self, broker: Broker, incarnation: int) -> None:
        if not self._current(broker, incarnation):
            return
        if broker.broker_epoch >= 0:
            self.send(broker.broker_id, CONTROLLER, self._on_heartbeat, broker.broker_id,
                      broker.broker_epoch, broker.image.last_applied_offset)
        else:  # not registered: refused, or the request or its answer was lost
            self.send(broker.broker_id, CONTROLLER, self._on_register, broker, incarnation)
        self._maybe_fetch(broker)
        self._maybe_alter_isr(broker)
        self._settle_pending(broker)
        self.at(self.now + HEARTBEAT_MS, self._broker_tick, broker, incarnation)

    def _on_image(self, broker: Broker, image: MetadataImage) -> None:
        if image.last_applied_offset <= broker.image.last_applied_offset:
            return
        before = broker.partition()
        broker.image = image
        after = broker.partition()
        if after is not None and after.leader == broker.broker_id and \
                (before is None or before.leader != broker.broker_id):
            self._becomes_leader(broker)
        self._maybe_fetch(broker)
        self._settle_pending(broker)

    def _becomes_leader(self, broker: Broker) -> None:
        """A follower's producer state followed every batch it stored: it leads with it."""
        if self.plant.producer_state is not None:
            broker.log.producers = self.plant.producer_state(broker.log)
            return
        assert broker.log.producers == broker.log.rebuilt_producers(), \
            f"broker {broker.broker_id}'s producer state is not its log's"

    # leader side

    def _on_fetch(self, leader: Broker, follower: Broker, fetch_id: int, epoch: int,
                  offset: int, last_epoch: int) -> None:
        resolved = check_partition(leader.image, leader.broker_id, partition=0,
                                   topic_id=TOPIC_ID, current_leader_epoch=epoch)
        progress = leader.progress
        assert progress is not None
        answer: tuple[Any, ...]
        if resolved.error != ErrorCode.NONE:
            answer = ("error", resolved.error)
        else:
            assert resolved.partition is not None
            diverging = diverging_epoch(leader.log.end_offset_for_epoch, log_start=0,
                                        fetch_offset=offset, last_fetched_epoch=last_epoch)
            if diverging is not None:
                answer = ("diverging", diverging, progress.high_watermark)
            elif offset > leader.log.log_end_offset:
                answer = ("error", ErrorCode.OFFSET_OUT_OF_RANGE)
            else:
                progress.observe_partition(resolved.partition, self.now)
                progress.record_follower_fetch(follower.broker_id, offset, self.now)
                progress.maybe_advance_high_watermark(resolved.partition, leader.broker_id)
                answer = ("records", leader.log.batches_from(offset, FETCH_MAX_RECORDS),
                          progress.high_watermark)
                self._settle_pending(leader)
        extra = self.rng.randint(100, 600) if follower.slow_until > self.now else 0
        self.send(leader.broker_id, follower.broker_id, self._on_fetch_answer, follower,
                  fetch_id, offset, answer, extra_ms=extra)

    def _leading(self, leader: Broker) -> tuple[ErrorCode, PartitionImage | None]:
        """The partition state `leader` takes a produce in: its image's, if that names it
        leader (`check_partition`); else why not."""
        if self.plant.leadership is not None:
            view = self.plant.leadership(leader, leader.partition(), leader.log.last_epoch)
            if view is not None and view.leader == leader.broker_id:
                return ErrorCode.NONE, view
        resolved = check_partition(leader.image, leader.broker_id, partition=0,
                                   topic_id=TOPIC_ID)
        return resolved.error, resolved.partition if resolved.error == ErrorCode.NONE \
            else None

    def _on_produce(self, leader: Broker, producer: SimProducer, batch: ProducerBatch,
                    attempt: int) -> None:
        """The produce handler (`broker.kafka.partitions.produce`)."""
        error, partition = self._leading(leader)
        if partition is not None and producer.acks == ACKS_ALL and \
                len(partition.isr) < MIN_ISR:
            error = ErrorCode.NOT_ENOUGH_REPLICAS
        verdict = None if partition is None or error != ErrorCode.NONE else \
            leader.log.producers.check([batch.header], leader.log.log_end_offset)
        if isinstance(verdict, Reject):
            error = verdict.error
        if partition is None or error != ErrorCode.NONE:
            self.stats["refused"] += 1
            self._answer(leader, producer, batch, attempt, error)
            return
        if isinstance(verdict, Duplicate):  # a retry of a batch stored: not stored again
            self.stats["duplicates"] += 1
            first, last = verdict.first_offset, verdict.last_offset
        else:
            header, epoch = batch.header, partition.leader_epoch
            first, last = leader.log.append(header, tuple(
                Record(epoch, value, header.producer_id, header.producer_epoch,
                       header.base_sequence + i if header.base_sequence >= 0 else -1)
                for i, value in enumerate(batch.values)))
        if producer.acks == ACKS_ALL:
            leader.pending.append(Pending(producer=producer, batch=batch, attempt=attempt,
                                          leader_epoch=partition.leader_epoch,
                                          first_offset=first, offset=last,
                                          deadline=self.now + PRODUCE_TIMEOUT_MS))
            self._settle_pending(leader)
        elif producer.acks == ACKS_LEADER:
            self._answer(leader, producer, batch, attempt, ErrorCode.NONE, first)

    def _answer(self, leader: Broker, producer: SimProducer, batch: ProducerBatch,
                attempt: int, error: ErrorCode, first_offset: int = -1) -> None:
        """Answer a produce: acks=0 gets nothing but a refusal's closed connection."""
        if producer.acks != ACKS_NONE or error != ErrorCode.NONE:
            self.send(leader.broker_id, PRODUCER, self._on_produce_answer, producer, batch,
                      attempt, error, first_offset)

    def _settle_pending(self, leader: Broker) -> None:
        """Answer the acks=all produces whose verdict is in (the produce handler's loop)."""
        if not leader.pending or leader.progress is None:
            return
        current = leader.partition()
        waiting = []
        for pending in leader.pending:
            found, end = leader.log.end_offset_for_epoch(pending.leader_epoch)
            still_in_log = found == pending.leader_epoch and end > pending.offset
            if current is not None and current.leader == leader.broker_id and still_in_log:
                leader.progress.maybe_advance_high_watermark(current, leader.broker_id)
            judged = current if self.plant.leadership is None else \
                self.plant.leadership(leader, current, pending.leader_epoch)
            verdict = self.plant.verdict(leader, pending, judged) or acks_all_verdict(
                judged, leader.broker_id, leader_epoch=pending.leader_epoch,
                still_in_log=still_in_log, high_watermark=leader.progress.high_watermark,
                last_offset=pending.offset, min_isr=MIN_ISR)
            if verdict is None and self.now < pending.deadline:
                waiting.append(pending)
                continue
            error = ErrorCode.REQUEST_TIMED_OUT if verdict is None else verdict[0]
            self._answer(leader, pending.producer, pending.batch, pending.attempt, error,
                         pending.first_offset)
        leader.pending = waiting

    def _maybe_alter_isr(self, leader: Broker) -> None:
        """The ISR manager's round (`broker.kafka.replication.isr`): at most one
        AlterPartition in flight; unanswered within the request timeout, sent again."""
        partition = leader.partition()
        progress = leader.progress
        if partition is None or progress is None or partition.leader != leader.broker_id \
                or leader.broker_epoch < 0:
            return
        progress.observe_partition(partition, self.now)
        progress.maybe_advance_high_watermark(partition, leader.broker_id)
        if leader.alter_sent > self.now - REQUEST_TIMEOUT_MS:
            return
        if leader.alter_sent >= 0:  # its answer never came
            progress.unanswered(partition, self.now)
        proposal = progress.next_proposal(partition, leader.broker_id, self.now,
                                          lag_time_max_s=LAG_TIME_MAX_MS,
                                          eligible=frozenset(leader.image.unfenced_broker_ids()))
        leader.alter_sent = -(1 << 40)
        if proposal is None:
            return
        leader.alter_sent = self.now
        self.send(leader.broker_id, CONTROLLER, self._on_alter_partition, leader, partition,
                  AlterPartitionRequest(
                      broker_id=leader.broker_id, broker_epoch=leader.broker_epoch,
                      topics=(AlterPartitionTopic(topic_id=TOPIC_ID, partitions=(
                          AlterPartitionData(partition=0,
                                             leader_epoch=partition.leader_epoch,
                                             partition_epoch=partition.partition_epoch,
                                             new_isr=proposal),)),)))

    def _on_alter_answer(self, leader: Broker, incarnation: int, partition: PartitionImage,
                         error_code: int, partition_epoch: int) -> None:
        if self._current(leader, incarnation) and leader.progress is not None:
            leader.alter_sent = -(1 << 40)
            leader.progress.answered(partition, error_code, partition_epoch, self.now,
                                     LAG_TIME_MAX_MS)

    # follower side

    def _maybe_fetch(self, follower: Broker) -> None:
        partition = follower.partition()
        if self.now - follower.fetch_sent < REQUEST_TIMEOUT_MS or partition is None or \
                partition.leader in (
                NO_LEADER, follower.broker_id) or follower.broker_id not in partition.replicas:
            return
        leader = self.brokers[partition.leader]
        follower.fetch_id += 1
        follower.fetch_sent = self.now
        self.send(follower.broker_id, leader.broker_id, self._on_fetch, leader, follower,
                  follower.fetch_id, partition.leader_epoch, follower.log.log_end_offset,
                  follower.log.last_epoch)

    def _on_fetch_answer(self, follower: Broker, fetch_id: int, offset: int,
                         answer: tuple[Any, ...]) -> None:
        if fetch_id != follower.fetch_id or not follower.alive:
            return  # an answer to a fetch given up on, or to a crashed incarnation's
        follower.fetch_sent = -(1 << 40)
        progress = follower.progress
        assert progress is not None
        if answer[0] == "diverging":
            _, diverging, leader_hw = answer
            if self.plant.hw_from_diverging_answer:
                progress.high_watermark = max(progress.high_watermark,
                                              min(leader_hw, follower.log.log_end_offset))
            end = self.plant.truncation(diverging, follower.log) \
                if self.plant.truncation is not None else truncation_offset(
                    diverging, follower.log.end_offset_for_epoch, follower.log.log_end_offset)
            self.checker.on_truncate(follower.broker_id, end, progress.high_watermark)
            self.stats["truncations"] += follower.log.truncate_to(end) > 0
            progress.high_watermark = min(progress.high_watermark, follower.log.log_end_offset)
        elif answer[0] == "records" and offset == follower.log.log_end_offset:
            _, batches, leader_hw = answer
            for header, records in batches:
                follower.log.append(header, records)
            progress.high_watermark = max(progress.high_watermark,
                                          min(leader_hw, follower.log.log_end_offset))
        self.at(self.now + FETCH_BACKOFF_MS, self._maybe_fetch, follower)

    # the producers

    def _new_producer(self, name: int) -> SimProducer:
        """Idempotent or not, acks drawn from the seed; the first sends acks=all."""
        acks = ACKS_ALL if name == 0 else self.rng.choice((ACKS_ALL, ACKS_LEADER, ACKS_NONE))
        idempotent = self.rng.random() < 0.75
        return SimProducer(name=name, acks=acks, producer_id=FIRST_PRODUCER_ID + name
                           if idempotent else NO_PRODUCER_ID)

    def _produce_tick(self) -> None:
        """Each producer's retries that are due, and a new batch from one of them."""
        if self.producing:
            for producer in self.producers:
                for batch in producer.due(self.now, PRODUCER_REQUEST_TIMEOUT_MS):
                    self.stats["produce_retries"] += 1
                    self._send_batch(producer, batch)
            producer = self.rng.choice(self.producers)
            if producer.can_send_new() and self._client_leader() is not None:
                count = self.rng.randint(1, MAX_BATCH_RECORDS)
                values = tuple(range(self.value + 1, self.value + count + 1))
                self.value += count
                self.stats["sent_no_ack"] += producer.acks == ACKS_NONE
                self._send_batch(producer, producer.new_batch(values, self.now))
        self.at(self.now + PRODUCE_INTERVAL_MS, self._produce_tick)

    def _client_leader(self) -> Broker | None:
        """The leader a random broker's image names (a client's metadata may be stale)."""
        partition = self.brokers[self.rng.choice(sorted(self.brokers))].partition()
        if partition is None or partition.leader == NO_LEADER:
            return None
        return self.brokers[partition.leader]

    def _send_batch(self, producer: SimProducer, batch: ProducerBatch) -> None:
        """No leader known: the batch times out and is sent again."""
        leader = self._client_leader()
        if leader is not None:
            self.send(PRODUCER, leader.broker_id, self._on_produce, leader, producer, batch,
                      batch.attempt)

    def _on_produce_answer(self, producer: SimProducer, batch: ProducerBatch, attempt: int,
                           error: ErrorCode, first_offset: int) -> None:
        if producer.acks == ACKS_ALL and error == ErrorCode.NONE:
            # the leader vouches for it, whether or not the client still waits for it
            self.checker.on_acked(first_offset, batch.values)
            self.stats["acked"] += 1
        if producer.acks == ACKS_NONE:
            producer.on_closed(batch.header, error)
        elif not producer.is_current(batch, attempt):
            return  # an answer to an attempt given up on (its connection was closed)
        elif error == ErrorCode.NONE:
            self.stats["acked_leader"] += producer.acks == ACKS_LEADER
            producer.on_acked(batch)
        elif not producer.on_error(batch, error, self.now):
            self.stats["epoch_bumps"] += 1

    # the consumer

    def _consume_tick(self) -> None:
        """Fetch from the position on, from the leader a random broker's image names."""
        source = self.brokers[self.rng.choice(sorted(self.brokers))]
        partition = source.partition()
        if partition is not None and partition.leader != NO_LEADER:
            self.send(CONSUMER, partition.leader, self._on_consumer_fetch,
                      self.brokers[partition.leader], partition.leader_epoch,
                      self.consumed)
        self.at(self.now + 4 * PRODUCE_INTERVAL_MS, self._consume_tick)

    def _on_consumer_fetch(self, leader: Broker, epoch: int, position: int) -> None:
        """A consumer's Fetch: records from `position` up to the high watermark (the
        log end for a follower's Fetch only)."""
        resolved = check_partition(leader.image, leader.broker_id, partition=0,
                                   topic_id=TOPIC_ID, current_leader_epoch=epoch)
        if resolved.error != ErrorCode.NONE or leader.progress is None:
            return
        upper = self.plant.consumer_upper(leader) if self.plant.consumer_upper is not None \
            else leader.progress.high_watermark
        entries = leader.log.entries[position:upper]
        self.send(leader.broker_id, CONSUMER, self._on_consumed, position, entries)

    def _on_consumed(self, position: int, entries: list[Record]) -> None:
        if position != self.consumed:
            return  # an answer to an older position
        self.checker.on_consumed(position, entries)
        self.consumed += len(entries)


def _describe(action: Callable[..., None], args: tuple[Any, ...]) -> str:
    """An event for the trace: its handler and its arguments, brokers by id."""
    if getattr(action, "__name__", "") == "_arrive":
        src, dst, handler, inner = args
        return f"{src}->{dst} {_describe(handler, inner)}"
    shown = [f"b{a.broker_id}" if isinstance(a, Broker) else "world" if isinstance(a, World) else
             f"image@{a.last_applied_offset}" if isinstance(a, MetadataImage) else
             f"producer{a.name}" if isinstance(a, SimProducer) else
             f"batch(seq {a.header.base_sequence}, values {a.values})"
             if isinstance(a, ProducerBatch) else
             getattr(a, "__name__", None) or repr(a) for a in args]
    return f"{getattr(action, '__name__', action)}({', '.join(map(str, shown))})"[:160]
