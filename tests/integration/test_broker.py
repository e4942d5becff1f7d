"""Brokers as metadata-log observers, multi-process on 127.0.0.1 (KIP-516 on the broker
side: hosting from the image in place of LeaderAndIsr, "stale state", "Deletion")."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from broker import partition_dir as pd
from metadata import admin
from metadata.topic_configs import ORDERED_DELIVERY
from raft.common.uuid import Uuid
from raft.storage import format_log_dir
from tests.integration.conftest import ClusterFactory
from tests.support.quorum_support import log_events, wait_until
from tools.cluster import Cluster, ClusterError
from tools.quorum_client import request

pytestmark = pytest.mark.integration

BROKER_SETTINGS = {
    "broker.heartbeat.interval.ms": 300,
    # a stopped broker stays unfenced (and keeps its replicas) for the whole test, so the
    # recreated topic is placed on it again: no controlled shutdown, a long session
    "controlled.shutdown.enable": False,
    "broker.session.timeout.ms": 60_000,
}
WAIT_S = 20.0


# --- helpers: admin requests and broker status --------------------------------------


def admin_request(cluster: Cluster, api: str, message: Any, timeout_s: float = WAIT_S) -> Any:
    """Send an admin request to the active controller (following NOT_CONTROLLER), waiting
    (bounded) while an election leaves no active controller."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        addresses = cluster.controller_addresses()
        for address in addresses:
            try:
                body = request(address, api, admin.encode_body(message),
                               cluster_id=cluster.cluster_id, timeout_s=2.0)
            except ClusterError as exc:
                last = str(exc)
                continue
            response = admin.decode_response(api, body)
            if isinstance(response, admin.AdminErrorResponse):  # NOT_CONTROLLER: next one
                last = f"{address}: {response.error_message}"
                continue
            return response
        time.sleep(0.05)
    raise AssertionError(f"{api} not answered within {timeout_s} s: {last}")


def create_topic(cluster: Cluster, name: str, partitions: int, replication_factor: int,
                 ordered: bool = False) -> admin.CreatableTopicResult:
    """`ordered` asks for enable.ordered.delivery (KIP-253's resizes)."""
    configs = (admin.CreatableTopicConfig(name=ORDERED_DELIVERY, value="true"),) \
        if ordered else None
    response = admin_request(cluster, "CreateTopics", admin.CreateTopicsRequest(topics=(
        admin.CreatableTopic(name=name, num_partitions=partitions,
                             replication_factor=replication_factor, configs=configs),)))
    (result,) = response.topics
    assert result.error_code == 0, result
    return result


def delete_topic(cluster: Cluster, topic_id: Uuid) -> None:
    response = admin_request(cluster, "DeleteTopics", admin.DeleteTopicsRequest(
        topics=(admin.DeleteTopicState(topic_id=topic_id),)))
    (result,) = response.responses
    assert result.error_code == 0, result


def broker_status(cluster: Cluster, node_id: int) -> dict[str, Any] | None:
    return cluster.broker_status(node_id)


def wait_broker_reconciled(cluster: Cluster, node_id: int, offset: int) -> dict[str, Any]:
    """The broker has applied `offset` and finished a reconciliation of that image."""
    return wait_until(lambda: (s := broker_status(cluster, node_id)) is not None
                      and s["reconciled_offset"] >= offset and s, WAIT_S,
                      f"broker {node_id} reconciled up to offset {offset}")


def wait_brokers_unfenced(cluster: Cluster, node_ids: list[int]) -> None:
    for node_id in node_ids:
        wait_until(lambda n=node_id: (s := broker_status(cluster, n)) is not None
                   and not s["is_fenced"], WAIT_S, f"broker {node_id} unfenced")


def controller_offset(cluster: Cluster) -> int:
    """The last committed offset (everything before the high watermark)."""
    return int(cluster.describe()["high_watermark"]) - 1


def data_dir(cluster: Cluster, node_id: int) -> Path:
    return Path(cluster.node(node_id).data_dir)


def partition_dirs(cluster: Cluster, node_id: int) -> dict[str, Uuid | None]:
    local, _ = pd.scan(data_dir(cluster, node_id))
    return {p.dir_name: p.topic_id for p in local}


def staged_dirs(cluster: Cluster, node_id: int) -> set[str]:
    return {s.name for s in pd.scan(data_dir(cluster, node_id))[1]}


def write_marker(cluster: Cluster, node_id: int, dir_name: str, text: str) -> None:
    (data_dir(cluster, node_id) / dir_name / "00000000000000000000.log").write_text(text)


def read_marker(path: Path) -> str | None:
    marker = path / "00000000000000000000.log"
    return marker.read_text() if marker.exists() else None


def log_messages(cluster: Cluster, node_id: int, message: str) -> list[dict[str, Any]]:
    return [e for e in log_events(cluster, node_id) if e.get("msg") == message]


