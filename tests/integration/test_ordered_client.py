"""The ordered client on real processes (1 voter + 1 broker): `kraft produce --ordered`
writes per-key sequences to a 2-partition topic, and one `kraft consume --ordered`
delivers every acknowledged record in per-key order, then stops on SIGTERM, committing
its positions (a second run of the same group starts after them)."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.support.quorum_support import FAST_SETTINGS, kraft, running_cluster
from tools.client.order_check import acknowledged_from, check_order, deliveries_from
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

TOPIC, GROUP = "ordered", "ordered-group"
KEYS, COUNT = 4, 40
WAIT_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("ordered") / "cluster", FAST_SETTINGS,
                         voters=1, brokers=1) as started:
        created = kraft("topics", "--cluster", str(started.directory), "--create",
                        "--topic", TOPIC, "--partitions", "2", "--replication-factor", "1",
                        "--ordered")
        assert created.returncode == 0, created.stderr
        yield started


def _lines_into(stream: IO[str], out: queue.Queue[dict[str, Any]]) -> None:
    for line in stream:
        if line.strip():
            out.put(json.loads(line))


def consume_until(cluster: Path, count: int) -> list[dict[str, Any]]:
    """Run `kraft consume` until it delivered `count` records (bounded), then SIGTERM it
    (it must exit 0); every record it printed."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", "consume", "--cluster", str(cluster),
         "--topic", TOPIC, "--group", GROUP, "--ordered", "--json", "--duration", "120",
         "--heartbeat-interval-ms", "300"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    lines: queue.Queue[dict[str, Any]] = queue.Queue()
    reader = threading.Thread(target=_lines_into, args=(process.stdout, lines), daemon=True)
    reader.start()
    records: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and len(records) < count:
            try:
                records.append(lines.get(timeout=max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                break
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    reader.join(timeout=5)
    while not lines.empty():
        records.append(lines.get())
    assert code == 0, process.stderr.read() if process.stderr else ""
    return records


def produce(cluster: Cluster, count: int) -> list[dict[str, Any]]:
    produced = kraft("produce", "--cluster", str(cluster.directory), "--topic", TOPIC,
                     "--ordered", "--keys", str(KEYS), "--count", str(count), "--json",
                     timeout=WAIT_S + 30)
    assert produced.returncode == 0, produced.stderr
    return [json.loads(line) for line in produced.stdout.splitlines() if line.strip()]


def test_ordered_produce_then_consume_keeps_per_key_order(cluster: Cluster) -> None:
    acked = produce(cluster, COUNT)
    assert len(acked) == COUNT
    assert {row["partition"] for row in acked} == {0, 1}  # 4 keys over both partitions

    consumed = consume_until(cluster.directory, COUNT)
    report = check_order(acknowledged_from([acked]), deliveries_from([consumed]))
    assert report.ok, report.summary()
    assert report.delivered == COUNT
    assert {(row["partition"], row["offset"]) for row in consumed} == \
        {(row["partition"], row["offset"]) for row in acked}

    (latest,) = produce(cluster, 1)
    (first_again,) = consume_until(cluster.directory, 1)  # positions committed on SIGTERM
    assert (first_again["partition"], first_again["offset"]) == \
        (latest["partition"], latest["offset"])
