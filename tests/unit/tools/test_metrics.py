"""tools.metrics without processes: the windowed avg/max, what one Ready turn moves (a
fake node), the metrics.listener key. The real endpoint is scraped over HTTP in
tests/integration/test_metrics.py."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import generate_latest

from raft.types import Batch, Ready
from tools.config import ConfigError, from_mapping, parse_metrics_listener
from tools.metrics import NodeMetrics, WindowedStat


def test_windowed_stat_forgets_samples_older_than_the_window() -> None:
    stat = WindowedStat(window_s=10)
    assert math.isnan(stat.avg(0))
    assert math.isnan(stat.max(0))
    stat.record(4, at=0)
    stat.record(8, at=5)
    assert (stat.avg(6), stat.max(6)) == (6, 8)
    assert (stat.avg(12), stat.max(12)) == (8, 8)
    assert math.isnan(stat.avg(16))


@dataclass
class FakeNode:
    node_id: int = 1
    cluster_id: str = "c"
    voters: dict[int, Any] = field(default_factory=lambda: {1: ("h", 1), 2: ("h", 2)})
    role: str = "unattached"
    leader_id: int | None = None
    epoch: int = 0
    high_watermark: int = 0
    log_end_offset: int = 0
    log_end_epoch: int = 0
    leader_high_watermark: int | None = None
    observers: list[Any] = field(default_factory=list)

    def add_ready_observer(self, callback: Any) -> None:
        self.observers.append(callback)


def sample(metrics: NodeMetrics, name: str) -> float:
    value = metrics.registry.get_sample_value(name)
    assert value is not None, name
    return value


def test_one_leadership_times_the_election_counts_appends_and_times_commits() -> None:
    node = FakeNode()
    metrics = NodeMetrics()
    metrics.observe_node(node, is_voter=True, roles="controller")  # type: ignore[arg-type]
    observe = node.observers[0]
    node.role = "prospective"
    observe(Ready(), 1000)
    assert sample(metrics, "kafka_raft_current_leader") == -1
    node.role, node.leader_id, node.epoch = "leader", 1, 3
    batch = Batch(base_offset=0, epoch=3, records=(b"a", b"b", b"c"))
    node.log_end_offset, node.log_end_epoch = 3, 3
    observe(Ready(entries=(batch,)), 1250)
    assert sample(metrics, "kafka_raft_election_latency_max") == 250
    assert sample(metrics, "kafka_raft_append_records_total") == 3
    assert sample(metrics, "kafka_raft_fetch_records_total") == 0
    assert metrics.registry.get_sample_value(
        "kafka_raft_current_state", {"kafka_raft_current_state": "leader"}) == 1
    node.high_watermark = 2
    observe(Ready(high_watermark=2), 1260)  # the batch's last record is not committed yet
    assert math.isnan(sample(metrics, "kafka_raft_commit_latency_max"))
    node.high_watermark = 3
    observe(Ready(high_watermark=3), 1290)
    assert sample(metrics, "kafka_raft_commit_latency_avg") == 40
    assert [sample(metrics, f"kafka_raft_{name}") for name in (
        "current_epoch", "high_watermark", "log_end_offset")] == [3, 3, 3]
    text = generate_latest(metrics.registry).decode()
    assert 'kraft_node_info{cluster_id="c",node_id="1",roles="controller"' in text


def test_a_following_non_voter_is_an_observer_and_counts_fetched_records() -> None:
    node = FakeNode(node_id=5, role="follower", leader_id=1, epoch=2)
    metrics = NodeMetrics()
    metrics.observe_node(node, is_voter=False, roles="broker")  # type: ignore[arg-type]
    node.observers[0](Ready(entries=(Batch(base_offset=0, epoch=2, records=(b"x",)),)), 10)
    assert metrics.registry.get_sample_value(
        "kafka_raft_current_state", {"kafka_raft_current_state": "observer"}) == 1
    assert sample(metrics, "kafka_raft_fetch_records_total") == 1
    assert sample(metrics, "kafka_raft_append_records_total") == 0
    assert math.isnan(sample(metrics, "kafka_raft_election_latency_avg"))


@pytest.mark.parametrize("text", ["http://127.0.0.1:9404", "http://localhost:0/",
                                  "http://[::1]:9404/metrics"])
def test_metrics_listener_accepts_http_host_port(text: str) -> None:
    host, port = parse_metrics_listener(text)
    assert host
    assert 0 <= port <= 65535


@pytest.mark.parametrize("text", ["127.0.0.1:9404", "https://h:1", "http://h", "http://h:x",
                                  "http://h:1/other"])
def test_metrics_listener_refuses_anything_else(text: str) -> None:
    with pytest.raises(ConfigError, match="metrics.listener"):
        from_mapping({"node.id": 1, "process.roles": "controller",
                      "controller.quorum.voters": "1@127.0.0.1:9093",
                      "listeners": "CONTROLLER://127.0.0.1:9093", "log.dirs": "/tmp/x",
                      "metrics.listener": text})
