"""Per-key order across partition-count changes under faults, end to end (the runs of
test_ordered_resize.py): the active controller killed as a resize is issued (an
expansion, then a deletion), a consumer killed while it waits at a gate, and the group
coordinator's broker killed during a resize. A file of its own so that the two test
workers share the ordered-resize runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ordered_resize import assert_in_order, kill_soon, resize_cluster, run
from tests.support.quorum_support import coordinator_of
from tools.cluster import Cluster
from tools.resize_run import Hook, ResizeRun


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with resize_cluster(tmp_path_factory.mktemp("ordered-faults") / "cluster") as started:
        yield started


def test_controller_killed_during_an_expansion_and_during_a_deletion(
        cluster: Cluster, tmp_path: Path) -> None:
    killed: list[int] = []

    def kill_leader(at: int, resize: ResizeRun) -> None:
        leader = cluster.wait_for_leader(10)["leader_id"]
        kill_soon(cluster, leader, 0.05)
        killed.append(leader)

    def restart(at: int, resize: ResizeRun) -> None:
        while killed:
            cluster.start_node(killed.pop())

    # resize 1 grows 2 → 3, resize 4 shrinks 8 → 5; each killed node restarts a step later
    hooks: dict[int, Hook] = {1: kill_leader, 2: restart, 4: kill_leader, 5: restart}
    assert_in_order(run(cluster, tmp_path, hooks=hooks, records_per_step=25))
    for node_id in killed:
        cluster.start_node(node_id)


def test_consumer_killed_while_gated(cluster: Cluster, tmp_path: Path) -> None:
    def hook(at: int, resize: ResizeRun) -> None:
        victim = resize.consumers[0]
        def kill_after_resize() -> None:
            time.sleep(0.3)  # just after the expansion: the new partitions are gated
            victim.kill()
            resize.start_consumer(len(resize.consumers))
        threading.Thread(target=kill_after_resize, daemon=True).start()

    result = run(cluster, tmp_path, hooks={1: hook}, process_delay_ms=10,
                 records_per_step=25)
    assert_in_order(result)  # a killed consumer may redeliver, never reorder


def test_coordinator_broker_killed_during_a_resize(cluster: Cluster, tmp_path: Path) -> None:
    killed: list[int] = []

    def hook(at: int, resize: ResizeRun) -> None:
        coordinator = coordinator_of(cluster, resize.config.group)
        assert coordinator is not None
        kill_soon(cluster, coordinator, 0.05)
        killed.append(coordinator)

    def restart(at: int, resize: ResizeRun) -> None:
        for node_id in killed:
            cluster.start_node(node_id)

    result = run(cluster, tmp_path, hooks={2: hook, 3: restart}, records_per_step=25)
    assert_in_order(result)
