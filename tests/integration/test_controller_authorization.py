"""Every row of the controller listener that the gate decides (broker/access_table.py),
against real processes on 127.0.0.1, in the manner of Kafka's AuthorizerIntegrationTest:
- the cluster's unprivileged client certificate (`client.properties`) sending the
  row's attack (tools/access_probes.py) is refused with CLUSTER_AUTHORIZATION_FAILED;
- a principal holding exactly the row's ACL on the cluster is served (the core or the
  handler answers, with any code but an authorization failure), and refused again once
  that ACL is gone; with another operation instead it is refused;
- a super user is served.
Afterwards the voter set is that of before, the epoch far below the attacks' and the
log without their NoOps: no attack moved the quorum. A broker's STATUS listener is
gated by the same table (BrokerStatus, WriteSnapshot).

One TLS cluster (mutual TLS, the StandardAuthorizer on) of 3 voters and 1 broker for the
module: the launcher's admin identity (admin.properties) is the super user; the others
are certificates issued by the cluster's CA."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from metadata import admin
from metadata.authorizer import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from raft.common.errors import ErrorCode
from tests.support.quorum_support import FAST_SETTINGS, kraft
from tools import access_probes, tls_certs
from tools.access_probes import CLOSED, is_refused, send
from tools.cluster import Cluster
from tools.quorum_client import client_ssl_context, request

pytestmark = pytest.mark.integration
pytest.importorskip("cryptography")

OPS = tls_certs.certificate_principal("kraft-test-ops")
NODES = ";".join(tls_certs.node_principal(n) for n in range(1, 5))
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "authorizer.class.name": "standard", "super.users": NODES}
# a leader change during a write (NOT_CONTROLLER, NOT_LEADER_OR_FOLLOWER) is followed
MOVED = (ErrorCode.NOT_CONTROLLER, ErrorCode.NOT_LEADER_OR_FOLLOWER)
LEADER_CHANGE_S = 20.0
# every probe (tools/access_probes.py: the request, and the right it must need, kept apart
# from the table); BrokerStatus is a broker's, served on its STATUS listener here
PROBED = sorted(p.api for p in access_probes.probes("", 1) if p.api != "BrokerStatus")


def _identity(cluster: Cluster, common_name: str) -> Path:
    """Client properties with a new certificate for `common_name` from the cluster CA."""
    return tls_certs.write_client_identity(cluster.directory, common_name,
                                           f"{common_name}.properties", "a test identity"
                                           ).properties


class Setup:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.admin = cluster.client_ssl  # admin.properties: a super user
        self.ops = client_ssl_context(_identity(cluster, "kraft-test-ops"))
        self.unprivileged = client_ssl_context(Path(cluster.directory) / "client.properties")
        self.cluster_id = cluster.cluster_id

    @property
    def controllers(self) -> list[str]:
        return self.cluster.controller_addresses()

    def leader(self) -> tuple[str, dict[str, object]]:
        state = self.cluster.wait_for_leader(20)
        leader = self.cluster.node(int(state["leader_id"]))  # type: ignore[call-overload]
        assert leader.controller_address is not None
        return leader.controller_address, state

    def acl(self, operation: AclOperation, present: bool) -> str:
        """Grant `operation` on the cluster to OPS (or take it back) as the admin; the
        address of the leader that committed it, whose gate has applied it. A leader
        change on the way (NOT_CONTROLLER) is followed, as a client would."""
        binding = AclBinding(resource_type=ResourceType.CLUSTER, resource_name=CLUSTER_NAME,
                             pattern_type=PatternType.LITERAL, principal=OPS, host="*",
                             operation=operation, permission_type=AclPermissionType.ALLOW)
        message: admin.AdminRequest = admin.CreateAclsRequest(creations=(binding,)) \
            if present else admin.DeleteAclsRequest(filters=(AclFilter(
                resource_type=binding.resource_type, resource_name=CLUSTER_NAME,
                pattern_type=PatternType.LITERAL, principal=OPS, host="*",
                operation=operation, permission_type=AclPermissionType.ALLOW),))
        api = admin.api_of(message)
        deadline = time.monotonic() + LEADER_CHANGE_S
        while True:
            address = self.leader()[0]
            answer = request(address, api, admin.encode_body(message),
                             cluster_id=self.cluster_id, ssl_context=self.admin)
            error = getattr(admin.decode_response(api, answer), "top_level_error", 0)
            if error == 0:
                return address
            assert error in MOVED, answer
            assert time.monotonic() < deadline, answer
            time.sleep(0.05)  # the election under way: poll the leader again


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    cluster = Cluster.create(tmp_path_factory.mktemp("authz") / "cluster", voters=3,
                             brokers=1, settings=SETTINGS, tls=True)
    try:
        ready = Setup(cluster)
        cluster.start()
        cluster.wait_for_leader(20)
        cluster.wait_for_brokers(30)
        yield ready
    finally:
        cluster.kill_all_started()


def _probe(setup: Setup, api: str, voter: int) -> access_probes.Probe:
    [found] = [p for p in access_probes.probes(setup.cluster_id, voter) if p.api == api]
    return found


@pytest.mark.parametrize("api", PROBED)
def test_row(setup: Setup, api: str) -> None:
    address, state = setup.leader()
    voter = next(v for v in setup.cluster.voter_ids if v != state["leader_id"])
    probe = _probe(setup, api, voter)

    def ask(body: dict[str, object], context: object, at: str = address) -> int | str:
        return send(at, api, body, cluster_id=setup.cluster_id,
                    ssl_context=context)  # type: ignore[arg-type]

    attacked = ask(probe.attack, setup.unprivileged)
    assert is_refused(attacked), f"{api}: the attack got {attacked}"
    assert is_refused(ask(probe.harmless, setup.ops))
    other = AclOperation.DESCRIBE if probe.right != AclOperation.DESCRIBE \
        else AclOperation.CREATE
    granted = setup.acl(other, present=True)  # asked where it is applied
    try:
        assert is_refused(ask(probe.harmless, setup.ops, granted)), \
            f"{api} served on {other.name}"
    finally:
        setup.acl(other, present=False)
    granted = setup.acl(probe.right, present=True)
    try:
        served = ask(probe.harmless, setup.ops, granted)
    finally:
        revoked = setup.acl(probe.right, present=False)
    assert served != CLOSED, f"{api} with its ACL: {served}"
    assert not is_refused(served), f"{api} with its ACL: {served}"
    assert is_refused(ask(probe.harmless, setup.ops, revoked))
    by_super_user = ask(probe.harmless, setup.admin)
    assert by_super_user != CLOSED
    assert not is_refused(by_super_user)


def test_no_attack_moved_the_quorum(setup: Setup) -> None:
    _, before = setup.leader()
    for probe in access_probes.probes(setup.cluster_id, setup.cluster.voter_ids[0]):
        if probe.api not in PROBED:
            continue
        for address in setup.controllers:
            assert is_refused(send(address, probe.api, probe.attack,
                                   cluster_id=setup.cluster_id,
                                   ssl_context=setup.unprivileged)), probe.api
    _, after = setup.leader()
    # an election of its own (a loaded host, 300 ms timeouts) may add an epoch or two;
    # the attacks' epoch is ATTACK_EPOCH
    assert before["leader_epoch"] <= after["leader_epoch"] < access_probes.ATTACK_EPOCH
    assert sorted(v["replica_id"] for v in after["voters"]) == setup.cluster.voter_ids
    assert after["high_watermark"] < before["high_watermark"] + 1000  # no 20,000 NoOps


@pytest.mark.parametrize("api", ["BrokerStatus", "WriteSnapshot"])
def test_status_row(setup: Setup, api: str) -> None:
    [broker] = [n for n in setup.cluster.nodes.values() if not n.is_voter]
    assert broker.status_address is not None

    def ask(context: object) -> object:
        return request(broker.status_address, api, {},  # type: ignore[arg-type]
                       cluster_id=setup.cluster_id, ssl_context=context)  # type: ignore

    refused = ask(setup.unprivileged)
    assert isinstance(refused, dict)
    assert refused["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    served = ask(setup.admin)
    assert isinstance(served, dict)
    assert served.get("error_code", 0) != ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_the_cli_with_the_unprivileged_identity_is_refused_and_nothing_moves(
        setup: Setup) -> None:
    """`kraft features upgrade`, `quorum remove-controller`, `quorum append`, `quorum
    snapshot` and `quorum describe` with `--command-config client.properties`: each
    fails, naming the authorization failure; the voters and the log end stay put."""
    directory = str(setup.cluster.directory)
    client = ("--command-config", str(Path(directory) / "client.properties"))
    _, before = setup.leader()
    victim = next(v for v in before["voters"] if v["replica_id"] != before["leader_id"])
    runs = {
        "features upgrade": kraft("features", "--cluster", directory, *client, "upgrade",
                                  "--feature", "kraft.version=1", "--timeout", "5"),
        "remove-controller": kraft("quorum", "remove-controller", "--cluster", directory,
                                   *client, "--node", str(victim["replica_id"]),
                                   "--directory-id", str(victim["replica_directory_id"]
                                                         or "AAAAAAAAAAAAAAAAAAAAAA"),
                                   "--timeout", "5"),
        "append": kraft("quorum", "append", "--cluster", directory, *client,
                        "--count", "20000", "--timeout", "5"),
        "snapshot": kraft("quorum", "snapshot", "--cluster", directory, *client,
                          "--timeout", "5"),
        "describe": kraft("quorum", "describe", "--cluster", directory, *client,
                          "--replication"),
    }
    for verb, done in runs.items():
        assert done.returncode != 0, (verb, done.stdout)
        assert "CLUSTER_AUTHORIZATION_FAILED" in done.stdout + done.stderr, (verb, done)
    _, after = setup.leader()
    assert sorted(v["replica_id"] for v in after["voters"]) == setup.cluster.voter_ids
    assert after["high_watermark"] < before["high_watermark"] + 1000  # no 20,000 NoOps
    admin = kraft("quorum", "describe", "--cluster", directory, "--replication")
    assert admin.returncode == 0, admin.stderr
