"""The controller's broker decisions (registration, heartbeats, fencing and the partition
changes that follow) and its pending view, one rule per test."""

from __future__ import annotations

import random

from metadata import records as rec
from metadata.admin import (
    BrokerHeartbeatRequest,
    CreatableTopic,
    CreateTopicsRequest,
    RegisterBrokerRequest,
)
from metadata.delta import replay
from metadata.image import NO_LEADER, NO_OFFSET
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from tests.support.controller_harness import TIMEOUT_MS, Harness

# --- brokers -------------------------------------------------------------------------------


def test_broker_epoch_is_the_offset_of_its_registration_when_a_new_incarnation_registers(
) -> None:
    """Kafka: a new incarnation gets broker epoch = the offset of its RegisterBroker record."""
    h = Harness(brokers=0)
    h.log.extend([(0, rec.NoOp()), (1, rec.NoOp())])  # e.g. LeaderChange records
    h.commit()
    epoch = h.start_broker(7)
    assert epoch == 2
    assert h.log[2][1] == rec.RegisterBroker(broker_id=7, incarnation_id=h.controller.committed
                                             .brokers[7].incarnation_id, broker_epoch=2,
                                             endpoints=("PLAINTEXT://127.0.0.1:9098",))


def test_registration_retry_gets_the_same_epoch_when_the_incarnation_is_the_same() -> None:
    """Idempotent registration: no new record, same epoch."""
    h = Harness(brokers=1)
    incarnation = h.controller.committed.brokers[1].incarnation_id
    decision = h.run(RegisterBrokerRequest(broker_id=1, incarnation_id=incarnation))
    assert decision.records == ()
    assert decision.response.broker_epoch == h.epochs[1]  # type: ignore[union-attr]


def test_registration_fails_with_duplicate_when_another_incarnation_is_alive() -> None:
    """DUPLICATE_BROKER_REGISTRATION (101) while the registered one's session is alive."""
    h = Harness(brokers=1)
    h.now_ms = TIMEOUT_MS - 1
    decision = h.run(RegisterBrokerRequest(broker_id=1, incarnation_id=Uuid.random(h.rng)))
    assert decision.response.error_code == 101  # type: ignore[union-attr]


def test_reregistration_moves_leadership_when_the_old_session_expired_unfenced() -> None:
    """A new incarnation replaces an expired one: new epoch, fenced, leadership moves away."""
    h = Harness(brokers=2)
    h.create("t", partitions=2, factor=2)
    h.now_ms = TIMEOUT_MS
    h.heartbeat(2)
    old_epoch = h.epochs[1]
    decision = h.run(RegisterBrokerRequest(broker_id=1, incarnation_id=Uuid.random(h.rng)))
    assert decision.response.broker_epoch > old_epoch  # type: ignore[union-attr]
    image = h.controller.committed
    assert image.brokers[1].fenced
    assert all(p.leader == 2 and p.isr == (2,) for p in image.topic_by_name("t").partitions)  # type: ignore[union-attr]


def test_registration_fails_with_invalid_request_when_the_broker_id_is_negative() -> None:
    """Broker ids are >= 0."""
    decision = Harness(brokers=0).run(RegisterBrokerRequest(broker_id=-1,
                                                            incarnation_id=Uuid.random()))
    assert decision.response.error_code == ErrorCode.INVALID_REQUEST  # type: ignore[union-attr]


def test_heartbeat_fails_with_broker_id_not_registered_when_the_broker_is_unknown() -> None:
    """BROKER_ID_NOT_REGISTERED (102)."""
    decision = Harness(brokers=0).run(BrokerHeartbeatRequest(
        broker_id=5, broker_epoch=0, current_metadata_offset=0))
    assert decision.response.error_code == 102  # type: ignore[union-attr]


def test_heartbeat_fails_with_stale_broker_epoch_when_the_epoch_is_old() -> None:
    """STALE_BROKER_EPOCH (77): a heartbeat from an older incarnation."""
    h = Harness(brokers=1)
    decision = h.run(BrokerHeartbeatRequest(broker_id=1, broker_epoch=h.epochs[1] + 1,
                                            current_metadata_offset=100))
    assert decision.response.error_code == 77  # type: ignore[union-attr]


def test_broker_stays_fenced_when_its_heartbeat_is_behind_the_high_watermark() -> None:
    """Unfenced only once caught up with the controller's high watermark."""
    h = Harness(brokers=0)
    response = h.run(RegisterBrokerRequest(broker_id=1, incarnation_id=Uuid.random())).response
    h.epochs[1] = response.broker_epoch  # type: ignore[union-attr]
    h.log.extend([(1, rec.NoOp())])
    h.commit()
    decision = h.heartbeat(1, offset=0)
    assert (decision.response.is_caught_up, decision.response.is_fenced) == (False, True)  # type: ignore[union-attr]
    assert decision.records == ()
    decision = h.heartbeat(1, offset=1)
    assert decision.records == (rec.UnfenceBroker(broker_id=1, broker_epoch=0),)
    assert not h.controller.committed.brokers[1].fenced


