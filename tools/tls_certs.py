"""Throwaway certificates for a local TLS cluster (`kraft quorum start --tls`): a CA, one
certificate per node, one for clients, and the client properties file.

Made with the `cryptography` package (ECDSA P-256 keys: quick to make, read by Java,
librdkafka and Python alike). Every certificate names `IP:127.0.0.1` and `DNS:localhost`
(the launcher's listeners are on 127.0.0.1, and clients check the name dialled), and is
good for both server and client authentication. A node's subject is
`CN=kraft-node-<id>,O=kraft-py`: the node id bound in its certificate, which the
controllers check against the ids it claims (`raft.peer_identity`); a client's is
`CN=kraft-client,O=kraft-py` (its principal: `User:CN=kraft-client,O=kraft-py`).

Layout under the cluster directory:

    tls/ca.pem                  the CA certificate (the truststore of every node and client)
    tls/ca-key.pem              its key (0600; kept so tests and operators can issue more)
    tls/node-<id>.pem           a node's key (PKCS8, unencrypted) then its certificate
    tls/client.pem              the same for clients (a Kafka PEM keystore file)
    tls/client-cert.pem, tls/client-key.pem   the client's certificate and key apart
                                (kafka-python's ssl_certfile/ssl_keyfile, librdkafka's
                                ssl.certificate.location/ssl.key.location)
    client.properties           security.protocol=SSL and the ssl.* keys naming them
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from raft.common.tls import NODE_CN_PREFIX

CLIENT_PROPERTIES = "client.properties"
TLS_DIR = "tls"
CLIENT_CN = "kraft-client"
ORGANIZATION = "kraft-py"
VALID_DAYS = 365


@dataclass(frozen=True, slots=True)
class Issuer:
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _validity(now: datetime.datetime, days: int) -> tuple[datetime.datetime, datetime.datetime]:
    return now - datetime.timedelta(hours=1), now + datetime.timedelta(days=days)


def make_ca(common_name: str = "kraft-py local CA", *, now: datetime.datetime | None = None,
            days: int = VALID_DAYS) -> Issuer:
    """A self-signed CA certificate and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    start, end = _validity(now or datetime.datetime.now(datetime.UTC), days)
    certificate = (
        x509.CertificateBuilder().subject_name(_name(common_name))
        .issuer_name(_name(common_name)).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                     crl_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False,
                                     decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
        .sign(key, hashes.SHA256()))
    return Issuer(certificate, key)


def issue(ca: Issuer, common_name: str, *, ip_addresses: tuple[str, ...] = ("127.0.0.1",),
          dns_names: tuple[str, ...] = ("localhost",), now: datetime.datetime | None = None,
          days: int = VALID_DAYS) -> Issuer:
    """A certificate signed by `ca` for `common_name`, naming the given addresses, for
    server and client authentication."""
    key = ec.generate_private_key(ec.SECP256R1())
    start, end = _validity(now or datetime.datetime.now(datetime.UTC), days)
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
    builder = (
        x509.CertificateBuilder().subject_name(_name(common_name))
        .issuer_name(ca.certificate.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                              ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            ca.key.public_key()), critical=False))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return Issuer(builder.sign(ca.key, hashes.SHA256()), key)


def node_common_name(node_id: int) -> str:
    return f"{NODE_CN_PREFIX}{node_id}"


def node_principal(node_id: int) -> str:
    """The principal a node's certificate gives its connections (Kafka's default SSL
    principal builder: `User:` and the subject DN, most specific first)."""
    return f"User:CN={node_common_name(node_id)},O={ORGANIZATION}"


def certificate_pem(issued: Issuer) -> bytes:
    return issued.certificate.public_bytes(serialization.Encoding.PEM)


def key_pem(issued: Issuer) -> bytes:
    return issued.key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def keystore_pem(issued: Issuer) -> bytes:
    """A PEM keystore file: the key, then the certificate (Kafka's and Python's order)."""
    return key_pem(issued) + certificate_pem(issued)


def load_ca(directory: str | os.PathLike[str]) -> Issuer:
    """The CA a cluster directory's `tls/` holds (to issue more certificates)."""
    tls_dir = Path(directory) / TLS_DIR
    certificate = x509.load_pem_x509_certificate((tls_dir / "ca.pem").read_bytes())
    key = serialization.load_pem_private_key((tls_dir / "ca-key.pem").read_bytes(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return Issuer(certificate, key)


def write_node_keystore(directory: str | os.PathLike[str], ca: Issuer, node_id: int,
                        common_name: str | None = None) -> Path:
    """`tls/node-<id>.pem` signed by `ca` (CN `kraft-node-<id>` unless given)."""
    path = Path(directory) / TLS_DIR / f"node-{node_id}.pem"
    _write_private(path, keystore_pem(issue(ca, common_name or node_common_name(node_id))))
    return path


@dataclass(frozen=True, slots=True)
class ClusterTls:
    ca_file: Path
    node_keystores: dict[int, Path]
    client_keystore: Path
    client_cert: Path
    client_key: Path
    client_properties: Path


def write_cluster_tls(directory: str | os.PathLike[str], node_ids: list[int]) -> ClusterTls:
    """The CA, the nodes' and the client's certificates, and `client.properties`."""
    base = Path(directory).resolve()
    tls_dir = base / TLS_DIR
    tls_dir.mkdir(parents=True, exist_ok=True)
    ca = make_ca()
    (tls_dir / "ca.pem").write_bytes(certificate_pem(ca))
    _write_private(tls_dir / "ca-key.pem", key_pem(ca))
    nodes = {n: write_node_keystore(base, ca, n) for n in node_ids}
    client = issue(ca, CLIENT_CN)
    _write_private(tls_dir / "client.pem", keystore_pem(client))
    (tls_dir / "client-cert.pem").write_bytes(certificate_pem(client))
    _write_private(tls_dir / "client-key.pem", key_pem(client))
    properties = base / CLIENT_PROPERTIES
    properties.write_text(
        "# kraft-py: a client of this TLS cluster (kraft ... --command-config, Kafka's tools)\n"
        "security.protocol=SSL\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={tls_dir / 'ca.pem'}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={tls_dir / 'client.pem'}\n"
        "ssl.endpoint.identification.algorithm=https\n")
    return ClusterTls(tls_dir / "ca.pem", nodes, tls_dir / "client.pem",
                      tls_dir / "client-cert.pem", tls_dir / "client-key.pem", properties)


def node_tls_settings(files: ClusterTls, node_id: int) -> dict[str, str]:
    """The `ssl.*` node keys of `node_id` in a `--tls` cluster (mutual TLS), and
    `super.users` naming every node's principal: with the authorizer turned on (`--set
    authorizer.class.name=...`), the nodes' own requests to each other stay allowed, as
    Kafka's brokers are usually super users; the client's certificate is not one."""
    return {"ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(files.node_keystores[node_id]),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(files.ca_file),
            "ssl.client.auth": "required",
            "super.users": ";".join(node_principal(n) for n in sorted(files.node_keystores))}
