"""The data-plane invariants, checked after every event of a simulated run (and at a
truncation or an acknowledgement as it happens). A violation raises
`DataPlaneViolation` naming the invariant.

- `hw-within-log`: no replica's high watermark is above its log end.
- `committed-prefix`: below its high watermark every replica holds the same records (the
  committed prefix: an offset never holds two different records once committed).
- `no-truncation-below-hw`: a replica never truncates what it counted as committed.
- `acked-is-committed`: an acknowledged acks=all write is committed, at its offsets.
- `idempotent-stored-once`: no idempotent producer's record (producer id, epoch,
  sequence) is committed at two offsets, whatever its acks (acks=1 and acks=0 writes
  may be lost, never duplicated).
- `idempotent-in-order`: an idempotent producer's records of one epoch are committed in
  the order of their sequence numbers.
- `consumer-reads-committed`: a consumer reads only committed records (never above the
  high watermark), each at its offset.
- `leader-holds-committed`: the leader the controller chose, once it knows it, holds
  every committed record (so none acknowledged is ever lost).
- `leader-hw-monotonic`: a leader's high watermark never goes back within its epoch
  (and process: a restarted one starts from 0).
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.dataplane.sim.log import Record
from broker.dataplane.sim.node import Broker
from metadata.image import NO_LEADER, MetadataImage
from raft.common.uuid import Uuid


class DataPlaneViolation(AssertionError):
    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail


class Checker:
    def __init__(self, topic_id: Uuid) -> None:
        self.topic_id = topic_id
        self.committed: list[Record] = []
        # (producer id, epoch, sequence) -> its committed offset; (id, epoch) -> last sequence
        self._sequences: dict[tuple[int, int, int], int] = {}
        self._last_sequence: dict[tuple[int, int], int] = {}
        self._checked: dict[int, int] = {}  # broker -> prefix of its log checked
        self._leader_checked: dict[tuple[int, int], int] = {}  # (broker, epoch) -> prefix
        # (broker, incarnation, epoch) -> high watermark: a restarted broker's starts again
        # from 0 (the data plane keeps no high-watermark checkpoint), as it does in Kafka
        # from its last checkpoint
        self._leader_hw: dict[tuple[int, int, int], int] = {}

    def on_truncate(self, broker_id: int, new_end: int, high_watermark: int) -> None:
        if new_end < high_watermark:
            raise DataPlaneViolation("no-truncation-below-hw", f"broker {broker_id} "
                                     f"truncates to {new_end} below its high watermark "
                                     f"{high_watermark}")
        self._checked[broker_id] = min(self._checked.get(broker_id, 0), new_end)

    def on_acked(self, first_offset: int, values: tuple[int, ...]) -> None:
        for offset, value in enumerate(values, start=first_offset):
            if offset >= len(self.committed) or self.committed[offset].value != value:
                held = self.committed[offset] if offset < len(self.committed) else "nothing"
                raise DataPlaneViolation("acked-is-committed", f"write {value} acknowledged "
                                         f"at offset {offset}, where the committed log "
                                         f"holds {held}")

    def on_consumed(self, position: int, entries: list[Record]) -> None:
        for offset, entry in enumerate(entries, start=position):
            if offset >= len(self.committed) or self.committed[offset] != entry:
                held = self.committed[offset] if offset < len(self.committed) else "nothing"
                raise DataPlaneViolation("consumer-reads-committed", f"a consumer read "
                                         f"{entry} at offset {offset}, where the committed "
                                         f"log holds {held}")

    def after_event(self, brokers: Mapping[int, Broker], committed: MetadataImage) -> None:
        for broker in brokers.values():
            if broker.progress is None:
                continue
            hw, entries = broker.progress.high_watermark, broker.log.entries
            if hw > len(entries):
                raise DataPlaneViolation("hw-within-log", f"broker {broker.broker_id}: high "
                                         f"watermark {hw} above its log end {len(entries)}")
            start = self._checked.get(broker.broker_id, 0)
            for offset in range(start, hw):
                if offset == len(self.committed):
                    self._check_idempotent(offset, entries[offset])
                    self.committed.append(entries[offset])
                elif entries[offset] != self.committed[offset]:
                    raise DataPlaneViolation(
                        "committed-prefix", f"broker {broker.broker_id} holds "
                        f"{entries[offset]} at offset {offset} below its high watermark "
                        f"{hw}; committed there: {self.committed[offset]}")
            self._checked[broker.broker_id] = max(start, hw)
        self._check_leader(brokers, committed)

    def _check_idempotent(self, offset: int, record: Record) -> None:
        if record.producer_id < 0:
            return
        producer = (record.producer_id, record.producer_epoch)
        key = (*producer, record.sequence)
        if key in self._sequences:
            raise DataPlaneViolation("idempotent-stored-once", f"producer {producer[0]} "
                                     f"epoch {producer[1]} sequence {record.sequence} "
                                     f"committed at offsets {self._sequences[key]} and "
                                     f"{offset}")
        last = self._last_sequence.get(producer, -1)
        if record.sequence <= last:
            raise DataPlaneViolation("idempotent-in-order", f"producer {producer[0]} "
                                     f"epoch {producer[1]}: sequence {record.sequence} "
                                     f"committed at offset {offset}, after {last}")
        self._sequences[key] = offset
        self._last_sequence[producer] = record.sequence

    def _check_leader(self, brokers: Mapping[int, Broker], committed: MetadataImage) -> None:
        topic = committed.topic(self.topic_id)
        if topic is None or topic.partitions[0].leader == NO_LEADER:
            return
        chosen = topic.partitions[0]
        leader = brokers[chosen.leader]
        known = leader.partition()
        if not leader.alive or leader.progress is None or known is None or \
                (known.leader, known.leader_epoch) != (chosen.leader, chosen.leader_epoch):
            return
        key = (leader.broker_id, chosen.leader_epoch)
        entries, start = leader.log.entries, self._leader_checked.get(key, 0)
        for offset in range(start, len(self.committed)):
            if offset >= len(entries) or entries[offset] != self.committed[offset]:
                held = entries[offset] if offset < len(entries) else "nothing"
                raise DataPlaneViolation(
                    "leader-holds-committed", f"leader {leader.broker_id} of epoch "
                    f"{chosen.leader_epoch} holds {held} at offset {offset}; committed "
                    f"there: {self.committed[offset]}")
        self._leader_checked[key] = len(self.committed)
        hw = leader.progress.high_watermark
        run = (leader.broker_id, leader.incarnation, chosen.leader_epoch)
        if hw < self._leader_hw.get(run, 0):
            raise DataPlaneViolation("leader-hw-monotonic", f"leader {leader.broker_id} of "
                                     f"epoch {chosen.leader_epoch}: high watermark {hw} "
                                     f"below {self._leader_hw[run]}")
        self._leader_hw[run] = hw