def test_broker_is_fenced_when_the_session_times_out_without_heartbeats() -> None:
    """broker.session.timeout.ms = 9000: fenced at 9000 ms since the last heartbeat, not
    before."""
    h = Harness(brokers=2)
    h.now_ms = 4000
    h.heartbeat(2)
    assert h.tick(TIMEOUT_MS - 1) is None
    decision = h.tick(TIMEOUT_MS)
    assert decision is not None
    assert decision.records == (rec.FenceBroker(broker_id=1, broker_epoch=h.epochs[1]),)
    assert h.controller.committed.unfenced_broker_ids() == (2,)
    assert h.tick(TIMEOUT_MS + 4000) is not None  # broker 2's turn
    assert h.controller.committed.unfenced_broker_ids() == ()


def test_tick_is_due_exactly_when_a_tick_would_fence() -> None:
    """The shell's check between ticks (`tick_due`) agrees with `tick` at every step:
    the shell asks the core loop for a tick only when it is due."""
    h = Harness(brokers=2)
    h.now_ms = 4000
    h.heartbeat(2)
    for now_ms in (0, TIMEOUT_MS - 1, TIMEOUT_MS, TIMEOUT_MS + 3999, TIMEOUT_MS + 4000):
        due = h.controller.tick_due(now_ms)
        assert due == (h.tick(now_ms) is not None), now_ms
    assert not h.controller.tick_due(TIMEOUT_MS + 9000)  # every broker fenced


def test_controlled_shutdown_moves_leadership_at_once_and_keeps_the_broker_fenced() -> None:
    """wantShutDown: fenced in the heartbeat's own batch (leadership to another ISR member,
    out of the ISRs), told it may stop, and never unfenced while it asks, however caught
    up; a heartbeat without the ask unfences it again (a restart)."""
    h = Harness(brokers=3)
    h.create("t", partitions=3, factor=2)
    offset = h.controller.committed.last_applied_offset
    decision = h.run(BrokerHeartbeatRequest(broker_id=1, broker_epoch=h.epochs[1],
                                            current_metadata_offset=offset,
                                            want_shut_down=True))
    response = decision.response
    assert (response.is_fenced, response.should_shut_down) == (True, True)  # type: ignore[union-attr]
    assert decision.records[0] == rec.FenceBroker(broker_id=1, broker_epoch=h.epochs[1])
    topic = h.controller.committed.topic_by_name("t")
    assert topic is not None
    assert all(p.leader != 1 and 1 not in p.isr for p in topic.partitions)
    again = h.run(BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=h.epochs[1], want_shut_down=True,
        current_metadata_offset=h.controller.committed.last_applied_offset))
    assert again.records == ()
    assert again.response.should_shut_down  # type: ignore[union-attr]
    assert h.controller.committed.brokers[1].fenced
    h.heartbeat(1)
    assert not h.controller.committed.brokers[1].fenced


def test_leadership_moves_with_a_new_leader_epoch_when_the_leader_is_fenced() -> None:
    """On fence: PartitionChange moves leadership to an unfenced ISR member (leader_epoch +
    1 on replay) and the ISR shrinks."""
    h = Harness(brokers=3)
    h.create("t", partitions=3, factor=2)
    h.now_ms = 5000
    h.heartbeat(2), h.heartbeat(3)
    h.tick(TIMEOUT_MS)
    topic = h.controller.committed.topic_by_name("t")
    assert topic is not None
    for p in topic.partitions:
        assert 1 not in p.isr
        assert p.leader in (2, 3)
        assert p.leader_epoch == (1 if p.replicas[0] == 1 else 0)
    assert h.controller.committed.content_hash() == replay(h.log).content_hash()


def test_partition_keeps_its_last_isr_member_and_no_leader_when_all_are_fenced() -> None:
    """The ISR never becomes empty; with no unfenced member the leader is NO_LEADER (-1).
    Unfencing that member elects it again."""
    h = Harness(brokers=1)
    h.create("t")
    h.tick(TIMEOUT_MS)
    partition = h.controller.committed.topic_by_name("t").partitions[0]  # type: ignore[union-attr]
    assert (partition.leader, partition.isr, partition.leader_epoch) == (NO_LEADER, (1,), 1)
    h.now_ms = TIMEOUT_MS
    h.heartbeat(1)
    partition = h.controller.committed.topic_by_name("t").partitions[0]  # type: ignore[union-attr]
    assert (partition.leader, partition.leader_epoch) == (1, 2)


# --- the pending view -------------------------------------------------------------------


def test_view_falls_back_to_committed_when_the_log_commits_something_else() -> None:
    """Leadership lost: what commits is not what this controller proposed; pending is dropped."""
    h = Harness()
    h.create("t", commit=False)
    assert h.controller.pending_count == 2
    other = Uuid.random(random.Random(77))
    h.controller.on_committed([(len(h.log) - 2, rec.Topic(name="u", topic_id=other))])
    assert h.controller.pending_count == 0
    assert set(h.controller.view.topic_ids_by_name) == {"u"}


def test_reply_waits_for_pending_writes_when_the_decision_writes_nothing() -> None:
    """A failed create that rests on an in-flight create replies after it commits."""
    h = Harness()
    h.create("t", commit=False)
    decision = h.run(CreateTopicsRequest(topics=(CreatableTopic(name="t"),)), commit=False)
    assert decision.wait_offset == len(h.log) - 1
    h.commit()
    decision = h.run(CreateTopicsRequest(topics=(CreatableTopic(name="t"),)))
    assert decision.wait_offset == NO_OFFSET
