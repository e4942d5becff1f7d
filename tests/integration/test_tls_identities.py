"""The identities of a cluster started by `kraft quorum start --tls` (real processes,
mutual TLS, 127.0.0.1):

- with the authorizer on, the CLI given only `--cluster DIR` acts as the cluster's admin
  (`DIR/admin.properties`, `User:CN=kraft-admin,O=kraft-py`, in `super.users`): it creates
  a topic and adds an ACL; the unprivileged `DIR/client.properties` chosen with
  `--command-config` is refused both;
- a broker's controller client sends nothing to a process on its controller's address
  that presents a certificate of the cluster's CA binding no node id (a client's, as the
  launcher used to issue them: server usage and `IP:127.0.0.1`, so the name check alone
  let it through)."""

from __future__ import annotations

import datetime
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from raft.common import tls
from tests.support.quorum_support import FAST_SETTINGS, kraft, log_events, wait_until
from tests.support.secure_cluster import quorum_started
from tools import tls_certs
from tools.cluster import Cluster

pytestmark = pytest.mark.integration
pytest.importorskip("cryptography")

CLIENT = "User:CN=kraft-client,O=kraft-py"
WAIT_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("identities") / "cluster"
    settings = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
                "authorizer.class.name": "standard"}
    with quorum_started(directory, "--voters", "1", "--brokers", "1", "--tls", "--json",
                        *(f"--set={k}={v}" for k, v in settings.items())) as cluster:
        yield cluster


def as_client(cluster: Cluster) -> tuple[str, ...]:
    return ("--command-config", str(cluster.directory / "client.properties"))


def test_admin_creates_a_topic_and_adds_an_acl_when_the_cli_is_given_only_the_cluster(
        cluster: Cluster) -> None:
    directory = str(cluster.directory)
    created = kraft("topics", "--cluster", directory, "--create", "--topic", "by-admin",
                    "--partitions", "1", "--replication-factor", "1")
    assert created.returncode == 0, created.stderr
    added = kraft("acls", "--cluster", directory, "--add", "--allow-principal", CLIENT,
                  "--operation", "Read", "--topic", "by-admin")
    assert added.returncode == 0, added.stderr
    listed = kraft("acls", "--cluster", directory, "--list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(a["principal"], a["operation"]) for a in json.loads(listed.stdout)["acls"]] == [
        (CLIENT, "READ")]
    status = kraft("quorum", "describe", "--cluster", directory, "--status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["LeaderId"] == 1


def test_unprivileged_client_is_refused_admin_verbs_when_chosen_with_command_config(
        cluster: Cluster) -> None:
    directory = str(cluster.directory)
    added = kraft("acls", "--cluster", directory, *as_client(cluster), "--add",
                  "--allow-principal", CLIENT, "--operation", "All", "--cluster")
    assert added.returncode == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in added.stderr
    created = kraft("topics", "--cluster", directory, *as_client(cluster), "--create",
                    "--topic", "by-client", "--partitions", "1", "--replication-factor", "1")
    assert created.returncode == 1
    assert "TOPIC_AUTHORIZATION_FAILED" in created.stderr


class PosingController(threading.Thread):
    """A TLS server on a controller's address presenting `keystore`: it counts the
    handshakes it completes and the bytes it receives after them, one connection at a
    time, until stopped."""

    def __init__(self, address: tuple[str, int], keystore: Path, ca_file: Path) -> None:
        super().__init__(daemon=True)
        self.context = tls.server_context(tls.TlsSettings(
            keystore_location=str(keystore), truststore_location=str(ca_file),
            client_auth="required"))
        self.listener = socket.create_server(address)
        self.listener.settimeout(0.1)  # how soon a stop is seen
        self.stopped = threading.Event()
        self.handshakes = 0
        self.received = 0

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(2)
            try:
                with self.context.wrap_socket(conn, server_side=True) as secured:
                    self.handshakes += 1
                    while data := secured.recv(65536):
                        self.received += len(data)
            except (OSError, ssl.SSLError):
                conn.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join(10)
        self.listener.close()


def test_broker_sends_nothing_when_a_client_certificate_answers_at_its_controller(
        tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path / "cluster", voters=1, brokers=1, tls=True,
                             settings={**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200})
    ca = tls_certs.load_ca(cluster.directory)
    posing = tmp_path / "posing-client.pem"
    posing.write_bytes(tls_certs.keystore_pem(tls_certs.issue(
        ca, tls_certs.CLIENT_CN, now=datetime.datetime.now(datetime.UTC))))
    host, _, port = (cluster.node(1).controller_address or "").rpartition(":")
    fake = PosingController((host, int(port)), posing, cluster.directory / "tls" / "ca.pem")
    fake.start()
    try:
        cluster.start_node(2)  # the broker only: voter 1's address is the fake's

        def refused() -> bool:
            return any(e.get("msg") == "controller unreachable"
                       and "binds no node id, not node 1" in str(e.get("reason"))
                       for e in log_events(cluster, 2))

        wait_until(refused, WAIT_S, "the broker's controller client to refuse the fake")
    finally:
        cluster.kill_all_started()
        fake.stop()
    assert fake.handshakes >= 1  # the host name check passed: only the node id refused it
    assert fake.received == 0
