"""Kafka error codes the ordered client reacts to (plain ints: responses are decoded
with error codes as int16, so codes Kafka lacks read too)."""

from __future__ import annotations

from raft.common.errors import ErrorCode

NONE = 0
# Metadata moved (a leader, the topic's counts): refresh it and send again.
METADATA_RETRIABLE = frozenset(int(code) for code in (
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.INCONSISTENT_TOPIC_ID,
    ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.INVALID_PARTITION_METADATA))
# The records may have been stored before the error (the leader appended them, then
# lost leadership or timed out waiting for the ISR): the same batch must be sent again
# to learn its fate (the leader answers a stored one with its offset), never re-routed.
# NOT_ENOUGH_REPLICAS too: the leader checks the ISR before it looks for a stored copy
# (as Kafka's), so it refuses the resend of a batch an earlier, unanswered attempt
# stored; re-routed, the record would be stored twice (the data-plane simulator found it)
MAYBE_STORED = frozenset(int(code) for code in (
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.KAFKA_STORAGE_ERROR))
# The producer's identity or sequence is unknown to the leader: take a new producer ID.
PRODUCER_RESET = frozenset(int(code) for code in (
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID,
    ErrorCode.INVALID_PRODUCER_EPOCH))
# The group moved on without this member: join again.
REJOIN = frozenset(int(code) for code in (
    ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.UNKNOWN_MEMBER_ID,
    ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID))
COORDINATOR_MOVED = frozenset(int(code) for code in (
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))


def name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"

MEMBER_ID_REQUIRED = int(ErrorCode.MEMBER_ID_REQUIRED)
UNKNOWN_MEMBER_ID = int(ErrorCode.UNKNOWN_MEMBER_ID)  # join again without the old id
OFFSET_OUT_OF_RANGE = int(ErrorCode.OFFSET_OUT_OF_RANGE)
INVALID_PARTITION_METADATA = int(ErrorCode.INVALID_PARTITION_METADATA)  # count changed
