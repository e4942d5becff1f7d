"""After the faults heal: wait (bounded) for the cluster to settle, then observe its final
state for the checker: the controller's topics and their replicas, every record of every
partition, each broker's applied offset and image hash, each broker's log dir once its
staged deletions were due, and the controller log's image hashes (from its snapshot at
or below the brokers' offset once its log no longer starts at 0); and, once every node
stopped, what each did with snapshots (written, log-start advances, fetched)."""

from __future__ import annotations

import bisect
import json
import logging
import os
import struct
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from broker.kafka.partitions.batch_walk import whole_batches
from broker.kafka.partitions.producer_state import read_header
from broker.kafka.partitions.segments import segment_bases, segment_name
from broker.partition_dir import scan
from metadata.admin import DescribeTopicsRequest, DescribeTopicsResponse
from metadata.delta import replay_bytes
from metadata.image import MetadataImage
from metadata.snapshot_loader import load_snapshot_image
from raft.segment import iter_batches, list_segments, segment_base_offset
from raft.snapshot import SnapshotFile, list_snapshots
from raft.storage import read_log_start
from tools.chaos.checker import BrokerDisk, BrokerObservation, PartitionDir, ReadRecord, StagedDir
from tools.chaos.workload import AdminCaller
from tools.cluster import Cluster, ClusterError

log = logging.getLogger(__name__)

METADATA_DIR = "__cluster_metadata-0"
POLL_S = 0.2


@dataclass(frozen=True, slots=True)
class FinalTopic:
    topic_id: str
    replicas: tuple[tuple[int, ...], ...]  # per partition


def final_topics(cluster: Cluster, timeout_s: float) -> dict[str, FinalTopic]:
    """name -> topic ID and replicas, from the active controller (as the cluster's
    operator: on a secured cluster its client certificate, a super user, which may
    describe every topic)."""
    caller = AdminCaller(cluster.controller_addresses(), cluster.cluster_id,
                         cluster.client_ssl)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        response, _ = caller.call(DescribeTopicsRequest(), is_write=False)
        if isinstance(response, DescribeTopicsResponse) and response.error_code == 0:
            return {str(t.name): FinalTopic(str(t.topic_id), tuple(
                        tuple(p.replicas) for p in sorted(t.partitions,
                                                          key=lambda p: p.partition)))
                    for t in response.topics}
        time.sleep(POLL_S)
    raise ClusterError(f"no controller described the topics within {timeout_s} s")


def settle_brokers(cluster: Cluster, timeout_s: float) -> list[BrokerObservation]:
    """Poll until every broker answers with the same applied offset twice in a row (the
    brokers caught up with a quiet log), or the deadline; the last observations."""
    brokers = [n for n, info in sorted(cluster.nodes.items()) if not info.is_voter]
    deadline = time.monotonic() + timeout_s
    previous: list[BrokerObservation] = []
    while True:
        current = []
        for node_id in brokers:
            status = cluster.broker_status(node_id) or {}
            current.append(BrokerObservation(node_id=node_id,
                                             applied_offset=status.get("applied_offset"),
                                             image_hash=status.get("image_hash")))
        offsets = {b.applied_offset for b in current}
        if len(offsets) == 1 and None not in offsets and current == previous:
            return current
        if time.monotonic() > deadline:
            return current
        previous = current
        time.sleep(0.5)  # two looks this far apart agree: a quiet log


def read_all(bootstrap: str, topics: dict[str, FinalTopic], timeout_s: float,
             login: Mapping[str, Any] | None = None
             ) -> tuple[list[ReadRecord], dict[str, bool], dict[tuple[str, int], int]]:
    """Every record of every partition of `topics` from the beginning to the high
    watermark, through kafka-python (logged in with `login`, its keyword arguments, on
    a secured cluster); per topic ID whether it was read to the end; and each partition's
    log start once read (retention may move it meanwhile: what lies below the later
    start may legally be gone, what lies above it was there all along)."""
    import kafka

    reads: list[ReadRecord] = []
    complete: dict[str, bool] = {}
    starts: dict[tuple[str, int], int] = {}
    consumer = kafka.KafkaConsumer(**(login or {}), bootstrap_servers=bootstrap,
                                   enable_auto_commit=False,
                                   request_timeout_ms=5000, fetch_max_wait_ms=100)
    try:
        for name, topic in sorted(topics.items()):
            topic_id = topic.topic_id
            assigned = [kafka.TopicPartition(name, p) for p in range(len(topic.replicas))]
            consumer.assign(assigned)
            consumer.seek_to_beginning()
            ends = consumer.end_offsets(assigned)
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and any(
                    consumer.position(tp) < ends[tp] for tp in assigned):
                for tp, messages in consumer.poll(timeout_ms=500).items():
                    reads += [ReadRecord(topic_id=topic_id, partition=tp.partition,
                                         offset=m.offset, value=(m.value or b"").decode(),
                                         key=None if m.key is None else m.key.decode())
                              for m in messages]
            complete[topic_id] = all(consumer.position(tp) >= ends[tp] for tp in assigned)
            starts.update({(topic_id, tp.partition): offset
                           for tp, offset in consumer.beginning_offsets(assigned).items()})
            if not complete[topic_id]:
                log.warning("topic not read to its end", extra={"topic": name})
    finally:
        consumer.close()
    return reads, complete, starts


