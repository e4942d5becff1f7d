"""Every broker's partition logs, as `kraft replay` checks them (tools.replay.partition_checks).

A broker keeps each partition it hosts in `<log.dir>/<topic>-<partition>/`
(broker.reconcile): `partition.metadata` names its topic ID, the segment files
`<base offset, 20 digits>.log` hold Kafka magic v2 batches
(broker.kafka.partitions.partition_log). Beside them in the log dir,
`log-start-offset-checkpoint` holds the log starts inside a first segment (DeleteRecords)
and `replication-offset-checkpoint` each partition's high watermark
(broker.kafka.replication.hw_checkpoint). Directories without a readable
`partition.metadata` (not created yet) and the staged deletions under `deleting/` are
left out: the broker serves neither.

A log is read as its broker opens it: batches in segment order up to the first torn or
corrupt one (framing, magic or CRC32C), where the broker would cut it; the log start is
the first segment's base or the checkpointed start inside the log, whichever is later.

These are read on the driver, not in Spark tasks: each segment is read once (its CRC32Cs
checked, as the broker opening it checks them) and only each batch's header is kept, a
small tuple; the checks compare a partition's replicas with each other, so they need
them together in one place. The records are decoded again only for the partitions
`--history` names (`record_values`).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from broker.kafka.partitions import log_start_checkpoint
from broker.kafka.partitions.batch_rewrite import batch_records
from broker.kafka.partitions.batch_walk import whole_batches
from broker.kafka.partitions.segments import segment_bases, segment_name
from broker.kafka.replication.hw_checkpoint import CHECKPOINT_FILE as HIGH_WATERMARK_FILE
from broker.partition_dir import read_partition_metadata
from broker.reconcile import parse_partition_dir_name
from raft.common.uuid import Uuid
from tools.replay import METADATA_DIR
from tools.replay.inputs import InputError, NodeInput

_HEADER = struct.Struct(">qiiBIhi")  # base offset .. last offset delta


class StoredBatch(NamedTuple):
    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int
    segment: int  # its segment's base offset
    position: int  # in the segment file
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Replica:
    """One broker's copy of one partition."""

    broker: int
    topic: str
    partition: int
    topic_id: Uuid
    directory: Path
    batches: tuple[StoredBatch, ...]
    segments: tuple[int, ...]  # the segment files' base offsets
    log_start: int
    high_watermark: int | None  # from replication-offset-checkpoint; None: no entry

    @property
    def log_end(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self.log_start

    def describe(self) -> dict[str, object]:
        return {"broker": self.broker, "topic": self.topic, "partition": self.partition}


def _batches(directory: Path, bases: list[int]) -> list[StoredBatch]:
    """The batches the broker would open, up to the first torn or corrupt one."""
    out: list[StoredBatch] = []
    for base in bases:
        path = directory / segment_name(base)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"{path}: unreadable partition segment: "
                             f"{exc.strerror or exc}") from None
        position = 0  # the end of the last whole batch
        for start, end in whole_batches(data):
            base_offset, _, epoch, _, crc, _, last_delta = _HEADER.unpack_from(data, start)
            if last_delta < 0:
                return out
            out.append(StoredBatch(base_offset, base_offset + last_delta, epoch, crc, base,
                                   start, end - start))
            position = end
        if position < len(data):
            return out
    return out


def _replica(broker: int, directory: Path, key: tuple[str, int], topic_id: Uuid,
             starts: dict[tuple[str, int], int], marks: dict[tuple[str, int], int]) -> Replica:
    bases = segment_bases(os.listdir(directory))
    batches = _batches(directory, bases)
    first = bases[0] if bases else 0
    end = batches[-1].last_offset + 1 if batches else first
    start = starts.get(key, 0)
    return Replica(broker=broker, topic=key[0], partition=key[1], topic_id=topic_id,
                   directory=directory, batches=tuple(batches), segments=tuple(bases),
                   log_start=start if first <= start <= end else first,
                   high_watermark=marks.get(key))


def broker_replicas(node: NodeInput) -> list[Replica]:
    """The partition logs in one node's log dir (none for a controller)."""
    log_dir = node.log_dir
    starts = log_start_checkpoint.read(log_dir)
    marks = log_start_checkpoint.read(log_dir, HIGH_WATERMARK_FILE)
    replicas = []
    try:
        for child in sorted(log_dir.iterdir()):
            key = parse_partition_dir_name(child.name)
            if key is None or child.name == METADATA_DIR or not child.is_dir():
                continue
            topic_id = read_partition_metadata(child)
            if topic_id is not None:
                replicas.append(_replica(node.node_id, child, key, topic_id, starts, marks))
    except OSError as exc:
        raise InputError(f"{exc.filename or log_dir}: cannot list partition logs: "
                         f"{exc.strerror or exc}") from None
    return replicas


def read_replicas(nodes: tuple[NodeInput, ...]) -> dict[tuple[Uuid, int], list[Replica]]:
    """Every node's partition logs, by (topic ID, partition), each list by broker id."""
    out: dict[tuple[Uuid, int], list[Replica]] = {}
    for node in nodes:
        for replica in broker_replicas(node):
            out.setdefault((replica.topic_id, replica.partition), []).append(replica)
    return out


def record_values(replica: Replica, batch: StoredBatch
                  ) -> list[tuple[int, bytes | None, bytes | None]] | None:
    """(offset, key, value) of each record of one stored batch (every Kafka codec is
    decoded); None when it is a control batch or its body does not decode."""
    path = replica.directory / segment_name(batch.segment)
    try:
        with open(path, "rb") as handle:
            handle.seek(batch.position)
            data = handle.read(batch.size)
    except OSError as exc:
        raise InputError(f"{path}: unreadable partition segment: {exc.strerror or exc}") \
            from None
    return batch_records(data)
