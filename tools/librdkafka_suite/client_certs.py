"""The client certificate files librdkafka's SSL tests read, in the forms trivup's SslApp
makes them (`scenarios.ClientFiles`), signed by a `kraft quorum start --tls` cluster's CA
(`tools.tls_certs`) so that its brokers, with `ssl.client.auth=required`, accept them.
A second, unused CA comes first in the all-CAs file, as trivup's, so that a client
reading that file must pick the right one out of several."""

from __future__ import annotations

import secrets
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from tools.librdkafka_suite.scenarios import ClientFiles
from tools.tls_certs import Issuer, certificate_pem, issue_client, key_pem, load_ca, make_ca

CLIENT_CN = "librdkafka-suite-client"


def write_client_files(directory: Path, cluster_dir: Path) -> ClientFiles:
    """The files of a client certificate signed by the CA of the TLS cluster in
    `cluster_dir`, written under `directory` (made if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = load_ca(cluster_dir)
    client = issue_client(ca, CLIENT_CN)
    password = secrets.token_hex(8)
    files = ClientFiles(
        priv_pem=directory / "client-priv.pem", priv_der=directory / "client-priv.der",
        pub_pem=directory / "client-pub.pem", pub_der=directory / "client-pub.der",
        pkcs=directory / "client.pfx", ca_pem=directory / "ca.pem",
        ca_der=directory / "ca.der", all_cas_pem=directory / "all_cas.pem",
        password=password)
    for private in (files.priv_pem, files.priv_der, files.pkcs):
        private.touch(mode=0o600)
    files.priv_pem.write_bytes(key_pem(client))
    files.priv_der.write_bytes(client.key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    files.pub_pem.write_bytes(certificate_pem(client) + certificate_pem(ca))
    files.pub_der.write_bytes(_der(client))
    files.pkcs.write_bytes(pkcs12.serialize_key_and_certificates(
        CLIENT_CN.encode(), client.key, client.certificate, [ca.certificate],
        serialization.BestAvailableEncryption(password.encode())))
    files.ca_pem.write_bytes(certificate_pem(ca))
    files.ca_der.write_bytes(_der(ca))
    files.all_cas_pem.write_bytes(certificate_pem(make_ca("librdkafka-suite unused CA"))
                                  + certificate_pem(ca))
    return files


def _der(issued: Issuer) -> bytes:
    return issued.certificate.public_bytes(serialization.Encoding.DER)