def with_producers(reads: Sequence[ReadRecord], log_dirs: Mapping[int, Path], topic_id: str
                   ) -> list[ReadRecord]:
    """`reads` of one topic, each with the producer id and epoch of the batch that holds
    it, from the longest of the brokers' copies of its partition (the replicas agree
    below the high watermark, which the reads stop at; `kraft replay` checks that)."""
    longest: dict[int, list[tuple[int, int, int, int]]] = {}
    for _, log_dir in sorted(log_dirs.items()):
        for local in scan(log_dir)[0]:
            if local.topic_id is None or str(local.topic_id) != topic_id:
                continue
            batches = batch_producers(log_dir / f"{local.topic}-{local.partition}")
            held = longest.get(local.partition, [])
            if not held or (batches and batches[-1][1] > held[-1][1]):
                longest[local.partition] = batches
    out = []
    for record in reads:
        batches = longest.get(record.partition, [])
        at = bisect.bisect_left(batches, record.offset, key=lambda b: b[1])
        if at < len(batches) and batches[at][0] <= record.offset:
            record = replace(record, producer=(batches[at][2], batches[at][3]))
        out.append(record)
    return out


_BASE_OFFSET = struct.Struct(">q")  # a magic v2 batch's first 8 bytes


def batch_producers(directory: Path) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, producer id, producer epoch) of each batch of one
    partition directory's segments, in offset order, up to a torn or corrupt tail (producer
    id -1: no idempotent producer): the batches the broker keeps (`whole_batches`)."""
    out = []
    for base in segment_bases(os.listdir(directory)):
        data = (directory / segment_name(base)).read_bytes()
        for position, _ in whole_batches(data):
            (base_offset,) = _BASE_OFFSET.unpack_from(data, position)
            header = read_header(data, position)
            out.append((base_offset, base_offset + header.last_offset_delta,
                        header.producer_id, header.producer_epoch))
    return out


def scan_broker_dirs(cluster: Cluster, timeout_s: float) -> list[BrokerDisk]:
    """Each broker's log dir, scanned once every broker reconciled the image it applied
    and removed the staged deletions it reported (or at the deadline: the checker then
    names what is overdue)."""
    brokers = [n for n, info in sorted(cluster.nodes.items()) if not info.is_voter]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        statuses = [cluster.broker_status(node_id) for node_id in brokers]
        if all(s is not None and s.get("reconciled_offset") == s.get("applied_offset")
               and not s.get("pending_deletions") for s in statuses):
            break
        time.sleep(POLL_S)
    disks = []
    for node_id in brokers:
        observed_ms = int(time.time() * 1000)
        local, staged = scan(Path(cluster.node(node_id).data_dir))
        disks.append(BrokerDisk(
            node_id=node_id, observed_ms=observed_ms,
            partitions=[PartitionDir(topic=p.topic, partition=p.partition,
                                     topic_id=None if p.topic_id is None else str(p.topic_id))
                        for p in local],
            staged=[StagedDir(name=s.name, due_ms=s.due_ms) for s in staged]))
    return disks


def reference_hashes(log_dir: str | Path, offsets: Iterable[int]) -> dict[int, str]:
    """The content hash of the image replayed from one voter's log through each offset
    (offsets the log does not reach are left out). Read after the node stopped.

    The replay starts at offset 0 while the log still holds it; once the log start moved
    past it (snapshots, `metadata.max.retention.bytes`), it starts from the image of a
    snapshot of that node that the remaining log continues (`replay_base`; offsets below
    its end are left out, and all of them when there is none)."""
    pending = sorted({o for o in offsets if o is not None})
    out: dict[int, str] = {}
    partition = Path(log_dir) / METADATA_DIR
    segments = list_segments(partition)
    image, replay_from = MetadataImage.empty(), 0
    if pending and log_starts_above_zero(partition, segments):
        base = replay_base(partition, segments, pending[0])
        if base is None:
            return out
        image, replay_from = load_snapshot_image(base.path), base.snapshot_id.end_offset
        pending = [o for o in pending if o >= replay_from - 1]
    if pending and pending[0] == replay_from - 1:
        out[pending.pop(0)] = image.content_hash()
    chunk: list[tuple[int, bytes]] = []
    for segment in segments:
        for stored in iter_batches(segment.read_bytes(), str(segment)):
            for index, record in enumerate(stored.batch.records):
                if not pending:
                    return out
                offset = stored.batch.base_offset + index
                if offset < replay_from:
                    continue
                chunk.append((offset, record))
                if offset == pending[0]:
                    image = replay_bytes(chunk, image)
                    chunk = []
                    out[pending.pop(0)] = image.content_hash()
    return out


def log_starts_above_zero(partition: Path, segments: list[Path]) -> bool:
    """Whether the log no longer holds offset 0 (its start moved, or its first segment
    was deleted)."""
    return read_log_start(partition)[0] > 0 or (
        bool(segments) and segment_base_offset(segments[0]) > 0)


def replay_base(partition: Path, segments: list[Path], first_offset: int
                ) -> SnapshotFile | None:
    """The snapshot to replay from: one from whose end offset on the log still holds
    every record (at or above its first segment's base, or its start when no segment is
    left), the newest ending at or below `first_offset` + 1, else the oldest (the offsets
    below it are then left out); None when there is none."""
    floor = segment_base_offset(segments[0]) if segments else read_log_start(partition)[0]
    usable = [s for s in list_snapshots(partition) if s.snapshot_id.end_offset >= floor]
    below = [s for s in usable if s.snapshot_id.end_offset <= first_offset + 1]
    if below:
        return max(below)
    return min(usable, default=None)


# -- snapshots ---------------------------------------------------------------------------

WROTE_SNAPSHOT = "wrote snapshot"  # metadata/snapshot_writer.py
ADVANCED_LOG_START = "log start advanced to the snapshot"  # metadata/snapshot_writer.py
LOADED_FETCHED = "loaded a snapshot fetched from the leader"  # tools/server/build.py


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSnapshots:
    """What one node did with snapshots during the run, from its node.log and its
    metadata directory once stopped."""

    node_id: int
    written: int  # snapshots it wrote
    log_start_advances: int  # times its log start moved to a snapshot
    fetched: int  # snapshots it fetched from the leader (FetchSnapshot) and loaded
    log_start: int  # where its log starts at the end
    first_segment: int | None  # the base offset of its first segment at the end
    checkpoints: int  # snapshot files in its metadata directory at the end

    def to_json(self) -> dict[str, object]:
        return {"node": self.node_id, "written": self.written,
                "log_start_advances": self.log_start_advances, "fetched": self.fetched,
                "log_start": self.log_start, "first_segment": self.first_segment,
                "checkpoints": self.checkpoints}


def snapshot_activity(cluster: Cluster) -> list[NodeSnapshots]:
    """Per node: the snapshots written, log-start advances and fetched snapshots its log
    reports (INFO events), and its log start, first segment and snapshot files on disk."""
    out = []
    for node_id, info in sorted(cluster.nodes.items()):
        counts = Counter(event_messages(info.log_path))
        partition = Path(info.data_dir) / METADATA_DIR
        segments = list_segments(partition) if partition.is_dir() else []
        out.append(NodeSnapshots(
            node_id=node_id, written=counts[WROTE_SNAPSHOT],
            log_start_advances=counts[ADVANCED_LOG_START], fetched=counts[LOADED_FETCHED],
            log_start=read_log_start(partition)[0] if partition.is_dir() else 0,
            first_segment=segment_base_offset(segments[0]) if segments else None,
            checkpoints=len(list_snapshots(partition)) if partition.is_dir() else 0))
    return out


def event_messages(path: Path) -> Iterator[str]:
    """The `msg` of each JSON line of a node's log (other lines are skipped)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.startswith("{"):
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(event, dict) and isinstance(event.get("msg"), str):
                        yield event["msg"]
    except FileNotFoundError:
        return
