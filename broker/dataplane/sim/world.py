"""The simulated cluster: a controller, brokers and clients exchanging messages over a
seeded network, one event at a time (time in simulated ms, no wall clock).

One topic with KIP-253 ordered delivery, every partition replicated on every broker.
Each broker does, for each partition its image gives it, what the Kafka handlers do,
with the same pure rules:
- as leader, answers a follower's fetch (`check_partition` fences stale epochs,
  `leader_fetch`, as fetch.py runs it, then the follower's progress and the high watermark, whole
  batches) and a produce (acks=all refused below `min.insync.replicas`; then, once the
  partition lock is free, the image read again there for the count and the mark
  (`produce_refusal`) and the leader epoch it stamps; checked against the log's producer
  state, `ProducerStates.check`: a retry already stored is answered with its offsets and
  not stored again; acks=1 answered then, acks=all by `acks_all_verdict` as the high
  watermark and its image move), and proposes ISR changes every half lag time
  (`isr_proposal`, one AlterPartition in flight);
- as follower, fetches from the leader its image names, truncates by
  `truncation_offset`, appends (its producer state follows each batch stored), takes
  min(leader's high watermark, its log end) and follows the leader's log start;
- heartbeats, reporting the marked partitions it leads with an empty log
  (`marked_led_partitions`), and registers again (a new incarnation) after a crash, with
  the producer state rebuilt from its log.
The controller is the real pure controller code: sessions (`metadata.broker_control`),
ISR changes (`metadata.isr`) and resizes (`metadata.controller.Controller`, growth and
shrink as one batch each). The clients are `plain` (Kafka's clients on partition 0) and
`ordered` (KIP-253's producers and consumer).
"""

from __future__ import annotations

import collections
import heapq
import random
from collections.abc import Callable
from typing import Any

from broker.dataplane.acks import acks_all_verdict
from broker.dataplane.divergence import SERVE, leader_fetch, truncation_offset
from broker.dataplane.progress import LeaderProgress
from broker.dataplane.sim.invariants import Checker
from broker.dataplane.sim.log import Record, SimLog
from broker.dataplane.sim.node import (
    TOPIC_ID,
    Broker,
    Life,
    Pending,
    Replica,
    Reply,
    life_of,
)
from broker.dataplane.sim.planted import Plant
from broker.dataplane.sim.producer import ACKS_ALL
from broker.kafka.ordered.rules import marked_led_partitions, produce_refusal, undeleted_count
from broker.kafka.partitions.producer_state import BatchHeader, Duplicate, Reject
from broker.kafka.replication.replica import check_partition
from metadata import records as rec
from metadata.admin import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerHeartbeatRequest,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    EmptyPartition,
    RegisterBrokerRequest,
)
from metadata.broker_control import broker_heartbeat, fence_broker, register_broker
from metadata.controller import Controller
from metadata.delta import MetadataDelta
from metadata.image import NO_LEADER, MetadataImage, PartitionImage, TopicImage
from metadata.isr import alter_partition
from metadata.topic_configs import ORDERED_DELIVERY
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid

