"""Replay of the logs a real multi-process run wrote (tools.cluster): 3 voters and 2
brokers, a topic created, deleted by ID and its name recreated, then the cluster stopped
and every node's log replayed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tools.replay.inputs import from_cluster
from tools.replay.job import run_replay

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(180)]

FAST = {"quorum.election.timeout.ms": 300, "quorum.fetch.timeout.ms": 600,
        "quorum.election.backoff.max.ms": 200, "quorum.request.timeout.ms": 400,
        "quorum.fetch.max.wait.ms": 150, "broker.heartbeat.interval.ms": 200,
        "broker.session.timeout.ms": 9000}


def _topics(directory: Path, *args: str) -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-m", "tools.cli", "topics", "--cluster",
                             str(directory), *args, "--json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _create_when_brokers_registered(directory: Path) -> dict[str, Any]:
    """Topic creation needs unfenced brokers; retry the (idempotent-in-effect) request
    while they register, bounded by a deadline."""
    deadline = time.monotonic() + 30
    while True:
        result = subprocess.run([sys.executable, "-m", "tools.cli", "topics", "--cluster",
                                 str(directory), "--create", "--topic", "orders",
                                 "--partitions", "3", "--replication-factor", "2", "--json"],
                                capture_output=True, text=True, timeout=60)
        if result.returncode == 0 or time.monotonic() > deadline:
            assert result.returncode == 0, result.stderr
            return json.loads(result.stdout)  # type: ignore[no-any-return]
        time.sleep(0.2)


def test_replay_passes_when_logs_come_from_a_real_cluster_run(spark, tmp_path):
    """The replay (tools/replay/job.py): logs of a real run (elections, broker
    registration, a topic deleted and its name reused with a new ID) pass every check,
    the committed prefix taken from the high-watermark checkpoints the nodes wrote."""
    cluster_module = pytest.importorskip("tools.cluster")
    cluster = cluster_module.Cluster.create(tmp_path / "run", voters=3, brokers=2,
                                            settings=FAST)
    try:
        cluster.start()
        cluster.wait_for_leader(20)
        cluster.append(50, batch=5)
        first = _create_when_brokers_registered(cluster.directory)
        _topics(cluster.directory, "--delete", "--topic-id", first["topic_id"])
        second = _create_when_brokers_registered(cluster.directory)
        cluster.append(20, batch=5)
    finally:
        cluster.shut_down()
    assert second["topic_id"] != first["topic_id"]

    result = run_replay(spark, from_cluster(cluster.directory), with_analysis=True)

    assert result.passed, [c.to_json() for c in result.checks if not c.passed]
    assert result.replay_input.voters == (1, 2, 3)
    recreated = {r["name"]: r for r in result.analysis.recreated_names}
    assert recreated["orders"]["old_ids"] == [first["topic_id"]]
    assert recreated["orders"]["current_id"] == second["topic_id"]
    assert result.analysis.committed_end > 70
    # the nodes' high-watermark checkpoints, written on their graceful stop, decide it
    assert "from high-watermark checkpoints" in result.check("committed_prefix").note
    checkpoints = [n.high_watermark for n in result.replay_input.nodes]
    assert None not in checkpoints
    assert result.analysis.committed_end == max(h for h in checkpoints if h is not None)
