"""The ordered-resize end-to-end runs (tools/resize_run.py) as the integration tests
use them: one cluster per test module, one resize run per test, its order check."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.quorum_support import FAST_SETTINGS, running_cluster
from tools.cluster import Cluster
from tools.resize_run import Hook, ResizeRun, ResizeRunConfig, ResizeRunResult, write_outputs

BROKERS = (4, 5, 6)
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "broker.session.timeout.ms": 3000}


@contextmanager
def resize_cluster(directory: Path) -> Iterator[Cluster]:
    """One cluster for a module: each test has its own topic and group, and a test that
    kills a node starts it again."""
    with running_cluster(directory, SETTINGS, voters=3, brokers=len(BROKERS)) as started:
        yield started


def run(cluster: Cluster, tmp_path: Path, hooks: dict[int, Hook] | None = None,
        **overrides: Any) -> ResizeRunResult:
    name = tmp_path.name.replace("[", "-").replace("]", "")[-40:]
    config = ResizeRunConfig(cluster_dir=cluster.directory, topic=f"t-{name}",
                             group=f"g-{name}", **overrides)
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    resize = ResizeRun(config, logs)
    result = resize.run(hooks)
    write_outputs(result, tmp_path / "outputs")  # kept in tmp_path for a failed run
    return result


def assert_in_order(result: ResizeRunResult) -> None:
    report = result.report
    assert report.acknowledged > 0, report.summary()
    assert report.out_of_order_count == 0, "\n".join(report.out_of_order)
    missing = dict(list(report.missing.items())[:5])
    assert report.missing_count == 0, f"{report.summary()}: {missing}"
    partitions = {row["partition"] for rows in result.consumed for row in rows}
    assert max(partitions) >= 5, f"records from partitions {sorted(partitions)} only"


def kill_soon(cluster: Cluster, node_id: int, delay_s: float) -> threading.Thread:
    """SIGKILL `node_id` after `delay_s`, from a thread: the resize is then in flight."""
    def kill() -> None:
        time.sleep(delay_s)  # the resize request is on its way when the controller dies
        cluster.kill(node_id)
    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread
