"""Multi-process quorum on 127.0.0.1: election, replication, the CLI, bad peers."""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

import pytest

from tests.support.quorum_support import (
    FAST_SETTINGS,
    dump_log,
    kraft,
    log_events,
    wait_all_hold,
    wait_until,
)
from tools.cluster import Cluster, ClusterError
from tools.quorum_client import request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def own_view(cluster: Cluster, node_id: int) -> dict[str, Any]:
    """DescribeQuorum answered by one node itself (no redirect)."""
    body = request(cluster.node(node_id).controller_address or "", "DescribeQuorumRequest",
                   {}, timeout_s=2)
    assert isinstance(body, dict)
    return body


def leader_views(cluster: Cluster, node_ids: tuple[int, ...]) -> list[tuple[int, int]]:
    """(leader, epoch) as each node sees it; [] while one is not listening yet (a
    majority elects a leader before the last node's listener is up)."""
    try:
        return [leader_of(own_view(cluster, n)) for n in node_ids]
    except ClusterError:
        return []


def leader_of(body: dict[str, Any]) -> tuple[int, int]:
    partition = body["topics"][0]["partitions"][0]
    return partition["leader_id"], partition["leader_epoch"]


def records_up_to(cluster: Cluster, node_id: int, last_offset: int) -> list[tuple[Any, ...]]:
    return [(r["offset"], r["epoch"], r["type"], json.dumps(r["record"], sort_keys=True))
            for r in dump_log(cluster, node_id) if r["offset"] <= last_offset]


def test_appends_commit_on_all_three_when_three_voters_elect_one_leader(
        make_cluster: Any) -> None:
    """KIP-595: one leader per epoch, known to every voter; committed records are the same
    bytes on every voter (compared with `kraft dump-log --json`)."""
    cluster = make_cluster(voters=3)
    views = wait_until(lambda: (v := leader_views(cluster, (1, 2, 3)))
                       and len(set(v)) == 1 and v[0][0] > 0 and v, 10, "agreement on a leader")
    leader, epoch = views[0]
    assert leader in (1, 2, 3)
    assert epoch >= 1
    assert own_view(cluster, leader)["is_leader"]
    reply = cluster.append(300, batch=10)
    assert reply["count"] == 300
    assert len(reply["batches"]) == 30
    last = reply["last_offset"]
    logs = {n: wait_until(lambda n=n: (r := records_up_to(cluster, n, last))
                          and r[-1][0] == last and r, 10, f"node {n} to hold offset {last}")
            for n in (1, 2, 3)}
    assert logs[1] == logs[2] == logs[3]
    types = [record[2] for record in logs[1]]
    assert types[0] == "LeaderChange"
    assert "MetadataTopic" in types
    assert types.count("NoOp") == 300


def test_cli_describes_status_and_replication_when_asked_any_voter(
        make_cluster: Any) -> None:
    """kafka-metadata-quorum.sh columns; a follower redirects to the leader."""
    cluster = make_cluster(voters=3, brokers=1)
    cluster.append(20, batch=5)
    follower = next(n for n in cluster.voter_ids if not own_view(cluster, n)["is_leader"])
    address = cluster.node(follower).controller_address or ""
    status = kraft("quorum", "describe", "--bootstrap-controller", address, "--status",
                   "--json")
    assert status.returncode == 0, status.stderr
    view = json.loads(status.stdout)
    assert set(view) == {"ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark",
                         "MaxFollowerLag", "MaxFollowerLagTimeMs", "KRaftVersion",
                         "CurrentVoters", "CurrentObservers"}
    assert view["KRaftVersion"] == 0  # a static quorum
    assert view["ClusterId"] == cluster.cluster_id
    assert view["LeaderId"] != follower
    assert view["HighWatermark"] >= 22
    # kafka-metadata-quorum.sh 3.9: each voter with its endpoints, each observer by id
    assert sorted(v["id"] for v in view["CurrentVoters"]) == [1, 2, 3]
    assert next(v for v in view["CurrentVoters"] if v["id"] == follower)["endpoints"] == \
        [f"CONTROLLER://{address}"]
    # every voter's, the one neither asked nor leading too: as --cluster shows them
    by_cluster = kraft("quorum", "describe", "--cluster", str(cluster.directory), "--status",
                       "--json")
    assert view["CurrentVoters"] == json.loads(by_cluster.stdout)["CurrentVoters"]
    assert all(v["endpoints"] for v in view["CurrentVoters"]), view["CurrentVoters"]
    wait_until(lambda: json.loads(kraft("quorum", "describe", "--cluster",
                                        str(cluster.directory), "--status", "--json").stdout)
               ["CurrentObservers"] == [{"id": 4}], 10, "the broker to fetch as an observer")
    replication = kraft("quorum", "describe", "--cluster", str(cluster.directory),
                        "--replication")
    assert replication.returncode == 0, replication.stderr
    lines = replication.stdout.splitlines()
    assert lines[0].split() == ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                                "LastCaughtUpTimestamp", "Status"]
    statuses = [line.split()[-1] for line in lines[1:]]
    assert statuses == ["Leader", "Follower", "Follower", "Observer"]  # the leader first


