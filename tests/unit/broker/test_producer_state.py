"""broker.kafka.partitions.producer_state: Kafka's idempotent-producer rules, pure."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.kafka.partitions.producer_state import (
    BATCHES_TO_RETAIN,
    MAX_SEQUENCE,
    Accept,
    BatchHeader,
    Duplicate,
    ProducerStates,
    Reject,
    SnapshotError,
    decode_snapshot,
    encode_snapshot,
    last_sequence,
)
from raft.common.errors import ErrorCode

PID = 7


def header(seq: int, count: int = 1, epoch: int = 0, pid: int = PID) -> BatchHeader:
    return BatchHeader(pid, epoch, seq, count - 1)


def produce(states: ProducerStates, *headers: BatchHeader) -> Accept | Duplicate | Reject:
    """What the leader does: check, and apply when accepted."""
    verdict = states.check(headers, states.end_offset)
    if isinstance(verdict, Accept):
        offset = states.end_offset
        for h in headers:
            states.apply(h, offset)
            offset += h.last_offset_delta + 1
    return verdict


def test_retry_of_one_of_the_last_five_batches_is_a_duplicate_with_its_offsets() -> None:
    """Kafka: a batch with the exact sequence range of a retained batch (same epoch) is
    answered with the original offsets, not stored again."""
    states = ProducerStates()
    for seq in range(0, 12, 2):
        assert produce(states, header(seq, 2)) == Accept()
    # batches 2..11 (offsets 2..11) are the last five; 0-1 fell out of the window
    assert produce(states, header(4, 2)) == Duplicate(4, 5)
    assert produce(states, header(10, 2)) == Duplicate(10, 11)
    assert isinstance(produce(states, header(0, 2)), Reject)
    assert produce(states, header(4, 3)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # type: ignore[union-attr]
    assert states.end_offset == 12


def test_gap_and_stale_epoch_rejected_and_new_epoch_must_start_at_zero() -> None:
    states = ProducerStates()
    assert produce(states, header(0, 3, epoch=1)) == Accept()
    gap = produce(states, header(5, epoch=1))
    assert isinstance(gap, Reject)
    assert gap.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    stale = produce(states, header(3, epoch=0))
    assert isinstance(stale, Reject)
    assert stale.error == ErrorCode.INVALID_PRODUCER_EPOCH
    bumped = produce(states, header(3, epoch=2))
    assert isinstance(bumped, Reject)
    assert bumped.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(states, header(0, epoch=2)) == Accept()
    # the new epoch forgot the old one's batches: their retry is no duplicate now
    assert isinstance(produce(states, header(0, 3, epoch=1)), Reject)


def test_unknown_producer_accepted_at_any_sequence_as_kafka_since_kip_360() -> None:
    """No UNKNOWN_PRODUCER_ID from Produce: a producer with no state here is accepted at
    whatever sequence it sends (its earlier batches may be elsewhere or gone)."""
    states = ProducerStates()
    assert produce(states, header(41, epoch=3)) == Accept()
    assert produce(states, header(42, epoch=3)) == Accept()
    assert isinstance(produce(states, header(44, epoch=3)), Reject)


def test_sequence_wraps_to_zero_after_the_largest_int32() -> None:
    states = ProducerStates()
    assert last_sequence(MAX_SEQUENCE - 1, 3) == 1
    assert produce(states, header(MAX_SEQUENCE - 1, 2)) == Accept()
    assert produce(states, header(0, 2)) == Accept()
    assert produce(states, header(MAX_SEQUENCE - 1, 2)) == Duplicate(0, 1)


def test_batches_of_one_request_checked_in_order_against_each_other() -> None:
    states = ProducerStates()
    assert produce(states, header(0, 2), header(2, 2), header(0, 1, pid=9)) == Accept()
    assert states.entry(PID).last_seq == 3  # type: ignore[union-attr]
    refused = produce(states, header(4), header(6))
    assert isinstance(refused, Reject)
    assert states.end_offset == 5  # nothing of the refused request was applied


def test_batch_without_a_sequence_from_an_idempotent_producer_is_invalid() -> None:
    refused = produce(ProducerStates(), header(-1))
    assert isinstance(refused, Reject)
    assert refused.error == ErrorCode.INVALID_RECORD


def test_batches_without_a_producer_id_are_never_checked() -> None:
    states = ProducerStates()
    plain = BatchHeader(-1, -1, -1, 4)
    assert produce(states, plain) == Accept()
    assert produce(states, plain) == Accept()
    assert states.entries == {}
    assert states.end_offset == 10


# --- properties ---------------------------------------------------------------------------

# a client request: (producer, epoch, base sequence, records)
requests = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 14),
                              st.integers(1, 3)), max_size=60)


def leader_run(plan: list[tuple[int, int, int, int]]
               ) -> tuple[ProducerStates, list[tuple[BatchHeader, int]]]:
    """The leader's state and the batches it stored (with their base offsets)."""
    states = ProducerStates()
    stored: list[tuple[BatchHeader, int]] = []
    for pid, epoch, seq, count in plan:
        h = header(seq, count, epoch=epoch, pid=pid)
        offset = states.end_offset
        if produce(states, h) == Accept():
            stored.append((h, offset))
    return states, stored


