"""The controllers' admin API under the authorizer, on a mutual-TLS cluster (`kraft quorum
start --tls`'s certificates): the nodes' principals (`User:CN=kraft-node-<id>,O=kraft-py`)
are super users, so the broker registers, heartbeats and replicates; the CLI's client
certificate (`User:CN=kraft-client,O=kraft-py`, chosen with `--command-config
client.properties`: `--cluster DIR` alone is the admin) is not, so its admin RPCs are
refused until a super user (a client holding node 1's certificate) grants it ACLs with
`kraft acls --bootstrap-controller`; a rename needs DELETE on the old name besides ALTER.
One 1-voter + 1-broker cluster for the module."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.quorum_support import FAST_SETTINGS, kraft
from tools.cluster import Cluster

pytestmark = pytest.mark.integration
pytest.importorskip("cryptography")

CLIENT = "User:CN=kraft-client,O=kraft-py"
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "authorizer.class.name": "standard",
            "super.users": "User:CN=kraft-node-1,O=kraft-py;User:CN=kraft-node-2,O=kraft-py"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster.create(tmp_path_factory.mktemp("acls-tls") / "cluster", voters=1,
                             brokers=1, settings=SETTINGS, tls=True)
    try:
        cluster.start()
        cluster.wait_for_leader(20)
        cluster.wait_for_brokers(30)  # registered and unfenced: CLUSTER_ACTION held
        yield cluster
    finally:
        cluster.kill_all_started()


@pytest.fixture(scope="module")
def node_properties(cluster: Cluster) -> Path:
    """Client properties with node 1's certificate: a super user's."""
    directory = Path(cluster.directory)
    path = directory / "node-1-client.properties"
    text = (directory / "client.properties").read_text()
    path.write_text(text.replace(str(directory / "tls" / "client.pem"),
                                 str(directory / "tls" / "node-1.pem")))
    return path


def as_client(cluster: Cluster) -> tuple[str, ...]:
    """The CLI's arguments to act as the unprivileged client on `cluster`."""
    return ("--cluster", str(cluster.directory), "--command-config",
            str(Path(cluster.directory) / "client.properties"))


def test_client_is_refused_when_it_has_no_acl(cluster: Cluster) -> None:
    listed = kraft("acls", *as_client(cluster), "--list")
    assert listed.returncode == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in listed.stderr
    created = kraft("topics", *as_client(cluster), "--create", "--topic", "denied",
                    "--partitions", "1", "--replication-factor", "1")
    assert created.returncode == 1
    assert "TOPIC_AUTHORIZATION_FAILED" in created.stderr


def test_client_may_create_and_list_when_a_super_user_grants_it(
        cluster: Cluster, node_properties: Path) -> None:
    controller = cluster.controller_addresses()[0]
    granted = kraft("acls", "--bootstrap-controller", controller, "--command-config",
                    str(node_properties), "--add", "--allow-principal", CLIENT,
                    "--operation", "Create", "--operation", "Describe", "--cluster")
    assert granted.returncode == 0, granted.stderr
    assert f"(principal={CLIENT}, host=*, operation=CREATE, permissionType=ALLOW)" in \
        granted.stdout
    created = kraft("topics", *as_client(cluster), "--create", "--topic", "granted",
                    "--partitions", "1", "--replication-factor", "1")
    assert created.returncode == 0, created.stderr
    listed = kraft("acls", *as_client(cluster), "--list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(a["operation"] for a in json.loads(listed.stdout)["acls"]) == [
        "CREATE", "DESCRIBE"]
    # DESCRIBE on the cluster is not ALTER: adding an ACL is still refused
    added = kraft("acls", *as_client(cluster), "--add", "--allow-principal", "User:x",
                  "--operation", "Read", "--topic", "granted")
    assert added.returncode == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in added.stderr


def test_rename_needs_delete_on_the_old_name_when_create_and_read_on_the_new_are_held(
        cluster: Cluster, node_properties: Path) -> None:
    """CREATE and READ on `mine-*` with ALTER on `payroll` must not let the client carry
    payroll away under a name it may read."""
    controller = cluster.controller_addresses()[0]

    def as_super_user(*args: str) -> None:
        done = kraft(*args, "--bootstrap-controller", controller, "--command-config",
                     str(node_properties))
        assert done.returncode == 0, done.stderr

    as_super_user("topics", "--create", "--topic", "payroll", "--partitions", "1",
                  "--replication-factor", "1")
    as_super_user("acls", "--add", "--allow-principal", CLIENT, "--operation", "Create",
                  "--operation", "Read", "--topic", "mine-", "--resource-pattern-type",
                  "prefixed", "--force")
    as_super_user("acls", "--add", "--allow-principal", CLIENT, "--operation", "Alter",
                  "--topic", "payroll", "--force")
    rename = ("topics", *as_client(cluster), "--alter", "--topic", "payroll",
              "--new-name", "mine-payroll")
    refused = kraft(*rename)
    assert refused.returncode == 1
    assert "TOPIC_AUTHORIZATION_FAILED" in refused.stderr
    assert "DELETE" in refused.stderr
    as_super_user("acls", "--add", "--allow-principal", CLIENT, "--operation", "Delete",
                  "--topic", "payroll", "--force")
    renamed = kraft(*rename)
    assert renamed.returncode == 0, renamed.stderr
