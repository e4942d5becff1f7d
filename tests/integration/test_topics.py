"""Multi-process: `kraft topics` against a local cluster of 3 voters and 3 brokers on
127.0.0.1; the brokers register and heartbeat, the controller runs on the raft leader."""

from __future__ import annotations

import json
import re
import signal
from typing import Any

import pytest

from tests.support.quorum_support import dump_log, kraft, wait_until
from tools.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BROKER_SETTINGS = {"broker.heartbeat.interval.ms": 200, "broker.session.timeout.ms": 9000}


def start(make_cluster: Any) -> Cluster:
    cluster: Cluster = make_cluster(voters=3, brokers=3, settings=BROKER_SETTINGS)
    leader = cluster.wait_for_leader(10)["leader_id"]
    wait_until(lambda: sum(r["type"] == "UnfenceBroker" for r in dump_log(cluster, leader)) >= 3,
               20, "three brokers to register and be unfenced")
    return cluster


def topics(cluster: Cluster, *args: str) -> Any:
    return kraft("topics", "--cluster", str(cluster.directory), *args, timeout=60)


def ok_json(cluster: Cluster, *args: str) -> Any:
    result = topics(cluster, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_topic_is_described_by_name_and_id_and_recreated_with_a_new_id(
        make_cluster: Any) -> None:
    """KIP-516 end to end: create, describe by name and by ID (kafka-topics.sh format),
    delete by ID, recreate the name: a new ID, and the old ID is UNKNOWN_TOPIC_ID (100)."""
    cluster = start(make_cluster)
    created = ok_json(cluster, "--create", "--topic", "orders", "--partitions", "3",
                      "--replication-factor", "2")
    old_id = created["topic_id"]
    assert (created["partitions"], created["replication_factor"]) == (3, 2)

    text = topics(cluster, "--describe", "--topic", "orders")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == (f"Topic: orders\tTopicId: {old_id}\tPartitionCount: 3\t"
                        "ReplicationFactor: 2\tInitialPartitionCount: 3\t"
                        "UndeletedPartitionCount: 3")
    assert len(lines) == 4
    for index, line in enumerate(lines[1:]):
        assert re.fullmatch(rf"\tTopic: orders\tPartition: {index}\tLeader: [456]\t"
                            r"Replicas: [456],[456]\tIsr: [456],[456]", line), line

    by_id = ok_json(cluster, "--describe", "--topic-id", old_id)["topics"][0]
    assert (by_id["name"], by_id["topic_id"], by_id["partition_count"]) == ("orders", old_id, 3)

    deleted = ok_json(cluster, "--delete", "--topic-id", old_id)
    assert deleted == {"name": "orders", "topic_id": old_id}
    new_id = ok_json(cluster, "--create", "--topic", "orders", "--partitions", "1",
                     "--replication-factor", "3")["topic_id"]
    assert new_id != old_id

    stale = topics(cluster, "--describe", "--topic-id", old_id)
    assert stale.returncode == 1
    assert "UNKNOWN_TOPIC_ID (100)" in stale.stderr
    listed = ok_json(cluster, "--list")["topics"]
    assert listed == [{"name": "orders", "topic_id": new_id}]


REFUSALS = [
    (("--create", "--topic", "dup"), "TOPIC_ALREADY_EXISTS (36)"),
    (("--create", "--topic", "x", "--partitions", "0"), "INVALID_PARTITIONS (37)"),
    (("--create", "--topic", "x", "--replication-factor", "4"), "INVALID_REPLICATION_FACTOR (38)"),
    (("--create", "--topic", ".."), "INVALID_TOPIC_EXCEPTION (17)"),
    (("--delete", "--topic", "nope"), "UNKNOWN_TOPIC_OR_PARTITION (3)"),
    (("--delete", "--topic-id", "AAAAAAAAAAAAAAAAAAAAAg"), "UNKNOWN_TOPIC_ID (100)"),
    (("--describe", "--topic", "nope"), "UNKNOWN_TOPIC_OR_PARTITION (3)"),
    (("--alter", "--topic", "dup", "--partitions", "1"), "INVALID_PARTITIONS (37)"),
    (("--alter", "--topic", "dup", "--new-name", "taken"), "TOPIC_ALREADY_EXISTS (36)"),
    (("--alter", "--topic", "dup", "--new-name", "a/b"), "INVALID_TOPIC_EXCEPTION (17)"),
]


def test_cli_exits_1_with_the_kafka_error_and_code_when_the_controller_refuses(
        make_cluster: Any) -> None:
    """Every refusal is one clear line on stderr naming the Kafka error and its code, exit 1;
    nothing is changed by a refused request."""
    cluster = start(make_cluster)
    ok_json(cluster, "--create", "--topic", "dup", "--partitions", "2")
    ok_json(cluster, "--create", "--topic", "taken")
    before = ok_json(cluster, "--describe")
    for args, error in REFUSALS:
        result = topics(cluster, *args)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert error in lines[-1], (args, result.stderr)
    assert ok_json(cluster, "--describe") == before
    renamed = ok_json(cluster, "--alter", "--topic", "dup", "--new-name", "dup2")
    assert renamed["topic_id"] == before["topics"][0]["topic_id"]
    grown = ok_json(cluster, "--alter", "--topic-id", renamed["topic_id"], "--partitions", "4")
    assert len(grown["new_assignment"]) == 2
    # a shrink needs ordered delivery, asked for at creation (KIP-253)
    ok_json(cluster, "--create", "--topic", "ordered", "--partitions", "1", "--ordered")
    ok_json(cluster, "--alter", "--topic", "ordered", "--partitions", "3")
    ok_json(cluster, "--alter", "--topic", "ordered", "--partitions", "2")

    def shrunk() -> bool:  # partition 2, marked and empty, is removed soon after
        (topic,) = ok_json(cluster, "--describe", "--topic", "ordered")["topics"]
        return (topic["undeleted_partition_count"], len(topic["partitions"])) == (2, 2)
    wait_until(shrunk, 30, "the ordered topic shrunk to 2 partitions")


@pytest.mark.parametrize(("args", "error"), [
    (("--alter", "--topic", "t"), "exactly one of --partitions"),
    (("--alter", "--topic", "t", "--partitions", "2", "--new-name", "u"), "exactly one of"),
    (("--delete",), "need --topic NAME or --topic-id ID"),
    (("--describe", "--topic-id", "not-an-id"), "invalid Uuid"),
    (("--create",), "--create needs --topic"),
    (("--create", "--topic", "a", "--topic-id", "AAAAAAAAAAAAAAAAAAAAAg"), "not allowed with"),
    (("--list", "--topic", "a"), "--list takes no"),
    (("--describe", "--create"), "not allowed with"),
    (("--alter", "--topic", "t", "--partitions", "2", "--ordered"), "--ordered goes with --create"),
    (("--describe", "--config", "retention.ms=1"), "--config goes with --create"),
    (("--create", "--topic", "a", "--config", "retention.ms"), "expected KEY=VALUE"),
])
def test_cli_exits_2_when_the_usage_is_bad(args: tuple[str, ...], error: str) -> None:
    """Bad usage exits 2 with a clear message, before any request is sent."""
    result = kraft("topics", "--bootstrap-controller", "127.0.0.1:9", *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert error in result.stderr


def test_acknowledged_creates_and_deletes_hold_when_the_controller_is_killed_between_requests(
        make_cluster: Any) -> None:
    """Writes reply only after they commit, so each acknowledged create and delete survives
    the SIGKILL of the controller that acknowledged it; the next one follows the new leader."""
    cluster = start(make_cluster)
    expected: dict[str, str] = {}
    for round_ in range(3):
        name = f"t{round_}"
        expected[name] = ok_json(cluster, "--create", "--topic", name, "--partitions", "2",
                                 "--replication-factor", "2")["topic_id"]
        if round_ == 1:
            assert ok_json(cluster, "--delete", "--topic", "t0")["topic_id"] == expected.pop("t0")
        state = cluster.wait_for_leader(10)
        leader = state["leader_id"]
        cluster.kill(leader, signal.SIGKILL)
        cluster.wait_for_leader(10, above_epoch=state["leader_epoch"], exclude=[leader])
        cluster.start_node(leader)
    described = ok_json(cluster, "--describe")["topics"]
    assert {t["name"]: t["topic_id"] for t in described} == expected
    assert all(t["partition_count"] == 2 for t in described)
