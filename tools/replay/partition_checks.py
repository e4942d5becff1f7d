"""The checks over the brokers' partition logs (read by tools.replay.partition_logs), each
a named `CheckResult` (pure: replicas and the metadata history in, verdicts out).

* `partition-replicas-agree`: below the lowest high watermark the partition's replicas
  checkpointed (`replication-offset-checkpoint`), every replica holds the same batches
  (base offset, last offset, leader epoch, CRC) as the one with the highest; a replica
  whose log starts later is compared from its start. Replicas without a checkpoint entry
  are not compared (a lagging follower may hold a stale tail of an older epoch, which only
  its checkpoint bounds). A replica whose log ends below its own checkpoint lost
  committed records. Compacted topics: every replica cleans its own log, so batches
  (same base offset) must agree in last offset and epoch, not CRC, and a batch one
  replica cleaned away is not missing.
* `partition-offsets-contiguous`: each log's batches follow each other without gap or
  overlap, each segment's first batch starting at its base offset; on a compacted topic
  batches only ascend without overlap (cleaning leaves gaps inside and between batches).
* `partition-epochs-match-metadata`: every batch's leader epoch is one the metadata log
  gave that partition (tools.replay.partition_history), and epochs never decrease along
  a log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tools.replay.checks import MAX_EXAMPLES, PARTITION_CHECKS, CheckResult
from tools.replay.partition_history import PartitionHistory, PartitionKey
from tools.replay.partition_logs import Replica, StoredBatch

REPLICAS_AGREE, OFFSETS_CONTIGUOUS, EPOCHS_MATCH, _ = PARTITION_CHECKS


Partitions = Mapping[PartitionKey, list[Replica]]


def _batch(batch: StoredBatch) -> dict[str, int]:
    return {"base_offset": batch.base_offset, "last_offset": batch.last_offset,
            "leader_epoch": batch.leader_epoch, "crc": batch.crc}


def _result(name: str, examples: list[dict[str, Any]], counts: dict[str, int],
            note: str = "") -> CheckResult:
    skipped = not counts.get("replicas")
    return CheckResult(name=name, description=PARTITION_CHECKS[name], violations=len(examples),
                       examples=tuple(examples[:MAX_EXAMPLES]), counts=counts,
                       skipped=skipped,
                       note="no partition logs on any broker" if skipped else note)


def _window(replica: Replica, low: int, bound: int) -> list[StoredBatch]:
    return [b for b in replica.batches if b.last_offset >= low and b.base_offset < bound]


def _first_difference(mine: list[StoredBatch], theirs: list[StoredBatch],
                      compacted: bool) -> tuple[StoredBatch | None, StoredBatch | None] | None:
    """The first pair of batches that disagree (None on one side: missing there)."""
    if compacted:
        by_base = {b.base_offset: b for b in theirs}
        for batch in mine:
            other = by_base.get(batch.base_offset)
            if other is not None and (other.last_offset, other.leader_epoch) != \
                    (batch.last_offset, batch.leader_epoch):
                return batch, other
        return None
    for index in range(max(len(mine), len(theirs))):
        left = mine[index] if index < len(mine) else None
        right = theirs[index] if index < len(theirs) else None
        if left is None or right is None or left[:4] != right[:4]:
            return left, right
    return None


def check_replicas_agree(partitions: Partitions, history: PartitionHistory) -> CheckResult:
    examples: list[dict[str, Any]] = []
    counts = {"partitions": len(partitions), "replicas": 0, "partitions_compared": 0,
              "batches_compared": 0, "replicas_without_checkpoint": 0}
    for key, replicas in sorted(partitions.items(), key=lambda item: str(item[0])):
        counts["replicas"] += len(replicas)
        checkpointed = [r for r in replicas if r.high_watermark is not None]
        counts["replicas_without_checkpoint"] += len(replicas) - len(checkpointed)
        for replica in checkpointed:
            if replica.high_watermark is not None and replica.log_end < replica.high_watermark:
                examples.append({**replica.describe(), "offset": replica.log_end,
                                 "reason": f"log ends at {replica.log_end}, below its "
                                           f"high-watermark checkpoint "
                                           f"{replica.high_watermark}: committed records "
                                           f"lost"})
        if len(checkpointed) < 2:
            continue
        counts["partitions_compared"] += 1
        bound = min(r.high_watermark or 0 for r in checkpointed)
        reference = max(checkpointed, key=lambda r: (r.high_watermark or 0, r.log_end,
                                                     -r.broker))
        compacted = key[0] in history.compacted
        for replica in checkpointed:
            if replica is reference:
                continue
            # a log ending below its checkpoint is reported above, not once more here
            low = max(replica.log_start, reference.log_start)
            high = min(bound, replica.log_end, reference.log_end)
            mine, theirs = _window(replica, low, high), _window(reference, low, high)
            counts["batches_compared"] += len(mine)
            found = _first_difference(mine, theirs, compacted)
            if found is None:
                continue
            batch, other = found
            either = batch or other
            assert either is not None, "a difference has a batch on one side at least"
            examples.append({
                **replica.describe(), "reference_broker": reference.broker,
                "offset": either.base_offset,
                "below": high, "batch": None if batch is None else _batch(batch),
                "reference_batch": None if other is None else _batch(other),
                "reason": "the replicas hold different batches below the high watermark"})
    unchecked = counts["replicas_without_checkpoint"]
    return _result(REPLICAS_AGREE, examples, counts,
                   note=f"{unchecked} replica(s) without a high-watermark checkpoint not "
                        "compared" if unchecked else "")


def _gaps(replica: Replica, compacted: bool) -> Iterable[tuple[int, str]]:
    """(offset, reason) of each place the log's offsets do not run on."""
    following_base = dict(zip(replica.segments, [*replica.segments[1:], None], strict=True))
    previous: StoredBatch | None = None
    for batch in replica.batches:
        following = following_base[batch.segment]
        first_in_segment = previous is None or previous.segment != batch.segment
        if previous is not None and batch.base_offset <= previous.last_offset:
            yield batch.base_offset, (f"batch {batch.base_offset}..{batch.last_offset} "
                                      f"overlaps {previous.base_offset}.."
                                      f"{previous.last_offset}")
        elif previous is not None and not compacted and \
                batch.base_offset != previous.last_offset + 1:
            yield batch.base_offset, (f"gap: {previous.last_offset + 1}.."
                                      f"{batch.base_offset - 1} missing")
        if batch.base_offset < batch.segment or \
                (following is not None and batch.last_offset >= following) or \
                (first_in_segment and not compacted and batch.base_offset != batch.segment):
            yield batch.base_offset, (f"batch {batch.base_offset}..{batch.last_offset} "
                                      f"outside segment {batch.segment} (next: "
                                      f"{following})")
        previous = batch


