"""Setup shared by the security integration tests (tests/integration/test_sasl_cluster.py,
test_sasl_ssl_cluster.py, test_sasl_bootstrap_quorum.py, test_tls_cluster.py and
test_acls.py): a cluster started by `kraft quorum start` and killed by PID whatever
happened, controllers formatted again with `kraft format --add-scram`, topics created
and waited for on the brokers, and the kafka-python / confluent-kafka settings of a SASL
or TLS client. kill_recorded also ends tests/integration/conftest.py's cli_cluster_dir."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.quorum_support import kraft, wait_until
from tools.cluster import Cluster, ClusterError, is_alive

WAIT_S = 30.0


def scram_jaas(user: str, password: str) -> str:
    """A SCRAM login's `sasl.jaas.config` value (Kafka's ScramLoginModule)."""
    return ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{user}" password="{password}";')


# the bootstrap super user the SASL tests format and the brokers replicate as
ADMIN_JAAS = scram_jaas("admin", "admin-secret")


def format_with_scram(cluster: Cluster, node_id: int, users: Iterable[str]) -> None:
    """`kraft format --add-scram=USER...` of one node's (emptied) data dir, as a user
    would format a controller with its bootstrap credentials."""
    formatted = kraft("format", "--dir", cluster.node(node_id).data_dir, "--node-id",
                      str(node_id), "--cluster-id", cluster.cluster_id,
                      *(f"--add-scram={u}" for u in users))
    assert formatted.returncode == 0, formatted.stderr


@contextmanager
def quorum_started(directory: Path, *args: str) -> Iterator[Cluster]:
    """`kraft quorum start --cluster DIRECTORY ARGS...` (it must succeed) and the cluster
    it started; on exit every node process still alive is killed by PID, whatever
    happened (SIGCONT first, so that a paused one dies too)."""
    try:
        started = kraft("quorum", "start", "--cluster", str(directory), *args, timeout=90)
        assert started.returncode == 0, started.stderr
        yield Cluster.load(directory)
    finally:
        kill_recorded(directory)


def kill_recorded(directory: Path) -> None:
    """SIGKILL, by PID, every node process that the cluster.json in `directory` records
    and that still runs our node (continued first, in case it is stopped); nothing if
    no cluster was written there."""
    try:
        loaded = Cluster.load(directory)
    except ClusterError:
        return
    for node in loaded.nodes.values():
        if node.pid and is_alive(node.pid, node.config):
            os.kill(node.pid, signal.SIGCONT)
            os.kill(node.pid, signal.SIGKILL)


def bootstrap_servers(cluster: Cluster, brokers: Iterable[int]) -> str:
    """The brokers' client addresses, comma-separated (a client's bootstrap list)."""
    return ",".join(a for n in brokers if (a := cluster.node(n).client_address))


def hosts_topic(cluster: Cluster, node_id: int, name: str) -> bool:
    status = cluster.broker_status(node_id)
    return status is not None and any(h["topic"] == name for h in status["hosted"])


def create_topic(cluster: Cluster, name: str, brokers: Iterable[int], *,
                 partitions: int = 1) -> None:
    """`kraft topics --create` (replication factor 2) through the controllers, then wait
    until every one of `brokers` hosts it."""
    created = kraft("topics", "--cluster", str(cluster.directory), "--create", "--topic",
                    name, "--partitions", str(partitions), "--replication-factor", "2",
                    timeout=60)
    assert created.returncode == 0, created.stderr
    wait_until(lambda: all(hosts_topic(cluster, n, name) for n in brokers), WAIT_S,
               f"every broker to host {name}")


def kafka_python_sasl(bootstrap: str | list[str], user: str, password: str, mechanism: str,
                      *, protocol: str = "SASL_PLAINTEXT") -> dict[str, Any]:
    """kafka-python's settings to log in as `user` (SASL_PLAINTEXT, or SASL_SSL with
    kafka_python_ssl's files)."""
    return {"bootstrap_servers": bootstrap, "security_protocol": protocol,
            "sasl_mechanism": mechanism, "sasl_plain_username": user,
            "sasl_plain_password": password}


def librdkafka_sasl(bootstrap: str, user: str, password: str, mechanism: str, *,
                    protocol: str = "SASL_PLAINTEXT") -> dict[str, Any]:
    """confluent-kafka's (librdkafka's) settings to log in as `user`."""
    return {"bootstrap.servers": bootstrap, "security.protocol": protocol,
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def kafka_python_ssl(tls_dir: Path) -> dict[str, Any]:
    """kafka-python's SSL settings with the launcher's CA and client certificate."""
    return {"security_protocol": "SSL", "ssl_cafile": str(tls_dir / "ca.pem"),
            "ssl_certfile": str(tls_dir / "client-cert.pem"),
            "ssl_keyfile": str(tls_dir / "client-key.pem")}


def librdkafka_ssl(tls_dir: Path) -> dict[str, Any]:
    """confluent-kafka's SSL settings with the launcher's CA and client certificate."""
    return {"security.protocol": "SSL", "ssl.ca.location": str(tls_dir / "ca.pem"),
            "ssl.certificate.location": str(tls_dir / "client-cert.pem"),
            "ssl.key.location": str(tls_dir / "client-key.pem")}
