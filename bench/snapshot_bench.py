"""Snapshots at scale: 100,000 topics x 10 partitions (1,000,000 partitions).

    python -m bench snapshot_bench [-- --topics N --partitions P --topics-per-request N
                                       --in-flight N --profile DIR]

Opt-in: `make bench` runs it only when named (`python -m bench snapshot_bench`), since
the full size takes 12 minutes on a quiet 2-core VM (20 under load). `--topics` shrinks
it; the first lines say the size it was measured at.

One multi-process cluster on 127.0.0.1 (`tools.cluster`): 3 voters with fsync, and 2
real brokers that start only when measured. Default settings but three:
`broker.session.timeout.ms` (below), `metadata.max.retention.bytes` = -1 so that the
voters keep their whole log for catch-up from offset 0 (the default, 100 MiB, would
start their logs at a snapshot: this log is larger), and `log.segment.bytes` = 16 MiB
so that whole segments lie below a snapshot, to be deleted for step 6. Snapshots are
written every 20 MiB of records (the default) throughout, brokers' included.

Setup (timed and printed). Three placeholder brokers (ids 1001-1003) are registered and
unfenced through the admin API by this process (RegisterBroker, then BrokerHeartbeat,
as `broker/heartbeat.py` does), and the topics are created through the admin API with
replication factor 3 on them, in batched CreateTopics requests: 100 topics (1,100
records) each, 4 in flight. One request may hold 1,000 topics of 10 partitions
(`ControllerConfig.max_partitions_per_request`), but deciding and applying 11,000 records
holds a voter's event loop long enough to cost elections (check-quorum resignations):
measured at 100,000 topics, 1,000 a request with 3 in flight took 449 s and 98 epochs,
100 with 4 in flight 404 s and 38 epochs (both while other jobs loaded the host).
Placeholders rather than broker processes: a real broker
hosting a partition creates its directory and an fsynced `partition.metadata`
(`broker/partition_dir.py`), i.e. 3 million directories and several million fsyncs at
this size, which would measure the disk, not the metadata. They never heartbeat again,
so `broker.session.timeout.ms` is raised for this cluster: fencing one would move the
leadership of a million partitions (`metadata/broker_control.py` `leadership_moves`).

Then:
1. Snapshot write: `WriteSnapshot` on each voter (what `kraft quorum snapshot` sends):
   the node's own time (high-watermark checkpoint, encode, write, fsync, in its worker
   thread) and the file size. In this process too (`write_image_snapshot`, what the
   node runs).
2. Snapshot load (file -> MetadataImage): `metadata.snapshot_loader.load_start_image`,
   the start-up path, on a copy of the checkpoint just written (of the voter with the
   largest end offset: a follower may lag) and of its high-watermark checkpoint; it
   checks and applies the file batch by batch. Beside it, the file read and checked
   whole with nothing applied (`raft.snapshot.read_snapshot`), for scale.
3. Image rebuild from the log: that voter's segments read as `kraft metadata-shell` reads
   a running node's log (`raft.log.scan_log_dir`: CRCs checked, nothing repaired) and
   every record below the snapshot's end offset applied batch by batch with
   `MetadataDelta.apply_records` (what a broker's commit listener does); then the
   image's content hash is compared with the loaded snapshot's (not timed). Twice: with
   the garbage collector on between batches, as a node's commit listener runs, and
   paused around the whole load (`raft.common.gc_pause`, as snapshot loads run).
4. Catch-up by Fetch from offset 0: broker 4 starts on its empty log directory while
   the voters hold the whole log; it hosts none of the partitions. The figure is the
   time from `start_node` to its "broker unfenced" log line (JSON with a wall-clock
   `ts`): the controller unfences a broker whose heartbeat shows every record applied
   up to the controller's high watermark. On the way, its "broker registered" and
   "caught up with the metadata log" lines, and when the leader's DescribeQuorum shows
   its log at the high watermark of its start. The broker itself is never polled (a
   BrokerStatus reply lists every hosted partition and hashes the image). Its VmRSS and
   VmHWM (/proc/<pid>/status) once unfenced and again after a short settle; the
   voters' VmRSS for context.
5. Idle at this size: with broker 4 up (holding the image, hosting none of the
   partitions) and settled, each process's CPU over `IDLE_WINDOW_S`
   (`bench.idle_bench.idle_window`) against idle_bench's 1% of a core: what staying a
   quorum costs with a million partitions in every image.
6. Catch-up by FetchSnapshot: `catch_up_by_fetch_snapshot`, the same measurement on
   broker 5 once the voters, restarted with the default retention, have snapshotted
   and deleted their early segments (broker 4 stopped first); the voters' restart
   times (each from its own snapshot) are printed on the way.

`--profile DIR` writes cProfile files of this process's phases (setup client, rebuild,
load, write) and of the voters and brokers 4 and 5 (started under `python -m cProfile`;
a node writes its profile when it stops), and prints the top functions of each. A node's profile
covers its main thread only: its worker threads (snapshot writes, a broker's image
checkpoint hash and reconciliation) are not in it, and its epoll wait is idle time.

Targets, printed next to the figures and never asserted: image rebuild at most 3 s with
the collector on, snapshot load at most 2 s, a new broker unfenced by Fetch from offset 0
within 15 s and by FetchSnapshot within 4 s, a restarted voter back at the high
watermark within 4 s, broker memory under 4 GiB.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import json
import math
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.idle_bench import idle_window, print_idle
from bench.stats import verdict
from metadata.admin import (
    WRITE_APIS,
    AdminErrorResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
    api_of,
    encode_body,
)
from metadata.controller import ControllerConfig
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from metadata.snapshot_loader import load_start_image
from metadata.snapshot_writer import write_image_snapshot
from raft import messages
from raft.common.errors import ErrorCode
from raft.common.gc_pause import gc_paused
from raft.common.leader_redirect import Done
from raft.common.uuid import Uuid
from raft.log import METADATA_PARTITION_DIR, scan_log_dir
from raft.snapshot import SnapshotId, read_snapshot
from raft.storage import HIGH_WATERMARK_CHECKPOINT, read_log_start
from tools.admin_client import LeaderClient, admin_outcome
from tools.cluster import Cluster, ClusterError
from tools.config import KEYS_BY_NAME, KNOWN_KEYS
from tools.quorum_client import request

TOPICS = 100_000
PARTITIONS = 10
REPLICATION_FACTOR = 3
VOTERS = 3
REAL_BROKERS = 2  # 4: catch-up by Fetch; 5: catch-up by FetchSnapshot
PLACEHOLDER_BROKERS = (1001, 1002, 1003)
IN_FLIGHT = 4  # CreateTopics requests outstanding at once
TOPICS_PER_REQUEST = 100
REQUEST_TIMEOUT_S = 600.0
SESSION_TIMEOUT_MS = 24 * 3600 * 1000  # the placeholders never heartbeat again
RETENTION_KEY = "metadata.max.retention.bytes"
SEGMENT_BYTES = 16 << 20  # so that whole segments lie below a snapshot, to be deleted
SETTINGS: dict[str, Any] = {"broker.session.timeout.ms": SESSION_TIMEOUT_MS,
                            RETENTION_KEY: -1,  # the whole log, for catch-up from 0
                            "log.segment.bytes": SEGMENT_BYTES}
CATCH_UP_TIMEOUT_S = 600.0
# defaults this bench leaves as they are (each key's one default: its Key's)
HEARTBEAT_INTERVAL_MS: int = KEYS_BY_NAME["broker.heartbeat.interval.ms"].default
SNAPSHOT_INTERVAL_BYTES: int = \
    KEYS_BY_NAME["metadata.log.max.record.bytes.between.snapshots"].default
DEFAULT_RETENTION_BYTES: int = KEYS_BY_NAME[RETENTION_KEY].default \
    if RETENTION_KEY in KEYS_BY_NAME else 100 << 20
SETTLE_S = 10.0
IDLE_WINDOW_S = 60.0  # step 5's
TARGET_CATCH_UP_S = 15.0  # by Fetch from offset 0
TARGET_FETCH_SNAPSHOT_S = 4.0  # by FetchSnapshot
TARGET_REBUILD_S = 3.0  # with the collector on
TARGET_LOAD_S = 2.0
TARGET_VOTER_RESTART_S = 4.0
TARGET_RSS_BYTES = 4 << 30
LOG_START_TIMEOUT_S = 120.0
VOTER_RESTART_TIMEOUT_S = 600.0
CAUGHT_UP_MESSAGE = "caught up with the metadata log"
REGISTERED_MESSAGE = "broker registered"
FETCHED_POLL_S = 0.25
UNFENCED_MESSAGE = "broker unfenced"
SNAPSHOT_MESSAGE = "wrote snapshot"  # metadata/snapshot_writer.py


def mib(size: int) -> str:
    return f"{size / (1 << 20):,.1f} MiB"


# --- profiling ------------------------------------------------------------------------


class Profiler:
    """cProfile of this process's phases, and the paths node profiles go to (`None`:
    profiling off)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self.directory is None:
            yield
            return
        profile = cProfile.Profile()
        profile.enable()
        try:
            yield
        finally:
            profile.disable()
            profile.dump_stats(self.directory / f"bench-{name}.prof")

    def node_file(self, node_id: int) -> Path | None:
        return None if self.directory is None else self.directory / f"node-{node_id}.prof"

    def summary(self, top: int = 12) -> None:
        if self.directory is None:
            return
        for path in sorted(self.directory.glob("*.prof")):
            out = io.StringIO()
            stats = pstats.Stats(str(path), stream=out)
            stats.sort_stats("tottime").print_stats(top)
            lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
            start = next((i for i, ln in enumerate(lines) if "ncalls" in ln), 0)
            total = next((ln for ln in lines if "function calls" in ln), "").strip()
            print(f"  profile {path.name} ({total}), by own time:")
            for ln in lines[start:start + top + 1]:
                print(f"    {ln}")


