"""TLS for every kraft-py listener and client: one place that builds `ssl.SSLContext`s from
plain values (Kafka's `ssl.*` settings, parsed by `tools.config`), reads who a peer's
certificate names, and runs the server-side handshake over Trio.

- `TlsSettings` holds Kafka's keys as plain values: a keystore (a PEM file, a PKCS12
  file, or PEM text given in the configuration), a truststore (the same three forms;
  none: the system's CAs), `ssl.client.auth` (none | requested | required) and
  `ssl.endpoint.identification.algorithm` (`https`: the server's certificate must name
  the host or IP address dialled; empty: the chain is still checked, the name is not).
- `server_context` / `client_context` build the contexts; TLS 1.2 is the floor, as in
  Kafka's default `ssl.enabled.protocols`. A bad file, password or PEM text is one
  `TlsConfigError` naming what failed.
- `peer_subject` renders a peer certificate's subject as Kafka's default SSL principal
  builder does (RFC 2253: most specific first, `CN=broker-4,O=kraft`), so the principal
  of a connection is `User:<that DN>`; `node_id_of` reads the node id bound in a
  kraft-py node certificate: the subject's common name `kraft-node-<id>` (the only
  encoding accepted: `tools/tls_certs.py` issues it; see raft/peer_identity.py for the
  check on requests). A node dialling another with identity binding on (mutual TLS)
  checks the other way round: `open_node_stream` refuses a server whose certificate does
  not bind the node id it meant to dial (`node_identity_error`), before a byte is sent,
  so that a client's certificate or another node's cannot pose as that node.
- `accept` runs the server-side handshake with a deadline (a silent or plaintext peer is
  refused, never waited on) and returns the stream and the peer's `Session`.
- every client and server is handed its context: there is no process-wide default (the
  command line reads its own once and passes it to the verb's clients, `tools/cli.py`).

Python's `ssl` module loads certificates and keys only from files: PEM text and PKCS12
contents go through an anonymous in-memory file (`memfd_create`; a private temporary
file where there is none) that is closed as soon as it is read.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raft.common.session import KafkaPrincipal, Session

if TYPE_CHECKING:
    import trio

__all__ = [
    "CLIENT_AUTH_MODES", "NODE_CN_PREFIX", "STORE_TYPES", "TlsConfigError", "TlsSettings",
    "TlsHandshakeError", "accept", "client_context", "common_names",
    "node_id_of", "node_identity_error", "open_node_stream", "open_stream", "peer_subject",
    "server_context", "tls_session", "wrap_client",
]

CLIENT_AUTH_MODES = ("none", "requested", "required")
STORE_TYPES = ("PEM", "PKCS12")
NODE_CN_PREFIX = "kraft-node-"  # a node certificate's subject CN: kraft-node-<id>
DEFAULT_HANDSHAKE_TIMEOUT_S = 10.0
_NODE_CN = re.compile(r"kraft-node-(0|[1-9][0-9]{0,9})")


class TlsConfigError(ValueError):
    """The TLS settings cannot make a context (a missing file, a wrong password, PEM text
    that is not a certificate or key); the message names what failed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsSettings:
    """Kafka's `ssl.*` values. The keystore is one of `keystore_location` (a file of
    `keystore_type`) or the PEM pair `keystore_certificate_chain` + `keystore_key`; the
    truststore is one of `truststore_location` or `truststore_certificates` (PEM)."""

    keystore_location: str = ""
    keystore_type: str = "PEM"
    keystore_password: str = ""  # a PKCS12 file's password
    keystore_certificate_chain: str = ""  # PEM text: the certificate, then its chain
    keystore_key: str = ""  # PEM text: the private key
    key_password: str = ""  # the private key's password ("": not encrypted)
    truststore_location: str = ""
    truststore_type: str = "PEM"
    truststore_password: str = ""  # a PKCS12 truststore's password
    truststore_certificates: str = ""  # PEM text: the trusted CA certificates
    client_auth: str = "none"  # none | requested | required
    endpoint_identification_algorithm: str = "https"  # "": no hostname check

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or self.keystore_key)


