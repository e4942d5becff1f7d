"""Synthetic clusters with partition data for the replay's partition checks: three voters
whose metadata log creates topic `orders` (one partition on brokers 4 and 5, leader
epoch 0, then a leader change to epoch 1), and the brokers' `node-4/data`, `node-5/data`
log dirs holding `orders-0/` as a broker writes it: `partition.metadata`, Kafka magic v2
batches (`raft.common.kafka.record_batch.encode_batch`, the broker's base offset and
leader epoch stamped outside the CRC, as `PartitionLog.append` stamps them) in segment
files, and the log dir's `replication-offset-checkpoint` and
`log-start-offset-checkpoint`.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from broker.kafka.partitions import log_start_checkpoint
from broker.kafka.partitions.segments import segment_name
from broker.kafka.replication.hw_checkpoint import CHECKPOINT_FILE as HIGH_WATERMARK_FILE
from broker.partition_dir import write_partition_metadata
from metadata import records as rec
from raft.common.kafka.record_batch import encode_batch
from raft.common.uuid import Uuid
from raft.types import Batch
from tests.support.synthetic_logs import write_cluster

ORDERS_ID = Uuid(0x0DE15)
BROKERS = (4, 5)
_BASE = struct.Struct(">q")
_EPOCH = struct.Struct(">i")


def metadata_batches(*, compacted: bool = False) -> list[Batch]:
    """The controllers' log: `orders` created led by broker 4 (epoch 0), then led by 5
    (epoch 1); `compacted`: with cleanup.policy=compact."""
    first: list[rec.Record] = [
        rec.LeaderChange(leader_id=1, voters=(1, 2, 3)),
        rec.MetadataTopic(topic_id=Uuid(7)),
        *(rec.RegisterBroker(broker_id=b, incarnation_id=Uuid(b), broker_epoch=b)
          for b in BROKERS),
        rec.Topic(name="orders", topic_id=ORDERS_ID),
        rec.Partition(topic_id=ORDERS_ID, partition=0, replicas=BROKERS, isr=BROKERS,
                      leader=4)]
    if compacted:
        first.append(rec.TopicConfig(topic_id=ORDERS_ID, key="cleanup.policy",
                                     value="compact"))
    second = [rec.PartitionChange(topic_id=ORDERS_ID, partition=0, leader=5)]
    batch = Batch(base_offset=0, epoch=1, records=tuple(r.encode() for r in first))
    return [batch, Batch(base_offset=batch.next_offset, epoch=1,
                         records=tuple(r.encode() for r in second))]


@dataclass(frozen=True, slots=True)
class StoredWrite:
    """One batch as the leader stored it: its base offset, leader epoch and records."""

    base_offset: int
    epoch: int
    records: tuple[tuple[bytes | None, bytes | None], ...]  # (key, value)


def batch_bytes(write: StoredWrite) -> bytes:
    data = bytearray(encode_batch(write.records, timestamps=[1000] * len(write.records)))
    _BASE.pack_into(data, 0, write.base_offset)
    _EPOCH.pack_into(data, 12, write.epoch)
    return bytes(data)


def clean_log(batches: int = 6, per_batch: int = 2) -> list[StoredWrite]:
    """Contiguous batches, epoch 0 for the first half and 1 after, value `v<offset>`
    and key `k<offset % 3>`."""
    out = []
    for number in range(batches):
        base = number * per_batch
        out.append(StoredWrite(base, 0 if number < batches // 2 else 1, tuple(
            (f"k{o % 3}".encode(), f"v{o}".encode()) for o in range(base, base + per_batch))))
    return out


def write_replica(log_dir: Path, writes: Sequence[StoredWrite], *, segment_batches: int = 4,
                  high_watermark: int | None = None, log_start: int | None = None) -> Path:
    """`orders-0` in `log_dir`: `writes` in segments of `segment_batches` batches."""
    directory = log_dir / "orders-0"
    directory.mkdir(parents=True, exist_ok=True)
    write_partition_metadata(directory, ORDERS_ID)
    for index in range(0, len(writes), segment_batches):
        chunk = writes[index:index + segment_batches]
        (directory / segment_name(chunk[0].base_offset)).write_bytes(
            b"".join(batch_bytes(w) for w in chunk))
    if high_watermark is not None:
        log_start_checkpoint.write(log_dir, {("orders", 0): high_watermark},
                                   HIGH_WATERMARK_FILE)
    if log_start is not None:
        log_start_checkpoint.write(log_dir, {("orders", 0): log_start})
    return directory


def write_partition_cluster(root: Path, replicas: dict[int, Sequence[StoredWrite]], *,
                            high_watermarks: dict[int, int], compacted: bool = False,
                            log_starts: dict[int, int] | None = None) -> Path:
    """Voters 1-3 with the metadata log, brokers with `replicas` (broker -> its log)."""
    log = metadata_batches(compacted=compacted)
    end = log[-1].next_offset
    write_cluster(root, {1: log, 2: log, 3: log}, voters=(1, 2, 3),
                  high_watermarks={1: end, 2: end, 3: end})
    for broker, writes in replicas.items():
        log_dir = root / f"node-{broker}" / "data"
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / "meta.properties").write_text(f"version=1\nnode.id={broker}\n",
                                                 encoding="utf-8")
        write_replica(log_dir, writes, high_watermark=high_watermarks.get(broker),
                      log_start=(log_starts or {}).get(broker))
    return root


def history_line(offset: int, value: bytes, *, key: bytes | None = None) -> str:
    """One acknowledged write of `orders-0` in `--history`'s format."""
    entry: dict[str, object] = {"topic": "orders", "partition": 0, "offset": offset,
                                "value": base64.b64encode(value).decode()}
    if key is not None:
        entry["key"] = base64.b64encode(key).decode()
    return json.dumps(entry)
