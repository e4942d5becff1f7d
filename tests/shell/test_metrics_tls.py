"""tools/metrics.py over https (`metrics.listener = https://HOST:PORT`): the node's PEM
keystore serves /metrics, a client with a certificate of the CA reads it, and one without
a certificate is refused when `ssl.client.auth=required`."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request

import pytest

from raft.common.tls import TlsSettings
from tools import tls_certs
from tools.metrics import NodeMetrics


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tls_certs.ClusterTls:
    return tls_certs.write_cluster_tls(tmp_path_factory.mktemp("metrics"), [1])


def _get(url: str, context: ssl.SSLContext) -> str:
    with urllib.request.urlopen(url, context=context, timeout=10) as answer:
        return str(answer.read().decode())


def test_metrics_are_served_over_tls_only_to_clients_with_a_certificate_when_required(
        certs: tls_certs.ClusterTls) -> None:
    metrics = NodeMetrics()
    host, port = metrics.serve("127.0.0.1", 0, TlsSettings(
        keystore_location=str(certs.node_keystores[1]),
        truststore_location=str(certs.ca_file), client_auth="required"))
    url = f"https://{host}:{port}/metrics"
    client = ssl.create_default_context(cafile=str(certs.ca_file))
    client.load_cert_chain(str(certs.client_keystore))
    assert "kafka_raft_current_epoch" in _get(url, client)
    anonymous = ssl.create_default_context(cafile=str(certs.ca_file))
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        _get(url, anonymous)
