"""The data-plane invariants, checked after every event of a simulated run (and at a
truncation, an acknowledgement or a delivery as it happens), each partition's by its own
`Checker` (one per life of a partition index). A violation raises `DataPlaneViolation`
naming the invariant.

- `hw-within-log`: no replica's high watermark is above its log end.
- `committed-prefix`: below its high watermark every replica holds the same records (the
  committed prefix: an offset never holds two different records once committed), from
  its log start on.
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
  every committed record from its log start on (so none acknowledged is ever lost but
  by DeleteRecords).
- `leader-hw-monotonic`: a leader's high watermark never goes back within its epoch
  (and process: a restarted one starts from 0).
- `per-key-order` (`KeyOrder`): an ordered consumer never delivers a record of a key
  before every record of that key acknowledged before it was sent (KIP-253's promise:
  the ordered producer sends a key's next record only once the last one is acknowledged).
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.dataplane.sim.log import Record
from broker.dataplane.sim.node import Broker, Life, Replica, life_of
from metadata.image import NO_LEADER, PartitionImage


class DataPlaneViolation(AssertionError):
    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail


class Checker:
    def __init__(self, index: int, life: Life) -> None:
        self.index, self.life = index, life
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

    def _replica(self, broker: Broker) -> Replica | None:
        replica = broker.replicas.get(self.index)
        return replica if replica is not None and replica.life == self.life else None

    def on_truncate(self, broker_id: int, new_end: int, high_watermark: int) -> None:
        if new_end < high_watermark:
            raise DataPlaneViolation("no-truncation-below-hw", f"broker {broker_id} "
                                     f"partition {self.index} "
                                     f"truncates to {new_end} below its high watermark "
                                     f"{high_watermark}")
        self._checked[broker_id] = min(self._checked.get(broker_id, 0), new_end)

    def on_acked(self, first_offset: int, values: tuple[int, ...]) -> None:
        for offset, value in enumerate(values, start=first_offset):
            if offset >= len(self.committed) or self.committed[offset].value != value:
                held = self.committed[offset] if offset < len(self.committed) else "nothing"
                raise DataPlaneViolation("acked-is-committed", f"write {value} acknowledged "
                                         f"at offset {offset} of partition {self.index}, "
                                         "where the committed log "
                                         f"holds {held}")

    def on_consumed(self, position: int, entries: list[Record]) -> None:
        for offset, entry in enumerate(entries, start=position):
            if offset >= len(self.committed) or self.committed[offset] != entry:
                held = self.committed[offset] if offset < len(self.committed) else "nothing"
                raise DataPlaneViolation("consumer-reads-committed", f"a consumer read "
                                         f"{entry} at offset {offset} of partition "
                                         f"{self.index}, where the committed "
                                         f"log holds {held}")

    def check_replica(self, broker_id: int, replica: Replica) -> None:
        """After an event: a replica of this life (its process up)."""
        assert replica.progress is not None
        assert replica.life == self.life
        hw, entries = replica.progress.high_watermark, replica.log.entries
        if hw > len(entries):
            raise DataPlaneViolation("hw-within-log", f"broker {broker_id}: high watermark "
                                     f"{hw} of partition {self.index} above its log end "
                                     f"{len(entries)}")
        checked = self._checked.get(broker_id, 0)
        if hw <= checked:  # nothing new below it (a truncation lowers `checked` first)
            return
        # below its log start a replica holds nothing (DeleteRecords, followed from the
        # leader's): a record it kept there, even one the leader never had, is deleted
        start = max(checked, min(replica.log.log_start_offset, len(self.committed)))
        for offset in range(start, hw):
            if offset == len(self.committed):
                self._check_idempotent(offset, entries[offset])
                self.committed.append(entries[offset])
            elif entries[offset] != self.committed[offset]:
                raise DataPlaneViolation(
                    "committed-prefix", f"broker {broker_id} holds {entries[offset]} at "
                    f"offset {offset} of partition {self.index}, below its high watermark "
                    f"{hw}; committed there: {self.committed[offset]}")
        if hw > start:
            self._checked[broker_id] = hw

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

    def check_leader(self, brokers: Mapping[int, Broker], chosen: PartitionImage) -> None:
        """After an event: the leader the committed image names for this life."""
        if chosen.leader == NO_LEADER or life_of(chosen) != self.life:
            return
        leader = brokers[chosen.leader]
        known, replica = leader.partition(self.index), self._replica(leader)
        if not leader.alive or replica is None or replica.progress is None or \
                known is None or \
                (known.leader, known.leader_epoch) != (chosen.leader, chosen.leader_epoch):
            return
        key = (leader.broker_id, chosen.leader_epoch)
        entries = replica.log.entries
        start = max(self._leader_checked.get(key, 0),
                    min(replica.log.log_start_offset, len(self.committed)))
        for offset in range(start, len(self.committed)):
            if offset >= len(entries) or entries[offset] != self.committed[offset]:
                held = entries[offset] if offset < len(entries) else "nothing"
                raise DataPlaneViolation(
                    "leader-holds-committed", f"leader {leader.broker_id} of partition "
                    f"{self.index} epoch "
                    f"{chosen.leader_epoch} holds {held} at offset {offset}; committed "
                    f"there: {self.committed[offset]}")
        self._leader_checked[key] = len(self.committed)
        hw = replica.progress.high_watermark
        run = (leader.broker_id, leader.incarnation, chosen.leader_epoch)
        if hw < self._leader_hw.get(run, 0):
            raise DataPlaneViolation("leader-hw-monotonic", f"leader {leader.broker_id} of "
                                     f"epoch {chosen.leader_epoch}: high watermark {hw} "
                                     f"below {self._leader_hw[run]}")
        self._leader_hw[run] = hw



class KeyOrder:
    """`per-key-order`: what each key's ordered producer had acknowledged when it sent
    each record, against what the ordered consumers delivered."""

    def __init__(self) -> None:
        self._acked: dict[bytes, list[int]] = {}  # key -> values in acknowledgement order
        self._before: dict[int, int] = {}  # value -> how many of its key's were acked then
        self._delivered: dict[bytes, set[int]] = {}

    def on_sent(self, key: bytes, value: int) -> None:
        self._before.setdefault(value, len(self._acked.get(key, ())))

    def on_acked(self, key: bytes, value: int) -> None:
        acked = self._acked.setdefault(key, [])
        if value not in acked:
            acked.append(value)

    def on_delivered(self, key: bytes, value: int, where: str) -> None:
        delivered = self._delivered.setdefault(key, set())
        missing = [v for v in self._acked.get(key, [])[:self._before.get(value, 0)]
                   if v not in delivered]
        if missing:
            raise DataPlaneViolation("per-key-order", f"key {key.decode()}: value {value} "
                                     f"delivered ({where}) before {missing[0]}, "
                                     "acknowledged before it was sent")
        delivered.add(value)
