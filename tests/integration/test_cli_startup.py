"""Multi-process: `kraft quorum describe` and `kraft topics --describe` against a live
cluster of 3 voters and 1 broker answer in full without loading the Kafka codec (kio),
Trio or cryptography: they speak the controllers' msgpack protocol, and those imports
were most of each verb's start (bench/cli_bench.py times them)."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import pytest

from metadata.admin import DescribeTopicsRequest, DescribeTopicsResponse
from tests.support.cli_imports import run_verb
from tests.support.quorum_support import kraft, wait_until
from tools import admin_client

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def test_describe_verbs_answer_from_a_live_cluster_without_the_heavy_imports(
        make_cluster: Any) -> None:
    cluster = make_cluster(voters=3, brokers=1)
    cluster.wait_for_brokers(20)
    where = ["--cluster", str(cluster.directory)]
    created = kraft("topics", *where, "--create", "--topic", "startup", "--partitions", "2",
                    "--replication-factor", "1", "--json")
    assert created.returncode == 0, created.stderr
    topic_id = json.loads(created.stdout)["topic_id"]

    status = run_verb("quorum", "describe", *where, "--status", "--json")
    assert status.exit_code == 0, status.stderr
    view = json.loads(status.stdout)
    assert view["ClusterId"] == cluster.cluster_id
    assert view["LeaderId"] in (1, 2, 3)
    assert sorted(v["id"] for v in view["CurrentVoters"]) == [1, 2, 3]
    assert status.loaded == []

    described = run_verb("topics", *where, "--describe", "--json")
    assert described.exit_code == 0, described.stderr
    (topic,) = json.loads(described.stdout)["topics"]
    assert (topic["name"], topic["topic_id"], topic["partition_count"]) == \
        ("startup", topic_id, 2)
    assert described.loaded == []


def test_a_followers_leader_hint_is_followed_without_the_backoff(
        make_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`kraft topics` asks the controllers in cluster.json's order: when the first is a
    follower, its NOT_CONTROLLER names the leader, which is asked at once (the retry
    backoff cost such a verb 100 ms, two thirds of its start)."""
    cluster = make_cluster(voters=3)
    leader = cluster.wait_for_leader(10)["leader_id"]
    follower = next(n for n in cluster.voter_ids if n != leader)
    # a follower names the leader once it has fetched from it in this epoch (on a loaded
    # host it may not have yet when the leader first answers)
    wait_until(lambda: any(v["replica_id"] == follower and v["last_fetch_timestamp"] >= 0
                           for v in cluster.describe()["voters"]), 10,
               f"voter {follower} fetching from leader {leader}")
    sleeps: list[float] = []
    monkeypatch.setattr(admin_client, "time", SimpleNamespace(monotonic=time.monotonic,
                                                              sleep=sleeps.append))
    client = admin_client.AdminClient([cluster.node(follower).controller_address or ""],
                                      cluster_id=cluster.cluster_id, timeout_s=10)
    response = client.call(DescribeTopicsRequest())
    assert isinstance(response, DescribeTopicsResponse)
    assert response.error_code == 0
    assert client.preferred == cluster.node(leader).controller_address
    assert sleeps == []
