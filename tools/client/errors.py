"""Kafka error codes the ordered client reacts to (plain ints: responses are decoded
with error codes as int16, so codes Kafka lacks read too)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.kafka.ordered_schemas import INVALID_PARTITION_METADATA

NONE = 0
# Metadata moved (a leader, the topic's counts): refresh it and send again.
METADATA_RETRIABLE = frozenset(int(code) for code in (
    ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
    ErrorCode.unknown_topic_or_partition, ErrorCode.request_timed_out,
    ErrorCode.not_enough_replicas, ErrorCode.not_enough_replicas_after_append,
    ErrorCode.kafka_storage_error, ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch, ErrorCode.inconsistent_topic_id,
    ErrorCode.unknown_topic_id, ErrorCode.offset_not_available,
    ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress)) | {INVALID_PARTITION_METADATA}
# The records may have been stored before the error (the leader appended them, then
# lost leadership or timed out waiting for the ISR): the same batch must be sent again
# to learn its fate (the leader answers a stored one with its offset), never re-routed.
MAYBE_STORED = frozenset(int(code) for code in (
    ErrorCode.not_leader_or_follower, ErrorCode.request_timed_out,
    ErrorCode.not_enough_replicas_after_append, ErrorCode.kafka_storage_error))
# The producer's identity or sequence is unknown to the leader: take a new producer ID.
PRODUCER_RESET = frozenset(int(code) for code in (
    ErrorCode.out_of_order_sequence_number, ErrorCode.unknown_producer_id,
    ErrorCode.invalid_producer_epoch))
# The group moved on without this member: join again.
REJOIN = frozenset(int(code) for code in (
    ErrorCode.rebalance_in_progress, ErrorCode.unknown_member_id,
    ErrorCode.illegal_generation, ErrorCode.fenced_instance_id))
COORDINATOR_MOVED = frozenset(int(code) for code in (
    ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress))


def name(code: int) -> str:
    if code == INVALID_PARTITION_METADATA:
        return "INVALID_PARTITION_METADATA"
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{code}"

MEMBER_ID_REQUIRED = int(ErrorCode.member_id_required)
UNKNOWN_MEMBER_ID = int(ErrorCode.unknown_member_id)  # join again without the old id
OFFSET_OUT_OF_RANGE = int(ErrorCode.offset_out_of_range)