def expected_dirs(results: list[admin.CreatableTopicResult], node_id: int) -> dict[str, Uuid]:
    return {f"{r.name}-{p}": r.topic_id for r in results
            for p, replicas in enumerate(r.assignment) if node_id in replicas}


# --- tests -----------------------------------------------------------------------------


def test_hosts_exactly_assigned_partitions_when_broker_starts_on_empty_dir(
        make_cluster: ClusterFactory) -> None:
    """KIP-516 (in place of LeaderAndIsr): a broker that starts from an empty log dir
    fetches the metadata log by topic ID, catches up, and creates exactly the partitions
    the controller assigned it, each with partition.metadata naming the topic ID; its
    image agrees with the other broker's at the same offset, and its checkpoint with the
    image it applied."""
    cluster = make_cluster(voters=3, brokers=2, settings=BROKER_SETTINGS)
    wait_brokers_unfenced(cluster, [4, 5])
    results = [create_topic(cluster, "orders", 4, 1), create_topic(cluster, "users", 3, 2)]
    offset = controller_offset(cluster)
    for node_id in (4, 5):
        wait_broker_reconciled(cluster, node_id, offset)
        assert partition_dirs(cluster, node_id) == expected_dirs(results, node_id)

    # Broker 5 again, from a freshly formatted, empty directory.
    cluster.stop_node(5)
    shutil.rmtree(data_dir(cluster, 5))
    format_log_dir(str(data_dir(cluster, 5)), cluster_id=cluster.cluster_id, node_id=5)
    cluster.start_node(5)
    status = wait_broker_reconciled(cluster, 5, offset)
    assert partition_dirs(cluster, 5) == expected_dirs(results, 5)
    for dir_name, topic_id in expected_dirs(results, 5).items():
        assert (data_dir(cluster, 5) / dir_name / "partition.metadata").read_text() == \
            f"version: 0\ntopic_id: {topic_id}\n"
    # Both brokers replayed the same committed records: same offset, same image.
    pair = wait_until(lambda: (a := broker_status(cluster, 4)) and (b := broker_status(
        cluster, 5)) and a["applied_offset"] == b["applied_offset"] and (a, b), WAIT_S,
        "brokers 4 and 5 at the same applied offset")
    assert pair[0]["image_hash"] == pair[1]["image_hash"]
    # The checkpoint follows the image at most once a second (broker.server).
    checkpoint = wait_until(lambda: (c := json.loads(
        (data_dir(cluster, 5) / "metadata-image.checkpoint").read_text())
        )["applied_offset"] >= offset and c, WAIT_S, "broker 5's checkpoint at the offset")
    current = broker_status(cluster, 5)
    assert current is not None
    if current["applied_offset"] == checkpoint["applied_offset"]:
        assert current["image_hash"] == checkpoint["image_hash"]
    assert {(h["topic"], h["partition"]) for h in status["hosted"]} == {
        (r.name, p) for r in results for p, replicas in enumerate(r.assignment)
        if 5 in replicas}


def test_stages_old_id_and_creates_new_when_topic_recreated_while_broker_down(
        make_cluster: ClusterFactory) -> None:
    """KIP-516 "stale state" + "Deletion": broker 4 is down while A is deleted and
    recreated and C is deleted; back up, it logs a WARN with the deletion time, moves A-0
    (old ID) to deleting/<old id>_0 and C-0 to deleting/<C id>_0, creates A-0 with the new
    ID, never touches live B-0, and removes the staged copies after
    delete.topic.delay.ms."""
    delay_ms = 3000
    cluster = make_cluster(voters=3, brokers=1,
                           settings={**BROKER_SETTINGS, "delete.topic.delay.ms": delay_ms})
    wait_brokers_unfenced(cluster, [4])
    old_a = create_topic(cluster, "A", 1, 1)
    live_b = create_topic(cluster, "B", 1, 1)
    gone_c = create_topic(cluster, "C", 1, 1)
    wait_broker_reconciled(cluster, 4, controller_offset(cluster))
    for name in ("A", "B", "C"):
        write_marker(cluster, 4, f"{name}-0", f"records of {name} before the restart")
    b_inode = (data_dir(cluster, 4) / "B-0").stat().st_ino

    cluster.stop_node(4)
    delete_topic(cluster, old_a.topic_id)
    delete_topic(cluster, gone_c.topic_id)
    new_a = create_topic(cluster, "A", 1, 1)
    assert new_a.topic_id != old_a.topic_id
    offset = controller_offset(cluster)
    assert partition_dirs(cluster, 4)["A-0"] == old_a.topic_id  # nothing moved while down

    cluster.start_node(4)
    wait_broker_reconciled(cluster, 4, offset)
    assert partition_dirs(cluster, 4) == {"A-0": new_a.topic_id, "B-0": live_b.topic_id}
    assert read_marker(data_dir(cluster, 4) / "A-0") is None
    staged_a = data_dir(cluster, 4) / "deleting" / f"{old_a.topic_id}_0"
    staged_c = data_dir(cluster, 4) / "deleting" / f"{gone_c.topic_id}_0"
    assert read_marker(staged_a) == "records of A before the restart"
    assert read_marker(staged_c) == "records of C before the restart"
    assert read_marker(data_dir(cluster, 4) / "B-0") == "records of B before the restart"
    assert (data_dir(cluster, 4) / "B-0").stat().st_ino == b_inode

    warnings = log_messages(cluster, 4, "staging stale partition for deletion")
    assert {w["topic_id"] for w in warnings} == {str(old_a.topic_id), str(gone_c.topic_id)}
    assert all(w["level"] == "WARNING" and w["delete_at_ms"] > 0 for w in warnings)
    due = max(w["delete_at_ms"] for w in warnings)

    wait_until(lambda: staged_dirs(cluster, 4) == set(), delay_ms / 1000 + WAIT_S,
               "the staged copies removed after delete.topic.delay.ms")
    assert time.time() * 1000 >= due
    assert partition_dirs(cluster, 4) == {"A-0": new_a.topic_id, "B-0": live_b.topic_id}


