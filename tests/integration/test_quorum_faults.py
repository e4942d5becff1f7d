"""Multi-process quorum under faults: SIGKILL, SIGSTOP/SIGCONT, SIGTERM, full restart."""

from __future__ import annotations

import signal
import socket
from typing import Any

import pytest

from raft.common.framing import FrameDecoder, encode_frame
from raft.storage import read_quorum_state
from tests.support.quorum_support import epochs_by_offset, log_events, wait_all_hold, wait_until
from tools.cluster import Cluster, ClusterError
from tools.config import parse_address
from tools.quorum_client import request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def own_leader(cluster: Cluster, node_id: int) -> tuple[int, int]:
    body = request(cluster.node(node_id).controller_address or "", "DescribeQuorumRequest",
                   {}, timeout_s=2)
    partition = body["topics"][0]["partitions"][0]
    return partition["leader_id"], partition["leader_epoch"]


def test_new_leader_keeps_acknowledged_appends_when_leader_is_killed(
        make_cluster: Any) -> None:
    """Raft failover: SIGKILL of the leader gives a new leader in a higher epoch, and
    every acknowledged append (epoch, offset) is still in every log. (How long the
    failover takes is measured by `make bench`, bench/quorum_bench.py.)"""
    cluster = make_cluster(voters=3)
    before = cluster.wait_for_leader(5)
    acked = cluster.append(200, batch=20)["batches"]
    wait_all_hold(cluster, acked[-1][1])
    cluster.kill(before["leader_id"], signal.SIGKILL)
    after = cluster.wait_for_leader(5, above_epoch=before["leader_epoch"],
                                    exclude=[before["leader_id"]])
    assert after["leader_id"] != before["leader_id"]
    acked += cluster.append(50, batch=10, exclude=[before["leader_id"]])["batches"]
    cluster.start_node(before["leader_id"])  # the old leader rejoins and catches up
    last_offset = acked[-1][1]
    for node_id in cluster.voter_ids:
        epochs = wait_until(lambda n=node_id: (e := epochs_by_offset(cluster, n))
                            and last_offset in e and e, 10, f"node {node_id} to catch up")
        missing = [(epoch, offset) for epoch, offset in acked if epochs.get(offset) != epoch]
        assert missing == [], f"node {node_id} lost acknowledged appends {missing[:5]}"


def test_followers_ask_for_pre_votes_at_once_when_the_leader_is_killed(
        make_cluster: Any) -> None:
    """Crash detection: a SIGKILLed leader's connections close and its port refuses, so
    its followers ask for pre-votes (KIP-996) at once and elect a successor. The fetch
    timeout (60 s) is far beyond the bound the successor is awaited in (10 s), and a
    killed leader sends no EndQuorumEpoch: only the refused reconnect can have started
    the election, as the followers' logs say."""
    cluster = make_cluster(voters=3, settings={"controller.quorum.fetch.timeout.ms": 60_000})
    before = cluster.wait_for_leader(5)
    wait_all_hold(cluster, cluster.append(10, batch=5)["last_offset"])
    cluster.kill(before["leader_id"], signal.SIGKILL)
    after = cluster.wait_for_leader(10, above_epoch=before["leader_epoch"],
                                    exclude=[before["leader_id"]])
    assert after["leader_id"] != before["leader_id"]
    asked = [n for n in cluster.voter_ids if n != before["leader_id"] and any(
        e["msg"] == "leader unreachable, asking for pre-votes"
        for e in log_events(cluster, n))]
    assert asked, "no follower asked for pre-votes on the refused reconnect"
    assert cluster.append(5, exclude=[before["leader_id"]])["epoch"] == after["leader_epoch"]


def _send_append(address: str, cluster_id: str) -> socket.socket:
    sock = socket.create_connection(parse_address(address), timeout=10)
    sock.sendall(encode_frame({"api": "Append", "version": 0, "correlation_id": 1,
                               "cluster_id": cluster_id, "body": {"count": 5, "batch": 5}}))
    return sock


def _receive_reply(sock: socket.socket) -> dict[str, Any]:
    decoder = FrameDecoder()
    with sock:
        while True:
            data = sock.recv(65536)
            assert data, "the stale leader closed the connection without answering"
            frames = decoder.feed(data)
            if frames:
                body: dict[str, Any] = frames[0]["body"]
                return body


