"""Image rebuild, snapshot write and snapshot load, in one process, without a cluster.

    python -m bench rebuild_bench [-- --topics N --partitions P --repeat R --profile FILE]

The figures `bench/snapshot_bench.py` measures in its steps 1-3, on the same records,
without the 10 minutes of cluster setup, so that a change to the decode and replay path
can be measured in a minute. The log is what the controller writes: this process drives
the pure `metadata.controller.Controller` (3 brokers registered and unfenced by their
heartbeats, then CreateTopics requests of 100 topics of P partitions, replication factor
3, as snapshot_bench sends them), appends each decision's records as one batch to a
`raft.log.DiskLog` (16 MiB segments) and keeps that directory in the temp directory,
keyed by the size, for the next run.

Then, timed with both CPU time (`time.process_time`: robust while other processes load
the host) and wall time, the best of `--repeat` runs:
(a) rebuild: `raft.log.scan_log_dir` (read, CRCs checked) + `MetadataDelta.apply_records`
    of every batch (the collector paused per batch, as in a broker's commit listener),
    then `build()` (what snapshot_bench step 3 times), once with the garbage collector
    on between batches, once paused around the whole load (`raft.common.gc_pause`, as
    the snapshot loader does);
(b) snapshot write: `metadata.snapshot_writer.write_image_snapshot` of the rebuilt
    image (what a node's snapshot writer runs: records, encode, write, fsync);
(c) snapshot load: `metadata.snapshot_loader.load_start_image` of that snapshot.
The images of (a) and (c) must have the same content hash (checked, not timed).

The default size (10,000 topics x 10 partitions, 110,000 records) takes well under a
minute and is part of `make bench`; `--topics 100000` is the full size of snapshot_bench
(1.1 million records; the first run also writes the log, about a minute more). Targets,
printed and never asserted, at 1.1 million records (snapshot_bench's): rebuild at most
3 s with the collector on, snapshot load at most 2 s.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import pstats
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from metadata.admin import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
)
from metadata.controller import Controller, ControllerConfig, Decision
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from metadata.snapshot_loader import load_start_image
from metadata.snapshot_writer import write_image_snapshot
from raft.common.gc_pause import gc_paused
from raft.common.uuid import Uuid
from raft.log import DiskLog, scan_log_dir
from raft.snapshot import SnapshotId
from raft.storage import write_high_watermark_checkpoint

T = TypeVar("T")

DEFAULT_TOPICS = 10_000
DEFAULT_PARTITIONS = 10
TOPICS_PER_REQUEST = 100  # snapshot_bench's CreateTopics size
REPLICATION_FACTOR = 3
BROKERS = (1001, 1002, 1003)  # snapshot_bench's placeholders
EPOCH = 1
SEGMENT_BYTES = 16 << 20  # snapshot_bench's log.segment.bytes
SEED = 20261128
FULL_TOPICS = 100_000
TARGET_REBUILD_S = 3.0  # at FULL_TOPICS x 10 partitions, collector on (snapshot_bench's)
TARGET_LOAD_S = 2.0
_LOG_FORMAT = 1  # bump when the generated log changes, to ignore older cached copies


class _Writer:
    """The controller and the log it writes: each decision's records, one batch."""

    def __init__(self, log: DiskLog) -> None:
        self.log = log
        self.controller = Controller(MetadataImage.empty(), now_ms=0, config=ControllerConfig(
            broker_session_timeout_ms=1 << 40))  # no heartbeats after setup
        self.rng = random.Random(SEED)
        self.records = 0

    def decide(self, request: object) -> Decision:
        decision = self.controller.handle(request, now_ms=0, rng=self.rng)  # type: ignore[arg-type]
        if decision.records:
            if decision.base_offset != self.log.end_offset:
                raise AssertionError(f"decision at {decision.base_offset}, log end "
                                     f"{self.log.end_offset}")
            self.log.append(EPOCH, [r.encode() for r in decision.records])
            self.records += len(decision.records)
            self.controller.on_committed(
                enumerate(decision.records, start=decision.base_offset))
        return decision


def _write_log(directory: Path, topics: int, partitions: int) -> int:
    """The controller's log for the size into `directory`; returns its record count."""
    with DiskLog(directory, segment_bytes=SEGMENT_BYTES) as log:
        writer = _Writer(log)
        for broker_id in BROKERS:
            registered = writer.decide(RegisterBrokerRequest(
                broker_id=broker_id, incarnation_id=Uuid.random(writer.rng),
                endpoints=(f"PLAINTEXT://127.0.0.1:{9 + broker_id}",))).response
            assert isinstance(registered, RegisterBrokerResponse), registered
            beat = writer.decide(BrokerHeartbeatRequest(
                broker_id=broker_id, broker_epoch=registered.broker_epoch,
                current_metadata_offset=log.end_offset - 1)).response
            assert isinstance(beat, BrokerHeartbeatResponse), beat
            assert not beat.is_fenced, beat
        for start in range(0, topics, TOPICS_PER_REQUEST):
            response = writer.decide(CreateTopicsRequest(topics=tuple(
                CreatableTopic(name=f"t{index:07d}", num_partitions=partitions,
                               replication_factor=REPLICATION_FACTOR)
                for index in range(start, min(topics, start + TOPICS_PER_REQUEST))))).response
            assert isinstance(response, CreateTopicsResponse)
            if any(t.error_code for t in response.topics):
                raise AssertionError(f"create failed: {response.topics[0]}")
        log.flush()
        return writer.records


