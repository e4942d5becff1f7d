"""`kraft quorum start` with metrics on prints each node's metrics URL (found in its
node.log, port 0 picked by the node), and each URL serves Prometheus metrics."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest

from tests.support.quorum_support import kraft

pytestmark = pytest.mark.integration


def test_start_prints_each_nodes_metrics_url(cli_cluster_dir: Path) -> None:
    started = kraft("quorum", "start", "--cluster", str(cli_cluster_dir), "--voters", "1",
                    "--brokers", "1", "--set", "metrics.listener=http://127.0.0.1:0")
    try:
        assert started.returncode == 0, started.stderr
        urls = re.findall(r"^  node (\d) .*, metrics (http://127\.0\.0\.1:\d+/metrics)$",
                          started.stdout, re.MULTILINE)
        assert [node for node, _ in urls] == ["1", "2"]
        for _, url in urls:
            with urllib.request.urlopen(url, timeout=10) as page:
                assert b"kafka_raft_current_leader 1.0" in page.read()
    finally:
        stopped = kraft("quorum", "stop", "--cluster", str(cli_cluster_dir))
        assert stopped.returncode == 0, stopped.stderr
