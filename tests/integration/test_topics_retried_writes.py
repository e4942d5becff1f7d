"""`kraft topics` writes whose first attempt's answer is lost (real processes: 1 voter + 1
broker; a stand-in node on 127.0.0.1 in front of the controller passes every request on
and drops the answer to the one write it is told to, hanging up). The leader
client then asks the controller itself again (`raft.common.leader_redirect`: the first
attempt may have been applied), which refuses: TOPIC_ALREADY_EXISTS to the create,
INVALID_PARTITIONS to the grow. The topic now has the partition count asked for, which
proves the lost attempt applied: the verb reports success, rc 0."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.quorum_support import FAST_SETTINGS, kraft, running_cluster
from tests.support.standin_nodes import HANG_UP, Answer, standin_nodes
from tools.admin_client import exchange
from tools.cluster import Cluster

pytestmark = pytest.mark.integration


def answer_dropping_relay(target: str, drop_api: str, dropped: list[Any]) -> Answer:
    """A stand-in node's answers: each request passed on to `target` and its answer back,
    but the first request of api `drop_api` is answered by hanging up (its answer kept
    in `dropped`): the client cannot tell it was applied."""
    def answer(frame: dict[str, Any]) -> Any:
        body = exchange(target, frame["api"], frame["body"], cluster_id=frame["cluster_id"])
        if frame["api"] == drop_api and not dropped:
            dropped.append(body)
            return HANG_UP
        return body
    return answer


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("retried") / "cluster", FAST_SETTINGS,
                         voters=1, brokers=1) as started:
        yield started


def _topics_losing_one_answer(cluster: Cluster, drop_api: str, *args: str
                              ) -> tuple[Any, list[Any]]:
    """`kraft topics ARGS` through a relay that loses the answer to the first `drop_api`
    request; the result and the answers lost."""
    dropped: list[Any] = []
    controller = cluster.node(1).controller_address or ""
    with standin_nodes() as start:
        relay = start(answer_dropping_relay(controller, drop_api, dropped))
        result = kraft("topics", "--bootstrap-controller", f"{relay.address},{controller}",
                       *args, "--json", "--timeout", "20")
    return result, dropped


def _describe(cluster: Cluster, name: str) -> dict[str, Any]:
    described = kraft("topics", "--cluster", str(cluster.directory), "--describe",
                      "--topic", name, "--json")
    assert described.returncode == 0, described.stderr
    topic: dict[str, Any] = json.loads(described.stdout)["topics"][0]
    return topic


def test_a_create_whose_answer_was_lost_reports_the_topic_it_made(cluster: Cluster) -> None:
    created, dropped = _topics_losing_one_answer(
        cluster, "CreateTopics", "--create", "--topic", "lost-create", "--partitions", "2",
        "--replication-factor", "1")
    assert len(dropped) == 1  # the first attempt was answered, and the answer lost
    assert created.returncode == 0, created.stderr
    topic = _describe(cluster, "lost-create")
    shown = json.loads(created.stdout)
    assert (shown["name"], shown["topic_id"], shown["partitions"]) == \
        ("lost-create", topic["topic_id"], 2)


def test_a_grow_whose_answer_was_lost_reports_the_new_count(cluster: Cluster) -> None:
    made = kraft("topics", "--cluster", str(cluster.directory), "--create", "--topic",
                 "lost-grow", "--partitions", "1", "--replication-factor", "1")
    assert made.returncode == 0, made.stderr
    grown, dropped = _topics_losing_one_answer(
        cluster, "CreatePartitions", "--alter", "--topic", "lost-grow", "--partitions", "3")
    assert len(dropped) == 1
    assert grown.returncode == 0, grown.stderr
    assert json.loads(grown.stdout)["partitions"] == 3
    assert _describe(cluster, "lost-grow")["partition_count"] == 3


def test_a_refused_create_whose_answer_was_lost_is_still_refused(cluster: Cluster) -> None:
    """INVALID_PARTITIONS to a create is a refusal, not a proof (and the topic it would
    look up does not exist): the controller's own error, rc 1."""
    refused, dropped = _topics_losing_one_answer(
        cluster, "CreateTopics", "--create", "--topic", "never", "--partitions", "0")
    assert len(dropped) == 1
    assert refused.returncode == 1
    assert "INVALID_PARTITIONS (37)" in json.loads(refused.stdout)["error"]
