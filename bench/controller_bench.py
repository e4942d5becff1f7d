"""Controller throughput and image rebuild time.

    python -m bench controller_bench

1. Topic creations committed per second (one partition each, replication factor 3) on
   a multi-process cluster of 3 voters (fsync) and 3 brokers: one request at a time on
   one connection, then 100 in flight (100 connections, each one at a time). A create
   is counted once its reply arrives, i.e. once its records have committed.
2. Time to rebuild a MetadataImage from a log of 100,000 topics (Topic + Partition
   records, 200,000 records) written to a DiskLog: read + decode + replay, and the
   content hash. Bounded: well under 60 s.
"""

from __future__ import annotations

import itertools
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from metadata import records as rec
from metadata.admin import (
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    decode_response,
    encode_body,
)
from metadata.delta import replay_bytes
from raft.common.framing import FramedStream
from raft.common.uuid import Uuid
from raft.log import DiskLog
from tools.cluster import Cluster, ClusterError
from tools.commands.topics import AdminClient
from tools.config import parse_address

SEQUENTIAL_SECONDS = 3.0
IN_FLIGHT = 100
IN_FLIGHT_SECONDS = 4.0
REPLAY_TOPICS = 100_000
SETTINGS = {"broker.heartbeat.interval.ms": 200}


def create_request(name: str) -> dict[str, Any]:
    return encode_body(CreateTopicsRequest(topics=(CreatableTopic(
        name=name, num_partitions=1, replication_factor=3),)))


async def create_loop(address: str, cluster_id: str, prefix: str, until: float,
                      latencies: list[float]) -> None:
    """Create topics one at a time on one connection until `until` (trio time)."""
    stream = FramedStream(await trio.open_tcp_stream(*parse_address(address)))
    correlation = itertools.count(1)
    try:
        for index in itertools.count():
            if trio.current_time() >= until:
                return
            correlation_id = next(correlation)
            begin = trio.current_time()
            await stream.send({"api": "CreateTopics", "version": 0,
                               "correlation_id": correlation_id, "cluster_id": cluster_id,
                               "body": create_request(f"{prefix}-{index}")})
            reply = await stream.receive()
            assert reply is not None
            assert reply["correlation_id"] == correlation_id
            response = decode_response("CreateTopics", reply["body"])
            if not isinstance(response, CreateTopicsResponse) or response.topics[0].error_code:
                raise ClusterError(f"create failed: {response}")
            latencies.append((trio.current_time() - begin) * 1000)
    finally:
        await stream.aclose()


async def measure(address: str, cluster_id: str, connections: int, seconds: float,
                  run: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    started = trio.current_time()
    until = started + seconds
    async with trio.open_nursery() as nursery:
        for connection in range(connections):
            nursery.start_soon(create_loop, address, cluster_id, f"r{run}-c{connection}",
                               until, latencies)
    return len(latencies) / (trio.current_time() - started), latencies


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def wait_for_brokers(cluster: Cluster) -> str:
    """Create a probe topic with replication factor 3 once three brokers are unfenced;
    returns the active controller's address."""
    deadline = time.monotonic() + 30
    client = AdminClient(cluster.controller_addresses(), cluster_id=cluster.cluster_id)
    while True:
        response = client.call(CreateTopicsRequest(topics=(CreatableTopic(
            name="probe", num_partitions=1, replication_factor=3),)))
        if response.topics[0].error_code == 0:
            assert client.preferred is not None
            return client.preferred
        if time.monotonic() > deadline:
            raise ClusterError(f"brokers not ready: {response.topics[0].error_message}")
        time.sleep(0.2)


def creations(directory: Path) -> None:
    cluster = Cluster.create(directory / "cluster", voters=3, brokers=3, settings=SETTINGS)
    try:
        cluster.start()
        cluster.wait_for_leader(20)
        address = wait_for_brokers(cluster)
        for run, (connections, seconds) in enumerate(((1, SEQUENTIAL_SECONDS),
                                                      (IN_FLIGHT, IN_FLIGHT_SECONDS))):
            rate, latencies = trio.run(measure, address, cluster.cluster_id, connections,
                                       seconds, run)
            print(f"topic creations committed: {rate:8,.0f}/s with {connections:>3} in flight "
                  f"({len(latencies):,} topics; latency p50 {percentile(latencies, .5):.1f} ms, "
                  f"p99 {percentile(latencies, .99):.1f} ms)")
    except ClusterError as exc:
        print(f"controller bench failed: {exc}")
    finally:
        cluster.shut_down(timeout_s=5)


def rebuild(directory: Path, topics: int = REPLAY_TOPICS) -> None:
    rng = random.Random(516)
    log = DiskLog(directory / "replay-log")
    batch: list[bytes] = []
    for index in range(topics):
        topic_id = Uuid.random(rng)
        batch.append(rec.Topic(name=f"topic-{index}", topic_id=topic_id,
                               initial_partition_count=1).encode())
        batch.append(rec.Partition(topic_id=topic_id, partition=0, replicas=(4, 5, 6),
                                   isr=(4, 5, 6), leader=4 + index % 3).encode())
        if len(batch) >= 1000:
            log.append(1, batch)
            batch = []
    if batch:
        log.append(1, batch)
    log.flush()
    log.close()

    started = time.perf_counter()
    reopened = DiskLog(directory / "replay-log")
    entries: list[tuple[int, bytes]] = []
    offset = 0
    while offset < reopened.end_offset:
        for stored in reopened.read(offset, 8 << 20):
            entries.extend(enumerate(stored.records, start=stored.base_offset))
            offset = stored.next_offset
    read_s = time.perf_counter() - started
    image = replay_bytes(entries)
    replay_s = time.perf_counter() - started - read_s
    hash_started = time.perf_counter()
    image.content_hash()
    hash_s = time.perf_counter() - hash_started
    reopened.close()
    assert len(image.topics) == topics
    assert image.anomaly_count == 0
    print(f"image rebuild from a log of {topics:,} topics ({len(entries):,} records): "
          f"{read_s + replay_s:.2f} s (open+read {read_s:.2f} s, decode+replay "
          f"{replay_s:.2f} s, {len(entries) / replay_s:,.0f} records/s); "
          f"content hash {hash_s:.2f} s")


def main() -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="controller-bench-") as temp:
        creations(Path(temp))
        rebuild(Path(temp))
    print(f"(controller bench took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