def create_on(cluster: Cluster, name: str, broker_id: int) -> admin.CreatableTopicResult:
    """A one-partition topic whose only replica is `broker_id`."""
    response = admin_request(cluster, "CreateTopics", admin.CreateTopicsRequest(topics=(
        admin.CreatableTopic(name=name, assignments=(admin.CreatableReplicaAssignment(
            partition_index=0, broker_ids=(broker_id,)),)),)))
    (result,) = response.topics
    assert result.error_code == 0, result
    return result


def test_stages_strays_when_broker_restarts_with_a_copied_dir_or_one_without_its_file(
        make_cluster: ClusterFactory) -> None:
    """Strays: broker 5 is down while (a) a partition directory of live topic S, whose
    only replica is broker 4, is copied into its log dir, and (b) its replica R-0 loses
    partition.metadata while R is deleted and recreated on it. Back up, it stages both
    under deleting/ with a WARN naming why: the copy (not assigned here) and the file-less
    data (never adopted by the name R, which now has another ID); the new R-0 starts
    empty with the new ID, and broker 4's S-0 is untouched."""
    cluster = make_cluster(voters=3, brokers=2,
                           settings={**BROKER_SETTINGS, "delete.topic.delay.ms": 600_000})
    wait_brokers_unfenced(cluster, [4, 5])
    live_s = create_on(cluster, "S", 4)
    old_r = create_on(cluster, "R", 5)
    wait_broker_reconciled(cluster, 4, controller_offset(cluster))
    wait_broker_reconciled(cluster, 5, controller_offset(cluster))
    write_marker(cluster, 4, "S-0", "records of S")
    write_marker(cluster, 5, "R-0", "records of the old R")

    cluster.stop_node(5)
    shutil.copytree(data_dir(cluster, 4) / "S-0", data_dir(cluster, 5) / "S-0")
    (data_dir(cluster, 5) / "R-0" / pd.PARTITION_METADATA).unlink()
    delete_topic(cluster, old_r.topic_id)
    new_r = create_on(cluster, "R", 5)
    offset = controller_offset(cluster)

    cluster.start_node(5)
    wait_broker_reconciled(cluster, 5, offset)
    assert partition_dirs(cluster, 5) == {"R-0": new_r.topic_id}
    assert read_marker(data_dir(cluster, 5) / "R-0") is None
    deleting = data_dir(cluster, 5) / "deleting"
    assert read_marker(deleting / f"{live_s.topic_id}_0") == "records of S"
    assert read_marker(deleting / f"{Uuid(0)}_0") == "records of the old R"
    reasons = {w["dir"]: w["reason"] for w in log_messages(
        cluster, 5, "staging stale partition for deletion") if w["level"] == "WARNING"}
    assert "not assigned to this broker" in reasons["S-0"]
    assert "never adopted by name" in reasons["R-0"]
    assert read_marker(data_dir(cluster, 4) / "S-0") == "records of S"
    assert partition_dirs(cluster, 4) == {"S-0": live_s.topic_id}