# -- building contexts ------------------------------------------------------------------


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """A listener's context: its keystore (required), and the truststore that checks
    client certificates as `client_auth` asks."""
    if not settings.has_keystore:
        raise TlsConfigError("an SSL listener needs a keystore: ssl.keystore.location, or "
                             "ssl.keystore.certificate.chain and ssl.keystore.key")
    if settings.client_auth not in CLIENT_AUTH_MODES:
        raise TlsConfigError(f"ssl.client.auth: expected one of {', '.join(CLIENT_AUTH_MODES)}"
                             f", got {settings.client_auth!r}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_keystore(context, settings)
    context.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                           "required": ssl.CERT_REQUIRED}[settings.client_auth]
    if settings.client_auth != "none":
        _load_truststore(context, settings)
    return context


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """A client's context: the server's chain checked against the truststore, its name
    against the address dialled unless the algorithm is empty; the keystore, when given,
    is the client's certificate (mutual TLS)."""
    algorithm = settings.endpoint_identification_algorithm.strip().lower()
    if algorithm not in ("", "https"):
        raise TlsConfigError("ssl.endpoint.identification.algorithm: expected https or "
                             f"empty, got {settings.endpoint_identification_algorithm!r}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = algorithm == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    _load_truststore(context, settings)
    if settings.has_keystore:
        _load_keystore(context, settings)
    return context


def _load_keystore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    password = settings.key_password or None
    if settings.keystore_location:
        kind = settings.keystore_type.upper()
        if kind not in STORE_TYPES:
            raise TlsConfigError(f"ssl.keystore.type: expected one of {', '.join(STORE_TYPES)}"
                                 f", got {settings.keystore_type!r}")
        if kind == "PKCS12":
            chain, key = _pkcs12_keystore(settings.keystore_location,
                                          settings.keystore_password)
            _load_pem_pair(context, chain, key, None, "ssl.keystore.location")
            return
        _readable(settings.keystore_location, "ssl.keystore.location")
        try:
            context.load_cert_chain(settings.keystore_location, password=password)
        except (ssl.SSLError, OSError) as exc:
            raise TlsConfigError(f"ssl.keystore.location {settings.keystore_location}: "
                                 f"cannot load a certificate and key: {_reason(exc)}") from None
        return
    if not settings.keystore_certificate_chain or not settings.keystore_key:
        raise TlsConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go "
                             "together")
    _load_pem_pair(context, settings.keystore_certificate_chain.encode(),
                   settings.keystore_key.encode(), password, "ssl.keystore.key")


def _load_pem_pair(context: ssl.SSLContext, chain: bytes, key: bytes,
                   password: str | None, what: str) -> None:
    with _memory_file(chain) as chain_path, _memory_file(key) as key_path:
        try:
            context.load_cert_chain(chain_path, key_path, password=password)
        except (ssl.SSLError, OSError) as exc:
            raise TlsConfigError(f"{what}: cannot load the certificate chain and key: "
                                 f"{_reason(exc)}") from None


def _load_truststore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    try:
        if settings.truststore_location:
            kind = settings.truststore_type.upper()
            if kind not in STORE_TYPES:
                raise TlsConfigError("ssl.truststore.type: expected one of "
                                     f"{', '.join(STORE_TYPES)}, got {settings.truststore_type!r}")
            _readable(settings.truststore_location, "ssl.truststore.location")
            if kind == "PKCS12":
                context.load_verify_locations(cadata=_pkcs12_certificates(
                    settings.truststore_location, settings.truststore_password))
            else:
                context.load_verify_locations(cafile=settings.truststore_location)
        elif settings.truststore_certificates:
            context.load_verify_locations(cadata=settings.truststore_certificates)
        else:  # as Kafka falls back to the JVM's trusted CAs
            context.load_default_certs()
    except (ssl.SSLError, OSError, ValueError) as exc:
        if isinstance(exc, TlsConfigError):
            raise
        where = settings.truststore_location or "ssl.truststore.certificates"
        raise TlsConfigError(f"truststore {where}: cannot load CA certificates: "
                             f"{_reason(exc)}") from None


