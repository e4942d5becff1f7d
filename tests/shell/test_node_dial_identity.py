"""A node dialling another checks the certificate it reached binds the node id it meant
to dial, on real loopback sockets with real TLS: a broker's controller client
(metadata/controller_client.py), its DescribeQuorum forwarding (broker/kafka/admin/quorum_api.py)
and its replica fetcher's dial (raft/common/tls.py `open_node_stream`) send nothing to a
fake controller whose certificate binds no node id or another node's, and talk to the
voter whose certificate binds its own id. The client certificate `kraft quorum start
--tls` writes cannot even finish a handshake as a server (client authentication only, no
address)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import trio

from broker.kafka.admin.quorum_api import QuorumForwarder, QuorumUnavailable
from metadata.admin import DescribeTopicsRequest
from metadata.controller_client import ControllerClient, ControllerUnavailable, request_once
from raft.common import tls
from raft.common.framing import FramedStream
from tools import tls_certs

BOUND_S = 10  # every test ends within this, whatever the code under test does


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tls_certs.ClusterTls:
    return tls_certs.write_cluster_tls(tmp_path_factory.mktemp("certs"), [1, 4, 7])


@pytest.fixture(scope="module")
def posing_client(certs: tls_certs.ClusterTls) -> Path:
    """A client certificate as the launcher wrote it before client certificates lost
    the server usage and the address: it passes the name check, so only the node id
    check can refuse it."""
    path = certs.ca_file.parent / "old-style-client.pem"
    path.write_bytes(tls_certs.keystore_pem(tls_certs.issue(
        tls_certs.load_ca(certs.ca_file.parent.parent), tls_certs.CLIENT_CN,
        now=datetime.datetime.now(datetime.UTC))))
    return path


def broker_context(certs: tls_certs.ClusterTls) -> Any:
    """What broker 4 dials the controllers with (mutual TLS, names checked)."""
    return tls.client_context(tls.TlsSettings(
        keystore_location=str(certs.node_keystores[4]),
        truststore_location=str(certs.ca_file)))


class FakeController:
    """A TLS server on 127.0.0.1 presenting `keystore`; it answers each frame with an
    empty body and counts the bytes it received after the handshake."""

    def __init__(self, keystore: Path, ca_file: Path) -> None:
        self.context = tls.server_context(tls.TlsSettings(
            keystore_location=str(keystore), truststore_location=str(ca_file),
            client_auth="required"))
        self.received = 0
        self.handshakes = 0

    async def serve(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._connection, listeners)

    async def _connection(self, stream: trio.SocketStream) -> None:
        try:
            secured, _ = await tls.accept(stream, self.context, timeout_s=BOUND_S)
        except tls.TlsHandshakeError:
            await stream.aclose()
            return
        self.handshakes += 1
        framed = FramedStream(secured)
        try:
            while (frame := await framed.receive()) is not None:
                self.received += 1
                await framed.send({**frame, "body": {"answered_by": "fake"}})
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            await trio.aclose_forcefully(secured)


async def _with_fake(keystore: Path, certs: tls_certs.ClusterTls, body: Any) -> FakeController:
    fake = FakeController(keystore, certs.ca_file)
    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(fake.serve)
            await body(("127.0.0.1", port))
            nursery.cancel_scope.cancel()
    return fake


async def test_controller_client_sends_nothing_when_a_client_certificate_poses_as_voter_1(
        certs: tls_certs.ClusterTls, posing_client: Path) -> None:
    problems: list[str] = []

    async def call(address: tuple[str, int]) -> None:
        client = ControllerClient(voters={1: address}, cluster_id="c",
                                  ssl_context=broker_context(certs), bind_identity=True)
        with pytest.raises(ControllerUnavailable) as refused:
            await client.call(DescribeTopicsRequest(), timeout_s=1.0)
        problems.append(str(refused.value))

    fake = await _with_fake(posing_client, certs, call)
    assert fake.handshakes >= 1  # the name check passed: the node id check refused it
    assert fake.received == 0
    assert "binds no node id, not node 1" in problems[0]


async def test_dial_is_refused_when_node_7_answers_at_voter_1s_address(
        certs: tls_certs.ClusterTls) -> None:
    async def call(address: tuple[str, int]) -> None:
        with pytest.raises(OSError, match="binds node 7, not node 1"):
            await request_once(address, "DescribeTopics", 1, "c", {},
                               ssl_context=broker_context(certs), node_id=1,
                               bind_identity=True)
        # the replica fetcher's dial to leader 1 (an inter-broker TLS listener)
        with pytest.raises(OSError, match="binds node 7, not node 1"):
            await tls.open_node_stream(*address, broker_context(certs), node_id=1,
                                       bind_identity=True)

    fake = await _with_fake(certs.node_keystores[7], certs, call)
    assert fake.received == 0


async def test_describe_quorum_forwarding_sends_nothing_when_voter_1_binds_no_node_id(
        certs: tls_certs.ClusterTls, posing_client: Path) -> None:
    async def call(address: tuple[str, int]) -> None:
        forwarder = QuorumForwarder(voters={1: address}, cluster_id="c",
                                    ssl_context=broker_context(certs), bind_identity=True)
        with pytest.raises(QuorumUnavailable, match="binds no node id, not node 1"):
            await forwarder.describe(timeout_s=1.0)

    fake = await _with_fake(posing_client, certs, call)
    assert fake.received == 0


async def test_voter_is_answered_when_its_certificate_binds_the_id_dialled(
        certs: tls_certs.ClusterTls) -> None:
    replies: list[Any] = []

    async def call(address: tuple[str, int]) -> None:
        replies.append(await request_once(address, "DescribeTopics", 1, "c", {},
                                          ssl_context=broker_context(certs), node_id=1,
                                          bind_identity=True))

    fake = await _with_fake(certs.node_keystores[1], certs, call)
    assert replies == [{"answered_by": "fake"}]
    assert fake.received == 1


async def test_launchers_client_certificate_cannot_serve_even_without_identity_binding(
        certs: tls_certs.ClusterTls) -> None:
    for identity in (certs.client, certs.admin):
        async def call(address: tuple[str, int]) -> None:
            with pytest.raises(OSError, match="TLS handshake failed"):
                await request_once(address, "DescribeTopics", 1, "c", {},
                                   ssl_context=broker_context(certs), node_id=1,
                                   bind_identity=False)

        fake = await _with_fake(identity.keystore, certs, call)
        assert (fake.handshakes, fake.received) == (0, 0)