def test_stale_leader_steps_down_and_its_appends_never_commit_when_it_was_stopped(
        make_cluster: Any) -> None:
    """A zombie leader (SIGSTOP) is replaced; after SIGCONT it steps down, an append it
    takes in its stale epoch is not acknowledged, and no stale-epoch record ever commits
    (Raft §5.4: only the current leader's entries commit by counting)."""
    cluster = make_cluster(voters=3)
    old = cluster.wait_for_leader(5)
    zombie, stale_epoch = old["leader_id"], old["leader_epoch"]
    wait_all_hold(cluster, cluster.append(20, batch=5)["last_offset"])
    cluster.kill(zombie, signal.SIGSTOP)
    new = cluster.wait_for_leader(10, above_epoch=stale_epoch, exclude=[zombie])
    committed = cluster.append(30, batch=5, exclude=[zombie])
    pending = _send_append(cluster.node(zombie).controller_address or "", cluster.cluster_id)
    cluster.kill(zombie, signal.SIGCONT)
    reply = _receive_reply(pending)
    assert reply["error_code"] != 0, f"a stale leader acknowledged an append: {reply}"
    wait_until(lambda: own_leader(cluster, zombie)[1] > stale_epoch, 10,
               "the old leader to learn the new epoch")
    final = cluster.append(10, batch=5)
    last_offset = final["last_offset"]
    assert final["epoch"] > stale_epoch
    logs = {n: wait_until(lambda n=n: (e := epochs_by_offset(cluster, n))
                          and last_offset in e and e, 10, f"node {n} to catch up")
            for n in cluster.voter_ids}
    prefixes = [{o: e for o, e in log.items() if o <= last_offset} for log in logs.values()]
    assert prefixes[0] == prefixes[1] == prefixes[2]
    first_new = min(o for o, e in prefixes[0].items() if e == new["leader_epoch"])
    stale_after = [o for o, e in prefixes[0].items() if o >= first_new and e <= stale_epoch]
    assert stale_after == []
    assert committed["epoch"] == new["leader_epoch"]


def test_leader_resigns_and_exits_zero_when_sent_sigterm(make_cluster: Any) -> None:
    """`kraft node` on SIGTERM: a leader resigns with EndQuorumEpoch, then exits 0."""
    cluster = make_cluster(voters=3)
    old = cluster.wait_for_leader(5)
    wait_all_hold(cluster, cluster.append(1)["last_offset"])
    pid = cluster.node(old["leader_id"]).pid
    assert pid is not None
    cluster.kill(old["leader_id"], signal.SIGTERM)
    assert cluster.exit_codes.get(pid) == 0
    events = [e["msg"] for e in log_events(cluster, old["leader_id"])]
    assert "resigning before shutdown" in events
    assert events[-1] == "node stopped"
    new = cluster.wait_for_leader(5, above_epoch=old["leader_epoch"], exclude=[old["leader_id"]])
    assert new["leader_id"] != old["leader_id"]


def test_committed_records_survive_when_the_whole_cluster_is_killed_and_restarted(
        make_cluster: Any) -> None:
    """SIGKILL of every node loses nothing acknowledged: quorum-state and logs are intact,
    the same committed records come back, and a leader is elected again."""
    cluster = make_cluster(voters=3)
    reply = cluster.append(300, batch=30)
    last_offset, epoch = reply["last_offset"], reply["epoch"]
    before = {n: wait_until(lambda n=n: (e := epochs_by_offset(cluster, n)) and last_offset in e
                            and e, 10, f"node {n} to hold offset {last_offset}")
              for n in cluster.voter_ids}
    for node_id in cluster.voter_ids:
        cluster.kill(node_id, signal.SIGKILL)
    for node_id in cluster.voter_ids:
        state = read_quorum_state(cluster.node(node_id).data_dir)
        assert state is not None
        assert state.epoch >= epoch
    cluster.start()
    cluster.wait_for_leader(10, above_epoch=epoch)
    again = cluster.append(10, batch=10)
    assert again["last_offset"] > last_offset
    for node_id in cluster.voter_ids:
        after = wait_until(lambda n=node_id: (e := epochs_by_offset(cluster, n))
                           and again["last_offset"] in e and e, 10, "catch-up")
        assert {o: e for o, e in after.items() if o <= last_offset} == \
            {o: e for o, e in before[node_id].items() if o <= last_offset}


