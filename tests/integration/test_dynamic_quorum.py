"""The dynamic quorum (KIP-853) with real processes on 127.0.0.1, an append workload
running throughout: grow 3 -> 5 voters with `kraft quorum add-controller`, shrink 5 -> 3
with `kraft quorum remove-controller`, and replace a voter whose data directory was
deleted (formatted anew: a new directory id; its old key removed, its new key added).
A voter restarted on a new port has its voter entry updated by itself (UpdateRaftVoter)
and the others dial it there. Every acknowledged append is in every voter's log
afterwards, at its offset and epoch, and the voters' logs are the same records."""

from __future__ import annotations

import json
import shutil
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raft.storage import format_log_dir, read_meta_properties
from tests.support.quorum_support import FAST_SETTINGS, dump_log, kraft, log_events, wait_until
from tools.cluster import Cluster, ClusterError
from tools.config import to_toml
from tools.ports import free_ports

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


class Workload:
    """Appends in small batches until stopped; remembers every acknowledged record."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.acked: list[tuple[int, int]] = []  # (epoch, offset) of committed appends
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                reply = self.cluster.append(5, timeout_s=10)
            except ClusterError:
                self.failures += 1
                self._stop.wait(0.1)
                continue
            self.acked.extend((epoch, offset) for epoch, offset in reply["batches"])

    def __enter__(self) -> Workload:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def wait_for_more(self, count: int) -> None:
        target = len(self.acked) + count
        wait_until(lambda: len(self.acked) >= target, 30, f"{count} more acknowledged appends")


@pytest.fixture
def dynamic_cluster(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster.create(tmp_path / "cluster", voters=3, settings=FAST_SETTINGS,
                             dynamic=True)
    try:
        cluster.start()
        cluster.wait_for_leader(20)
        yield cluster
    finally:
        cluster.kill_all_started()


def quorum(cluster: Cluster, *args: str) -> Any:
    result = kraft("quorum", *args, "--cluster", str(cluster.directory), "--json", timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def status(cluster: Cluster) -> dict[str, Any]:
    view: dict[str, Any] = quorum(cluster, "describe", "--status")
    return view


def voter_ids(cluster: Cluster) -> list[int]:
    return sorted(v["id"] for v in status(cluster)["CurrentVoters"])


def feature_level(cluster: Cluster) -> int:
    """`kraft features describe`'s finalized kraft.version."""
    described = kraft("features", "--cluster", str(cluster.directory), "describe", "--json")
    assert described.returncode == 0, described.stderr
    (row,) = [r for r in json.loads(described.stdout) if r["feature"] == "kraft.version"]
    level: int = row["finalized_version_level"]
    return level


def directory_of(cluster: Cluster, node_id: int) -> str:
    meta = read_meta_properties(cluster.node(node_id).data_dir)
    assert meta is not None
    assert meta.directory_id is not None
    return meta.directory_id


def check_logs(cluster: Cluster, voters: list[int], acked: list[tuple[int, int]]) -> None:
    """Every acknowledged append in every voter's log at its offset and epoch, and the
    voters' logs the same records up to the last one."""
    last = max(offset for _, offset in acked)

    def records(node_id: int) -> list[tuple[Any, ...]]:
        return [(r["offset"], r["epoch"], json.dumps(r["record"], sort_keys=True))
                for r in dump_log(cluster, node_id) if r["offset"] <= last]
    logs = {n: wait_until(lambda n=n: (r := records(n)) and r[-1][0] == last and r, 20,
                          f"node {n} to hold offset {last}") for n in voters}
    for node_id, log in logs.items():
        epochs = {offset: epoch for offset, epoch, _ in log}
        lost = [(e, o) for e, o in acked if epochs.get(o) != e]
        assert not lost, f"node {node_id} lacks acknowledged appends {lost[:5]}"
    reference = logs[voters[0]]
    start = max(log[0][0] for log in logs.values())  # below: a snapshot may stand in
    for node_id, log in logs.items():
        assert [r for r in log if r[0] >= start] == [r for r in reference if r[0] >= start], \
            f"node {node_id}'s log differs from node {voters[0]}'s"


def test_grow_3_to_5_then_shrink_to_3_when_appends_run(dynamic_cluster: Cluster) -> None:
    cluster = dynamic_cluster
    with Workload(cluster) as workload:
        workload.wait_for_more(20)
        for bootstrap in (False, True):  # grow: controllers formatted without initial
            # controllers, the second knowing only controller.quorum.bootstrap.servers
            node = cluster.add_controller_node(bootstrap_servers=bootstrap)
            cluster.start_node(node.id)
            added = quorum(cluster, "add-controller", "--node", str(node.id))
            assert added["added"] == node.id
            assert added["directory_id"] == directory_of(cluster, node.id)
            workload.wait_for_more(20)
        assert voter_ids(cluster) == [1, 2, 3, 4, 5]
        view = status(cluster)
        assert all(v["directoryId"] == directory_of(cluster, v["id"])
                   and v["endpoints"] == [f"CONTROLLER://{cluster.node(v['id']).controller_address}"]
                   for v in view["CurrentVoters"])
        leader = view["LeaderId"]
        removed = [leader, next(n for n in (1, 2, 3) if n != leader)]  # the leader too
        for node_id in removed:
            quorum(cluster, "remove-controller", "--node", str(node_id),
                   "--directory-id", directory_of(cluster, node_id))
            workload.wait_for_more(20)
        remaining = sorted({1, 2, 3, 4, 5} - set(removed))
        assert voter_ids(cluster) == remaining
        assert status(cluster)["LeaderId"] in remaining
        workload.wait_for_more(20)
    for node_id in removed:
        cluster.stop_node(node_id)
    check_logs(cluster, remaining, workload.acked)