def test_second_start_says_running_when_cluster_is_already_up(
        make_cluster: Any) -> None:
    """The launcher never starts twins; `kraft quorum stop` then stops every node."""
    cluster = make_cluster(voters=1)
    again = kraft("quorum", "start", "--cluster", str(cluster.directory))
    assert again.returncode == 1
    assert "already running" in again.stderr
    stopped = kraft("quorum", "stop", "--cluster", str(cluster.directory), "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["stopped"] == [1]
    assert Cluster.load(cluster.directory).running() == []


def _expect_closed(sock: socket.socket) -> None:
    sock.settimeout(5)
    try:
        assert sock.recv(100) == b""
    except ConnectionResetError:
        pass


def test_quorum_keeps_committing_when_a_stranger_sends_bad_frames(
        make_cluster: Any) -> None:
    """DESIGN wire format: garbage, a truncated frame and an oversized frame each close
    that connection with a logged reason; the quorum keeps committing."""
    cluster = make_cluster(voters=3)
    leader = cluster.wait_for_leader(5)["leader_id"]
    host, port = (cluster.node(leader).controller_address or "").split(":")
    with socket.create_connection((host, int(port))) as garbage:
        garbage.sendall(struct.pack(">I", 16) + b"\xc1" * 16)
        _expect_closed(garbage)
    with socket.create_connection((host, int(port))) as truncated:
        truncated.sendall(struct.pack(">I", 500) + b"\x85\xa3api")
        truncated.shutdown(socket.SHUT_WR)
        _expect_closed(truncated)
    with socket.create_connection((host, int(port))) as oversized:
        oversized.sendall(struct.pack(">I", 64 << 20) + b"\x00" * 64)
        _expect_closed(oversized)
    reply = cluster.append(50, batch=5)
    assert reply["count"] == 50
    closes = wait_until(lambda: [e for e in log_events(cluster, leader)
                                 if e.get("msg") == "closed connection"], 5, "close logs")
    reasons = " | ".join(e["reason"] for e in closes)
    assert "undecodable" in reasons
    assert "middle of a frame" in reasons
    assert "exceeds" in reasons
    assert all(e["peer"].startswith("127.0.0.1:") for e in closes)


def test_cli_drives_a_local_cluster_when_used_verb_by_verb(cli_cluster_dir: Any) -> None:
    """`kraft quorum start|append|kill|restart|stop` as a user runs them, with --json."""
    directory = str(cli_cluster_dir)
    settings = [arg for key, value in FAST_SETTINGS.items()
                for arg in ("--set", f"{key}={value}")]
    started = kraft("quorum", "start", "--cluster", directory, "--voters", "3", *settings,
                    "--json")
    assert started.returncode == 0, started.stderr
    leader = json.loads(started.stdout)["leader_id"]
    layout = json.loads((cli_cluster_dir / "cluster.json").read_text())
    assert [n["id"] for n in layout["nodes"]] == [1, 2, 3]
    assert all((cli_cluster_dir / f"node-{n}" / "node.pid").exists() for n in (1, 2, 3))
    appended = kraft("quorum", "append", "--cluster", directory, "--count", "40", "--batch",
                     "8", "--json")
    assert appended.returncode == 0, appended.stderr
    assert json.loads(appended.stdout)["count"] == 40
    wait_all_hold(Cluster.load(directory), json.loads(appended.stdout)["last_offset"])
    killed = kraft("quorum", "kill", "--cluster", directory, "--node", str(leader))
    assert killed.returncode == 0, killed.stderr
    again = kraft("quorum", "append", "--cluster", directory, "--count", "5", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["epoch"] > json.loads(appended.stdout)["epoch"]
    restarted = kraft("quorum", "restart", "--cluster", directory, "--node", str(leader))
    assert restarted.returncode == 0, restarted.stderr
    assert Cluster.load(directory).running() == [1, 2, 3]
    bad = kraft("quorum", "kill", "--cluster", directory, "--node", "9")
    assert bad.returncode == 1
    assert "no node 9" in bad.stderr
    stopped = kraft("quorum", "stop", "--cluster", directory)
    assert stopped.returncode == 0, stopped.stderr
    assert Cluster.load(directory).running() == []
