"""raft/common/tls.py: contexts built from Kafka's ssl.* values (PEM file, PKCS12 file,
PEM text), the errors a bad keystore gives, the client-auth and endpoint-check modes,
and the peer subject and node id read from a certificate, checked over real handshakes
on 127.0.0.1 where the behaviour is the handshake's."""

from __future__ import annotations

import functools
import ssl
from pathlib import Path
from typing import Any

import pytest
import trio
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    NoEncryption,
    pkcs12,
)

from raft.common import tls
from raft.common.tls import TlsConfigError, TlsSettings
from tools import tls_certs


@pytest.fixture(scope="module")
def ca() -> tls_certs.Issuer:
    return tls_certs.make_ca()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, ca: tls_certs.Issuer) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("tls")
    (base / "ca.pem").write_bytes(tls_certs.certificate_pem(ca))
    server = tls_certs.issue(ca, "kraft-node-1")
    client = tls_certs.issue(ca, "kraft-node-2")
    other_host = tls_certs.issue(ca, "kraft-node-3", ip_addresses=("10.9.9.9",), dns_names=())
    (base / "server.pem").write_bytes(tls_certs.keystore_pem(server))
    (base / "client.pem").write_bytes(tls_certs.keystore_pem(client))
    (base / "other-host.pem").write_bytes(tls_certs.keystore_pem(other_host))
    (base / "server.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"server", server.key, server.certificate, [ca.certificate],
        BestAvailableEncryption(b"store-secret")))
    (base / "trust.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [ca.certificate], NoEncryption()))
    return {"base": base, "ca": base / "ca.pem", "server": base / "server.pem",
            "client": base / "client.pem", "other_host": base / "other-host.pem",
            "p12": base / "server.p12", "trust_p12": base / "trust.p12",
            "server_cert": base / "server-cert.pem"}


def _server(files: dict[str, Path], **kwargs: Any) -> ssl.SSLContext:
    return tls.server_context(TlsSettings(keystore_location=str(files["server"]),
                                          truststore_location=str(files["ca"]), **kwargs))


def _client(files: dict[str, Path], keystore: str | None = "client", **kwargs: Any
            ) -> ssl.SSLContext:
    return tls.client_context(TlsSettings(
        keystore_location=str(files[keystore]) if keystore else "",
        truststore_location=str(files["ca"]), **kwargs))


async def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str = "127.0.0.1"
                     ) -> tuple[str, Any]:
    """('ok', the server's view of the peer certificate) or ('refused', the reason)."""
    seen: list[Any] = []
    decided = trio.Event()

    async def serve(stream: trio.SocketStream) -> None:
        try:
            secured, cert = await tls.accept(stream, server, timeout_s=5)
        except tls.TlsHandshakeError as exc:
            seen.append(("refused", str(exc)))
            decided.set()
            await trio.aclose_forcefully(stream)
            return
        seen.append(("ok", cert))
        decided.set()
        await secured.send_all(b"x")
        await secured.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, serve, 0,
                                                          host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        try:
            stream = await tls.wrap_client(await trio.open_tcp_stream("127.0.0.1", port),
                                           client, host, timeout_s=5)
            await stream.receive_some(1)  # TLS 1.3: the server's verdict arrives here
        except (OSError, trio.BrokenResourceError):
            pass
        with trio.fail_after(5):
            await decided.wait()
        nursery.cancel_scope.cancel()
    outcome: tuple[str, Any] = seen[0]
    return outcome


def test_pem_file_keystore_serves_a_handshake_when_the_client_trusts_the_ca(
        files: dict[str, Path]) -> None:
    verdict, cert = trio.run(_handshake, _server(files, client_auth="required"), _client(files))
    assert verdict == "ok"
    assert tls.peer_subject(cert) == "CN=kraft-node-2,O=kraft-py"
    assert tls.node_id_of(cert) == 2


def test_pkcs12_keystore_and_truststore_load_when_the_passwords_are_right(
        files: dict[str, Path]) -> None:
    server = tls.server_context(TlsSettings(
        keystore_location=str(files["p12"]), keystore_type="PKCS12",
        keystore_password="store-secret", truststore_location=str(files["trust_p12"]),
        truststore_type="PKCS12", client_auth="required"))
    verdict, cert = trio.run(_handshake, server, _client(files))
    assert (verdict, tls.node_id_of(cert)) == ("ok", 2)


def test_pkcs12_keystore_is_refused_when_the_password_is_wrong(files: dict[str, Path]) -> None:
    with pytest.raises(TlsConfigError, match="PKCS12"):
        tls.server_context(TlsSettings(keystore_location=str(files["p12"]),
                                       keystore_type="PKCS12", keystore_password="wrong"))


def test_pem_text_in_the_config_builds_the_same_context_when_no_file_is_given(
        files: dict[str, Path], ca: tls_certs.Issuer) -> None:
    text = files["server"].read_text()
    key_end = text.index("-----END PRIVATE KEY-----") + len("-----END PRIVATE KEY-----\n")
    server = tls.server_context(TlsSettings(
        keystore_key=text[:key_end], keystore_certificate_chain=text[key_end:],
        truststore_certificates=tls_certs.certificate_pem(ca).decode(),
        client_auth="required"))
    verdict, cert = trio.run(_handshake, server, _client(files))
    assert (verdict, tls.node_id_of(cert)) == ("ok", 2)


def test_keystore_error_names_the_key_when_the_file_is_missing(tmp_path: Path) -> None:
    with pytest.raises(TlsConfigError, match="ssl.keystore.location .*no such file"):
        tls.server_context(TlsSettings(keystore_location=str(tmp_path / "absent.pem")))


