"""Controller latency and throughput, and image rebuild time.

    python -m bench controller_bench

1. On a multi-process cluster of 3 voters (fsync) and 3 brokers, one client:
   - one at a time, alternating on two kept-open connections to the leader: an `Append`
     of one NoOp record (the raw Raft append: the leader proposes it and answers once it
     is committed) and a CreateTopics of one topic (one partition, replication factor 3),
     answered once its records are committed. Both are timed at the client, from send
     to reply, so the ratio create / raw append compares like with like in the same run
     under the same load; the Append's own leader-side latency (propose -> committed,
     no network) is printed too. Target: create p50 <= 2 x raw append p50.
   - then 100 creates in flight (100 connections, each one at a time); a create is
     counted once its reply arrives. Target: >= 5,000 creates/s. With it, the CPU time
     each process spent per create (from /proc), which shows where a 2-core host's
     cycles go (the brokers replay every create and make its partition directories).
2. Time to rebuild a MetadataImage from a log of 100,000 topics (Topic + Partition
   records, 200,000 records) written to a DiskLog: read + decode + replay, and the
   content hash. Bounded: well under 60 s.
"""

from __future__ import annotations

import itertools
import os
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import trio

from bench.stats import percentile, verdict
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
from tools.admin_client import AdminClient
from tools.cluster import Cluster, ClusterError
from tools.config import parse_address

SEQUENTIAL_SECONDS = 4.0  # alternating raw appends and creates
IN_FLIGHT = 100
TARGET_RATIO = 2.0
TARGET_IN_FLIGHT_RATE = 5000
IN_FLIGHT_SECONDS = 4.0
REPLAY_TOPICS = 100_000
SETTINGS = {"broker.heartbeat.interval.ms": 200}


def create_request(name: str) -> dict[str, Any]:
    return encode_body(CreateTopicsRequest(topics=(CreatableTopic(
        name=name, num_partitions=1, replication_factor=3),)))


async def exchange(stream: FramedStream, correlation: Iterator[int], api: str,
                   cluster_id: str, body: Any) -> tuple[float, Any]:
    """One request on a kept-open connection: (milliseconds to its reply, reply body)."""
    correlation_id = next(correlation)
    begin = trio.current_time()
    await stream.send({"api": api, "version": 0, "correlation_id": correlation_id,
                       "cluster_id": cluster_id, "body": body})
    reply = await stream.receive()
    elapsed = (trio.current_time() - begin) * 1000
    assert reply is not None
    assert reply["correlation_id"] == correlation_id
    return elapsed, reply["body"]


def check_created(body: Any) -> None:
    response = decode_response("CreateTopics", body)
    if not isinstance(response, CreateTopicsResponse) or response.topics[0].error_code:
        raise ClusterError(f"create failed: {response}")


async def create_loop(address: str, cluster_id: str, prefix: str, until: float,
                      latencies: list[float]) -> None:
    """Create topics one at a time on one connection until `until` (trio time)."""
    stream = FramedStream(await trio.open_tcp_stream(*parse_address(address)))
    correlation = itertools.count(1)
    try:
        for index in itertools.count():
            if trio.current_time() >= until:
                return
            elapsed, body = await exchange(stream, correlation, "CreateTopics", cluster_id,
                                           create_request(f"{prefix}-{index}"))
            check_created(body)
            latencies.append(elapsed)
    finally:
        await stream.aclose()


async def alternate(address: str, cluster_id: str, seconds: float
                    ) -> tuple[list[float], list[float], list[float]]:
    """One raw append, then one create, and again, one at a time, each on its own
    connection: (append latencies at the client, on the leader, create latencies)."""
    appends, leader_side, creates = [], [], []
    append_stream = FramedStream(await trio.open_tcp_stream(*parse_address(address)))
    create_stream = FramedStream(await trio.open_tcp_stream(*parse_address(address)))
    correlation = itertools.count(1)
    until = trio.current_time() + seconds
    try:
        for index in itertools.count():
            if trio.current_time() >= until:
                break
            elapsed, body = await exchange(append_stream, correlation, "Append", cluster_id,
                                           {"count": 1, "batch": 1, "in_flight": 1})
            if not isinstance(body, dict) or body.get("error_code") != 0:
                raise ClusterError(f"append failed: {body}")
            appends.append(elapsed)
            leader_side.extend(body["latencies_ms"])
            elapsed, body = await exchange(create_stream, correlation, "CreateTopics",
                                           cluster_id, create_request(f"one-{index}"))
            check_created(body)
            creates.append(elapsed)
    finally:
        await append_stream.aclose()
        await create_stream.aclose()
    return appends, leader_side, creates


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


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process (Linux /proc); 0 when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def creations(directory: Path) -> None:
    cluster = Cluster.create(directory / "cluster", voters=3, brokers=3, settings=SETTINGS)
    try:
        cluster.start()
        cluster.wait_for_leader(20)
        address = wait_for_brokers(cluster)
        appends, leader_side, creates = trio.run(alternate, address, cluster.cluster_id,
                                                 SEQUENTIAL_SECONDS)
        raw_p50, create_p50 = percentile(appends, .5), percentile(creates, .5)
        ratio = create_p50 / raw_p50 if raw_p50 else float("inf")
        print(f"raw append, one at a time ({len(appends):,}, 1 NoOp record each): "
              f"p50 {raw_p50:.1f} ms, p99 {percentile(appends, .99):.1f} ms at the client "
              f"(on the leader, propose -> committed: p50 {percentile(leader_side, .5):.1f} "
              f"ms, p99 {percentile(leader_side, .99):.1f} ms)")
        print(f"topic creations committed, one at a time ({len(creates):,}, alternating "
              f"with the appends): p50 {create_p50:.1f} ms, p99 "
              f"{percentile(creates, .99):.1f} ms, {1000 / statistics.mean(creates):,.0f}/s; "
              f"p50 {ratio:.2f} x the raw append's (target <= {TARGET_RATIO:.0f} x: "
              f"{verdict(ratio <= TARGET_RATIO)})")
        pids = {n: cluster.node(n).pid for n in cluster.nodes}
        before = {n: cpu_seconds(pid) for n, pid in pids.items()}
        client_before = time.process_time()
        rate, latencies = trio.run(measure, address, cluster.cluster_id, IN_FLIGHT,
                                   IN_FLIGHT_SECONDS, 1)
        client_cpu = time.process_time() - client_before
        print(f"topic creations committed: {rate:8,.0f}/s with {IN_FLIGHT} in flight "
              f"({len(latencies):,} topics; latency p50 {percentile(latencies, .5):.1f} ms, "
              f"p99 {percentile(latencies, .99):.1f} ms; target >= "
              f"{TARGET_IN_FLIGHT_RATE:,}/s: {verdict(rate >= TARGET_IN_FLIGHT_RATE)})")
        if latencies:
            leader = next(n for n in pids if cluster.node(n).controller_address == address)
            used = {n: cpu_seconds(pid) - before[n] for n, pid in pids.items()}
            per = {"leader": used[leader],
                   "followers": sum(used[n] for n in pids
                                    if n != leader and cluster.node(n).is_voter),
                   "brokers": sum(used[n] for n in pids if not cluster.node(n).is_voter),
                   "client": client_cpu}
            print("  CPU per create meanwhile: " + ", ".join(
                f"{what} {seconds * 1e6 / len(latencies):,.0f} us" for what, seconds
                in per.items()) + f" (host load average {os.getloadavg()[0]:.1f})")
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