def test_voter_replaced_when_its_data_directory_was_deleted(dynamic_cluster: Cluster) -> None:
    cluster = dynamic_cluster
    with Workload(cluster) as workload:
        workload.wait_for_more(20)
        leader = status(cluster)["LeaderId"]
        victim = next(n for n in (1, 2, 3) if n != leader)
        old_directory = directory_of(cluster, victim)
        cluster.stop_node(victim)
        data_dir = cluster.node(victim).data_dir
        shutil.rmtree(data_dir)
        format_log_dir(data_dir, cluster_id=cluster.cluster_id, node_id=victim)
        new_directory = directory_of(cluster, victim)
        assert new_directory != old_directory
        cluster.start_node(victim)
        # the new disk is not the voter (its old key still is): it fetches as an observer
        wait_until(lambda: {"id": victim, "directoryId": new_directory}
                   in status(cluster)["CurrentObservers"], 30,
                   f"node {victim}'s new disk among the leader's observers")
        workload.wait_for_more(20)
        quorum(cluster, "remove-controller", "--node", str(victim),
               "--directory-id", old_directory)
        workload.wait_for_more(20)
        quorum(cluster, "add-controller", "--node", str(victim))
        workload.wait_for_more(20)
        voters = {v["id"]: v["directoryId"] for v in status(cluster)["CurrentVoters"]}
        assert voters[victim] == new_directory
        assert sorted(voters) == [1, 2, 3]
    check_logs(cluster, [1, 2, 3], workload.acked)


def test_static_quorum_upgraded_then_grown_when_kraft_version_raised(tmp_path: Path) -> None:
    """kraft features upgrade --feature kraft.version=1 turns today's static quorum into
    a dynamic one, with no acknowledged append lost; a controller is then added."""
    cluster = Cluster.create(tmp_path / "static", voters=3, settings=FAST_SETTINGS)
    try:
        cluster.start()
        cluster.wait_for_leader(20)
        with Workload(cluster) as workload:
            workload.wait_for_more(20)
            assert feature_level(cluster) == 0
            assert status(cluster)["KRaftVersion"] == 0
            result = kraft("features", "--cluster", str(cluster.directory), "upgrade",
                           "--feature", "kraft.version=1", "--json")
            assert result.returncode == 0, result.stderr
            assert feature_level(cluster) == 1
            assert status(cluster)["KRaftVersion"] == 1
            workload.wait_for_more(20)
            node = cluster.add_controller_node()
            cluster.start_node(node.id)
            quorum(cluster, "add-controller", "--node", str(node.id))
            workload.wait_for_more(20)
            assert voter_ids(cluster) == [1, 2, 3, 4]
        check_logs(cluster, [1, 2, 3, 4], workload.acked)
    finally:
        cluster.kill_all_started()


def move_to_new_port(cluster: Cluster, node_id: int) -> str:
    """Stop the node, give its controller listener a free port (its node.toml and
    cluster.json), start it again; its new address."""
    cluster.stop_node(node_id)
    info = cluster.node(node_id)
    address = f"127.0.0.1:{free_ports(1, avoid=cluster.own_ports())[0]}"
    settings = tomllib.loads(Path(info.config).read_text())
    settings["listeners"] = f"CONTROLLER://{address}"
    Path(info.config).write_text(to_toml(settings))
    info.controller_address = address
    cluster.save()
    cluster.start_node(node_id)
    return address


def dialled(cluster: Cluster, node_id: int, peer_id: int, address: str) -> bool:
    """Whether `node_id`'s transport connected to voter `peer_id` at `address`."""
    return any(e.get("msg") == "connected" and e.get("dst") == peer_id
               and e.get("peer") == address for e in log_events(cluster, node_id))


def test_voter_restarted_on_a_new_port_has_its_endpoint_updated(
        dynamic_cluster: Cluster) -> None:
    """Nothing but the restart: the voter sends UpdateRaftVoter itself, the leader's
    DescribeQuorum names the new endpoint, the other voters dial it there, and the
    quorum commits, also after the leader is stopped (the moved voter's vote counts)."""
    cluster = dynamic_cluster
    with Workload(cluster) as workload:
        workload.wait_for_more(20)
        leader = status(cluster)["LeaderId"]
        moved = next(n for n in (1, 2, 3) if n != leader)
        old = cluster.node(moved).controller_address
        new = move_to_new_port(cluster, moved)
        entry = {"id": moved, "directoryId": directory_of(cluster, moved),
                 "endpoints": [f"CONTROLLER://{new}"]}

        def voters_with_new_entry() -> list[dict[str, Any]] | None:
            voters: list[dict[str, Any]] = status(cluster)["CurrentVoters"]
            return voters if entry in voters else None
        voters = wait_until(voters_with_new_entry, 30,
                            f"node {moved}'s new endpoint {new} in the voter set")
        assert {v["id"]: v["endpoints"] for v in voters} == {
            n: [f"CONTROLLER://{cluster.node(n).controller_address}"] for n in (1, 2, 3)}, \
            f"only node {moved} moved (from {old})"
        text = kraft("quorum", "describe", "--cluster", str(cluster.directory), "--status")
        assert text.returncode == 0, text.stderr
        assert f"CONTROLLER://{new}" in text.stdout
        assert "KRaftVersion:         1\n" in text.stdout
        workload.wait_for_more(20)
        for other in (n for n in (1, 2, 3) if n != moved):
            wait_until(lambda other=other: dialled(cluster, other, moved, new), 20,
                       f"node {other} to connect to node {moved} at {new}")
        cluster.stop_node(leader)
        workload.wait_for_more(20)
    remaining = [n for n in (1, 2, 3) if n != leader]
    check_logs(cluster, remaining, workload.acked)
