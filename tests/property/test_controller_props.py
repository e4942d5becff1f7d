"""Stateful property test: random admin requests, broker churn, commits and leadership
changes against the real controller and image, checked against a small model.

Invariants (the topic-ID rules and the replay's checks, tools/replay/checks.py): topic
IDs are unique, never ZERO or the sentinel, never reused; a name maps to at most one live
ID; every partition names a live topic; replaying the committed records from scratch
rebuilds an image with the same content hash (and the view = replay of committed +
pending).
"""

from __future__ import annotations

import random

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from metadata import records as rec
from metadata.admin import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
    BrokerHeartbeatRequest,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicState,
    RegisterBrokerRequest,
    RenameTopicRequest,
)
from metadata.controller import Controller, Decision
from metadata.delta import replay
from metadata.image import NO_LEADER, MetadataImage
from raft.common.errors import ErrorCode
from raft.common.uuid import RESERVED, Uuid

NAMES = ("a", "b", "c", "d")
BROKERS = (1, 2, 3, 4)


class ControllerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now_ms = 0
        self.controller = Controller(MetadataImage.empty(), now_ms=0)
        self.log: list[tuple[int, rec.Record]] = []  # the leader's log; the tail may be cut
        self.committed = 0  # entries of `log` known committed
        self.epochs: dict[int, int] = {}
        self.seen_ids: list[Uuid] = []  # every ID a create returned, for deletes by old ID
        # the model of the controller's view (committed + pending): live name -> ID
        self.live: dict[str, Uuid] = {}
        # (log length, live) after each decision: the committed model at a boundary
        self.snapshots: list[tuple[int, dict[str, Uuid]]] = [(0, {})]

    @initialize(seed=st.integers(0, 2**32), brokers=st.integers(0, len(BROKERS)))
    def start(self, seed: int, brokers: int) -> None:
        """Some brokers registered and unfenced, so creates can succeed from the start."""
        self.rng = random.Random(seed)
        for broker_id in BROKERS[:brokers]:
            self.register(broker_id)
        self.commit_all()
        for broker_id in BROKERS[:brokers]:
            self.heartbeat_broker(broker_id, caught_up=True)
        self.commit_all()

    # --- plumbing ---------------------------------------------------------------------

    def run(self, request: object) -> Decision:
        decision = self.controller.handle(request, now_ms=self.now_ms, rng=self.rng,  # type: ignore[arg-type]
                                          next_offset=len(self.log))
        self.append(decision)
        return decision

    def append(self, decision: Decision) -> None:
        assert decision.base_offset == len(self.log)
        for record in decision.records:
            event(type(record).__name__)
        top = getattr(decision.response, "error_code", None)
        topics = getattr(decision.response, "topics", None) or getattr(
            decision.response, "responses", None) or getattr(decision.response, "results", ())
        codes = [top, *(getattr(t, "error_code", None) for t in topics),
                 *(p.error_code for t in topics for p in getattr(t, "partitions", ())
                   if hasattr(p, "error_code"))]  # AlterPartition: per partition
        for code in codes:
            if code:
                event(f"error {ErrorCode(code).name}")
        self.log.extend(enumerate(decision.records, start=decision.base_offset))
        if decision.records:
            self.snapshots.append((len(self.log), dict(self.live)))

    def unfenced(self) -> int:
        return len(self.controller.view.unfenced_broker_ids())

    # --- topics -----------------------------------------------------------------------

    @rule(name=st.sampled_from(NAMES), partitions=st.integers(1, 3), factor=st.integers(1, 4))
    def create(self, name: str, partitions: int, factor: int) -> None:
        brokers = self.unfenced()
        response = self.run(CreateTopicsRequest(topics=(CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=factor),))).response
        assert isinstance(response, CreateTopicsResponse)
        result = response.topics[0]
        if name in self.live:
            assert result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        elif factor > brokers:
            assert result.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
        else:
            assert result.error_code == ErrorCode.NONE
            assert result.topic_id not in self.seen_ids
            assert result.topic_id not in RESERVED
            self.seen_ids.append(result.topic_id)
            self.live[name] = result.topic_id
            self.snapshots[-1] = (len(self.log), dict(self.live))

    @rule(name=st.sampled_from(NAMES))
    def delete_by_name(self, name: str) -> None:
        result = self.run(DeleteTopicsRequest(topics=(DeleteTopicState(name=name),))
                          ).response.responses[0]  # type: ignore[union-attr]
        if name in self.live:
            assert (result.error_code, result.topic_id) == (ErrorCode.NONE, self.live.pop(name))
            self.snapshots[-1] = (len(self.log), dict(self.live))
        else:
            assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    @precondition(lambda self: self.seen_ids)
    @rule(data=st.data())
    def delete_by_id(self, data: st.DataObject) -> None:
        topic_id = data.draw(st.sampled_from(self.seen_ids))
        result = self.run(DeleteTopicsRequest(topics=(DeleteTopicState(name="ignored",
                                                                       topic_id=topic_id),))
                          ).response.responses[0]  # type: ignore[union-attr]
        names = [n for n, i in self.live.items() if i == topic_id]
        if names:
            assert (result.error_code, result.name) == (ErrorCode.NONE, names[0])
            del self.live[names[0]]
            self.snapshots[-1] = (len(self.log), dict(self.live))
        else:
            assert result.error_code == ErrorCode.UNKNOWN_TOPIC_ID

    @precondition(lambda self: self.seen_ids)
    @rule(data=st.data(), new_name=st.sampled_from(NAMES))
    def rename(self, data: st.DataObject, new_name: str) -> None:
        topic_id = data.draw(st.sampled_from(self.seen_ids))
        before = len(self.log)
        response = self.run(RenameTopicRequest(topic_id=topic_id, new_name=new_name)).response
        names = [n for n, i in self.live.items() if i == topic_id]
        if not names:
            assert response.error_code == ErrorCode.UNKNOWN_TOPIC_ID  # type: ignore[union-attr]
        elif new_name in self.live and self.live[new_name] != topic_id:
            assert response.error_code == ErrorCode.TOPIC_ALREADY_EXISTS  # type: ignore[union-attr]
        else:
            assert response.error_code == ErrorCode.NONE  # type: ignore[union-attr]
            del self.live[names[0]]
            self.live[new_name] = topic_id
            if len(self.log) > before:
                self.snapshots[-1] = (len(self.log), dict(self.live))

    @rule(name=st.sampled_from(NAMES), extra=st.integers(1, 2))
    def grow(self, name: str, extra: int) -> None:
        topic = self.controller.view.topic_by_name(name)
        count = (len(topic.partitions) if topic else 0) + extra
        brokers = self.unfenced()
        result = self.run(CreatePartitionsRequest(topics=(CreatePartitionsTopic(
            name=name, count=count),))).response.results[0]  # type: ignore[union-attr]
        if topic is None:
            assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif topic.replication_factor > brokers:
            assert result.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
        else:
            assert result.error_code == ErrorCode.NONE
            grown = self.controller.view.topic_by_name(name)
            assert grown is not None
            assert len(grown.partitions) == count

    # --- brokers and time -------------------------------------------------------------

    @rule(broker_id=st.sampled_from(BROKERS))
    def register(self, broker_id: int) -> None:
        response = self.run(RegisterBrokerRequest(broker_id=broker_id,
                                                  incarnation_id=Uuid.random(self.rng))).response
        assert response.error_code in (ErrorCode.NONE, ErrorCode.DUPLICATE_BROKER_REGISTRATION)  # type: ignore[union-attr]
        if response.error_code == ErrorCode.NONE:  # type: ignore[union-attr]
            self.epochs[broker_id] = response.broker_epoch  # type: ignore[union-attr]

    @precondition(lambda self: self.epochs)
    @rule(data=st.data(), caught_up=st.booleans())
    def heartbeat(self, data: st.DataObject, caught_up: bool) -> None:
        self.heartbeat_broker(data.draw(st.sampled_from(sorted(self.epochs))), caught_up)

    def heartbeat_broker(self, broker_id: int, caught_up: bool) -> None:
        response = self.run(BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=self.epochs[broker_id],
            current_metadata_offset=len(self.log) - 1 if caught_up else -1)).response
        # a registration can be lost with leadership, or replaced by a newer incarnation
        assert response.error_code in (ErrorCode.NONE, ErrorCode.STALE_BROKER_EPOCH,  # type: ignore[union-attr]
                                       ErrorCode.BROKER_ID_NOT_REGISTERED)

    @rule(ms=st.sampled_from([0, 1000, 3000, 5000, 9000]))
    def advance_time(self, ms: int) -> None:
        self.now_ms += ms
        decision = self.controller.tick(self.now_ms, next_offset=len(self.log))
        if decision is not None:
            self.append(decision)

    @precondition(lambda self: self.epochs)
    @rule(data=st.data())
    def isolate_broker(self, data: st.DataObject) -> None:
        """One broker stops heartbeating while the others keep on: it alone is fenced and
        leadership moves off it."""
        victim = data.draw(st.sampled_from(sorted(self.epochs)))
        self.now_ms += 9000
        for broker_id in sorted(self.epochs):
            if broker_id != victim:
                self.heartbeat_broker(broker_id, caught_up=True)
        self.advance_time(0)
        broker = self.controller.view.brokers.get(victim)
        assert broker is None or broker.fenced or broker.broker_epoch != self.epochs[victim]

    @rule(data=st.data(), stale=st.booleans(), well_formed=st.booleans())
    def alter_isr(self, data: st.DataObject, stale: bool, well_formed: bool) -> None:
        """A partition leader proposes a random ISR (AlterPartition), sometimes on stale state:
        whatever is accepted keeps the partition well formed and adds no fenced broker."""
        view = self.controller.view
        led = [(t.topic_id, p) for t in view.topics.values() for p in t.partitions
               if p.leader in self.epochs]
        if not led:
            return
        topic_id, part = data.draw(st.sampled_from(sorted(led, key=lambda x: (x[0],
                                                                              x[1].partition))))
        others = [r for r in part.replicas if r != part.leader]
        new_isr: tuple[int, ...]
        if others and well_formed:  # the leader and some other replicas
            new_isr = (part.leader, *data.draw(st.lists(st.sampled_from(others), unique=True)))
        else:
            new_isr = tuple(data.draw(st.lists(st.sampled_from(BROKERS), unique=True,
                                               max_size=4)))
        response = self.run(AlterPartitionRequest(
            broker_id=part.leader, broker_epoch=self.epochs[part.leader],
            topics=(AlterPartitionTopic(topic_id=topic_id, partitions=(AlterPartitionData(
                partition=part.partition, leader_epoch=part.leader_epoch,
                partition_epoch=part.partition_epoch - stale, new_isr=new_isr),)),))).response
        assert isinstance(response, AlterPartitionResponse)
        (result,) = response.topics[0].partitions
        assert result.error_code in (
            ErrorCode.NONE, ErrorCode.STALE_BROKER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
            ErrorCode.INVALID_REQUEST, ErrorCode.INELIGIBLE_REPLICA)
        if result.error_code == ErrorCode.NONE:
            assert not stale
            assert result.isr == new_isr
            added = set(new_isr) - set(part.isr)
            assert all(not view.brokers[b].fenced for b in added)

    # --- the log ------------------------------------------------------------------------

    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        boundaries = [n for n, _ in self.snapshots if n > self.committed]
        if not boundaries:
            return
        upto = data.draw(st.sampled_from(boundaries))
        self.controller.on_committed(self.log[self.committed:upto])
        self.committed = upto

    def commit_all(self) -> None:
        self.controller.on_committed(self.log[self.committed:])
        self.committed = len(self.log)
        self.snapshots.append((len(self.log), dict(self.live)))

    @rule(new_controller=st.booleans())
    def lose_leadership(self, new_controller: bool) -> None:
        """The uncommitted tail is lost; either a fresh controller starts from the committed
        image, or this one sees another leader's record commit where it had pending ones."""
        del self.log[self.committed:]
        self.snapshots = [s for s in self.snapshots if s[0] <= self.committed]
        self.live = dict(self.snapshots[-1][1])
        if new_controller:
            self.controller = Controller(replay(self.log), now_ms=self.now_ms)
        else:
            entry = (len(self.log), rec.LeaderChange(leader_id=9, voters=(9,)))
            self.log.append(entry)
            self.controller.on_committed([entry])
            self.committed = len(self.log)
            self.snapshots.append((len(self.log), dict(self.live)))
        assert self.controller.view is self.controller.committed

    # --- invariants ---------------------------------------------------------------------

    @invariant()
    def replay_of_committed_records_rebuilds_the_same_image(self) -> None:
        committed = self.controller.committed
        assert committed.content_hash() == replay(self.log[:self.committed]).content_hash()
        assert self.controller.view.content_hash() == replay(self.log).content_hash()

    @invariant()
    def topic_ids_are_unique_and_never_reused(self) -> None:
        ids = [r.topic_id for _, r in self.log if isinstance(r, rec.Topic)]
        assert len(ids) == len(set(ids))
        assert not set(ids) & RESERVED
        assert set(ids) <= self.controller.view.used_topic_ids

    @invariant()
    def a_name_maps_to_at_most_one_live_id(self) -> None:
        for image in (self.controller.committed, self.controller.view):
            names = image.topic_ids_by_name
            assert len(set(names.values())) == len(names) == len(image.topics)
            assert all(image.topics[i].name == n for n, i in names.items())
        assert dict(self.controller.view.topic_ids_by_name) == self.live

    @invariant()
    def every_partition_names_a_live_topic_and_is_well_formed(self) -> None:
        view = self.controller.view
        assert view.anomaly_count == 0  # a Partition for a missing topic would be one
        for topic in view.topics.values():
            for index, partition in enumerate(topic.partitions):
                assert partition.partition == index
                assert partition.isr
                assert set(partition.isr) <= set(partition.replicas)
                assert partition.leader == NO_LEADER or partition.leader in partition.isr
                leader = view.brokers.get(partition.leader)
                assert partition.leader == NO_LEADER or (leader and not leader.fenced)


ControllerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40,
                                               deadline=None)
TestControllerMachine = ControllerMachine.TestCase
