"""A simulated KIP-253 ordered producer, deciding as `tools.client.producer` does (pure:
the world passes in the time and its metadata, and sends what it decides).

- A keyed record goes to `partition_for(key)` over the undeleted count of the image the
  producer holds, and the Produce carries that count; one record in flight, so a key's
  next record is sent only once the last one is acknowledged.
- A send whose outcome is unknown (no answer, or an error the leader may give after
  appending) is sent again unchanged (same partition, sequence and count) until it is
  definite: the leader answers a stored retry with its offset.
- A definite refusal (INVALID_PARTITION_METADATA: the leader checked the producer state
  first, so the record is not stored) refreshes the metadata and partitions the record
  again. Not NOT_ENOUGH_REPLICAS (`tools.client.errors` counts it as maybe stored too):
  the leader answers it before the producer-state check, so a resend of a batch an
  earlier attempt stored gets it too; partitioned again under a new count, the record
  was stored twice and the next one on the old partition, at the same sequence, was
  answered as that duplicate and lost (the sweep found it in the client's old rule:
  acked-is-committed).
- A sequence the leader does not know (OUT_OF_ORDER_SEQUENCE_NUMBER, ...) takes a new
  producer epoch, and the record is partitioned again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.kafka.ordered.partitioner import partition_for
from broker.kafka.ordered.rules import undeleted_count
from broker.kafka.partitions.producer_state import BatchHeader
from metadata.image import NO_LEADER, TopicImage
from raft.common.errors import ErrorCode

RETRY_BACKOFF_MS = 50
REQUEST_TIMEOUT_MS = 2_500  # no answer: sent again, unchanged
# surely not stored: partition it again (see above)
NOT_STORED = frozenset({ErrorCode.INVALID_PARTITION_METADATA})
PRODUCER_RESET = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                            ErrorCode.UNKNOWN_PRODUCER_ID,
                            ErrorCode.INVALID_PRODUCER_EPOCH})


def initial_count(topic: TopicImage) -> int:
    """The count linear hashing starts from (a topic never resized: all it has)."""
    initial = topic.initial_partition_count
    return len(topic.partitions) if initial is None else initial


@dataclass(slots=True, eq=False)
class Attempt:
    """One record as sent: resent unchanged while its outcome is unknown."""

    key: bytes
    value: int
    partition: int
    header: BatchHeader
    count: int
    number: int = 0  # answers to an older send are dropped
    sent_at: int = 0
    resend_at: int | None = None  # None: in flight

    def describe(self) -> str:
        return f"{self.key.decode()}={self.value}@p{self.partition}/count {self.count}"


@dataclass(slots=True, eq=False)
class OrderedProducer:
    name: int
    producer_id: int
    keys: tuple[bytes, ...]
    epoch: int = 0
    sequences: dict[int, int] = field(default_factory=dict)  # partition -> next
    metadata: TopicImage | None = None  # the image its routing comes from
    attempt: Attempt | None = None  # the record in flight
    unsent: tuple[bytes, int] | None = None  # the record to partition (again)
    route_at: int = 0  # when to partition it (a backoff after a refusal)
    next_key: int = 0

    def describe(self) -> str:
        return f"ordered{self.name}"

    def next_record(self, value: int) -> tuple[bytes, int]:
        """A new record of the next key: only once the last one was acknowledged."""
        assert self.attempt is None
        assert self.unsent is None
        key = self.keys[self.next_key % len(self.keys)]
        self.next_key += 1
        self.unsent = (key, value)
        return self.unsent

    def route(self, now: int) -> Attempt | None:
        """Partition the unsent record by the metadata held (None: it names no leader
        for it; the caller refreshes the metadata)."""
        assert self.unsent is not None
        assert self.metadata is not None
        key, value = self.unsent
        count = undeleted_count(self.metadata)
        partition = partition_for(key, initial_count(self.metadata), count)
        if self.metadata.partitions[partition].leader == NO_LEADER:
            return None
        header = BatchHeader(self.producer_id, self.epoch,
                             self.sequences.get(partition, 0), 0)
        self.attempt = Attempt(key, value, partition, header, count, sent_at=now)
        self.unsent = None
        return self.attempt

    def due(self, now: int) -> bool:
        """The record in flight is to be sent again now: backed off after an error or
        unanswered within the request timeout."""
        attempt = self.attempt
        if attempt is None:
            return False
        if attempt.resend_at is None:
            return now - attempt.sent_at >= REQUEST_TIMEOUT_MS
        return attempt.resend_at <= now

    def resend(self, now: int) -> Attempt:
        assert self.attempt is not None
        self.attempt.number += 1
        self.attempt.sent_at, self.attempt.resend_at = now, None
        return self.attempt

    def on_acked(self) -> Attempt:
        assert self.attempt is not None
        acked, self.attempt = self.attempt, None
        self.sequences[acked.partition] = acked.header.base_sequence + 1
        return acked

    def on_error(self, error: ErrorCode, now: int) -> None:
        """A refusal of the record in flight: sent again unchanged after the backoff
        unless it is surely not stored (then partitioned again)."""
        assert self.attempt is not None
        self.attempt.resend_at = self.route_at = now + RETRY_BACKOFF_MS
        # a resend's refusal says nothing of the earlier sends, whose outcome was unknown:
        # one may be stored, and its sequence would swallow the partition's next record
        if error in PRODUCER_RESET or (error in NOT_STORED and self.attempt.number > 0):
            self.epoch += 1
            self.sequences.clear()
        if error in PRODUCER_RESET or error in NOT_STORED:
            self.unsent = (self.attempt.key, self.attempt.value)
            self.attempt = None