CONTROLLER = 0
APPLY_LAG_MAX_MS = 200  # each broker applies each image with its own lag
METADATA_LAG_MS = (200, 1500)  # and more while it lags (a fault)
TOPIC = "sim"
INITIAL_PARTITIONS = 2
MIN_ISR = 2
HEARTBEAT_MS = 100
SESSION_TIMEOUT_MS = 600
LAG_TIME_MAX_MS = 500
FETCH_BACKOFF_MS = 20
FETCH_MAX_WAIT_MS = 100  # a follower's fetch with nothing new waits this long at most
LOCK_WAIT_MAX_MS = 5  # a produce waits for the partition lock (an append in flight)
SLOW_LOCK_WAIT_MS = (20, 200)  # on a slow broker (its disk too)
PRODUCE_TIMEOUT_MS = 2_000
REQUEST_TIMEOUT_MS = 400  # a fetch or AlterPartition unanswered this long is sent again
FETCH_MAX_RECORDS = 50


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
        self.committed_topic: TopicImage | None = None
        self.heartbeats: dict[int, int] = {}
        self.value = 0  # the last record's value (each record made gets a new one)
        self.keys: dict[int, bytes] = {}  # value -> its key (keyed records only)
        self.producing = True
        self.next_resize_at = -1  # when the ordered workload resizes the topic next
        self.stats = {"leader_changes": 0, "isr_changes": 0, "truncations": 0,
                      "acked": 0, "acked_leader": 0, "sent_no_ack": 0, "refused": 0,
                      "produce_retries": 0, "duplicates": 0, "epoch_bumps": 0,
                      "crashes": 0, "cuts": 0, "slow": 0, "metadata_lag": 0,
                      "metadata_freeze": 0,
                      "growths": 0, "shrinks": 0, "removals": 0, "count_refusals": 0}
        self.checkers: dict[int, Checker] = {}  # partition -> its invariants (this life)
        self.lives: dict[tuple[int, Life], Checker] = {}  # every life's, removed ones too
        # the last events, formatted only when a violation reports them
        self.trace: collections.deque[tuple[int, Callable[..., None], tuple[Any, ...]]] = \
            collections.deque(maxlen=trace_size)
        self._create_topic(brokers)

    def new_value(self) -> int:
        self.value += 1
        return self.value

    # -- the event loop ------------------------------------------------------------------

    def at(self, time: int, action: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (time, self._seq, action, args))

    def run_until(self, end: int) -> None:
        while self._queue and self._queue[0][0] <= end:
            time, _, action, args = heapq.heappop(self._queue)
            self.now = time
            self.trace.append((time, action, args))
            action(*args)
            self._check()
        self.now = end

    def _check(self) -> None:
        """The invariants after an event: each live replica's, then each leader's."""
        checkers = self.checkers
        for broker in self.brokers.values():
            for index, replica in broker.replicas.items():
                checker = checkers.get(index)
                if checker is not None and replica.progress is not None and \
                        replica.life == checker.life:
                    checker.check_replica(broker.broker_id, replica)
        if self.committed_topic is not None:
            for partition in self.committed_topic.partitions:
                checkers[partition.partition].check_leader(self.brokers, partition)

    def trace_lines(self) -> tuple[str, ...]:
        return tuple(f"{time:>6} {_describe(action, args)}" for time, action, args in self.trace)

    def start(self) -> None:
        for broker in self.brokers.values():
            self._boot(broker)
        self.at(0, self._controller_tick)

    def client_broker(self) -> Broker:
        """The broker a client's metadata comes from (a random one: it may lag)."""
        return self.brokers[self.rng.choice(sorted(self.brokers))]

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
        before = self.committed_topic
        self.committed_image = self.delta.build()
        after = self.committed_topic = self.committed_image.topic(TOPIC_ID)
        if before is not None and after is not None:
            for old, new in zip(before.partitions, after.partitions, strict=False):
                if life_of(old) == life_of(new):  # of every partition, each life alone
                    self.stats["leader_changes"] += new.leader not in (old.leader, NO_LEADER)
                    self.stats["isr_changes"] += new.isr != old.isr
            self.stats["removals"] += max(0, len(before.partitions) - len(after.partitions))
        partitions = after.partitions if after is not None else ()
        for partition in partitions:
            checker = self.checkers.get(partition.partition)
            if checker is None or checker.life != life_of(partition):
                checker = Checker(partition.partition, life_of(partition))
                self.checkers[partition.partition] = checker
                self.lives[(partition.partition, checker.life)] = checker
        for index in [i for i in self.checkers if i >= len(partitions)]:
            del self.checkers[index]
        for broker in self.brokers.values():
            lag = self.rng.randint(*METADATA_LAG_MS) if broker.metadata_lag_until > self.now \
                else self.rng.randint(0, APPLY_LAG_MAX_MS)
            self.send(CONTROLLER, broker.broker_id, self._on_image, broker,
                      broker.incarnation, self.committed_image, extra_ms=lag)

    def _create_topic(self, count: int) -> None:
        replicas = tuple(range(1, count + 1))
        self._emit(rec.Topic(name=TOPIC, topic_id=TOPIC_ID))
        self._emit(rec.TopicConfig(topic_id=TOPIC_ID, key=ORDERED_DELIVERY, value="true"))
        for index in range(INITIAL_PARTITIONS):
            self._emit(rec.Partition(topic_id=TOPIC_ID, partition=index, replicas=replicas,
                                     isr=replicas, leader=NO_LEADER))
        self._commit()

    def resize(self, count: int) -> bool:
        """CreatePartitions to `count` undeleted partitions, decided by the real
        controller (growth, or a shrink that marks): whether it was accepted."""
        decision = Controller(self.delta.build(), now_ms=self.now).handle(
            CreatePartitionsRequest(topics=(CreatePartitionsTopic(name=TOPIC, count=count),)),
            now_ms=self.now, rng=self.rng, next_offset=self.next_offset)
        assert isinstance(decision.response, CreatePartitionsResponse)
        if decision.response.results[0].error_code != ErrorCode.NONE:
            return False
        for record in decision.records:
            self._emit(record)
        self._commit()
        return True

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

    def _on_heartbeat(self, request: BrokerHeartbeatRequest) -> None:
        answer = broker_heartbeat(self.delta, self._emit, request,
                                  high_watermark=self.next_offset - 1)
        if answer.error_code == 0:
            self.heartbeats[request.broker_id] = self.now
        self._commit()

    def _on_alter_partition(self, broker: Broker, replica: Replica, partition: PartitionImage,
                            request: AlterPartitionRequest) -> None:
        answer = alter_partition(self.delta, self._emit, request)
        self._commit()
        result = answer.topics[0].partitions[0]
        self.send(CONTROLLER, broker.broker_id, self._on_alter_answer, broker, replica,
                  broker.incarnation, partition, result.error_code, result.partition_epoch)

    # -- a broker -------------------------------------------------------------------------

    def _boot(self, broker: Broker) -> None:
        broker.alive = True
        broker.incarnation = self.rng.getrandbits(62) + 1
        broker.broker_epoch = -1
        broker.metadata_frozen_until, broker.withheld = 0, None  # the process's freeze ended
        broker.apply(MetadataImage.empty())
        for replica in broker.replicas.values():
            self._open(replica)
        self.send(broker.broker_id, CONTROLLER, self._on_register, broker, broker.incarnation)
        self.at(self.now + HEARTBEAT_MS, self._broker_tick, broker, broker.incarnation)

    def _open(self, replica: Replica) -> None:
        """A replica's process state, as a starting broker (or a new replica) has it."""
        replica.log.producers = (self.plant.producer_state or SimLog.rebuilt_producers)(
            replica.log)
        replica.progress = LeaderProgress(log=replica.log, opened_at=self.now) \
            if self.plant.progress is None else self.plant.progress(replica.log, self.now)
        replica.fetch_sent = replica.alter_sent = -(1 << 40)
        replica.pending, replica.waiting_fetches = [], []

    def crash(self, broker: Broker, down_ms: int) -> None:
        if not broker.alive:
            return
        self.stats["crashes"] += 1
        broker.alive = False
        for replica in broker.replicas.values():
            replica.progress = None
        self.at(self.now + down_ms, self._boot, broker)

    def current(self, broker: Broker, incarnation: int) -> bool:
        return broker.alive and broker.incarnation == incarnation

    def _on_registered(self, broker: Broker, incarnation: int, broker_epoch: int) -> None:
        if not self.current(broker, incarnation):
            return
        broker.broker_epoch = broker_epoch  # -1: refused (the old session is alive)

    def _broker_tick(self, broker: Broker, incarnation: int) -> None:
        if not self.current(broker, incarnation):
            return
        if broker.broker_epoch >= 0:
            self.send(broker.broker_id, CONTROLLER, self._on_heartbeat, BrokerHeartbeatRequest(
                broker_id=broker.broker_id, broker_epoch=broker.broker_epoch,
                current_metadata_offset=broker.image.last_applied_offset,
                empty_marked_partitions=self._empty_marked(broker) or None))
        else:  # not registered: refused, or the request or its answer was lost
            self.send(broker.broker_id, CONTROLLER, self._on_register, broker, incarnation)
        for replica in list(broker.replicas.values()):
            self._maybe_fetch(broker, replica)
            self._maybe_alter_isr(broker, replica)
            self._settle_pending(broker, replica)
        self.at(self.now + HEARTBEAT_MS, self._broker_tick, broker, incarnation)

    def _empty_marked(self, broker: Broker) -> tuple[EmptyPartition, ...]:
        """The marked partitions it leads whose log is empty (`empty_marked`'s report)."""
        found = []
        for topic, partition in marked_led_partitions(broker.image, broker.broker_id):
            error, replica = broker.replica(partition.partition, ErrorCode.NONE)
            if replica is not None and replica.log.log_start_offset == \
                    replica.log.log_end_offset:
                found.append(EmptyPartition(
                    topic_id=topic.topic_id, partition=partition.partition,
                    leader_epoch=partition.leader_epoch,
                    log_start_offset=replica.log.log_start_offset,
                    log_end_offset=replica.log.log_end_offset))
        return tuple(found)

    def freeze_metadata(self, broker: Broker, length: int) -> None:
        """A fault: `broker` applies no image for `length` ms (it serves by the one it
        holds), then the newest it received, at once. It ends with the process."""
        if not broker.alive or length <= 0:
            return
        self.stats["metadata_freeze"] += 1
        broker.metadata_frozen_until = max(broker.metadata_frozen_until, self.now + length)
        self.at(broker.metadata_frozen_until, self._thaw, broker, broker.incarnation)

    def _thaw(self, broker: Broker, incarnation: int) -> None:
        withheld = broker.withheld
        if not self.current(broker, incarnation) or self.now < broker.metadata_frozen_until:
            return  # crashed since, or frozen again for longer
        broker.withheld = None
        if withheld is not None:
            self._on_image(broker, incarnation, withheld)

    def _on_image(self, broker: Broker, incarnation: int, image: MetadataImage) -> None:
        # an image sent to a process that crashed since is lost with its connection: a
        # restarted broker starts from an empty image, and one older than what it had
        # would remove the replicas of partitions added since
        if broker.incarnation != incarnation or \
                image.last_applied_offset <= broker.image.last_applied_offset:
            return
        if broker.metadata_frozen_until > self.now:
            if broker.withheld is None or \
                    image.last_applied_offset > broker.withheld.last_applied_offset:
                broker.withheld = image
            return
        before = {i: broker.partition(i) for i in broker.replicas}
        broker.apply(image)
        topic = broker.topic()
        partitions = topic.partitions if topic is not None else ()
        for index in [i for i in broker.replicas if i >= len(partitions) or
                      broker.replicas[i].life != life_of(partitions[i])]:
            del broker.replicas[index]  # removed (its directory staged for deletion)
        for partition in partitions:
            if partition.partition not in broker.replicas and \
                    broker.broker_id in partition.replicas:
                replica = Replica(partition.partition, life_of(partition))
                self._open(replica)
                broker.replicas[partition.partition] = replica
        for index, replica in list(broker.replicas.items()):
            after, old = broker.partition(index), before.get(index)
            if after is not None and after.leader == broker.broker_id and \
                    (old is None or old.leader != broker.broker_id):
                self._becomes_leader(replica)
            if after is not None and (old is None or old.leader_epoch != after.leader_epoch):
                # a new leader epoch: the fetch in flight is given up on (Kafka's fetcher
                # drops the partition's fetch state), so that an answer of an earlier term,
                # a diverging one among them, is never applied in this one
                replica.fetch_id += 1
                replica.fetch_sent = -(1 << 40)
            self._maybe_fetch(broker, replica)
            self._settle_pending(broker, replica)

    def _becomes_leader(self, replica: Replica) -> None:
        """A follower's producer state followed every batch it stored: it leads with it."""
        if self.plant.producer_state is not None:
            replica.log.producers = self.plant.producer_state(replica.log)
            return
        assert replica.log.producers == replica.log.rebuilt_producers(), \
            f"partition {replica.index}'s producer state is not its log's"

    # leader side

    def _on_fetch(self, leader: Broker, follower: Broker, replica: Replica, fetch_id: int,
                  epoch: int, offset: int, last_epoch: int, waited: bool = False) -> None:
        """A follower's fetch; one with nothing new waits for an append (Kafka's
        replica.fetch.wait.max.ms) unless it `waited` already."""
        resolved = check_partition(leader.image, leader.broker_id, partition=replica.index,
                                   topic_id=TOPIC_ID, current_leader_epoch=epoch)
        error, mine = leader.replica(replica.index, resolved.error)
        if mine is not None and mine.life != replica.life:
            error, mine = ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        answer: tuple[Any, ...]
        if mine is None or mine.progress is None:
            answer = ("error", error)
        else:
            assert resolved.partition is not None
            progress, log = mine.progress, mine.log
            verdict = leader_fetch(log.end_offset_for_epoch, log_start=log.log_start_offset,
                                   log_end=log.log_end_offset, fetch_offset=offset,
                                   last_fetched_epoch=last_epoch, from_follower=True)
            if isinstance(verdict, tuple):
                answer = ("diverging", verdict, progress.high_watermark)
            elif verdict != SERVE:
                answer = ("error", ErrorCode.OFFSET_OUT_OF_RANGE)
            else:
                progress.observe_partition(resolved.partition, self.now)
                progress.record_follower_fetch(follower.broker_id, offset, self.now)
                progress.maybe_advance_high_watermark(resolved.partition, leader.broker_id)
                self._settle_pending(leader, mine)
                if offset == log.log_end_offset and not waited:
                    fetch = (leader, follower, replica, fetch_id, epoch, offset, last_epoch,
                             True)
                    mine.waiting_fetches.append(fetch)
                    self.at(self.now + FETCH_MAX_WAIT_MS, self._answer_waiting, mine, fetch)
                    return
                answer = ("records", log.batches_from(offset, FETCH_MAX_RECORDS),
                          progress.high_watermark, log.log_start_offset)
        extra = self.rng.randint(100, 600) if follower.slow_until > self.now else 0
        self.send(leader.broker_id, follower.broker_id, self._on_fetch_answer, follower,
                  replica, fetch_id, offset, answer, extra_ms=extra)

    def _answer_waiting(self, replica: Replica, fetch: tuple[Any, ...] | None = None) -> None:
        """Answer the fetches waiting at `replica` (an append came), or `fetch` alone (its
        wait is over), unless answered already."""
        for waiting in [fetch] if fetch is not None else list(replica.waiting_fetches):
            if waiting in replica.waiting_fetches:
                replica.waiting_fetches.remove(waiting)
                leader = waiting[0]
                if leader.alive and leader.replicas.get(replica.index) is replica:
                    self._on_fetch(*waiting)

    def _leading(self, leader: Broker, index: int
                 ) -> tuple[ErrorCode, Replica | None, PartitionImage | None]:
        """The replica and partition state `leader` takes a produce in: its image's, if
        that names it leader (`check_partition`); else why not."""
        held = leader.replicas.get(index)
        if self.plant.leadership is not None and held is not None:
            view = self.plant.leadership(leader.broker_id, held, leader.partition(index),
                                         held.log.last_epoch)
            if view is not None and view.leader == leader.broker_id and \
                    held.progress is not None:
                return ErrorCode.NONE, held, view
        resolved = check_partition(leader.image, leader.broker_id, partition=index,
                                   topic_id=TOPIC_ID)
        error, replica = leader.replica(index, resolved.error)
        return error, replica, resolved.partition if replica is not None else None

    def checked_count(self, leader: Broker, client_count: int | None) -> int | None:
        """The count a leader checks a client's Produce or Fetch by (None: none): the
        client's, unless `dp_lagging_leader_answers_gate` lets a leader take a count
        ahead of its image (the controller's, which it has not applied)."""
        committed = self.committed_topic
        if self.plant.lagging_leader_unfenced and committed is not None and \
                client_count == undeleted_count(committed) and \
                leader.image.last_applied_offset < self.committed_image.last_applied_offset:
            return None
        return client_count

    def produce(self, leader: Broker, index: int, header: BatchHeader,
                values: tuple[int, ...], *, acks: int, reply: Reply,
                client_count: int | None = None) -> None:
        """The produce handler (`broker.kafka.partitions.produce`): the checks before the
        partition lock, by the image of the request's arrival."""
        error, replica, partition = self._leading(leader, index)
        if partition is not None and acks == ACKS_ALL and len(partition.isr) < MIN_ISR:
            error = ErrorCode.NOT_ENOUGH_REPLICAS
        if replica is None or error != ErrorCode.NONE:
            self.stats["refused"] += 1
            reply(error, -1, None)
            return
        wait = self.rng.randint(*SLOW_LOCK_WAIT_MS) if leader.slow_until > self.now else \
            self.rng.randint(0, LOCK_WAIT_MAX_MS)
        self.at(self.now + wait, self._produce_locked,
                leader, leader.incarnation, replica, header, values, acks, reply,
                client_count, leader.topic())

    def _produce_locked(self, leader: Broker, incarnation: int, replica: Replica,
                        header: BatchHeader, values: tuple[int, ...], acks: int, reply: Reply,
                        client_count: int | None, arrival: TopicImage | None) -> None:
        """Under the partition lock: the image read once more for the count, the mark and
        the epoch stamped (`produce_partition`), then the producer state's verdict."""
        if not self.current(leader, incarnation) or \
                leader.replicas.get(replica.index) is not replica:
            return  # the process died, or the partition went: no answer
        error, current, partition = self._leading(leader, replica.index)
        verdict = None if current is not replica else \
            replica.log.producers.check([header], replica.log.log_end_offset)
        counted = arrival if self.plant.count_and_stamp_two_images else leader.topic()
        if partition is not None and verdict is not None and \
                produce_refusal(counted, replica.index, self.checked_count(
                    leader, client_count)) is not None and \
                not isinstance(verdict, Duplicate):
            error = ErrorCode.INVALID_PARTITION_METADATA
        elif isinstance(verdict, Reject):
            error = verdict.error
        if partition is None or verdict is None or error != ErrorCode.NONE:
            self.stats["count_refusals" if error == ErrorCode.INVALID_PARTITION_METADATA
                       else "refused"] += 1
            reply(error if error != ErrorCode.NONE else ErrorCode.NOT_LEADER_OR_FOLLOWER, -1,
                  replica.life)
            return
        if isinstance(verdict, Duplicate):  # a retry of a batch stored: not stored again
            self.stats["duplicates"] += 1
            first, last = verdict.first_offset, verdict.last_offset
        else:
            epoch = partition.leader_epoch
            first, last = replica.log.append(header, tuple(
                Record(epoch, value, header.producer_id, header.producer_epoch,
                       header.base_sequence + i if header.base_sequence >= 0 else -1)
                for i, value in enumerate(values)))
            self._answer_waiting(replica)
        if acks == ACKS_ALL:
            replica.pending.append(Pending(reply=reply, leader_epoch=partition.leader_epoch,
                                           first_offset=first, offset=last,
                                           deadline=self.now + PRODUCE_TIMEOUT_MS))
            self._settle_pending(leader, replica)
        else:
            reply(ErrorCode.NONE, first, replica.life)

    def _settle_pending(self, leader: Broker, replica: Replica) -> None:
        """Answer the acks=all produces whose verdict is in (the produce handler's loop)."""
        if not replica.pending or replica.progress is None:
            return
        current = leader.partition(replica.index)
        if current is not None and life_of(current) != replica.life:
            current = None
        waiting = []
        for pending in replica.pending:
            found, end = replica.log.end_offset_for_epoch(pending.leader_epoch)
            still_in_log = found == pending.leader_epoch and end > pending.offset
            if current is not None and current.leader == leader.broker_id and still_in_log:
                replica.progress.maybe_advance_high_watermark(current, leader.broker_id)
            judged = current if self.plant.leadership is None else \
                self.plant.leadership(leader.broker_id, replica, current,
                                      pending.leader_epoch)
            verdict = self.plant.verdict(leader.broker_id, replica, pending, judged) or \
                acks_all_verdict(judged, leader.broker_id, leader_epoch=pending.leader_epoch,
                                 still_in_log=still_in_log,
                                 high_watermark=replica.progress.high_watermark,
                                 last_offset=pending.offset, min_isr=MIN_ISR)
            if verdict is None and self.now < pending.deadline:
                waiting.append(pending)
                continue
            pending.reply(ErrorCode.REQUEST_TIMED_OUT if verdict is None else verdict[0],
                          pending.first_offset, replica.life)
        replica.pending = waiting

    def _maybe_alter_isr(self, leader: Broker, replica: Replica) -> None:
        """The ISR manager's round (`broker.kafka.replication.isr`): at most one
        AlterPartition in flight; unanswered within the request timeout, sent again."""
        partition = leader.partition(replica.index)
        progress = replica.progress
        if partition is None or progress is None or partition.leader != leader.broker_id \
                or leader.broker_epoch < 0:
            return
        progress.observe_partition(partition, self.now)
        progress.maybe_advance_high_watermark(partition, leader.broker_id)
        if replica.alter_sent > self.now - REQUEST_TIMEOUT_MS:
            return
        if replica.alter_sent >= 0:  # its answer never came
            progress.unanswered(partition, self.now)
        proposal = progress.next_proposal(partition, leader.broker_id, self.now,
                                          lag_time_max_s=LAG_TIME_MAX_MS,
                                          eligible=frozenset(leader.image.unfenced_broker_ids()))
        replica.alter_sent = -(1 << 40)
        if proposal is None:
            return
        replica.alter_sent = self.now
        self.send(leader.broker_id, CONTROLLER, self._on_alter_partition, leader, replica,
                  partition, AlterPartitionRequest(
                      broker_id=leader.broker_id, broker_epoch=leader.broker_epoch,
                      topics=(AlterPartitionTopic(topic_id=TOPIC_ID, partitions=(
                          AlterPartitionData(partition=replica.index,
                                             leader_epoch=partition.leader_epoch,
                                             partition_epoch=partition.partition_epoch,
                                             new_isr=proposal),)),)))

    def _on_alter_answer(self, leader: Broker, replica: Replica, incarnation: int,
                         partition: PartitionImage, error_code: int,
                         partition_epoch: int) -> None:
        if self.current(leader, incarnation) and replica.progress is not None and \
                leader.replicas.get(replica.index) is replica:
            replica.alter_sent = -(1 << 40)
            replica.progress.answered(partition, error_code, partition_epoch, self.now,
                                      LAG_TIME_MAX_MS)

    # follower side

    def _maybe_fetch(self, follower: Broker, replica: Replica) -> None:
        partition = follower.partition(replica.index)
        if self.now - replica.fetch_sent < REQUEST_TIMEOUT_MS or partition is None or \
                replica.progress is None or partition.leader in (
                NO_LEADER, follower.broker_id) or follower.broker_id not in partition.replicas:
            return
        leader = self.brokers[partition.leader]
        replica.fetch_id += 1
        replica.fetch_sent = self.now
        self.send(follower.broker_id, leader.broker_id, self._on_fetch, leader, follower,
                  replica, replica.fetch_id, partition.leader_epoch,
                  replica.log.log_end_offset, replica.log.last_epoch)

    def _on_fetch_answer(self, follower: Broker, replica: Replica, fetch_id: int,
                         offset: int, answer: tuple[Any, ...]) -> None:
        if fetch_id != replica.fetch_id or not follower.alive or \
                follower.replicas.get(replica.index) is not replica:
            return  # an answer to a fetch given up on, a crashed incarnation's, a gone life's
        replica.fetch_sent = -(1 << 40)
        progress, log = replica.progress, replica.log
        assert progress is not None
        if answer[0] == "diverging":
            _, diverging, leader_hw = answer
            if self.plant.hw_from_diverging_answer:
                progress.high_watermark = max(progress.high_watermark,
                                              min(leader_hw, log.log_end_offset))
            end = self.plant.truncation(diverging, log) \
                if self.plant.truncation is not None else truncation_offset(
                    diverging, log.end_offset_for_epoch, log.log_end_offset)
            checker = self.checkers.get(replica.index)
            if checker is not None and checker.life == replica.life:
                checker.on_truncate(follower.broker_id, end, progress.high_watermark)
            self.stats["truncations"] += log.truncate_to(end) > 0
            progress.high_watermark = min(progress.high_watermark, log.log_end_offset)
        elif answer[0] == "records" and offset == log.log_end_offset:
            _, batches, leader_hw, leader_start = answer
            for header, records in batches:
                log.append(header, records)
            progress.high_watermark = max(progress.high_watermark,
                                          min(leader_hw, log.log_end_offset))
            # the log start follows the leader's (broker/kafka/replication/follower.py):
            # below it, a record the leader deleted is gone here too, diverged or not
            log.delete_records(leader_start)
        self.at(self.now + FETCH_BACKOFF_MS, self._maybe_fetch, follower, replica)


def _describe(action: Callable[..., None], args: tuple[Any, ...]) -> str:
    """An event for the trace: its handler and its arguments, brokers by id."""
    if getattr(action, "__name__", "") == "_arrive":
        src, dst, handler, inner = args
        return f"{src}->{dst} {_describe(handler, inner)}"
    shown = [f"b{a.broker_id}" if isinstance(a, Broker) else
             f"p{a.index}" if isinstance(a, Replica) else
             f"image@{a.last_applied_offset}" if isinstance(a, MetadataImage) else
             "topic" if isinstance(a, TopicImage) else
             a.describe() if hasattr(a, "describe") else getattr(a, "__name__", None) or repr(a)
             for a in args]
    return f"{getattr(action, '__name__', action)}({', '.join(map(str, shown))})"[:160]