def _readable(path: str, key: str) -> None:
    if not Path(path).is_file():
        raise TlsConfigError(f"{key} {path}: no such file")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and "PEM lib" in str(exc):  # OpenSSL says no more
        return "no PEM certificate and private key could be read (or the key is encrypted " \
            "and ssl.key.password is missing or wrong)"
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    return str(exc)


def _pkcs12(path: str, password: str, key: str) -> Any:
    from cryptography.hazmat.primitives.serialization import pkcs12  # PKCS12 only
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"{key} {path}: {exc.strerror or exc}") from None
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as exc:
        raise TlsConfigError(f"{key} {path}: not a PKCS12 file, or a wrong password: "
                             f"{exc}") from None


def _pkcs12_keystore(path: str, password: str) -> tuple[bytes, bytes]:
    """(PEM certificate chain, PEM unencrypted PKCS8 key) of a PKCS12 keystore."""
    from cryptography.hazmat.primitives import serialization
    store = _pkcs12(path, password, "ssl.keystore.location")
    if store.key is None or store.cert is None:
        raise TlsConfigError(f"ssl.keystore.location {path}: holds no private key and "
                             "certificate")
    pem = serialization.Encoding.PEM
    chain = store.cert.certificate.public_bytes(pem) + b"".join(
        c.certificate.public_bytes(pem) for c in store.additional_certs)
    key = store.key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())
    return chain, key