def check_offsets_contiguous(partitions: Partitions, history: PartitionHistory
                             ) -> CheckResult:
    examples: list[dict[str, Any]] = []
    counts = {"replicas": 0, "batches": 0}
    for key, replicas in partitions.items():
        for replica in replicas:
            counts["replicas"] += 1
            counts["batches"] += len(replica.batches)
            examples += [{**replica.describe(), "offset": offset, "reason": reason}
                         for offset, reason in _gaps(replica, key[0] in history.compacted)]
    return _result(OFFSETS_CONTIGUOUS, examples, counts)


def check_epochs_match(partitions: Partitions, history: PartitionHistory) -> CheckResult:
    examples: list[dict[str, Any]] = []
    counts = {"replicas": 0, "batches": 0, "replicas_of_unknown_topics": 0}
    for key, replicas in partitions.items():
        unknown = key[0] not in history.known_topics
        for replica in replicas:
            counts["replicas"] += 1
            if unknown and history.from_snapshot:  # created and deleted before it
                counts["replicas_of_unknown_topics"] += 1
                continue
            counts["batches"] += len(replica.batches)
            last = None
            for batch in replica.batches:
                reason = None
                if unknown:
                    reason = f"topic ID {key[0]} never created in the metadata log"
                elif not history.epoch_given(key, batch.leader_epoch):
                    reason = f"leader epoch {batch.leader_epoch} never given to the partition"
                elif last is not None and batch.leader_epoch < last:
                    reason = f"leader epoch {batch.leader_epoch} after {last}"
                if reason is not None:
                    examples.append({**replica.describe(), "offset": batch.base_offset,
                                     "batch": _batch(batch), "reason": reason})
                elif last is None or batch.leader_epoch > last:
                    last = batch.leader_epoch  # the highest given epoch so far
                if unknown:
                    break  # one violation per replica of an unknown topic
    note = "history from a snapshot: epochs up to the snapshot's taken as given" \
        if history.from_snapshot else ""
    return _result(EPOCHS_MATCH, examples, counts, note=note)
