"""The data-plane simulator's pure parts (broker/dataplane/sim): its producers decide as
Kafka's clients do (a retry keeps its sequence numbers; a sequence error gives up and
bumps the epoch), its log keeps the producer state the real log keeps (followed at each
batch, rebuilt after a truncation, which drops whole batches), and its idempotence
invariants fail on a record committed twice or out of sequence order, and only then."""

from __future__ import annotations

import pytest

from broker.dataplane.progress import LeaderProgress
from broker.dataplane.sim.invariants import Checker, DataPlaneViolation, KeyOrder
from broker.dataplane.sim.log import Record, SimLog
from broker.dataplane.sim.node import Replica
from broker.dataplane.sim.producer import (
    ACKS_ALL,
    ACKS_NONE,
    MAX_IN_FLIGHT,
    RETRY_BACKOFF_MS,
    SimProducer,
)
from broker.kafka.partitions.producer_state import NO_PRODUCER_ID, BatchHeader, Duplicate
from raft.common.errors import ErrorCode

TIMEOUT_MS = 1_000


def test_idempotent_batches_take_consecutive_sequences_up_to_5_in_flight() -> None:
    producer = SimProducer(name=0, acks=ACKS_ALL, producer_id=7)
    batches = [producer.new_batch((1, 2, 3), 0), producer.new_batch((4,), 0)]
    assert [(b.header.base_sequence, b.header.last_sequence) for b in batches] == \
        [(0, 2), (3, 3)]
    while producer.can_send_new():
        producer.new_batch((5,), 0)
    assert len(producer.unresolved) == MAX_IN_FLIGHT


def test_a_timed_out_or_refused_batch_is_sent_again_with_its_sequence() -> None:
    producer = SimProducer(name=0, acks=ACKS_ALL, producer_id=7)
    first = producer.new_batch((1,), 0)
    assert producer.due(TIMEOUT_MS - 1, TIMEOUT_MS) == []
    assert producer.due(TIMEOUT_MS, TIMEOUT_MS) == [first]
    assert not producer.is_current(first, 0)  # the first attempt's answer is dropped
    assert producer.on_error(first, ErrorCode.NOT_LEADER_OR_FOLLOWER, 2_000)
    assert producer.due(2_000 + RETRY_BACKOFF_MS, TIMEOUT_MS) == [first]
    assert (first.attempt, first.header.base_sequence) == (2, 0)


def test_a_sequence_error_on_the_oldest_batch_bumps_the_epoch_and_restarts_at_0() -> None:
    producer = SimProducer(name=0, acks=ACKS_ALL, producer_id=7)
    oldest, later = producer.new_batch((1,), 0), producer.new_batch((2,), 0)
    assert producer.on_error(later, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, 5)  # a gap
    assert not producer.on_error(oldest, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, 5)
    assert (producer.epoch, producer.unresolved) == (1, [])
    assert producer.new_batch((3,), 5).header.base_sequence == 0
    producer.on_closed(oldest.header, ErrorCode.INVALID_PRODUCER_EPOCH)  # old epoch's
    assert producer.epoch == 1


def test_acks_0_is_never_tracked_nor_retried() -> None:
    producer = SimProducer(name=0, acks=ACKS_NONE, producer_id=NO_PRODUCER_ID)
    batch = producer.new_batch((1,), 0)
    assert batch.header.base_sequence == -1
    assert producer.unresolved == []
    assert producer.due(10 * TIMEOUT_MS, TIMEOUT_MS) == []


def _append(log: SimLog, epoch: int, sequence: int, count: int) -> tuple[int, int]:
    header = BatchHeader(7, 0, sequence, count - 1)
    return log.append(header, tuple(Record(epoch, sequence + i, 7, 0, sequence + i)
                                    for i in range(count)))


def test_the_log_answers_a_stored_batch_as_a_duplicate_until_truncated_away() -> None:
    log = SimLog()
    _append(log, 1, 0, 2)
    assert _append(log, 2, 2, 3) == (2, 4)
    retry = BatchHeader(7, 0, 2, 2)
    assert log.producers.check([retry], log.log_end_offset) == Duplicate(2, 4)
    assert log.batches_from(2, 1) == [(retry, tuple(log.entries[2:5]))]  # a whole batch
    assert log.truncate_to(3) == 3  # the batch holding offset 3 goes whole
    assert (log.log_end_offset, log.last_epoch) == (2, 1)
    assert log.producers == log.rebuilt_producers()
    assert not isinstance(log.producers.check([retry], 2), Duplicate)


def _checked(records: list[Record]) -> None:
    """Run the invariants over one replica holding `records`, all below its high
    watermark."""
    replica = Replica(0, None)
    replica.log.entries.extend(records)
    replica.progress = LeaderProgress(log=replica.log, high_watermark=len(records))
    Checker(0, None).check_replica(1, replica)


@pytest.mark.parametrize(("sequences", "invariant"), [
    ((0, 1, 0), "idempotent-stored-once"),
    ((0, 2, 1), "idempotent-in-order"),
])
def test_an_idempotent_record_committed_twice_or_out_of_order_is_a_violation(
        sequences: tuple[int, ...], invariant: str) -> None:
    records = [Record(1, value, 7, 0, seq) for value, seq in enumerate(sequences)]
    with pytest.raises(DataPlaneViolation) as raised:
        _checked(records)
    assert raised.value.invariant == invariant


def test_a_plain_producers_retry_and_a_new_epoch_restarting_at_0_are_no_violation() -> None:
    _checked([Record(1, 1, NO_PRODUCER_ID, -1, -1), Record(1, 1, NO_PRODUCER_ID, -1, -1),
              Record(1, 2, 7, 0, 4), Record(1, 3, 7, 1, 0), Record(1, 4, 7, 1, 1)])


def _key_order(delivered: tuple[int, ...]) -> None:
    """Key k: 1 and 2 in flight together, then 3 sent once both were acknowledged;
    key j's 4 beside them. Deliver k's `delivered` in that order, after j's 4."""
    order = KeyOrder()
    order.on_sent(b"k", 1)
    order.on_sent(b"k", 2)
    order.on_acked(b"k", 2)
    order.on_acked(b"k", 1)
    order.on_sent(b"k", 3)
    order.on_sent(b"j", 4)
    order.on_acked(b"j", 4)
    order.on_delivered(b"j", 4, "partition 0")
    for value in delivered:
        order.on_delivered(b"k", value, "partition 1")


def test_records_in_flight_together_may_come_in_either_order() -> None:
    _key_order((2, 1, 3))
    _key_order((1, 2, 3))


@pytest.mark.parametrize("delivered", [(3,), (1, 3), (2, 3)])
def test_a_record_delivered_before_one_acknowledged_before_it_was_sent_is_a_violation(
        delivered: tuple[int, ...]) -> None:
    with pytest.raises(DataPlaneViolation) as raised:
        _key_order(delivered)
    assert raised.value.invariant == "per-key-order"
