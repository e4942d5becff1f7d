"""Prometheus metrics (`metrics.listener`), scraped over HTTP from real node processes on
127.0.0.1: 3 voters and 1 broker, each with its own endpoint.

The values must move with the cluster: the leader and epoch every voter reports are
DescribeQuorum's, the high watermark and log end grow by the records appended, the
leader counts them as appended and a follower as fetched, commits and an election are
timed, a broker counts a Kafka request by its api name and reports no metadata lag once
caught up.
"""

from __future__ import annotations

import math
import signal
import socket
import struct
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.quorum_support import FAST_SETTINGS, wait_until
from tools.cluster import Cluster
from tools.ports import free_ports

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
VOTERS, BROKER = (1, 2, 3), 4


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        assert reply.status == 200
        text = reply.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def state_of(samples: Samples) -> str:
    states = [dict(labels)["kafka_raft_current_state"] for (name, labels), v in samples.items()
              if name == "kafka_raft_current_state" and v == 1]
    assert len(states) == 1, states
    return states[0]


def api_versions_request(port: int) -> None:
    """One raw ApiVersions v0 request (api key 18) to a broker's Kafka listener."""
    client_id = b"metrics-test"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        reply = sock.recv(size, socket.MSG_WAITALL)
    assert struct.unpack_from(">ih", reply) == (7, 0)  # correlation id, no error


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Cluster, dict[int, int]]]:
    cluster = Cluster.create(tmp_path / "cluster", voters=len(VOTERS), brokers=1,
                             settings=FAST_SETTINGS)
    # not one of the nodes' own ports, chosen above but not bound yet
    ports = dict(zip(sorted(cluster.nodes), free_ports(len(cluster.nodes), cluster.own_ports()),
                     strict=True))
    for node_id, port in ports.items():
        with open(cluster.node(node_id).config, "a") as config:
            config.write(f'"metrics.listener" = "http://127.0.0.1:{port}"\n')
    try:
        cluster.start()
        cluster.wait_for_leader(15)
        cluster.wait_for_brokers(30)
        yield cluster, ports
    finally:
        cluster.kill_all_started()


def test_metrics_follow_the_quorum_and_the_broker(
        cluster: tuple[Cluster, dict[int, int]]) -> None:
    cluster_, ports = cluster

    def consistent() -> tuple[dict[str, int], dict[int, Samples]] | None:
        quorum = cluster_.describe()
        scraped = {n: scrape(ports[n]) for n in ports}
        if all(value(scraped[n], "kafka_raft_current_leader") == quorum["leader_id"] and
               value(scraped[n], "kafka_raft_current_epoch") == quorum["leader_epoch"]
               for n in ports):
            return quorum, scraped
        return None

    quorum, scraped = wait_until(consistent, 15, "every node reporting DescribeQuorum's "
                                 "leader and epoch")
    leader = quorum["leader_id"]
    follower = next(v for v in VOTERS if v != leader)
    assert state_of(scraped[leader]) == "leader"
    assert {state_of(scraped[v]) for v in VOTERS if v != leader} == {"follower"}
    assert state_of(scraped[BROKER]) == "observer"
    info = [dict(labels) for (name, labels) in scraped[BROKER] if name == "kraft_node_info"]
    assert info == [{"node_id": str(BROKER), "roles": "broker",
                     "cluster_id": cluster_.cluster_id, "version": info[0]["version"]}]
    assert value(scraped[leader], "kafka_raft_number_unknown_voter_connections") == 0

    # appends: the high watermark and log end grow; the leader appended, a follower fetched
    before = scraped
    cluster_.append(40, batch=4)

    def grown() -> dict[int, Samples] | None:
        now = {n: scrape(ports[n]) for n in ports}
        hw0 = value(before[leader], "kafka_raft_high_watermark")
        if all(value(now[n], "kafka_raft_high_watermark") >= hw0 + 40 for n in ports):
            return now
        return None

    after = wait_until(grown, 15, "every node's high watermark to pass the 40 records")
    for node in ports:
        assert value(after[node], "kafka_raft_log_end_offset") >= \
            value(after[node], "kafka_raft_high_watermark")
    assert value(after[leader], "kafka_raft_append_records_total") >= \
        value(before[leader], "kafka_raft_append_records_total") + 40
    assert value(after[follower], "kafka_raft_fetch_records_total") >= \
        value(before[follower], "kafka_raft_fetch_records_total") + 40
    assert value(after[BROKER], "kafka_raft_fetch_records_total") >= 40
    latency = value(after[leader], "kafka_raft_commit_latency_avg")
    assert 0 <= latency <= value(after[leader], "kafka_raft_commit_latency_max") < 10_000
    assert math.isnan(value(after[follower], "kafka_raft_commit_latency_avg"))

    # the broker: caught up (no lag), and a Kafka request counted by its api name
    def caught_up() -> Samples | None:
        samples = scrape(ports[BROKER])
        applied = value(samples, "kafka_server_broker_metadata_metrics_last_applied_record_offset")
        lag = value(samples, "kraft_broker_metadata_lag_records")
        return samples if lag == 0 and applied + 1 >= value(
            after[leader], "kafka_raft_high_watermark") else None

    broker_before = wait_until(caught_up, 15, "the broker's image to catch up")
    key = ("kafka_network_requests_total", (("request", "ApiVersions"),))
    count_before = broker_before.get(key, 0.0)
    client_address = cluster_.node(BROKER).client_address
    assert client_address is not None
    kafka_port = int(client_address.rpartition(":")[2])
    for _ in range(3):
        api_versions_request(kafka_port)
    broker_after = scrape(ports[BROKER])
    assert broker_after[key] == count_before + 3
    assert value(broker_after, "kafka_network_request_total_time_seconds_count",
                 request="ApiVersions") == count_before + 3
    assert ("kafka_network_requests_total", ()) not in broker_after
    assert not any(name.startswith("kafka_network") for name, _ in after[leader])

    # an election: the leader dies, the next one times its campaign
    cluster_.kill(leader, signal.SIGKILL)
    new_leader = cluster_.wait_for_leader(15, above_epoch=quorum["leader_epoch"],
                                          exclude=[leader])["leader_id"]

    def elected() -> Samples | None:
        samples = scrape(ports[new_leader])
        return samples if state_of(samples) == "leader" else None

    samples = wait_until(elected, 10, "the new leader's metrics")
    assert value(samples, "kafka_raft_current_epoch") > quorum["leader_epoch"]
    assert 0 < value(samples, "kafka_raft_election_latency_max") < 10_000