def test_same_end_state_when_broker_killed_during_reconciliation(
        make_cluster: ClusterFactory) -> None:
    """KIP-516 "Deletion", crash safety: SIGKILL the broker in the middle of staging the
    partitions of a recreated topic, restart it: every stale partition ends up staged
    with its data, the new ones created, the live topic untouched.

    The kill lands mid-way for sure: a FIFO where one stale partition's
    deletion.metadata.tmp goes makes that write hang (as on a stuck disk), so the broker
    is seen with the partitions before it staged, that one and those after it in place,
    nothing created and the reconciliation unfinished. (Every exact crash point is
    covered by tests/unit/broker/test_partition_dir.py.)"""
    cluster = make_cluster(voters=3, brokers=1,
                           settings={**BROKER_SETTINGS, "delete.topic.delay.ms": 600_000})
    wait_brokers_unfenced(cluster, [4])
    partitions = 12
    old = create_topic(cluster, "big", partitions, 1)
    live = create_topic(cluster, "live", 3, 1)
    wait_broker_reconciled(cluster, 4, controller_offset(cluster))
    for p in range(partitions):
        write_marker(cluster, 4, f"big-{p}", f"old big {p}")
    for p in range(3):
        write_marker(cluster, 4, f"live-{p}", f"live {p}")

    cluster.stop_node(4)
    delete_topic(cluster, old.topic_id)
    new = create_topic(cluster, "big", partitions, 1)
    offset = controller_offset(cluster)
    # Stale directories are staged in name order; the write hangs at the stuck one.
    stuck = "big-5"
    order = sorted(f"big-{p}" for p in range(partitions))
    index = order.index(stuck)
    assert 0 < index < partitions - 1  # the kill comes after some work, before the rest
    fifo = data_dir(cluster, 4) / stuck / f"{pd.DELETION_METADATA}.tmp"
    os.mkfifo(fifo)

    cluster.start_node(4)
    wait_until(lambda: any(e.get("dir") == stuck for e in log_messages(
        cluster, 4, "staging stale partition for deletion")), WAIT_S,
        f"the broker to stage {stuck}")
    status = broker_status(cluster, 4)
    assert status is not None
    assert status["reconciled_offset"] < offset  # still at it
    assert staged_dirs(cluster, 4) == {f"{old.topic_id}_{name.rsplit('-', 1)[1]}"
                                       for name in order[:index]}
    # the rest still in place, under the old ID: nothing created yet
    assert partition_dirs(cluster, 4) == {
        **{name: old.topic_id for name in order[index:]},
        **{f"live-{p}": live.topic_id for p in range(3)}}
    cluster.kill(4, signal.SIGKILL)

    fifo.unlink()  # the disk works again
    cluster.start_node(4)
    wait_broker_reconciled(cluster, 4, offset)
    expected = {f"big-{p}": new.topic_id for p in range(partitions)}
    expected.update({f"live-{p}": live.topic_id for p in range(3)})
    assert partition_dirs(cluster, 4) == expected
    assert staged_dirs(cluster, 4) == {f"{old.topic_id}_{p}" for p in range(partitions)}
    for p in range(partitions):
        staged = data_dir(cluster, 4) / "deleting" / f"{old.topic_id}_{p}"
        assert read_marker(staged) == f"old big {p}"
        assert read_marker(data_dir(cluster, 4) / f"big-{p}") is None
    for p in range(3):
        assert read_marker(data_dir(cluster, 4) / f"live-{p}") == f"live {p}"


def test_follows_new_leader_and_keeps_data_when_leader_killed_and_topic_renamed(
        make_cluster: ClusterFactory) -> None:
    """KIP-595 observers follow leader changes without a restart; KIP-516 renames: the
    directory follows the new name and keeps its data and partition.metadata's ID."""
    cluster = make_cluster(voters=3, brokers=1, settings=BROKER_SETTINGS)
    wait_brokers_unfenced(cluster, [4])
    broker_pid = cluster.node(4).pid
    first = create_topic(cluster, "first", 2, 1)
    wait_broker_reconciled(cluster, 4, controller_offset(cluster))
    write_marker(cluster, 4, "first-1", "kept across the rename")

    old_leader = cluster.describe()
    cluster.kill(old_leader["leader_id"], signal.SIGKILL)
    cluster.wait_for_leader(WAIT_S, above_epoch=old_leader["leader_epoch"],
                            exclude=[old_leader["leader_id"]])
    second = create_topic(cluster, "second", 1, 1)
    response = admin_request(cluster, "RenameTopic", admin.RenameTopicRequest(
        topic_id=first.topic_id, new_name="renamed"))
    assert response.error_code == 0, response
    offset = int(cluster.describe(exclude=[old_leader["leader_id"]])["high_watermark"]) - 1

    wait_broker_reconciled(cluster, 4, offset)
    assert cluster.node(4).pid == broker_pid
    assert cluster.is_running(4)
    assert partition_dirs(cluster, 4) == {"renamed-0": first.topic_id,
                                          "renamed-1": first.topic_id,
                                          "second-0": second.topic_id}
    assert read_marker(data_dir(cluster, 4) / "renamed-1") == "kept across the rename"
    assert staged_dirs(cluster, 4) == set()
