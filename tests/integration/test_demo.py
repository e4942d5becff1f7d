"""`make demo` end to end (without its Spark replay, which tests/replay covers)."""

import subprocess
import sys
from pathlib import Path

import pytest

from tools.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_demo_stages_the_stale_replica_and_survives_the_leader_kill_when_run(
        tmp_path: Path) -> None:
    """KIP-516 stale state through the CLI: the restarted broker stages the old ID's
    partitions, removes them after the delay, and the quorum elects a new leader."""
    cluster_dir = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-m", "tools.cli", "demo", "--cluster",
                           str(cluster_dir), "--skip-replay"], capture_output=True,
                          text=True, timeout=280, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "staged the old replicas for deletion" in done.stdout
    assert "UNKNOWN_TOPIC_ID (100)" in done.stdout
    assert "leads epoch" in done.stdout
    assert not list(cluster_dir.glob("node-*/node.pid")), "the demo stops every node"


def test_demo_refuses_a_directory_that_holds_a_cluster_at_once(tmp_path: Path) -> None:
    Cluster.create(tmp_path / "old", voters=1)
    done = subprocess.run([sys.executable, "-m", "tools.cli", "demo", "--cluster",
                           str(tmp_path / "old"), "--skip-replay"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"error: --cluster {tmp_path / 'old'} already holds a "
                                   "cluster: the demo needs a new directory (remove that "
                                   "one, or give another)")
    assert done.stdout == ""  # nothing was started