def start_node(cluster: Cluster, node_id: int, profile_to: Path | None) -> int:
    """`Cluster.start_node`, under `python -m cProfile -o FILE` when `profile_to` is set."""
    if profile_to is None:
        return cluster.start_node(node_id)
    return cluster.start_node(node_id, interpreter_args=("-m", "cProfile", "-o", str(profile_to)))


# --- the admin API -------------------------------------------------------------------


class Admin:
    """Blocking admin calls to the active controller, as `raft.common.leader_redirect`
    decides (`tools.admin_client.LeaderClient`); one generous timeout per call (a
    1,000-topic create commits 11,000 records)."""

    def __init__(self, cluster: Cluster) -> None:
        self.client = LeaderClient(cluster.controller_addresses(), cluster_id=cluster.cluster_id,
                                   attempt_timeout_s=REQUEST_TIMEOUT_S, backoff_s=0.1)

    def call(self, message: Any, timeout_s: float = REQUEST_TIMEOUT_S) -> Any:
        api = api_of(message)
        result = self.client.call(api, encode_body(message), classify=admin_outcome(api),
                                  is_write=api in WRITE_APIS,
                                  deadline=time.monotonic() + timeout_s)
        if not isinstance(result, Done):
            raise ClusterError(f"{api}: no answer ({'; '.join(result.problems[-3:])})")
        if isinstance(result.value, AdminErrorResponse):
            raise ClusterError(f"{api} failed: {result.value}")
        return result.value


