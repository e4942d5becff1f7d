"""Fixtures for multi-process tests: a local cluster in tmp_path on free 127.0.0.1 ports.

Every process a cluster object starts is SIGKILLed by PID at the end of the test, whatever
happened (stopped ones are continued first). Timeouts are short so the suite stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.quorum_support import FAST_SETTINGS
from tests.support.secure_cluster import kill_recorded
from tools.cluster import Cluster

ClusterFactory = Callable[..., Cluster]


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[ClusterFactory]:
    """`make_cluster(voters=3, brokers=0, start=True)` -> a started Cluster with a leader."""
    clusters: list[Cluster] = []

    def make(voters: int = 3, brokers: int = 0, start: bool = True,
             settings: dict[str, Any] | None = None) -> Cluster:
        cluster = Cluster.create(tmp_path / f"cluster-{len(clusters)}", voters=voters,
                                 brokers=brokers, settings={**FAST_SETTINGS, **(settings or {})})
        clusters.append(cluster)
        if start:
            cluster.start()
            cluster.wait_for_leader(15)
        return cluster

    yield make
    for cluster in clusters:
        cluster.kill_all_started()


@pytest.fixture
def cli_cluster_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory for a cluster started through the `kraft` CLI; at the end every node
    pid recorded in its cluster.json that still runs our node is SIGKILLed."""
    directory = tmp_path / "cli-cluster"
    yield directory
    kill_recorded(directory)
