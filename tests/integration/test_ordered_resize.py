"""Per-key order across partition-count changes, end to end with real processes.

Three ordered producers write per-key sequence numbers while the topic goes
2 → 3 → 4 → 8 → 5 → 3 partitions; two ordered consumers in one group deliver them. Every
key's values must be delivered in increasing order, none missing (tests/support/order_check.py).
The same run with the gates switched off must show order violations: without that the
first test proves nothing. Then the faults: the active controller
killed as a resize is issued (an expansion, then a deletion), a consumer killed while it
waits at a gate, the group coordinator's broker killed during a resize, and a partition
leader whose metadata lags by seconds through a growth and through a shrink.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raft.fault_injection import clear_fault_file, write_fault_file
from tests.support.quorum_support import (
    FAST_SETTINGS,
    coordinator_of,
    running_cluster,
    wait_until,
)
from tests.support.resize_run import (
    Hook,
    ResizeRun,
    ResizeRunConfig,
    ResizeRunResult,
    write_outputs,
)
from tools.cluster import Cluster

BROKERS = (4, 5, 6)
FAULT_FILE = "faults.json"  # in each node's directory (raft/fault_injection.py)
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "broker.session.timeout.ms": 3000, "fault.injection.file": FAULT_FILE}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One cluster for the module: each test has its own topic and group, and a test
    that kills a node starts it again."""
    with running_cluster(tmp_path_factory.mktemp("ordered") / "cluster", SETTINGS, voters=3,
                         brokers=len(BROKERS)) as started:
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


def test_keys_stay_in_order_while_the_topic_grows_and_shrinks(cluster: Cluster,
                                                             tmp_path: Path) -> None:
    result = run(cluster, tmp_path, process_delay_ms=5)
    assert_in_order(result)
    assert result.report.redeliveries == 0, result.report.summary()
    producer_codes = {n: c for n, c in result.exit_codes.items() if n.startswith("producer")}
    assert all(code == 0 for code in producer_codes.values()), result.exit_codes


# the peer without gates shows the workload can break order (about 30 s): make soak; in
# make test the growth chain and the schedule tests fail without the gates they check
@pytest.mark.soak
def test_without_the_gates_keys_go_out_of_order(cluster: Cluster, tmp_path: Path) -> None:
    # the consumers lag (a slow per-record step), so when a key moves to a new partition
    # its older records still wait in the old one: only the gates hold the new ones back
    result = run(cluster, tmp_path, gates=False, process_delay_ms=40, rate=30.0)
    assert result.report.out_of_order_count > 0, result.report.summary()


# --- faults ---------------------------------------------------------------------------


BROKER_DOWN_S = 3.0  # a killed broker's absence before it is started again


def kill_soon(cluster: Cluster, node_id: int, delay_s: float) -> threading.Thread:
    """SIGKILL `node_id` after `delay_s`, from a thread: the resize is then in flight."""
    def kill() -> None:
        time.sleep(delay_s)  # the resize request is on its way when the controller dies
        cluster.kill(node_id)
    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


# a controller, consumer or coordinator killed mid-resize: each a whole resize run (1-2.5
# minutes); `make soak` runs them, `make test` keeps to its ten minutes with the
# undisturbed runs (gated and not) and the schedule tests
@pytest.mark.soak
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


@pytest.mark.soak
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


@pytest.mark.soak
def test_coordinator_broker_killed_during_a_resize(cluster: Cluster, tmp_path: Path) -> None:
    """The group coordinator's broker is SIGKILLed as a resize starts and comes back a few
    seconds later, whether or not that resize could commit meanwhile: on a slow host the
    dead broker is fenced first, and RF 3 then waits for it (INVALID_REPLICATION_FACTOR
    until its return), so its return may not wait for the next resize."""
    returned: list[threading.Thread] = []

    def hook(at: int, resize: ResizeRun) -> None:
        coordinator = coordinator_of(cluster, resize.config.group)
        assert coordinator is not None
        kill_soon(cluster, coordinator, 0.05)  # the resize is then in flight

        def come_back() -> None:
            time.sleep(BROKER_DOWN_S)  # down for a while, whatever the resize does
            cluster.start_node(coordinator)
        thread = threading.Thread(target=come_back, daemon=True)
        thread.start()
        returned.append(thread)

    def restart(at: int, resize: ResizeRun) -> None:
        for thread in returned:
            thread.join(BROKER_DOWN_S + 5)

    result = run(cluster, tmp_path, hooks={2: hook, 3: restart}, records_per_step=25)
    assert_in_order(result)


FROZEN_S = 3.0  # how long a leader's metadata lags behind the resize


def frozen_log_lines(cluster: Cluster, node_id: int) -> int:
    log = Path(cluster.node(node_id).dir) / "node.log"
    return sum('"metadata_frozen": true' in line for line in log.read_text().splitlines())


@pytest.mark.soak  # a whole resize run more (about a minute): make test keeps to budget
def test_a_leader_whose_metadata_lags_keeps_every_key_in_order(cluster: Cluster,
                                                               tmp_path: Path) -> None:
    """Before the growth 2 → 3 the leader of partition 0 (whose keys split into 2), and
    before the shrink 8 → 5 the leader of partition 7 (marked, its keys to 3), keep
    serving the image from before the resize for FROZEN_S: producers still on the old
    count are taken there, the gates' queries it cannot answer in the new epochs are
    refused until it catches up (docs/kip-253.md, schedules a and b)."""
    frozen: list[tuple[int, threading.Thread]] = []

    def freeze_leader_of(partition: int) -> Hook:
        def hook(at: int, resize: ResizeRun) -> None:
            topic = resize.describe()
            assert topic is not None
            leader = next(p["leader"] for p in topic["partitions"]
                          if p["partition"] == partition)
            fault_file = Path(cluster.node(leader).dir) / FAULT_FILE
            seen = frozen_log_lines(cluster, leader)
            write_fault_file(fault_file, metadata_frozen=True)
            wait_until(lambda: frozen_log_lines(cluster, leader) > seen, 10,
                       f"broker {leader} froze its metadata")

            def thaw() -> None:
                time.sleep(FROZEN_S)  # the lag itself: the resize commits meanwhile
                clear_fault_file(fault_file)
            thread = threading.Thread(target=thaw, daemon=True)
            thread.start()
            frozen.append((leader, thread))
        return hook

    def thawed(at: int, resize: ResizeRun) -> None:
        for _, thread in frozen:
            thread.join(FROZEN_S + 5)

    hooks: dict[int, Hook] = {1: freeze_leader_of(0), 2: thawed, 4: freeze_leader_of(7),
                              5: thawed}
    result = run(cluster, tmp_path, hooks=hooks, process_delay_ms=5, records_per_step=25)
    assert len(frozen) == 2, frozen
    assert_in_order(result)
