"""Helpers for the multi-process quorum tests (imported by the test modules)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from metadata.admin import (
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DescribeTopicsRequest,
    DescribeTopicsResponse,
)
from tools.admin_client import CREATE_DONE_ALREADY, AdminClient, earlier_attempt_applied
from tools.cluster import Cluster

# Short timeouts keep the suite fast.
FAST_SETTINGS = {
    "controller.quorum.election.timeout.ms": 300,
    "controller.quorum.fetch.timeout.ms": 600,
    "controller.quorum.election.backoff.max.ms": 200,
    "controller.quorum.request.timeout.ms": 400,
    "controller.quorum.fetch.max.wait.ms": 150,
    "socket.request.max.bytes": 1 << 20,
    "controller.quorum.fetch.max.bytes": 256 * 1024,
}


@contextmanager
def running_cluster(directory: Path, settings: dict[str, Any], *, voters: int = 3,
                    brokers: int = 1,
                    prepare: Callable[[Cluster], None] | None = None) -> Iterator[Cluster]:
    """A cluster started with a leader and every broker registered (`prepare`, if given,
    edits the created cluster before it starts); on exit every process it started is
    killed, by PID."""
    cluster = Cluster.create(directory, voters=voters, brokers=brokers, settings=settings)
    if prepare is not None:
        prepare(cluster)
    try:
        cluster.start()
        cluster.wait_for_leader(20)
        cluster.wait_for_brokers(30)
        yield cluster
    finally:
        cluster.kill_all_started()


def kraft(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def wait_until(condition: Any, timeout_s: float, what: str) -> Any:
    """Poll an observable condition until it is truthy (bounded); returns its value."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def dump_log(cluster: Cluster, node_id: int) -> list[dict[str, Any]]:
    """`kraft dump-log --json` of one node's data dir: one dict per log record (a
    checkpoint's records are left out: their offsets count the file's records, not the
    log's)."""
    result = subprocess.run(
        [sys.executable, "-m", "tools.cli", "dump-log", "--dir", cluster.node(node_id).data_dir,
         "--json"], capture_output=True, text=True, timeout=30, check=True)
    records = (json.loads(line) for line in result.stdout.splitlines() if line.strip())
    return [r for r in records if "segment" in r]


def log_events(cluster: Cluster, node_id: int) -> list[dict[str, Any]]:
    """The JSON log lines of one node's node.log (non-JSON lines are skipped)."""
    events = []
    for line in cluster.node(node_id).log_path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def epochs_by_offset(cluster: Cluster, node_id: int) -> dict[int, int]:
    return {r["offset"]: r["epoch"] for r in dump_log(cluster, node_id)}


def wait_all_hold(cluster: Cluster, offset: int) -> None:
    """Every voter holds `offset` (so each has applied the MetadataTopic record too)."""
    for node_id in cluster.voter_ids:
        wait_until(lambda n=node_id: offset in epochs_by_offset(cluster, n), 10,
                   f"node {node_id} to hold offset {offset}")


def coordinator_of(cluster: Cluster, group: str, exclude: Iterable[int] = ()) -> int | None:
    """The node id FindCoordinator names for `group` (asked of a running broker not in
    `exclude`), None while there is none."""
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
    from kio.static.primitive import i8

    from raft.common.errors import ErrorCode
    from raft.common.kafka.wire_client import call

    skip = set(exclude)
    for node_id, info in sorted(cluster.nodes.items()):
        if info.is_voter or node_id in skip or info.client_address is None \
                or not cluster.is_running(node_id):
            continue
        try:
            found = call(info.client_address, FindCoordinatorRequest(key=group, key_type=i8(0)),
                         2.0)
        except OSError:
            continue
        return int(found.node_id) if found.error_code == ErrorCode.NONE else None
    return None


def create_topic_with(admin: AdminClient, name: str, partitions: int,
                      replication_factor: int) -> None:
    """Create `name` through `admin`, and assert it was created. A create the client
    sent again after an attempt of unknown outcome (a timeout, a leader change) may find
    the topic its first attempt made: TOPIC_ALREADY_EXISTS then proves the create
    applied when the topic has the count asked for, as `kraft topics --create` judges it
    (`tools.admin_client.earlier_attempt_applied`)."""
    response = admin.call(CreateTopicsRequest(topics=(CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor),)))
    assert isinstance(response, CreateTopicsResponse)
    (result,) = response.topics
    if result.error_code == 0:
        return
    assert admin.maybe_applied_before, result
    described = admin.call(DescribeTopicsRequest(names=(name,)))
    assert isinstance(described, DescribeTopicsResponse)
    (now,) = described.topics
    assert earlier_attempt_applied(result.error_code, requested=partitions,
                                   proof=CREATE_DONE_ALREADY,
                                   partitions_now=len(now.partitions)), (result, now)