def _pkcs12_certificates(path: str, password: str) -> str:
    from cryptography.hazmat.primitives import serialization
    store = _pkcs12(path, password, "ssl.truststore.location")
    certs = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
    if not certs:
        raise TlsConfigError(f"ssl.truststore.location {path}: holds no certificate")
    return "".join(c.certificate.public_bytes(serialization.Encoding.PEM).decode()
                   for c in certs)


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    """A path that reads as `data`, gone when the block ends."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("kraft-tls", 0)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    import tempfile  # only where there is no memfd_create: a client's start skips it
    with tempfile.NamedTemporaryFile(prefix="kraft-tls-") as handle:  # mode 0600
        handle.write(data)
        handle.flush()
        yield handle.name


# -- peers ------------------------------------------------------------------------------

# getpeercert()'s long attribute names -> RFC 2253 / Java X500Principal short names
_SHORT_NAMES = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
                "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
                "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID"}


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def peer_subject(cert: dict[str, Any] | None) -> str | None:
    """The subject DN of a (validated) peer certificate as `ssl.getpeercert()` gives it,
    in RFC 2253 form, most specific first: `CN=kraft-node-4,O=kraft-py`; None without one."""
    if not cert or "subject" not in cert:
        return None
    rdns = []
    for rdn in reversed(cert["subject"]):
        rdns.append("+".join(f"{_SHORT_NAMES.get(name, name)}={_escape(value)}"
                             for name, value in rdn))
    return ",".join(rdns)


def common_names(cert: dict[str, Any] | None) -> list[str]:
    if not cert:
        return []
    return [value for rdn in cert.get("subject", ()) for name, value in rdn
            if name == "commonName"]


def node_id_of(cert: dict[str, Any] | None) -> int | None:
    """The node id a node certificate binds: its one subject CN `kraft-node-<id>`. None
    for any other certificate (a client's, a CN that is not of that form, two CNs)."""
    names = common_names(cert)
    if len(names) != 1:
        return None
    match = _NODE_CN.fullmatch(names[0])
    return int(match.group(1)) if match else None


def node_identity_error(cert: dict[str, Any] | None, node_id: int | None) -> str | None:
    """Why a server's certificate does not bind the node dialled (None: it does). It must
    bind `node_id`; where the id dialled is unknown (None: an address a redirect named
    without one), it must bind some node id, so it is at least a node's."""
    bound = node_id_of(cert)
    if bound is not None and (node_id is None or bound == node_id):
        return None
    found = "no node id" if bound is None else f"node {bound}"
    return f"binds {found}, not {'a node id' if node_id is None else f'node {node_id}'}"


def tls_session(cert: dict[str, Any] | None, *, client_host: str,
                security_protocol: str = "SSL") -> Session:
    """The session of a TLS connection: `User:<subject DN>` with a client certificate,
    `User:ANONYMOUS` without (Kafka's default principal builder)."""
    subject = peer_subject(cert)
    principal = KafkaPrincipal("User", subject) if subject else Session().principal
    return Session(principal=principal, client_host=client_host,
                   security_protocol=security_protocol, tls_peer_subject=subject)


# -- Trio ---------------------------------------------------------------------------------
# Trio is imported in the functions below, not at the top: the command line's blocking
# client (tools/cluster.py) builds its contexts here and needs no Trio.


class TlsHandshakeError(Exception):
    """The peer did not complete a TLS handshake (plaintext, a refused or missing
    certificate, silence past the deadline); the message says what happened."""


async def accept(stream: trio.abc.Stream, context: ssl.SSLContext, *,
                 timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S
                 ) -> tuple[trio.SSLStream[trio.abc.Stream], dict[str, Any] | None]:
    """The server side of a handshake on an accepted stream: (the TLS stream, the
    peer's validated certificate or None). TlsHandshakeError when it fails; the caller
    closes `stream`."""
    import trio
    tls = trio.SSLStream(stream, context, server_side=True, https_compatible=True)
    try:
        with trio.fail_after(timeout_s):
            await tls.do_handshake()
    except trio.TooSlowError:
        raise TlsHandshakeError(f"no TLS handshake within {timeout_s} s") from None
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        cause = exc.__cause__ or exc
        raise TlsHandshakeError(f"TLS handshake failed: {_reason(cause) or 'closed'}") \
            from None
    cert = tls.getpeercert()
    return tls, cert or None


async def wrap_client(stream: trio.abc.Stream, context: ssl.SSLContext, host: str, *,
                      timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S
                      ) -> trio.SSLStream[trio.abc.Stream]:
    """The client side: handshake on a connected stream, checking the server's
    certificate against `host` when the context checks names. OSError when it fails
    (callers already treat a failed connect as one)."""
    import trio
    tls = trio.SSLStream(stream, context, server_hostname=host, https_compatible=True)
    try:
        with trio.fail_after(timeout_s):
            await tls.do_handshake()
    except trio.TooSlowError:
        await trio.aclose_forcefully(stream)
        raise OSError(f"{host}: no TLS handshake within {timeout_s} s") from None
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        await trio.aclose_forcefully(stream)
        cause = exc.__cause__ or exc
        raise OSError(f"{host}: TLS handshake failed: {_reason(cause) or 'closed'}") \
            from None
    return tls


async def open_stream(host: str, port: int, context: ssl.SSLContext | None
                      ) -> trio.abc.Stream:
    """A TCP connection to (host, port), over TLS when `context` is given."""
    import trio
    stream = await trio.open_tcp_stream(host, port)
    if context is None:
        return stream
    return await wrap_client(stream, context, host)


async def open_node_stream(host: str, port: int, context: ssl.SSLContext | None, *,
                           node_id: int | None, bind_identity: bool) -> trio.abc.Stream:
    """`open_stream` to another node: with `bind_identity` over TLS, the certificate
    reached must bind `node_id` (`node_identity_error`), else OSError naming what it
    binds, before anything is sent."""
    import trio
    stream = await open_stream(host, port, context)
    if context is None or not bind_identity:
        return stream
    assert isinstance(stream, trio.SSLStream)
    problem = node_identity_error(stream.getpeercert(), node_id)
    if problem is not None:
        await trio.aclose_forcefully(stream)
        raise OSError(f"the certificate at {host}:{port} {problem}")
    return stream
