"""A real full disk under a running voter (hostile input): each voter's data
directory is a small tmpfs; a ballast file fills one of them until ENOSPC. The full node
stops accepting writes, logs one ERROR naming its directory and "No space left on device",
closes its listener and stays alive (same PID) probing the directory; the other two keep
committing. Once the ballast is gone it rebuilds itself from disk in place, catches up, and
every voter holds every acknowledged append."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.quorum_support import (
    FAST_SETTINGS,
    dump_log,
    log_events,
    wait_all_hold,
    wait_until,
)
from tools.cluster import Cluster
from tools.config import parse_address

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

VOTERS = (1, 2, 3)
TMPFS_SIZE = "8m"
BALLAST = "ballast"
PROBING = "not accepting writes; probing the log directory until it takes writes again"


def mount_tmpfs(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs",
                           str(path)], capture_output=True, text=True, timeout=30)


def unmount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True, timeout=30).returncode:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


@pytest.fixture
def make_tmpfs_cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """`make(voters, brokers)` -> a started cluster whose every data directory is its own
    small tmpfs (mounted before formatting). At the end every process the cluster
    started is killed by PID, then the mounts go."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN)")
    mounted: list[Path] = []
    clusters: list[Cluster] = []

    def make(voters: int = 3, brokers: int = 0) -> Cluster:
        directory = tmp_path / f"cluster-{len(clusters)}"
        for node_id in range(1, voters + brokers + 1):
            data_dir = directory / f"node-{node_id}" / "data"  # tools.cluster's layout
            data_dir.mkdir(parents=True)
            result = mount_tmpfs(data_dir)
            if result.returncode != 0:
                pytest.skip(f"mounting a tmpfs is not permitted here: {result.stderr.strip()}")
            mounted.append(data_dir)
        cluster = Cluster.create(directory, voters=voters, brokers=brokers,
                                 settings=FAST_SETTINGS)
        clusters.append(cluster)
        assert all(Path(n.data_dir) in mounted for n in cluster.nodes.values())
        cluster.start()
        cluster.wait_for_leader(15)
        return cluster

    try:
        yield make
    finally:
        for cluster in clusters:
            cluster.kill_all_started()
        for data_dir in mounted:
            unmount(data_dir)


@pytest.fixture
def cluster(make_tmpfs_cluster: Callable[..., Cluster]) -> Cluster:
    return make_tmpfs_cluster(voters=len(VOTERS))


def fill(data_dir: Path) -> None:
    """Write a ballast file until the tmpfs has not a byte left."""
    fd = os.open(data_dir / BALLAST, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for chunk in (bytes(1 << 20), bytes(4096), bytes(1)):
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)


