"""Bootstrap credentials reach the log exactly once (real processes, 127.0.0.1): three
controllers formatted with the same `kraft format --add-scram`; the first active
controller appends them, and after it is killed the next leader, whose log is no longer
fresh, does not append them again: every voter's log holds each credential once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.quorum_support import FAST_SETTINGS, kraft, wait_until
from tests.support.secure_cluster import WAIT_S, format_with_scram, quorum_started
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

VOTERS = (1, 2, 3)
USERS = ("SCRAM-SHA-256=[name=alice,password=alice-secret]",
         "SCRAM-SHA-512=[name=admin,password=admin-secret]")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("bootstrap") / "cluster"
    made = Cluster.create(directory, voters=len(VOTERS), settings=FAST_SETTINGS)
    for node_id in VOTERS:
        # formatted again, with the users
        (Path(made.node(node_id).data_dir) / "meta.properties").unlink()
        format_with_scram(made, node_id, USERS)
    with quorum_started(directory) as cluster:
        yield cluster


def users(cluster: Cluster) -> list[str] | None:
    result = kraft("users", "--cluster", str(cluster.directory), "--describe", "--json",
                   "--timeout", "5")
    if result.returncode != 0:
        return None
    return sorted(u["user"] for u in json.loads(result.stdout)["users"])


def credential_records(cluster: Cluster, node_id: int) -> list[str]:
    dumped = kraft("dump-log", "--dir", cluster.node(node_id).data_dir, "--json")
    assert dumped.returncode == 0, dumped.stderr
    entries = [json.loads(line) for line in dumped.stdout.splitlines()]
    return sorted(e["record"]["name"] for e in entries if e["type"] == "UserScramCredential")


def leader(cluster: Cluster) -> int:
    result = kraft("quorum", "describe", "--cluster", str(cluster.directory), "--status",
                   "--json")
    assert result.returncode == 0, result.stderr
    return int(json.loads(result.stdout)["LeaderId"])


def test_bootstrap_credentials_are_appended_once_when_the_first_leader_dies(
        cluster: Cluster) -> None:
    assert wait_until(lambda: users(cluster), WAIT_S, "the bootstrap users") == [
        "admin", "alice"]
    first = leader(cluster)
    kraft("quorum", "kill", "--cluster", str(cluster.directory), "--node", str(first))
    wait_until(lambda: kraft("quorum", "describe", "--cluster", str(cluster.directory),
                             "--status", "--json").returncode == 0
               and leader(cluster) != first, WAIT_S, "a new leader")
    # the new leader is active (it answers) and appended nothing: still one of each
    assert wait_until(lambda: users(cluster), WAIT_S, "the new controller") == [
        "admin", "alice"]
    restarted = kraft("quorum", "restart", "--cluster", str(cluster.directory), "--node",
                      str(first))
    assert restarted.returncode == 0, restarted.stderr
    # a write of the new leader's: in every log it follows whatever it appended before
    altered = kraft("users", "--cluster", str(cluster.directory), "--alter",
                    "--entity-name", "carol", "--add-config", "SCRAM-SHA-256=[password=c]")
    assert altered.returncode == 0, altered.stderr
    for node_id in VOTERS:
        wait_until(lambda n=node_id: "carol" in credential_records(cluster, n), WAIT_S,
                   f"voter {node_id} to hold carol's credential")
        assert credential_records(cluster, node_id) == ["admin", "alice", "carol"]