def test_kill_reports_an_error_when_node_is_not_running(make_cluster: Any) -> None:
    """`kraft quorum kill` of a stopped node fails clearly instead of signalling a pid."""
    cluster = make_cluster(voters=1)
    cluster.kill(1, signal.SIGKILL)
    with pytest.raises(ClusterError, match="not running"):
        cluster.kill(1, signal.SIGKILL)


def replica_progress(cluster: Cluster, leader_id: int, node_id: int,
                     exclude: list[int]) -> dict[str, Any]:
    """What the leader's DescribeQuorum says of voter `node_id`: its log end (the offset
    of its last Fetch) and when that Fetch arrived, in the leader's clock."""
    state = cluster.describe(exclude=exclude)
    assert state["leader_id"] == leader_id
    progress: dict[str, Any] = next(v for v in state["voters"] if v["replica_id"] == node_id)
    return progress


def test_leader_keeps_committing_and_follower_catches_up_when_a_follower_is_stopped(
        make_cluster: Any) -> None:
    """A stalled follower (SIGSTOP) never stalls the quorum: the leader and the other
    follower keep committing while the leader sees the stopped one fetch nothing (its log
    end and last fetch time stand still, the other's move); after SIGCONT the follower
    fetches again and catches up to the same log."""
    cluster = make_cluster(voters=3)
    leader = cluster.wait_for_leader(5)
    leader_id = leader["leader_id"]
    stalled, other = (n for n in cluster.voter_ids if n != leader_id)
    cluster.kill(stalled, signal.SIGSTOP)
    leader_end = replica_progress(cluster, leader_id, leader_id, [stalled])["log_end_offset"]
    reply = cluster.append(2000, batch=50, exclude=[stalled])
    assert reply["epoch"] == leader["leader_epoch"]
    seen = replica_progress(cluster, leader_id, stalled, [stalled])
    other_seen = replica_progress(cluster, leader_id, other, [stalled])
    more = cluster.append(100, batch=50, exclude=[stalled])
    last_offset = more["last_offset"]
    # The 2100 records committed without the stopped follower: the leader saw no Fetch
    # from it since before the first of them, and none while the last 100 committed.
    assert seen["log_end_offset"] <= leader_end
    assert replica_progress(cluster, leader_id, stalled, [stalled]) == seen
    other_later = replica_progress(cluster, leader_id, other, [stalled])
    assert other_later["log_end_offset"] > last_offset
    assert other_later["last_fetch_timestamp"] > other_seen["last_fetch_timestamp"]

    cluster.kill(stalled, signal.SIGCONT)
    resumed = wait_until(
        lambda: (p := replica_progress(cluster, leader_id, stalled, []))
        and p["log_end_offset"] > last_offset and p, 10,
        "the leader to see the stalled follower fetch past the appends")
    assert resumed["last_fetch_timestamp"] > seen["last_fetch_timestamp"]
    caught_up = wait_until(lambda: (e := epochs_by_offset(cluster, stalled))
                           and last_offset in e and e, 10, "the stalled follower to catch up")
    reference = epochs_by_offset(cluster, leader_id)
    assert {o: e for o, e in caught_up.items() if o <= last_offset} == \
        {o: e for o, e in reference.items() if o <= last_offset}


def test_voter_with_empty_log_helps_elect_when_the_leader_stops_before_it_caught_up(
        make_cluster: Any) -> None:
    """Liveness (topic-ID addressing vs votes): a voter that joins with an empty log, after
    the leader is already gone, still grants its (pre-)vote to the up-to-date survivor,
    although it does not know the metadata topic's ID yet."""
    cluster = make_cluster(voters=3, start=False)
    cluster.start_node(1)
    cluster.start_node(3)
    old = cluster.wait_for_leader(10)
    cluster.append(10, batch=5)
    cluster.kill(old["leader_id"], signal.SIGSTOP)
    cluster.start_node(2)
    new = cluster.wait_for_leader(5, above_epoch=old["leader_epoch"],
                                  exclude=[old["leader_id"]])
    assert new["leader_id"] != old["leader_id"]