def test_keystore_error_when_the_file_holds_no_key(files: dict[str, Path]) -> None:
    with pytest.raises(TlsConfigError, match="cannot load a certificate and key"):
        tls.server_context(TlsSettings(keystore_location=str(files["ca"])))


def test_server_context_is_refused_when_there_is_no_keystore() -> None:
    with pytest.raises(TlsConfigError, match="needs a keystore"):
        tls.server_context(TlsSettings())


@pytest.mark.parametrize(("mode", "verify"), [("none", ssl.CERT_NONE),
                                              ("requested", ssl.CERT_OPTIONAL),
                                              ("required", ssl.CERT_REQUIRED)])
def test_client_auth_sets_the_verify_mode_when_given(files: dict[str, Path], mode: str,
                                                     verify: ssl.VerifyMode) -> None:
    assert _server(files, client_auth=mode).verify_mode == verify


def test_client_without_certificate_is_refused_when_client_auth_is_required(
        files: dict[str, Path]) -> None:
    verdict, reason = trio.run(_handshake, _server(files, client_auth="required"),
                               _client(files, keystore=None))
    assert verdict == "refused"
    assert "certificate" in reason.lower()


def test_client_without_certificate_is_anonymous_when_client_auth_is_requested(
        files: dict[str, Path]) -> None:
    verdict, cert = trio.run(_handshake, _server(files, client_auth="requested"),
                             _client(files, keystore=None))
    assert (verdict, cert) == ("ok", None)
    session = tls.tls_session(cert, client_host="127.0.0.1")
    assert str(session.principal) == "User:ANONYMOUS"
    assert session.security_protocol == "SSL"


def test_server_whose_certificate_names_another_host_is_refused_when_endpoints_are_checked(
        files: dict[str, Path]) -> None:
    server = tls.server_context(TlsSettings(keystore_location=str(files["other_host"])))
    verdict, _ = trio.run(_handshake, server, _client(files, keystore=None))
    assert verdict == "refused"
    unchecked = _client(files, keystore=None, endpoint_identification_algorithm="")
    assert not unchecked.check_hostname
    verdict, _ = trio.run(_handshake, server, unchecked)
    assert verdict == "ok"


def test_plaintext_client_is_refused_when_the_listener_is_tls(files: dict[str, Path]) -> None:
    async def run() -> str:
        server = _server(files)
        outcome: list[str] = []
        decided = trio.Event()

        async def serve(stream: trio.SocketStream) -> None:
            try:
                await tls.accept(stream, server, timeout_s=5)
                outcome.append("accepted")
            except tls.TlsHandshakeError as exc:
                outcome.append(str(exc))
            decided.set()
            await trio.aclose_forcefully(stream)

        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(functools.partial(trio.serve_tcp, serve, 0,
                                                              host="127.0.0.1"))
            stream = await trio.open_tcp_stream("127.0.0.1",
                                                listeners[0].socket.getsockname()[1])
            await stream.send_all(b"\x00\x00\x00\x05hello")
            assert await stream.receive_some(100) == b""  # closed, nothing answered
            with trio.fail_after(5):
                await decided.wait()
            nursery.cancel_scope.cancel()
        return outcome[0]

    assert trio.run(run).startswith("TLS handshake failed")


def test_endpoint_algorithm_other_than_https_is_refused() -> None:
    with pytest.raises(TlsConfigError, match="endpoint.identification"):
        tls.client_context(TlsSettings(endpoint_identification_algorithm="ldap"))


@pytest.mark.parametrize(("subject", "expected"), [
    (((("organizationName", "kraft-py"),), (("commonName", "kraft-node-4"),)),
     "CN=kraft-node-4,O=kraft-py"),
    (((("commonName", "a,b+c"),),), "CN=a\\,b\\+c"),
    (((("countryName", "DE"),), (("commonName", " x"),)), "CN=\\ x,C=DE"),
    (((("commonName", "a"), ("userId", "b")),), "CN=a+UID=b"),
])
def test_peer_subject_is_rfc2253_most_specific_first_when_a_certificate_is_given(
        subject: Any, expected: str) -> None:
    assert tls.peer_subject({"subject": subject}) == expected


@pytest.mark.parametrize(("names", "node_id"), [
    (["kraft-node-7"], 7), (["kraft-node-0"], 0), (["kraft-node-07"], None),
    (["kraft-node-"], None), (["kraft-node-1x"], None), (["broker-4"], None),
    (["kraft-node-1", "kraft-node-2"], None), ([], None)])
def test_node_id_is_read_only_when_the_one_common_name_is_kraft_node_id(
        names: list[str], node_id: int | None) -> None:
    cert = {"subject": tuple((("commonName", n),) for n in names)}
    assert tls.node_id_of(cert) == node_id


@pytest.mark.parametrize(("name", "dialled", "error"), [
    ("kraft-node-1", 1, None), ("kraft-node-1", None, None),
    ("kraft-node-7", 1, "binds node 7, not node 1"),
    ("kraft-client", 1, "binds no node id, not node 1"),
    ("kraft-client", None, "binds no node id, not a node id")])
def test_a_dialled_node_must_present_its_own_id_when_identity_is_bound(
        name: str, dialled: int | None, error: str | None) -> None:
    cert = {"subject": ((("organizationName", "kraft-py"),), (("commonName", name),))}
    assert tls.node_identity_error(cert, dialled) == error


def test_session_principal_is_the_subject_dn_when_the_peer_has_a_certificate() -> None:
    cert = {"subject": ((("organizationName", "kraft-py"),), (("commonName", "broker-4"),))}
    session = tls.tls_session(cert, client_host="127.0.0.1", security_protocol="SASL_SSL")
    assert str(session.principal) == "User:CN=broker-4,O=kraft-py"
    assert session.tls_peer_subject == "CN=broker-4,O=kraft-py"
    assert session.security_protocol == "SASL_SSL"
