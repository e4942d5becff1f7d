"""tools/metrics.py over https (`metrics.listener = https://HOST:PORT`): the node's PEM
keystore serves /metrics, a client with a certificate of the CA reads it, and one without
a certificate is refused when `ssl.client.auth=required`; a silent TCP peer holds only
its own connection (a scrape beside it is answered) and is dropped at the handshake
deadline."""

from __future__ import annotations

import socket
import ssl
import time
import urllib.error
import urllib.request

import pytest

from raft.common import tls
from raft.common.tls import TlsSettings
from tools import tls_certs
from tools.metrics import NodeMetrics, serve_registry

SCRAPE_BOUND_S = 5.0  # well under the server's 10 s handshake deadline


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tls_certs.ClusterTls:
    return tls_certs.write_cluster_tls(tmp_path_factory.mktemp("metrics"), [1])


def _get(url: str, context: ssl.SSLContext, timeout_s: float = 10) -> str:
    with urllib.request.urlopen(url, context=context, timeout=timeout_s) as answer:
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


def _client(certs: tls_certs.ClusterTls) -> ssl.SSLContext:
    client = ssl.create_default_context(cafile=str(certs.ca_file))
    client.load_cert_chain(str(certs.client_keystore))
    return client


def _settings(certs: tls_certs.ClusterTls) -> TlsSettings:
    return TlsSettings(keystore_location=str(certs.node_keystores[1]),
                       truststore_location=str(certs.ca_file), client_auth="required")


def test_scrape_is_answered_when_a_silent_tcp_peer_holds_a_connection_open(
        certs: tls_certs.ClusterTls) -> None:
    metrics = NodeMetrics()
    host, port = metrics.serve("127.0.0.1", 0, _settings(certs))
    url = f"https://{host}:{port}/metrics"
    with socket.create_connection((host, port), timeout=SCRAPE_BOUND_S) as silent:
        started = time.monotonic()
        assert "kafka_raft_current_epoch" in _get(url, _client(certs), SCRAPE_BOUND_S)
        assert time.monotonic() - started < SCRAPE_BOUND_S
        silent.settimeout(0)
        with pytest.raises(BlockingIOError):  # still open: nothing closed it meanwhile
            silent.recv(1)


def test_silent_peer_is_dropped_when_the_handshake_deadline_passes(
        certs: tls_certs.ClusterTls) -> None:
    server = serve_registry(NodeMetrics().registry, "127.0.0.1", 0,
                            tls.server_context(_settings(certs)))
    server.handshake_timeout_s = 0.3
    try:
        with socket.create_connection(("127.0.0.1", server.server_port),
                                      timeout=SCRAPE_BOUND_S) as silent:
            started = time.monotonic()
            assert silent.recv(1) == b""  # closed by the server, not by our timeout
            assert time.monotonic() - started < SCRAPE_BOUND_S
    finally:
        server.shutdown()
        server.server_close()


def test_plain_http_scrape_is_answered_when_a_silent_tcp_peer_holds_a_connection_open(
) -> None:
    metrics = NodeMetrics()
    host, port = metrics.serve("127.0.0.1", 0)
    with socket.create_connection((host, port), timeout=SCRAPE_BOUND_S):
        with urllib.request.urlopen(f"http://{host}:{port}/metrics",
                                    timeout=SCRAPE_BOUND_S) as answer:
            assert "kafka_raft_current_epoch" in answer.read().decode()
