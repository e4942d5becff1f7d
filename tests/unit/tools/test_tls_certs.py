"""tools/tls_certs.py's certificates as `kraft quorum start --tls` writes them, read back
with `cryptography`: a node's certificate is good for server and client authentication
and names the launcher's addresses; the client's and the admin's are good for client
authentication only and name no address, so neither can serve as a node; the admin is a
super user and the client is not; and which properties file the launcher and the CLI
pick for a cluster directory (tools/cluster.py)."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tools import tls_certs
from tools.cluster import Cluster, cluster_properties
from tools.config import load_client_properties


@pytest.fixture(scope="module")
def cluster_tls(tmp_path_factory: pytest.TempPathFactory) -> tls_certs.ClusterTls:
    return tls_certs.write_cluster_tls(tmp_path_factory.mktemp("certs"), [1, 4])


def certificate_in(path: Path) -> x509.Certificate:
    """The certificate of a PEM keystore file (its key first, then the certificate)."""
    return x509.load_pem_x509_certificates(path.read_bytes())[0]


def usages(cert: x509.Certificate) -> set[x509.ObjectIdentifier]:
    return set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def alternative_names(cert: x509.Certificate) -> list[object]:
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [*names.get_values_for_type(x509.DNSName),
            *names.get_values_for_type(x509.IPAddress)]


def common_name(cert: x509.Certificate) -> str:
    return str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def test_node_certificate_serves_and_dials_and_names_the_launchers_addresses(
        cluster_tls: tls_certs.ClusterTls) -> None:
    cert = certificate_in(cluster_tls.node_keystores[4])
    assert usages(cert) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    assert sorted(map(str, alternative_names(cert))) == ["127.0.0.1", "localhost"]
    assert ipaddress.ip_address("127.0.0.1") in alternative_names(cert)
    assert common_name(cert) == "kraft-node-4"


@pytest.mark.parametrize(("identity", "name"), [("client", "kraft-client"),
                                                 ("admin", "kraft-admin")])
def test_client_certificates_authenticate_clients_only_and_name_no_address(
        cluster_tls: tls_certs.ClusterTls, identity: str, name: str) -> None:
    files: tls_certs.ClientIdentity = getattr(cluster_tls, identity)
    for path in (files.keystore, files.cert):
        cert = certificate_in(path)
        assert usages(cert) == {ExtendedKeyUsageOID.CLIENT_AUTH}
        assert alternative_names(cert) == []
        assert common_name(cert) == name
    assert files.key.stat().st_mode & 0o077 == 0
    assert files.keystore.stat().st_mode & 0o077 == 0


def test_each_properties_file_names_its_own_identity(
        cluster_tls: tls_certs.ClusterTls) -> None:
    client = load_client_properties(cluster_tls.client.properties)
    admin = load_client_properties(cluster_tls.admin.properties)
    assert cluster_tls.client.properties.name == "client.properties"
    assert cluster_tls.admin.properties.name == "admin.properties"
    assert client.tls.keystore_location == str(cluster_tls.client.keystore)
    assert admin.tls.keystore_location == str(cluster_tls.admin.keystore)
    assert client.uses_tls
    assert admin.uses_tls


def test_the_admin_is_a_super_user_and_the_client_is_not(
        cluster_tls: tls_certs.ClusterTls) -> None:
    super_users = tls_certs.node_tls_settings(cluster_tls, 1)["super.users"].split(";")
    assert tls_certs.admin_principal() == "User:CN=kraft-admin,O=kraft-py"
    assert tls_certs.admin_principal() in super_users
    assert tls_certs.certificate_principal(tls_certs.CLIENT_CN) not in super_users


def test_super_users_of_the_settings_are_added_to_the_nodes_and_the_admin(
        tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path / "c", voters=1, brokers=1, tls=True,
                             settings={"super.users": "User:alice;User:CN=kraft-node-1,O=kraft-py"})
    for node in cluster.nodes.values():
        settings = tomllib.loads(Path(node.config).read_text())
        assert settings["super.users"].split(";") == [
            "User:CN=kraft-node-1,O=kraft-py", "User:CN=kraft-node-2,O=kraft-py",
            "User:CN=kraft-admin,O=kraft-py", "User:alice"]
    assert cluster.admin_properties == tmp_path / "c" / "admin.properties"
    assert cluster.client_properties == tmp_path / "c" / "client.properties"


def test_cluster_directory_offers_the_admin_to_admin_verbs_and_the_client_to_the_others(
        tmp_path: Path) -> None:
    assert cluster_properties(tmp_path) is None  # a plaintext cluster
    (tmp_path / "client.properties").write_text("security.protocol=SSL\n")
    # a cluster made before there was an admin identity: its one client
    assert cluster_properties(tmp_path) == tmp_path / "client.properties"
    (tmp_path / "admin.properties").write_text("security.protocol=SSL\n")
    assert cluster_properties(tmp_path) == tmp_path / "admin.properties"
    assert cluster_properties(tmp_path, admin=False) == tmp_path / "client.properties"
