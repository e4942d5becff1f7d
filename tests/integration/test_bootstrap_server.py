"""`--bootstrap-server` names a broker, as in Kafka's tools: `kraft topics` and `kraft
quorum describe` through a broker's Kafka listener answer as they do through the
controllers (`--bootstrap-controller`), refusals included. One 1-voter + 2-broker
cluster for the module; the commands run in-process (tools.cli.main) to stay quick."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.quorum_support import FAST_SETTINGS, running_cluster, wait_until
from tools.cli import main
from tools.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("bootstrap") / "cluster", SETTINGS,
                         voters=1, brokers=2) as started:
        yield started


@pytest.fixture(scope="module")
def targets(cluster: Cluster) -> dict[str, list[str]]:
    """The two ways to name the cluster: one broker, or every controller."""
    broker = next(n.client_address for n in cluster.nodes.values() if n.client_address)
    assert broker is not None
    return {"broker": ["--bootstrap-server", broker],
            "controllers": ["--bootstrap-controller", ",".join(cluster.controller_addresses())]}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def both(capsys: pytest.CaptureFixture[str], targets: dict[str, list[str]], verb: list[str],
         *args: str) -> dict[str, tuple[int, str, str]]:
    return {way: run(capsys, *verb, *target, *args) for way, target in targets.items()}


def ok_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_topics_through_a_broker_answer_as_through_the_controllers(
        capsys: pytest.CaptureFixture[str], cluster: Cluster,
        targets: dict[str, list[str]]) -> None:
    """Create, describe by name and by ID, list, grow and delete by ID through the broker:
    the same text and JSON as the controllers give."""
    broker = ["topics", *targets["broker"]]
    created = ok_json(capsys, *broker, "--create", "--topic", "via-broker", "--partitions", "3",
                      "--replication-factor", "2")
    topic_id = created["topic_id"]
    assert (created["name"], created["partitions"], created["replication_factor"]) == \
        ("via-broker", 3, 2)
    assert [len(r) for r in created["assignment"]] == [2, 2, 2]
    for args in (("--describe", "--topic", "via-broker"), ("--describe", "--topic-id", topic_id),
                 ("--list",)):
        for json_flag in ((), ("--json",)):
            answers = both(capsys, targets, ["topics"], *args, *json_flag)
            assert answers["broker"] == answers["controllers"], args
            assert answers["broker"][0] == 0
    described = json.loads(both(capsys, targets, ["topics"], "--describe", "--topic-id",
                                topic_id, "--json")["broker"][1])["topics"][0]
    assert [p["replicas"] for p in described["partitions"]] == created["assignment"]

    grown = ok_json(capsys, *broker, "--alter", "--topic-id", topic_id, "--partitions", "5")
    assert (grown["partitions"], len(grown["new_assignment"])) == (5, 2)
    answers = both(capsys, targets, ["topics"], "--describe", "--topic", "via-broker", "--json")
    assert answers["broker"] == answers["controllers"]
    assert json.loads(answers["broker"][1])["topics"][0]["partition_count"] == 5

    deleted = ok_json(capsys, *broker, "--delete", "--topic-id", topic_id)
    assert deleted == {"name": "via-broker", "topic_id": topic_id}
    gone = both(capsys, targets, ["topics"], "--describe", "--topic-id", topic_id)
    assert gone["broker"] == gone["controllers"]
    code, out, err = gone["broker"]
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert "UNKNOWN_TOPIC_ID (100)" in err


def test_refusals_through_a_broker_are_the_controllers_one_line(
        capsys: pytest.CaptureFixture[str], cluster: Cluster,
        targets: dict[str, list[str]]) -> None:
    """A refused request is one line naming the Kafka error, exit 1, the same line as the
    controllers give; a wrong broker address, or a controller's, is one line and exit 1;
    a rename, which Kafka's protocol lacks, is bad usage through a broker (exit 2)."""
    ok_json(capsys, "topics", *targets["broker"], "--create", "--topic", "taken")
    for args, error in [
            (("--create", "--topic", "taken"), "TOPIC_ALREADY_EXISTS (36)"),
            (("--create", "--topic", ".."), "INVALID_TOPIC_EXCEPTION (17)"),
            (("--describe", "--topic", "nope"), "UNKNOWN_TOPIC_OR_PARTITION (3)"),
            (("--delete", "--topic", "nope"), "UNKNOWN_TOPIC_OR_PARTITION (3)"),
            (("--alter", "--topic", "taken", "--partitions", "1"), "INVALID_PARTITIONS (37)")]:
        answers = both(capsys, targets, ["topics"], *args)
        assert answers["broker"] == answers["controllers"], args
        code, out, err = answers["broker"]
        assert (code, out) == (1, ""), args
        assert err.count("\n") == 1, (args, err)
        assert error in err, (args, err)

    code, _, err = run(capsys, "topics", *targets["broker"], "--alter", "--topic", "taken",
                       "--new-name", "other")
    assert code == 2
    assert "--bootstrap-controller" in err

    controller = cluster.controller_addresses()[0]  # --bootstrap-server's old meaning
    code, out, err = run(capsys, "topics", "--bootstrap-server", controller, "--list")
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert "--bootstrap-controller" in err
    for verb in (["topics", "--list"], ["quorum", "describe", "--status"]):
        code, out, err = run(capsys, *verb, "--bootstrap-server", "127.0.0.1:9",
                             "--timeout", "0.5")
        assert (code, out) == (1, ""), verb
        assert err.count("\n") == 1, (verb, err)
        assert "127.0.0.1:9" in err, (verb, err)


def test_quorum_describe_through_a_broker_equals_the_controllers(
        capsys: pytest.CaptureFixture[str], cluster: Cluster,
        targets: dict[str, list[str]]) -> None:
    """The broker forwards DescribeQuorum to the leader: the same --status (every voter
    with its CONTROLLER endpoint, the brokers as observers) and --replication rows."""
    def status(way: str) -> dict[str, Any]:
        view = ok_json(capsys, "quorum", "describe", *targets[way], "--status")
        view.pop("MaxFollowerLagTimeMs")  # a clock reading: differs between two calls
        view.pop("KRaftVersion", None)  # Kafka's DescribeQuorum, through the broker, has none
        return view  # type: ignore[no-any-return]

    def same_status() -> dict[str, Any] | None:
        view = status("broker")
        return view if view == status("controllers") else None

    view = wait_until(same_status, 10, "the same --status through the broker")
    assert view["ClusterId"] == cluster.cluster_id
    assert [v["id"] for v in view["CurrentVoters"]] == cluster.voter_ids
    assert all(v["endpoints"] == [f"CONTROLLER://{cluster.node(v['id']).controller_address}"]
               for v in view["CurrentVoters"])
    assert sorted(o["id"] for o in view["CurrentObservers"]) == \
        [n for n in cluster.nodes if n not in cluster.voter_ids]

    def rows(way: str) -> list[tuple[int, str]]:
        table = ok_json(capsys, "quorum", "describe", *targets[way], "--replication")
        return [(r["NodeId"], r["Status"]) for r in table]
    assert rows("broker") == rows("controllers")
