"""Throwaway certificates for a local TLS cluster (`kraft quorum start --tls`): a CA, one
certificate per node, two client identities, and their client properties files.

Made with the `cryptography` package (ECDSA P-256 keys: quick to make, read by Java,
librdkafka and Python alike). The rule of usages: a node's certificate names
`IP:127.0.0.1` and `DNS:localhost` (the launcher's listeners are on 127.0.0.1, and clients
check the name dialled) and is good for server and client authentication, as a node is
both; a client's certificate names no address and is good for client authentication only,
so it cannot serve as a node. A node's subject is `CN=kraft-node-<id>,O=kraft-py`: the node
id bound in its certificate, which the controllers check against the ids it claims
(`raft.peer_identity`) and every node checks when it dials another (`node_id_of`).

The two client identities (principals as Kafka's default SSL principal builder makes them,
`User:<subject DN>`):
- `admin.properties`, `CN=kraft-admin,O=kraft-py`: the operator. The launcher adds it to
  every node's `super.users`, and `kraft ... --cluster DIR` uses it by default for the
  verbs it runs against the cluster.
- `client.properties`, `CN=kraft-client,O=kraft-py`: an unprivileged client (no ACL, not a
  super user), for applications and for trying what an ordinary client may do.

Layout under the cluster directory:

    tls/ca.pem                  the CA certificate (the truststore of every node and client)
    tls/ca-key.pem              its key (0600; kept so tests and operators can issue more)
    tls/node-<id>.pem           a node's key (PKCS8, unencrypted) then its certificate
    tls/client.pem              the same for the unprivileged client (a Kafka PEM keystore)
    tls/client-cert.pem, tls/client-key.pem   the client's certificate and key apart
                                (kafka-python's ssl_certfile/ssl_keyfile, librdkafka's
                                ssl.certificate.location/ssl.key.location)
    tls/admin.pem, tls/admin-cert.pem, tls/admin-key.pem   the same for the admin
    client.properties           security.protocol=SSL and the ssl.* keys naming the client's
    admin.properties            the same naming the admin's
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
ADMIN_PROPERTIES = "admin.properties"
TLS_DIR = "tls"
CLIENT_CN = "kraft-client"
ADMIN_CN = "kraft-admin"
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
          days: int = VALID_DAYS, server_auth: bool = True) -> Issuer:
    """A certificate signed by `ca` for `common_name`, naming the given addresses, for
    client authentication and, with `server_auth` (a node's), server authentication."""
    key = ec.generate_private_key(ec.SECP256R1())
    start, end = _validity(now or datetime.datetime.now(datetime.UTC), days)
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server_auth else []) + \
        [ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = (
        x509.CertificateBuilder().subject_name(_name(common_name))
        .issuer_name(ca.certificate.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            ca.key.public_key()), critical=False))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return Issuer(builder.sign(ca.key, hashes.SHA256()), key)


def issue_client(ca: Issuer, common_name: str, *, now: datetime.datetime | None = None,
                 days: int = VALID_DAYS) -> Issuer:
    """A client's certificate: client authentication only and no address, so that a
    server checking the name it dialled and the usage refuses it."""
    return issue(ca, common_name, ip_addresses=(), dns_names=(), now=now, days=days,
                 server_auth=False)


def node_common_name(node_id: int) -> str:
    return f"{NODE_CN_PREFIX}{node_id}"


def node_principal(node_id: int) -> str:
    """The principal a node's certificate gives its connections (Kafka's default SSL
    principal builder: `User:` and the subject DN, most specific first)."""
    return certificate_principal(node_common_name(node_id))


def certificate_principal(common_name: str) -> str:
    """The principal of a certificate issued here for `common_name`."""
    return f"User:CN={common_name},O={ORGANIZATION}"


def admin_principal() -> str:
    """The admin identity's principal (`admin.properties`), a super user of the cluster."""
    return certificate_principal(ADMIN_CN)


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
class ClientIdentity:
    """One client identity's files: its PEM keystore, certificate and key apart, and the
    client properties file naming them."""

    keystore: Path
    cert: Path
    key: Path
    properties: Path


@dataclass(frozen=True, slots=True)
class ClusterTls:
    ca_file: Path
    node_keystores: dict[int, Path]
    client: ClientIdentity  # unprivileged
    admin: ClientIdentity  # a super user

    @property
    def client_keystore(self) -> Path:
        return self.client.keystore

    @property
    def client_properties(self) -> Path:
        return self.client.properties


def write_client_identity(directory: str | os.PathLike[str], common_name: str,
                          properties_name: str, comment: str, *, ca: Issuer | None = None,
                          stem: str | None = None) -> ClientIdentity:
    """A client certificate for `common_name` signed by `ca` (default: the cluster
    directory's own CA), its files in `tls/<stem>*.pem` (stem: the common name) and the
    client properties file `properties_name` naming them, with `comment` on top."""
    base = Path(directory).resolve()
    tls_dir = base / TLS_DIR
    stem = stem or common_name
    issued = issue_client(ca or load_ca(base), common_name)
    keystore, cert, key = (tls_dir / f"{stem}.pem", tls_dir / f"{stem}-cert.pem",
                           tls_dir / f"{stem}-key.pem")
    _write_private(keystore, keystore_pem(issued))
    cert.write_bytes(certificate_pem(issued))
    _write_private(key, key_pem(issued))
    properties = base / properties_name
    properties.write_text(
        f"# kraft-py: {comment}\n"
        "security.protocol=SSL\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={tls_dir / 'ca.pem'}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={keystore}\n"
        "ssl.endpoint.identification.algorithm=https\n")
    return ClientIdentity(keystore, cert, key, properties)


def write_cluster_tls(directory: str | os.PathLike[str], node_ids: list[int]) -> ClusterTls:
    """The CA, the nodes' certificates, and the two client identities with their
    properties files (`client.properties`, `admin.properties`)."""
    base = Path(directory).resolve()
    tls_dir = base / TLS_DIR
    tls_dir.mkdir(parents=True, exist_ok=True)
    ca = make_ca()
    (tls_dir / "ca.pem").write_bytes(certificate_pem(ca))
    _write_private(tls_dir / "ca-key.pem", key_pem(ca))
    nodes = {n: write_node_keystore(base, ca, n) for n in node_ids}
    client = write_client_identity(
        base, CLIENT_CN, CLIENT_PROPERTIES, f"an unprivileged client of this TLS cluster "
        f"({CLIENT_CN}: no ACLs, not a super user; kraft ... --command-config, Kafka's tools)",
        ca=ca, stem="client")
    admin = write_client_identity(
        base, ADMIN_CN, ADMIN_PROPERTIES, f"this TLS cluster's admin ({ADMIN_CN}, in "
        "super.users; the default of kraft ... --cluster DIR)", ca=ca, stem="admin")
    return ClusterTls(tls_dir / "ca.pem", nodes, client, admin)


def node_tls_settings(files: ClusterTls, node_id: int) -> dict[str, str]:
    """The `ssl.*` node keys of `node_id` in a `--tls` cluster (mutual TLS), and
    `super.users` naming every node's principal and the admin's: with the authorizer
    turned on (`--set authorizer.class.name=...`), the nodes' own requests to each other
    and the operator's stay allowed, as Kafka's brokers are usually super users; the
    unprivileged client's certificate is not one."""
    return {"ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(files.node_keystores[node_id]),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(files.ca_file),
            "ssl.client.auth": "required",
            "super.users": ";".join([*(node_principal(n) for n in sorted(files.node_keystores)),
                                     admin_principal()])}
