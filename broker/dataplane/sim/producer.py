"""The simulated producers, deciding as a Kafka client does (pure: the world passes in the
time and sends what they decide).

- Idempotent: a producer id and epoch; each batch (one or more records) takes the next
  sequence numbers; at most `MAX_IN_FLIGHT` (5) batches unresolved, as
  `max.in.flight.requests.per.connection` with idempotence.
- A batch answered with an error that may pass (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
  NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ...) or not answered within the request timeout
  (its outcome unknown: it may be stored) is sent again unchanged, with the same
  sequence numbers, after a backoff.
- OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that an older unresolved one precedes is retried
  too (the older one's retry fills the gap). For the oldest, or INVALID_PRODUCER_EPOCH, the
  producer gives up every unresolved batch and bumps its epoch locally, starting again at
  sequence 0 (KIP-360's idempotent producer).
- Non-idempotent: no producer id; retried the same way, so a retry may be stored twice.
- acks=0: no answer, so sent once and never retried; a refusal closes the connection,
  which the client sees (`on_closed`): an idempotent one bumps its epoch as above.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.kafka.partitions.producer_state import NO_PRODUCER_ID, BatchHeader
from raft.common.errors import ErrorCode

ACKS_ALL, ACKS_NONE, ACKS_LEADER = -1, 0, 1
MAX_IN_FLIGHT = 5
MAX_BATCH_RECORDS = 3
RETRY_BACKOFF_MS = 50
SEQUENCE_ERRORS = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                             ErrorCode.INVALID_PRODUCER_EPOCH})


@dataclass(slots=True, eq=False)
class ProducerBatch:
    header: BatchHeader
    values: tuple[int, ...]
    attempt: int = 0  # answers to an older attempt are dropped (its connection closed)
    sent_at: int = 0
    resend_at: int | None = None  # None: in flight

    def describe(self) -> str:
        return f"batch(seq {self.header.base_sequence}, values {self.values})"


@dataclass(slots=True, eq=False)
class SimProducer:
    name: int  # the producer's index in the world
    acks: int
    producer_id: int  # NO_PRODUCER_ID: not idempotent
    epoch: int = 0
    next_sequence: int = 0
    unresolved: list[ProducerBatch] = field(default_factory=list)  # oldest first

    def describe(self) -> str:
        return f"producer{self.name}"

    @property
    def idempotent(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    def can_send_new(self) -> bool:
        return self.acks == ACKS_NONE or len(self.unresolved) < MAX_IN_FLIGHT

    def new_batch(self, values: tuple[int, ...], now: int) -> ProducerBatch:
        """The next batch of `values`, tracked until answered (not for acks=0)."""
        if self.idempotent:
            header = BatchHeader(self.producer_id, self.epoch, self.next_sequence,
                                 len(values) - 1)
            self.next_sequence += len(values)
        else:
            header = BatchHeader(NO_PRODUCER_ID, -1, -1, len(values) - 1)
        batch = ProducerBatch(header, values, sent_at=now)
        if self.acks != ACKS_NONE:
            self.unresolved.append(batch)
        return batch

    def due(self, now: int, request_timeout_ms: int) -> list[ProducerBatch]:
        """The batches to send again now (backed off after an error, or timed out), each
        marked as a new attempt."""
        due = [b for b in self.unresolved
               if (b.resend_at is not None and b.resend_at <= now)
               or (b.resend_at is None and now - b.sent_at >= request_timeout_ms)]
        for batch in due:
            batch.attempt += 1
            batch.sent_at, batch.resend_at = now, None
        return due

    def is_current(self, batch: ProducerBatch, attempt: int) -> bool:
        return attempt == batch.attempt and batch.resend_at is None and \
            batch in self.unresolved

    def on_acked(self, batch: ProducerBatch) -> None:
        self.unresolved.remove(batch)

    def on_error(self, batch: ProducerBatch, error: ErrorCode, now: int) -> bool:
        """An error answer to the batch's current attempt: retry it after the backoff
        (True), or give up (False; an idempotent producer then bumps its epoch)."""
        older_pending = self.unresolved.index(batch) > 0
        if error not in SEQUENCE_ERRORS or (
                error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and older_pending):
            batch.resend_at = now + RETRY_BACKOFF_MS
            return True
        self._bump_epoch(batch.header.producer_epoch)
        return False

    def on_closed(self, header: BatchHeader, error: ErrorCode) -> None:
        """acks=0: the leader refused a batch and closed the connection."""
        if self.idempotent and error in SEQUENCE_ERRORS:
            self._bump_epoch(header.producer_epoch)

    def _bump_epoch(self, failed_epoch: int) -> None:
        if failed_epoch != self.epoch:
            return  # an older epoch's batch: bumped already
        self.epoch += 1
        self.next_sequence = 0
        self.unresolved.clear()
