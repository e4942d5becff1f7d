"""raft.transport over TLS on real loopback sockets: peers connect with mutual TLS, each
inbound connection's handler sees its Session (User:<subject DN>), a request whose claimed
node id is not its certificate's closes the connection before the handler, and an
outbound connection to node N refuses a certificate of another node."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from raft import messages
from raft.common import tls
from raft.common.framing import FramedStream
from raft.common.session import current_session
from raft.transport import Connection, TcpTransport
from raft.transport_protocol import Frame, TransportTls
from tools import tls_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tls_certs.ClusterTls:
    return tls_certs.write_cluster_tls(tmp_path_factory.mktemp("certs"), [1, 2, 7])


def contexts(certs: tls_certs.ClusterTls, node_id: int, *, bind: bool = True
             ) -> TransportTls:
    settings = tls.TlsSettings(keystore_location=str(certs.node_keystores[node_id]),
                               truststore_location=str(certs.ca_file), client_auth="required")
    return TransportTls(server=tls.server_context(settings),
                        client=tls.client_context(settings), bind_identity=bind,
                        handshake_timeout_s=5)


class Seen:
    def __init__(self) -> None:
        self.frames: list[tuple[Frame, str]] = []
        self.arrived = trio.Event()

    async def __call__(self, conn: Connection, frame: Frame) -> None:
        self.frames.append((frame, str(current_session().principal)))
        self.arrived.set()


def vote(candidate_id: int) -> Frame:
    api, body = messages.encode_message(messages.VoteRequest(
        cluster_id="c", candidate_epoch=5, candidate_id=candidate_id, last_offset_epoch=1,
        last_offset=3))
    return {"api": api, "version": 0, "correlation_id": 1, "cluster_id": "c", "body": body,
            "src": candidate_id}


async def _serving(nursery: trio.Nursery, transport: TcpTransport) -> int:
    port: int = await nursery.start(transport.serve)
    return port


async def test_handler_sees_the_peer_principal_when_the_claim_matches_the_certificate(
        certs: tls_certs.ClusterTls) -> None:
    seen = Seen()
    server = TcpTransport(node_id=1, peers={}, handler=seen, listen=("127.0.0.1", 0))
    server.use_tls(contexts(certs, 1))
    client_context = contexts(certs, 2).client
    assert client_context is not None
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            port = await _serving(nursery, server)
            stream = FramedStream(await tls.open_stream("127.0.0.1", port, client_context))
            await stream.send(vote(2))
            await seen.arrived.wait()
            await stream.aclose()
            nursery.cancel_scope.cancel()
    assert seen.frames == [(vote(2), "User:CN=kraft-node-2,O=kraft-py")]
    assert server.identity_refusals == 0


async def test_connection_closes_before_the_handler_when_node_7_claims_to_be_voter_1(
        certs: tls_certs.ClusterTls, caplog: pytest.LogCaptureFixture) -> None:
    seen = Seen()
    server = TcpTransport(node_id=2, peers={}, handler=seen, listen=("127.0.0.1", 0))
    server.use_tls(contexts(certs, 2))
    stray = contexts(certs, 7).client
    assert stray is not None
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            port = await _serving(nursery, server)
            for _ in range(2):
                stream = FramedStream(await tls.open_stream("127.0.0.1", port, stray))
                await stream.send(vote(1))
                assert await stream.receive() is None  # closed, nothing answered
                await stream.aclose()
            nursery.cancel_scope.cancel()
    assert seen.frames == []
    assert server.identity_refusals == 2
    refusals = [r for r in caplog.records if r.getMessage() == "refused a node identity"]
    assert len(refusals) == 1  # logged once per subject and claimed id
    record: Any = refusals[0]
    assert (record.claimed, record.certificate_node) == (1, 7)


async def test_outbound_connection_is_refused_when_the_peer_certificate_is_another_node(
        certs: tls_certs.ClusterTls) -> None:
    """Node 1 dials "node 2" at an address where node 7 listens: the dial fails as a
    refused connect does, and the right node at the same kind of address is accepted."""
    impostor = TcpTransport(node_id=7, peers={}, handler=Seen(), listen=("127.0.0.1", 0))
    impostor.use_tls(contexts(certs, 7))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            port = await _serving(nursery, impostor)
            dialer = TcpTransport(node_id=1, peers={}, handler=Seen())
            dialer.use_tls(contexts(certs, 1))
            with pytest.raises(OSError, match="binds node 7, not node 2"):
                await dialer._connect(2, ("127.0.0.1", port))
            stream = await dialer._connect(7, ("127.0.0.1", port))
            await stream.aclose()
            nursery.cancel_scope.cancel()