class Appender:
    """Appends one-record batches through whoever leads; remembers what was acknowledged."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.acked: dict[int, int] = {}  # offset -> epoch, from successful replies only

    def append(self, count: int) -> int:
        reply = self.cluster.append(count, batch=1, timeout_s=30)
        for epoch, last_offset in reply["batches"]:
            self.acked[last_offset] = epoch
        return int(reply["last_offset"])

    def append_until(self, condition: Any, timeout_s: float, what: str) -> None:
        """Keep appending (the quorum's progress is the clock) until `condition()`."""
        def holds_or_append() -> bool:
            if condition():
                return True
            self.append(10)
            return False

        wait_until(holds_or_append, timeout_s, what)


def disk_full_errors(cluster: Cluster, node_id: int) -> list[dict[str, Any]]:
    return [e for e in log_events(cluster, node_id) if e.get("level") == "ERROR"]


def names_full_directory(event: dict[str, Any], data_dir: str) -> bool:
    return str(event.get("dir", "")).startswith(data_dir) and \
        "No space left on device" in str(event.get("error", ""))


def is_listening(address: str) -> bool:
    try:
        with socket.create_connection(parse_address(address), timeout=1):
            return True
    except OSError:
        return False


def has_logged(cluster: Cluster, node_id: int, message: str) -> bool:
    return any(e.get("msg") == message for e in log_events(cluster, node_id))


def records_up_to(cluster: Cluster, node_id: int, last_offset: int) -> list[tuple[Any, ...]]:
    return [(r["offset"], r["epoch"], r["type"], repr(r["record"]))
            for r in dump_log(cluster, node_id) if r["offset"] <= last_offset]


def fill_recover_and_compare(cluster: Cluster, full: int) -> None:
    """The scenario, with `full` the voter whose disk fills."""
    info = cluster.node(full)
    pid = info.pid
    address = info.controller_address or ""
    appender = Appender(cluster)
    first = appender.append(20)
    wait_all_hold(cluster, first)

    fill(Path(info.data_dir))
    # Its next log or quorum-state write fails (a last partly used page may take a few).
    appender.append_until(lambda: disk_full_errors(cluster, full), 30,
                          f"node {full} to report its full disk")
    wait_until(lambda: has_logged(cluster, full, PROBING), 10, f"node {full} to stop")
    errors = disk_full_errors(cluster, full)
    assert len(errors) == 1, errors
    assert names_full_directory(errors[0], info.data_dir), errors[0]
    assert "stopped accepting writes" in errors[0]["msg"]
    wait_until(lambda: not is_listening(address), 10, f"node {full} to close its listener")
    assert cluster.is_running(full)
    assert cluster.node(full).pid == pid

    # The other two are a majority: a leader among them, and appends commit.
    cluster.wait_for_leader(15, exclude=[full])
    during = appender.append(30)
    assert cluster.is_running(full)
    assert not is_listening(address)

    (Path(info.data_dir) / BALLAST).unlink()
    wait_until(lambda: has_logged(cluster, full, "space returned, restarting from disk"),
               30, f"node {full} to notice the space")
    wait_until(lambda: is_listening(address), 15, f"node {full} to listen again")
    after = appender.append(20)
    assert during < after
    wait_all_hold(cluster, after)
    assert cluster.node(full).pid == pid
    assert cluster.is_running(full)
    assert len(disk_full_errors(cluster, full)) == 1

    assert cluster.stop() == []  # every node exits on SIGTERM
    logs = {n: records_up_to(cluster, n, after) for n in VOTERS}
    assert logs[1] == logs[2] == logs[3]
    epoch_at = {record[0]: record[1] for record in logs[1]}
    missing = {o: e for o, e in appender.acked.items() if epoch_at.get(o) != e}
    assert not missing, f"acknowledged appends lost: {missing}"


def test_leader_stops_accepting_writes_and_recovers_in_place_when_its_disk_fills(
        cluster: Cluster) -> None:
    """Raft §5.2: the full leader stops, a new leader is elected by the other two; every
    append acknowledged before and after is on every voter once the old leader is back."""
    leader = cluster.wait_for_leader(15)["leader_id"]
    fill_recover_and_compare(cluster, leader)


def test_follower_stops_accepting_writes_and_recovers_in_place_when_its_disk_fills(
        cluster: Cluster) -> None:
    """Raft §5.3: the leader keeps committing with the other follower; the full follower
    comes back in place and catches up."""
    leader = cluster.wait_for_leader(15)["leader_id"]
    fill_recover_and_compare(cluster, min(n for n in VOTERS if n != leader))


def test_sigterm_while_probing_a_full_disk_exits_zero(cluster: Cluster) -> None:
    """A node waiting for space still stops promptly and cleanly on SIGTERM."""
    leader = cluster.wait_for_leader(15)["leader_id"]
    follower = min(n for n in VOTERS if n != leader)
    info = cluster.node(follower)
    pid = info.pid
    appender = Appender(cluster)
    fill(Path(info.data_dir))
    appender.append_until(lambda: disk_full_errors(cluster, follower), 30,
                          f"node {follower} to report its full disk")
    wait_until(lambda: not is_listening(info.controller_address or ""), 10,
               f"node {follower} to close its listener")
    cluster.kill(follower, signal.SIGTERM, timeout_s=10)
    assert cluster.exit_codes.get(pid or -1) == 0


def test_broker_stops_serving_and_recovers_in_place_when_its_disk_fills(
        make_tmpfs_cluster: Callable[..., Cluster]) -> None:
    """A broker (a raft observer with Kafka and status listeners) whose disk fills closes
    every listener and comes back in place, re-registered and caught up with the log."""
    cluster = make_tmpfs_cluster(voters=1, brokers=1)
    cluster.wait_for_brokers(30)
    broker = cluster.node(2)
    pid = broker.pid
    listeners = [broker.client_address or "", broker.status_address or ""]
    appender = Appender(cluster)

    fill(Path(broker.data_dir))
    appender.append_until(lambda: disk_full_errors(cluster, 2), 30,
                          "the broker to report its full disk")
    # Every path that could meet the full disk (the core loop, the lazy flush, the
    # checkpoints) has ended once the supervisor starts probing: one ERROR between them.
    wait_until(lambda: has_logged(cluster, 2, PROBING), 10, "the broker to stop")
    errors = disk_full_errors(cluster, 2)
    assert len(errors) == 1, errors
    assert names_full_directory(errors[0], broker.data_dir), errors[0]
    wait_until(lambda: not any(map(is_listening, listeners)), 10,
               "the broker to close its listeners")
    assert cluster.is_running(2)

    (Path(broker.data_dir) / BALLAST).unlink()
    last = appender.append(10)
    wait_until(lambda: (s := cluster.broker_status(2)) and not s["is_fenced"]
               and s["applied_offset"] >= last, 30, "the broker to catch up unfenced")
    assert all(map(is_listening, listeners))
    assert cluster.node(2).pid == pid
    assert len(disk_full_errors(cluster, 2)) == 1
    assert cluster.stop() == []
    assert records_up_to(cluster, 2, last) == records_up_to(cluster, 1, last)