def cached_log(topics: int, partitions: int) -> Path:
    """The log directory for the size, written on first use (to a temporary name, then
    renamed: an interrupted run leaves nothing that looks whole)."""
    root = Path(tempfile.gettempdir()) / "kraft-rebuild-bench"
    directory = root / f"v{_LOG_FORMAT}-{topics}x{partitions}"
    if directory.is_dir():
        return directory
    partial = root / f"{directory.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    count = _write_log(partial, topics, partitions)
    partial.rename(directory)
    print(f"wrote the log ({count:,} records) to {directory} in "
          f"{time.perf_counter() - began:.1f} s")
    return directory


class Timing:
    """The best CPU and wall times of repeated runs."""

    def __init__(self) -> None:
        self.cpu_s = float("inf")
        self.wall_s = float("inf")

    def __str__(self) -> str:
        return f"{self.cpu_s:.2f} s CPU, {self.wall_s:.2f} s wall"


@contextmanager
def timed(timing: Timing) -> Iterator[None]:
    cpu, wall = time.process_time(), time.perf_counter()
    yield
    timing.cpu_s = min(timing.cpu_s, time.process_time() - cpu)
    timing.wall_s = min(timing.wall_s, time.perf_counter() - wall)


def rebuild(directory: Path) -> tuple[MetadataImage, int]:
    """(a): the image of the whole log, and the record count."""
    delta = MetadataDelta(MetadataImage.empty())
    apply_records = delta.apply_records
    count = 0
    for _path, scan in scan_log_dir(directory):
        for stored in scan.batches:
            batch = stored.batch
            apply_records(batch.records, batch.base_offset)
            count += len(batch.records)
    return delta.build(), count


def repeat(runs: int, timing: Timing, step: Callable[[], T]) -> T:
    result = None
    for _ in range(runs):
        result = None
        gc.collect()
        with timed(timing):
            result = step()
    assert result is not None
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench rebuild_bench")
    parser.add_argument("--topics", type=int, default=DEFAULT_TOPICS)
    parser.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS)
    parser.add_argument("--repeat", type=int, default=1, help="runs per step; best kept")
    parser.add_argument("--profile", type=Path, help="cProfile of the rebuild to this file")
    args = parser.parse_args(argv or [])
    directory = cached_log(args.topics, args.partitions)
    print(f"{args.topics:,} topics x {args.partitions} partitions, replication factor "
          f"{REPLICATION_FACTOR}, {len(list(directory.glob('*.log')))} segments "
          f"({sum(p.stat().st_size for p in directory.glob('*.log')) / (1 << 20):,.1f} MiB)")

    full = args.topics * args.partitions >= FULL_TOPICS * DEFAULT_PARTITIONS
    for paused in (False, True):
        rebuild_t = Timing()
        with gc_paused() if paused else contextlib.nullcontext():
            image, count = repeat(args.repeat, rebuild_t, lambda: rebuild(directory))
        target = (f"; target <= {TARGET_REBUILD_S:.0f} s at this size: "
                  f"{'met' if rebuild_t.wall_s <= TARGET_REBUILD_S else 'NOT met'}"
                  if full and not paused else "")
        how = ("garbage collector paused (raft.common.gc_pause)" if paused
               else "garbage collector on, as a broker applies its commits")
        print(f"(a) rebuild (scan_log_dir + apply_records + build) of {count:,} records, {how}: "
              f"{rebuild_t} ({count / rebuild_t.cpu_s:,.0f} records/s CPU){target}")
    if args.profile is not None:
        profiler = cProfile.Profile()
        profiler.runcall(rebuild, directory)
        profiler.dump_stats(args.profile)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)

    with tempfile.TemporaryDirectory(prefix="rebuild-bench-") as scratch:
        out = Path(scratch)
        end_offset = image.last_applied_offset + 1
        snapshot_id = SnapshotId(end_offset=end_offset, epoch=EPOCH)
        write_t = Timing()

        def write() -> Path:
            for old in out.glob("*.checkpoint"):
                old.unlink()
            return write_image_snapshot(out, snapshot_id, image, last_contained_log_timestamp=0)
        path = repeat(args.repeat, write_t, write)
        print(f"(b) snapshot write (write_image_snapshot: encode + write + fsync): {write_t}, "
              f"{path.stat().st_size / (1 << 20):,.1f} MiB")
        write_high_watermark_checkpoint(out, end_offset)
        load_t = Timing()
        start = repeat(args.repeat, load_t,
                       lambda: load_start_image(out, log_end_offset=end_offset))
        same = start.image.content_hash() == image.content_hash()
        target = (f"; target <= {TARGET_LOAD_S:.0f} s at this size: "
                  f"{'met' if load_t.wall_s <= TARGET_LOAD_S else 'NOT met'}" if full else "")
        print(f"(c) snapshot load (load_start_image): {load_t}{target}; content hash "
              f"{'equal to' if same else 'DIFFERENT from'} the rebuilt image's")
        if not same:
            raise AssertionError("the loaded snapshot's image differs from the rebuilt one")