def register_placeholders(cluster: Cluster, admin: Admin) -> None:
    for broker_id in PLACEHOLDER_BROKERS:
        registered = admin.call(RegisterBrokerRequest(
            broker_id=broker_id, incarnation_id=Uuid.random(),
            endpoints=(f"PLAINTEXT://127.0.0.1:{9 + broker_id}",)))
        assert isinstance(registered, RegisterBrokerResponse)
        if registered.error_code:
            raise ClusterError(f"placeholder broker {broker_id}: {registered}")
        deadline = time.monotonic() + 30
        while True:
            applied = cluster.describe()["high_watermark"] - 1
            beat = admin.call(BrokerHeartbeatRequest(
                broker_id=broker_id, broker_epoch=registered.broker_epoch,
                current_metadata_offset=applied))
            assert isinstance(beat, BrokerHeartbeatResponse)
            if beat.error_code:
                raise ClusterError(f"placeholder broker {broker_id}: {beat}")
            if not beat.is_fenced:
                break
            if time.monotonic() > deadline:
                raise ClusterError(f"placeholder broker {broker_id} not unfenced in 30 s")
            time.sleep(0.05)


def most_per_request(partitions: int) -> int:
    return max(1, ControllerConfig().max_partitions_per_request // partitions)


def create_topics(admin: Admin, topics: int, partitions: int, per_request: int,
                  in_flight: int) -> tuple[int, int]:
    """Every topic, in CreateTopics requests of `per_request` topics, `in_flight` at a
    time. Returns (topics created, topics a retried request found already created)."""
    chunks = [range(start, min(topics, start + per_request))
              for start in range(0, topics, per_request)]

    def create(chunk: range) -> tuple[int, int]:
        response = admin.call(CreateTopicsRequest(topics=tuple(
            CreatableTopic(name=f"t{index:07d}", num_partitions=partitions,
                           replication_factor=REPLICATION_FACTOR) for index in chunk)))
        assert isinstance(response, CreateTopicsResponse)
        created = existing = 0
        for result in response.topics:
            if result.error_code == 0:
                created += 1
            elif result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
                existing += 1  # a request retried after a leader change had committed
            else:
                raise ClusterError(f"create {result.name} failed: {result.error_message}")
        return created, existing

    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        results = list(pool.map(create, chunks))
    return sum(r[0] for r in results), sum(r[1] for r in results)


# --- processes ---------------------------------------------------------------------


def memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process, in bytes."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def log_events(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """JSON log lines appended to a node's log since `offset` (whole lines only)."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        data = handle.read()
    end = data.rfind(b"\n") + 1
    events = []
    for line in data[:end].splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # not a log line (a crash trace)
        if isinstance(event, dict):
            events.append(event)
    return events, offset + end


@dataclass(frozen=True, slots=True)
class CatchUp:
    broker: int
    high_watermark: int  # before it started
    registered_s: float  # from start_node to its "broker registered" log line
    fetched_s: float  # until the leader saw its log end at `high_watermark`
    caught_up_s: float  # to its own "caught up" log line
    caught_up_at: tuple[int, int]  # (offset, high watermark) that line names
    unfenced_s: float  # to its "broker unfenced" log line
    rss: int  # once unfenced
    hwm: int
    settled_rss: int  # SETTLE_S later
    settled_hwm: int
    snapshots: int  # the broker's own snapshots written before it was unfenced


def observer_end(cluster: Cluster, broker: int) -> int:
    """The broker's log end offset as the leader last saw it in a Fetch (-1: none)."""
    try:
        observers = cluster.describe(timeout_s=2)["observers"]
    except ClusterError:
        return -1
    return next((o["log_end_offset"] for o in observers if o["replica_id"] == broker), -1)


def measure_catch_up(cluster: Cluster, broker: int, profile_to: Path | None = None
                     ) -> CatchUp:
    """Start `broker` (its directory as it is) and wait, without polling it, for its log
    lines saying it registered, caught up and was unfenced; meanwhile the leader's
    DescribeQuorum (every FETCHED_POLL_S) shows when its log reached the high watermark
    of its start. Unfenced is the controller's word: the broker's heartbeat showed it
    had applied every record up to the controller's high watermark."""
    hw = cluster.describe()["high_watermark"]
    log_path = cluster.node(broker).log_path
    offset = log_path.stat().st_size if log_path.exists() else 0
    started = time.time()
    pid = start_node(cluster, broker, profile_to)
    times: dict[str, float] = {}
    caught_up_at = (-1, -1)
    snapshots = 0
    next_describe = time.monotonic()
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    while len(times) < 4:
        if not cluster.is_running(broker):
            raise ClusterError(f"broker {broker} exited (see {log_path})")
        if time.monotonic() > deadline:
            raise ClusterError(f"broker {broker} not caught up and unfenced within "
                               f"{CATCH_UP_TIMEOUT_S:.0f} s (seen: {sorted(times)})")
        time.sleep(0.05)
        if "fetched" not in times and time.monotonic() >= next_describe:
            next_describe = time.monotonic() + FETCHED_POLL_S
            if observer_end(cluster, broker) >= hw:
                times["fetched"] = time.time() - started
        events, offset = log_events(log_path, offset)
        for event in events:
            message = event.get("msg")
            if message in (REGISTERED_MESSAGE, CAUGHT_UP_MESSAGE, UNFENCED_MESSAGE):
                times.setdefault(message, float(event["ts"]) - started)
            if message == CAUGHT_UP_MESSAGE:
                caught_up_at = (int(event.get("offset", -1)),
                                int(event.get("high_watermark", -1)))
            snapshots += message == SNAPSHOT_MESSAGE
    rss, hwm = memory(pid)
    time.sleep(SETTLE_S)
    settled_rss, settled_hwm = memory(pid)
    return CatchUp(broker, hw, times[REGISTERED_MESSAGE], times["fetched"],
                   times[CAUGHT_UP_MESSAGE], caught_up_at, times[UNFENCED_MESSAGE],
                   rss, hwm, settled_rss, settled_hwm, snapshots)


def print_catch_up(label: str, result: CatchUp, target_s: float) -> None:
    offset, hw = result.caught_up_at
    print(f"{label}: unfenced {result.unfenced_s:.2f} s after start_node (process "
          f"start-up included); target <= {target_s:.0f} s: "
          f"{verdict(result.unfenced_s <= target_s)}. On the way: registered at "
          f"{result.registered_s:.2f} s; its log at the high watermark of its start "
          f"({result.high_watermark:,}) by {result.fetched_s:.2f} s (DescribeQuorum every "
          f"{FETCHED_POLL_S:g} s); its own 'caught up' log line at {result.caught_up_s:.2f} s"
          f" (naming offset {offset:,} and high watermark {hw:,}); {result.snapshots} "
          f"snapshot(s) of its own written before it was unfenced (every "
          f"{SNAPSHOT_INTERVAL_BYTES >> 20} MiB of records, the default); heartbeat every "
          f"{HEARTBEAT_INTERVAL_MS / 1000:g} s, the default")


# --- the phases ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Size:
    topics: int
    partitions: int  # per topic
    per_request: int  # topics per CreateTopics
    in_flight: int  # CreateTopics outstanding


def setup(cluster: Cluster, size: Size, profiler: Profiler) -> None:
    topics, partitions = size.topics, size.partitions
    started = time.perf_counter()
    for voter in cluster.voter_ids:
        start_node(cluster, voter, profiler.node_file(voter))
    leader = cluster.wait_for_leader(30)["leader_id"]  # of epoch 1: nothing else ran
    admin = Admin(cluster)
    with profiler.phase("setup"):
        register_placeholders(cluster, admin)
        creating = time.perf_counter()
        created, existing = create_topics(admin, topics, partitions, size.per_request,
                                          size.in_flight)
        create_s = time.perf_counter() - creating
    if created + existing != topics:
        raise ClusterError(f"{created + existing} of {topics} topics created")
    state = cluster.describe()
    log_end = state["high_watermark"]
    total_s = time.perf_counter() - started
    log_bytes = sum(p.stat().st_size for p in
                    (Path(cluster.node(1).data_dir) / METADATA_PARTITION_DIR).glob("*.log"))
    retried = f"; {existing:,} found created by a retried request" if existing else ""
    print(f"setup: {topics:,} topics x {partitions} partitions = {topics * partitions:,} "
          f"partitions, replication factor {REPLICATION_FACTOR} on placeholder brokers "
          f"{', '.join(map(str, PLACEHOLDER_BROKERS))}: created through the admin API in "
          f"{create_s:.1f} s ({topics / create_s:,.0f} topics/s, "
          f"{topics * (partitions + 1) / create_s:,.0f} records/s; CreateTopics of "
          f"{size.per_request:,} topics, {size.in_flight} in flight{retried}); "
          f"{total_s:.1f} s with start-up and registration; log end {log_end:,}, voter "
          f"1's segments {mib(log_bytes)}; voter {leader} led epoch 1, voter "
          f"{state['leader_id']} leads epoch {state['leader_epoch']} at the end")


def snapshot_voters(cluster: Cluster) -> dict[str, Any]:
    """WriteSnapshot on every voter; prints each answer; returns the one of the
    largest end offset (a follower may not have applied the last records yet)."""
    answers = {}
    for voter in cluster.voter_ids:
        address = cluster.node(voter).controller_address
        assert address is not None
        began = time.perf_counter()
        body = request(address, "WriteSnapshot", {}, cluster_id=cluster.cluster_id,
                       timeout_s=REQUEST_TIMEOUT_S)
        round_trip = time.perf_counter() - began
        if not isinstance(body, dict) or body.get("error_code") != 0:
            raise ClusterError(f"WriteSnapshot on voter {voter} failed: {body!r}")
        existing = "" if body["created"] else " (existing: the image had not moved)"
        print(f"snapshot write, voter {voter} (WriteSnapshot): {body['elapsed_ms'] / 1000:.2f} s "
              f"in the node ({round_trip:.2f} s round trip), {body['size_bytes'] / 1e6:,.1f} MB "
              f"({mib(body['size_bytes'])}), {body['file']}{existing}")
        answers[voter] = body
    return max(answers.values(), key=lambda a: (int(a["end_offset"]), -int(a["node_id"])))


def in_process(cluster: Cluster, scratch: Path, written: dict[str, Any],
               profiler: Profiler) -> float:
    """Snapshot load, image rebuild and snapshot write in this process; returns the
    rebuild time."""
    source = Path(written["path"])
    end_offset = int(written["end_offset"])
    voter = int(written["node_id"])
    partition_dir = Path(cluster.node(voter).data_dir) / METADATA_PARTITION_DIR
    copy = scratch / "load" / METADATA_PARTITION_DIR
    copy.mkdir(parents=True)
    shutil.copy2(source, copy / source.name)
    shutil.copy2(partition_dir / HIGH_WATERMARK_CHECKPOINT, copy / HIGH_WATERMARK_CHECKPOINT)

    # 2. load: the start-up path (it applies each batch as it checks it); then, for
    # scale, the file read and checked whole with nothing applied (read_snapshot)
    with profiler.phase("load"):
        began = time.perf_counter()
        start = load_start_image(copy, log_end_offset=end_offset)
        load_s = time.perf_counter() - began
    began = time.perf_counter()
    snapshot = read_snapshot(copy / source.name)
    read_s = time.perf_counter() - began
    header_ms = snapshot.header.last_contained_log_timestamp
    loaded = start.image
    if start.snapshot_id is None or start.snapshot_id.end_offset != end_offset:
        raise ClusterError(f"load_start_image did not load {source.name}")
    print(f"snapshot load (voter {voter}'s file -> MetadataImage, metadata.snapshot_loader."
          f"load_start_image): {load_s:.2f} s for {len(snapshot.records):,} records "
          f"(for scale: the file read and checked whole, nothing applied, {read_s:.2f} s); "
          f"target <= "
          f"{TARGET_LOAD_S:.0f} s: {verdict(load_s <= TARGET_LOAD_S)}")
    del snapshot

    # 3. rebuild from the log, to the snapshot's end offset: with the garbage collector
    # as a node's commit listener has it, then paused (raft.common.gc_pause)
    rebuild_s = math.inf
    for paused in (False, True):
        gc.collect()
        with profiler.phase("rebuild-gc-paused" if paused else "rebuild"), \
                gc_paused() if paused else contextlib.nullcontext():
            began = time.perf_counter()
            batches: list[tuple[int, tuple[bytes, ...]]] = []  # (base offset, records)
            for _path, scan in scan_log_dir(partition_dir):
                for stored in scan.batches:
                    base = stored.batch.base_offset
                    below = stored.batch.records[:max(0, end_offset - base)]
                    if below:
                        batches.append((base, below))
            count = sum(len(records) for _, records in batches)
            read_s = time.perf_counter() - began
            delta = MetadataDelta(MetadataImage.empty())
            for base, records in batches:
                delta.apply_records(records, base)  # as a broker's commit listener does
            rebuilt = delta.build()
            took_s = time.perf_counter() - began
        rebuild_s = min(rebuild_s, took_s)
        del delta
        same = rebuilt.content_hash() == loaded.content_hash()
        print(f"image rebuild from voter {voter}'s log ({count:,} records below offset "
              f"{end_offset:,}, read as a running node's log, garbage collector "
              f"{'paused' if paused else 'on'}): {took_s:.2f} s (read + CRC "
              f"{read_s:.2f} s, decode + replay {took_s - read_s:.2f} s, "
              f"{count / (took_s - read_s):,.0f} records/s); target <= "
              f"{TARGET_REBUILD_S:.0f} s: {verdict(took_s <= TARGET_REBUILD_S)}; "
              f"{len(rebuilt.topics):,} topics, {rebuilt.partition_count():,} partitions; "
              f"content hash {'equal to' if same else 'DIFFERENT from'} the snapshot's")
        del batches, rebuilt

    # 1. write, in this process: the records, then encode + write + fsync
    out = scratch / "write"
    out.mkdir()
    with profiler.phase("write"):
        began = time.perf_counter()
        snapshot_id = SnapshotId(end_offset=end_offset, epoch=int(written["epoch"]))
        path = write_image_snapshot(out, snapshot_id, loaded, header_ms)
        write_s = time.perf_counter() - began
    # the same bytes as the node's function wrote (not timed)
    same_bytes = path.read_bytes() == source.read_bytes()
    print(f"snapshot write in this process (the loaded image, metadata.snapshot_writer."
          f"write_image_snapshot: records, encode, write, fsync): {write_s:.2f} s, "
          f"{mib(path.stat().st_size)}; bytes "
          f"{'identical to' if same_bytes else 'DIFFERENT from'} voter {voter}'s file")
    return rebuild_s


def catch_up_by_fetch(cluster: Cluster, broker: int, profile_to: Path | None) -> None:
    """A new broker from an empty directory, by Fetch from offset 0 (the voters hold
    the whole log)."""
    result = measure_catch_up(cluster, broker, profile_to)
    print_catch_up(f"broker {broker} catch-up by Fetch from offset 0 (empty directory)",
                   result, TARGET_CATCH_UP_S)
    print(f"broker {broker} memory, holding the image (it hosts none of the partitions): "
          f"VmRSS {mib(result.rss)} once unfenced, "
          f"{mib(result.settled_rss)} {SETTLE_S:.0f} s later (peak VmHWM "
          f"{mib(result.settled_hwm)}); target < {mib(TARGET_RSS_BYTES)}: "
          f"{verdict(max(result.settled_rss, result.rss) < TARGET_RSS_BYTES)}")
    voters = []
    for voter in cluster.voter_ids:
        pid = cluster.node(voter).pid
        if pid is not None and cluster.is_running(voter):
            rss, hwm = memory(pid)
            voters.append(f"voter {voter} {mib(rss)} (peak {mib(hwm)})")
    print(f"  (for context, voters' VmRSS: {', '.join(voters)})")


def idle_at_scale(cluster: Cluster, broker: int) -> None:
    """Step 5: the voters' and `broker`'s CPU over a window with nothing asked of them
    (after `measure_catch_up`'s settle)."""
    percents, load = idle_window(cluster, IDLE_WINDOW_S)
    print(f"idle with the image: 3 voters and broker {broker} (it hosts none of the "
          f"partitions), {IDLE_WINDOW_S:.0f} s window, load {load:.1f}:")
    print_idle(cluster, percents)


def fetch_snapshot_unsupported() -> str | None:
    """Why catch-up by FetchSnapshot cannot be measured (None: it can)."""
    missing = []
    if not hasattr(messages, "FetchSnapshotRequest"):
        missing.append("raft/messages.py has no FetchSnapshotRequest")
    if RETENTION_KEY not in KNOWN_KEYS:
        missing.append(f"the node config has no {RETENTION_KEY} (tools/config/keys.py), so "
                       "voters never delete their early segments")
    return "; ".join(missing) or None


def set_retention(config: Path, value: int) -> None:
    """Rewrite `RETENTION_KEY` in a node.toml (`tools.config.to_toml` writes one quoted
    key per line)."""
    lines = [ln for ln in config.read_text().splitlines()
             if not ln.startswith(f'"{RETENTION_KEY}"')]
    config.write_text("\n".join([*lines, f'"{RETENTION_KEY}" = {value}']) + "\n")


def restart_voter(cluster: Cluster, voter: int) -> float:
    """Stop and start one voter; seconds from the stop until it listens again (its
    "node started" log line: start-up from its newest snapshot done) and it is a voter
    in DescribeQuorum at the high watermark."""
    hw = cluster.describe()["high_watermark"]
    log_path = cluster.node(voter).log_path
    offset = log_path.stat().st_size
    began = time.perf_counter()
    cluster.restart(voter, timeout_s=60)
    deadline = time.monotonic() + VOTER_RESTART_TIMEOUT_S
    listening = False
    while True:
        if time.monotonic() > deadline:
            raise ClusterError(f"voter {voter} not back within {VOTER_RESTART_TIMEOUT_S:.0f} s")
        if not cluster.is_running(voter):
            raise ClusterError(f"voter {voter} exited on restart (see {log_path})")
        time.sleep(0.2)
        if not listening:
            events, offset = log_events(log_path, offset)
            listening = any(e.get("msg") == "node started" for e in events)
            continue
        try:
            state = cluster.describe(timeout_s=5)
        except ClusterError:
            continue  # no leader for a moment
        ends = {v["replica_id"]: v["log_end_offset"] for v in state["voters"]}
        if ends.get(voter, -1) >= hw:
            return time.perf_counter() - began


def segments(cluster: Cluster, node: int) -> list[Path]:
    return sorted((Path(cluster.node(node).data_dir) / METADATA_PARTITION_DIR).glob("*.log"))


def catch_up_by_fetch_snapshot(cluster: Cluster, broker: int,
                               profile_to: Path | None = None) -> None:
    """A new broker from an empty directory once every voter has snapshotted and
    deleted the segments below its snapshot (log start offset > 0): its first Fetch is
    answered with the leader's snapshot id, it loads the snapshot by FetchSnapshot, then
    Fetches the rest. Same measurement as `catch_up_by_fetch`.

    The voters restart one at a time with `RETENTION_KEY` at its default (Kafka's,
    100 MiB; half the log when the log is smaller) instead of -1, then snapshot
    (WriteSnapshot; after a snapshot a node whose log exceeds the retention starts its
    log there, `metadata/snapshot_writer.py`), and must show a log start offset > 0
    (`raft.storage.read_log_start`)."""
    label = f"broker {broker} catch-up by FetchSnapshot (empty directory)"
    reason = fetch_snapshot_unsupported()
    if reason is not None:
        print(f"{label}: not measured: {reason}")
        return
    log_bytes = sum(p.stat().st_size for p in segments(cluster, cluster.voter_ids[0]))
    retention = DEFAULT_RETENTION_BYTES if log_bytes > DEFAULT_RETENTION_BYTES \
        else log_bytes // 2  # a smaller run's log stays below the default
    restarts: dict[int, float] = {}  # voter -> seconds back at the high watermark
    for voter in cluster.voter_ids:
        set_retention(Path(cluster.node(voter).config), retention)
        restarts[voter] = restart_voter(cluster, voter)
    default = " (the default)" if retention == DEFAULT_RETENTION_BYTES else \
        f" (half the log of {mib(log_bytes)}: it is below the default)"
    print(f"voters restarted one at a time with {RETENTION_KEY} = {retention:,}{default}, "
          f"each from its snapshot, back at the high watermark after: "
          f"{', '.join(f'voter {v} {took:.1f} s' for v, took in restarts.items())}; "
          f"target <= {TARGET_VOTER_RESTART_S:.0f} s: "
          f"{verdict(max(restarts.values()) <= TARGET_VOTER_RESTART_S)}")
    before = {v: len(segments(cluster, v)) for v in cluster.voter_ids}
    snapshot_voters(cluster)
    deadline = time.monotonic() + LOG_START_TIMEOUT_S
    while True:
        starts = {v: read_log_start(Path(cluster.node(v).data_dir) / METADATA_PARTITION_DIR)[0]
                  for v in cluster.voter_ids}
        if all(start > 0 for start in starts.values()):
            break
        if time.monotonic() > deadline:
            print(f"{label}: not measured: voters' log start offsets {starts} "
                  f"{LOG_START_TIMEOUT_S:.0f} s after their snapshots")
            return
        time.sleep(0.5)
    after = {v: len(segments(cluster, v)) for v in cluster.voter_ids}
    print(f"voters' log start offsets {', '.join(f'{v}: {o:,}' for v, o in starts.items())}; "
          f"segments before -> after: "
          f"{', '.join(f'{v}: {before[v]} -> {after[v]}' for v in cluster.voter_ids)}")
    result = measure_catch_up(cluster, broker, profile_to)
    print_catch_up(label, result, TARGET_FETCH_SNAPSHOT_S)
    print(f"broker {broker} memory: VmRSS {mib(result.rss)} once unfenced, "
          f"{mib(result.settled_rss)} {SETTLE_S:.0f} s later (peak VmHWM "
          f"{mib(result.settled_hwm)}); target < {mib(TARGET_RSS_BYTES)}: "
          f"{verdict(max(result.settled_rss, result.rss) < TARGET_RSS_BYTES)}")


def run(directory: Path, size: Size, profiler: Profiler) -> None:
    cluster = Cluster.create(directory / "cluster", voters=VOTERS, brokers=REAL_BROKERS,
                             settings=SETTINGS)
    brokers = [n for n in sorted(cluster.nodes) if not cluster.node(n).is_voter]
    try:
        setup(cluster, size, profiler)
        written = snapshot_voters(cluster)
        in_process(cluster, directory / "scratch", written, profiler)
        catch_up_by_fetch(cluster, brokers[0], profiler.node_file(brokers[0]))
        idle_at_scale(cluster, brokers[0])
        cluster.stop_node(brokers[0], timeout_s=60)  # a profiled node writes its profile
        catch_up_by_fetch_snapshot(cluster, brokers[1], profiler.node_file(brokers[1]))
    except ClusterError as exc:
        print(f"snapshot bench failed: {exc}")
    finally:
        cluster.shut_down(timeout_s=60)  # a profiled node writes its profile as it stops


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench snapshot_bench")
    parser.add_argument("--topics", type=int, default=TOPICS)
    parser.add_argument("--partitions", type=int, default=PARTITIONS,
                        help="partitions per topic")
    parser.add_argument("--topics-per-request", type=int, default=TOPICS_PER_REQUEST,
                        metavar="N", help="topics per CreateTopics (at most "
                        "max_partitions_per_request / partitions)")
    parser.add_argument("--in-flight", type=int, default=IN_FLIGHT, metavar="N",
                        help="CreateTopics requests outstanding at once")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="write cProfile files here and print their top functions")
    args = parser.parse_args(argv)
    if min(args.topics, args.topics_per_request, args.in_flight) < 1 or \
            not 1 <= args.partitions <= ControllerConfig().max_partitions_per_request:
        parser.error("--topics, --topics-per-request and --in-flight must be >= 1, "
                     "--partitions between 1 and "
                     f"{ControllerConfig().max_partitions_per_request}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args([] if argv is None else argv)
    started = time.monotonic()
    print(f"(host: {os.cpu_count()} CPUs, 1-minute load average {os.getloadavg()[0]:.1f} "
          f"before the cluster starts; size {args.topics:,} topics x {args.partitions} "
          f"partitions)")
    profiler = Profiler(args.profile)
    if args.profile is not None:
        print(f"(profiling into {args.profile}: every figure is slowed by cProfile)")
    with tempfile.TemporaryDirectory(prefix="snapshot-bench-") as temp:
        run(Path(temp), Size(args.topics, args.partitions, min(
            args.topics_per_request, most_per_request(args.partitions)), args.in_flight),
            profiler)
    profiler.summary()
    print(f"(snapshot bench took {time.monotonic() - started:.0f} s; 1-minute load "
          f"average {os.getloadavg()[0]:.1f} at the end)")


if __name__ == "__main__":
    main(sys.argv[1:])