@settings(max_examples=300, deadline=None)
@given(requests)
def test_follower_applying_the_stored_batches_ends_with_the_leader_state(
        plan: list[tuple[int, int, int, int]]) -> None:
    """Replication: a follower that applies exactly the leader's stored batches (no
    checks) holds the same state, so as a new leader it decides retries identically;
    and the snapshot round-trips it."""
    leader, stored = leader_run(plan)
    follower = ProducerStates()
    for h, offset in stored:
        follower.apply(h, offset)
    assert follower == leader
    assert decode_snapshot(encode_snapshot(leader)) == leader


@settings(max_examples=300, deadline=None)
@given(requests, st.integers(0, 2), st.integers(0, 2), st.integers(0, 14), st.integers(1, 3))
def test_verdicts_follow_kafka_rules_when_checked_against_a_model(
        plan: list[tuple[int, int, int, int]], pid: int, epoch: int, seq: int,
        count: int) -> None:
    """Against a model built from the stored batches alone: a duplicate is exactly a
    retained range of the producer's current epoch; an accepted batch never repeats a
    stored range of that epoch; a stale epoch is always refused."""
    states, stored = leader_run(plan)
    mine = [(h, off) for h, off in stored if h.producer_id == pid]
    current_epoch = mine[-1][0].producer_epoch if mine else None
    retained = [(h, off) for h, off in mine if h.producer_epoch == current_epoch]
    retained = retained[-BATCHES_TO_RETAIN:]
    h = header(seq, count, epoch=epoch, pid=pid)
    verdict = states.check([h], states.end_offset)
    match = [(hh, off) for hh, off in retained
             if (hh.base_sequence, hh.last_sequence, hh.producer_epoch) ==
             (h.base_sequence, h.last_sequence, h.producer_epoch)]
    if match:
        first = match[0]
        assert verdict == Duplicate(first[1], first[1] + first[0].last_offset_delta)
        return
    assert not isinstance(verdict, Duplicate)
    if current_epoch is not None and epoch < current_epoch:
        assert isinstance(verdict, Reject)
        assert verdict.error == ErrorCode.INVALID_PRODUCER_EPOCH
    if isinstance(verdict, Accept) and current_epoch is not None:
        if epoch == current_epoch:
            assert seq == (retained[-1][0].last_sequence + 1) % (MAX_SEQUENCE + 1)
        else:
            assert seq == 0


@pytest.mark.parametrize("damage", ["magic", "crc", "truncated", "trailing"])
def test_damaged_snapshot_is_refused_when_decoded(damage: str) -> None:
    states, _ = leader_run([(0, 0, 0, 2), (1, 0, 0, 1), (0, 0, 2, 1)])
    data = bytearray(encode_snapshot(states))
    if damage == "magic":
        data[0] ^= 1
    elif damage == "crc":
        data[-1] ^= 1
    elif damage == "truncated":
        del data[-3:]
    else:
        data += b"\0"
    with pytest.raises(SnapshotError):
        decode_snapshot(bytes(data))
