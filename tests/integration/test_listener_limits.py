"""Listener limits against real processes on 127.0.0.1 (raft/common/connection_limits.py):
a broker whose Kafka listener is SASL_PLAINTEXT and a voter whose controller listener is
mutual TLS (`kraft quorum start --tls`), each with its RLIMIT_NOFILE set to 1024 by
`prlimit` once started, so the test is the same on every host.

The attacks: 3 connections announcing 100 MiB frames and sending data, before any login;
then 1,100 idle connections. Afterwards the node serves an authenticated client (a
produce and a fetch; a topic created through the controller), its RSS is within 64 MiB of
where it started, its log shows no log-directory failure, and the connections over the
descriptor budget (1024 less a reserve of 256: 768) were closed at once.

And a voter whose every open() and accept() fails for a while (its soft limit set to 0,
so even a descriptor it closes meanwhile cannot be handed out again): a rate-limited
WARNING, no log-directory failure, and it serves on once descriptors are back."""

from __future__ import annotations

import resource
import select
import shutil
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from raft.common.framing import FrameDecoder, encode_frame
from tests.support.quorum_support import FAST_SETTINGS, kraft, log_events, wait_until
from tests.support.secure_cluster import (
    ADMIN_JAAS,
    format_with_scram,
    kafka_python_sasl,
    quorum_started,
)
from tools.cluster import Cluster
from tools.config_basics import parse_address

pytestmark = pytest.mark.integration

kafka = pytest.importorskip("kafka")

NODE_NOFILE = 1024
BUDGET = NODE_NOFILE - 256  # raft/common/connection_limits.py's inbound_budget(1024)
IDLE_CONNECTIONS = 1100
ATTACKERS = 3
ANNOUNCED = 100 * 1024 * 1024
SENT_PER_ATTACKER = 60 * 1024 * 1024
RSS_GROWTH_MAX_KIB = 64 * 1024
ATTACK_S = 10.0  # every attack loop stops by itself within this
NO_DESCRIPTOR = 0  # a soft RLIMIT_NOFILE under which the kernel hands out no descriptor
CHUNK = bytes(256 * 1024)
VOTER, BROKER = 1, 2
SESSION_TIMEOUT_MS = 2000
SASL_SETTINGS = {
    **FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
    "broker.session.timeout.ms": SESSION_TIMEOUT_MS,
    "socket.request.max.bytes": ANNOUNCED,  # Kafka's default: the 100 MiB frames fit it
    "listener.security.protocol.map":
        "CONTROLLER:PLAINTEXT,PLAINTEXT:SASL_PLAINTEXT,STATUS:PLAINTEXT",
    "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
    "listener.name.plaintext.scram-sha-512.sasl.jaas.config": ADMIN_JAAS,
}


# -- the node's side -------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def limit_descriptors(pid: int) -> None:
    """The node's RLIMIT_NOFILE, soft and hard, to NODE_NOFILE (read at its next accept)."""
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (NODE_NOFILE, NODE_NOFILE))


def messages_of(cluster: Cluster, node_id: int, text: str) -> list[dict[str, Any]]:
    return [e for e in log_events(cluster, node_id) if text in str(e.get("msg", ""))]


def assert_no_log_dir_failure(cluster: Cluster, node_id: int) -> None:
    failures = [e for e in log_events(cluster, node_id)
                if "log directory" in str(e.get("msg", ""))]
    assert failures == []


@contextmanager
def descriptors_for_the_test(needed: int) -> Iterator[None]:
    """This process's soft RLIMIT_NOFILE raised to `needed` (within its hard limit) while
    the attack runs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        yield
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"the test needs {needed} descriptors; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# -- the attacks -----------------------------------------------------------------------


def announce_big_frames(address: tuple[str, int], wrap: ssl.SSLContext | None = None,
                        announced: int = ANNOUNCED) -> list[int]:
    """ATTACKERS connections each announce an `announced`-byte frame and send up to
    SENT_PER_ATTACKER bytes of it, until the node closes them or ATTACK_S passes; the
    bytes each got out."""
    sent = []
    deadline = time.monotonic() + ATTACK_S
    with ExitStack() as stack:
        connections = []
        for _ in range(ATTACKERS):
            raw = stack.enter_context(socket.create_connection(address, timeout=ATTACK_S))
            connection = raw if wrap is None else stack.enter_context(
                wrap.wrap_socket(raw, server_hostname=address[0]))
            connection.sendall(struct.pack(">i", announced))
            connections.append(connection)
        for connection in connections:
            total = 0
            try:
                while total < SENT_PER_ATTACKER and time.monotonic() < deadline:
                    connection.settimeout(max(0.1, deadline - time.monotonic()))
                    total += connection.send(CHUNK)
            except OSError:  # reset, broken pipe, or the node stopped reading (timeout)
                pass
            sent.append(total)
    return sent


def open_idle(address: tuple[str, int]) -> list[socket.socket]:
    return [socket.create_connection(address, timeout=ATTACK_S)
            for _ in range(IDLE_CONNECTIONS)]


def closed_by_node(connections: list[socket.socket]) -> set[int]:
    """The indexes of the connections the node closed (readable at EOF or reset)."""
    poller = select.poll()
    by_fd = {}
    for index, connection in enumerate(connections):
        poller.register(connection.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
        by_fd[connection.fileno()] = index
    closed = set()
    for fd, _ in poller.poll(0):
        index = by_fd[fd]
        try:
            data = connections[index].recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except ConnectionResetError:
            data = b""
        except BlockingIOError:  # a wake-up without data: still open
            continue
        if not data:
            closed.add(index)
    return closed


def close_all(connections: list[socket.socket]) -> None:
    for connection in connections:
        connection.close()


# -- the broker ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("limits-sasl") / "cluster"
    made = Cluster.create(directory, voters=1, brokers=1, settings=SASL_SETTINGS)
    shutil.rmtree(made.node(VOTER).data_dir)  # formatted again with the admin user
    format_with_scram(made, VOTER, ["SCRAM-SHA-512=[name=admin,password=admin-secret]"])
    with quorum_started(directory, "--json") as cluster:
        yield cluster


def produce_and_fetch(bootstrap: str, topic: str, value: bytes) -> None:
    """An authenticated client (SCRAM-SHA-512) produces `value` and reads it back."""
    login = kafka_python_sasl(bootstrap, "admin", "admin-secret", "SCRAM-SHA-512")
    admin = kafka.KafkaAdminClient(request_timeout_ms=20_000, **login)
    try:
        if topic not in admin.list_topics():
            admin.create_topics([kafka.admin.NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    producer = kafka.KafkaProducer(acks="all", request_timeout_ms=20_000, **login)
    try:
        offset = producer.send(topic, value=value).get(30).offset
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(consumer_timeout_ms=20_000, **login)
    try:
        partition = kafka.TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, offset)
        assert next(iter(consumer)).value == value
    finally:
        consumer.close()


def test_a_sasl_broker_survives_big_frames_before_login_and_1100_idle_connections(
        sasl_cluster: Cluster) -> None:
    node = sasl_cluster.node(BROKER)
    assert node.pid is not None
    assert node.client_address is not None
    address = parse_address(node.client_address)
    limit_descriptors(node.pid)
    produce_and_fetch(node.client_address, "before", b"warm")  # every lazy import done
    rss_before = rss_kib(node.pid)

    sent = announce_big_frames(address)
    # closed on the size header alone: at most what the socket buffers took meanwhile
    assert all(total < SENT_PER_ATTACKER // 4 for total in sent), sent
    closes = messages_of(sasl_cluster, BROKER, "closing Kafka connection")
    assert sum(f"frame size {ANNOUNCED} outside 0..524288" in e.get("reason", "")
               for e in closes) == ATTACKERS

    with descriptors_for_the_test(IDLE_CONNECTIONS + 256):
        idle = open_idle(address)
        try:
            refused = wait_until(lambda: len(closed := closed_by_node(idle)) >=
                                 IDLE_CONNECTIONS - BUDGET and closed, ATTACK_S,
                                 "the connections over the budget to be closed")
            assert IDLE_CONNECTIONS - BUDGET <= len(refused) <= IDLE_CONNECTIONS - BUDGET + 16
            # held past the session timeout: the broker's own heartbeats still go out
            time.sleep(SESSION_TIMEOUT_MS / 1000 + 1)  # the attack's duration, not a sync
            assert len(closed_by_node(idle)) == len(refused)  # the admitted ones stay
        finally:
            close_all(idle)

    warnings = messages_of(sasl_cluster, BROKER, "refused a connection")
    assert warnings, "the refusals were not logged"
    assert len(warnings) <= 2  # rate-limited: one per 10 s per listener
    assert warnings[0]["level"] == "WARNING"
    assert messages_of(sasl_cluster, VOTER, "fencing brokers") == []
    assert_no_log_dir_failure(sasl_cluster, BROKER)

    produce_and_fetch(node.client_address, "after", b"still-serving")
    status = sasl_cluster.broker_status(BROKER)
    assert status is not None
    assert status["is_fenced"] is False
    assert rss_kib(node.pid) - rss_before < RSS_GROWTH_MAX_KIB


# -- the controller --------------------------------------------------------------------


HANDSHAKE_DEADLINE_S = 4.0
TLS_SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
                "broker.session.timeout.ms": SESSION_TIMEOUT_MS,
                "socket.request.max.bytes": ANNOUNCED,
                "connections.authentication.timeout.ms": int(HANDSHAKE_DEADLINE_S * 1000)}


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("limits-tls") / "cluster"
    with quorum_started(directory, "--voters", "1", "--brokers", "1", "--tls", "--json",
                        *(f"--set={k}={v}" for k, v in TLS_SETTINGS.items())) as cluster:
        cluster.wait_for_brokers()
        yield cluster


def create_topic_through_controller(cluster: Cluster, name: str) -> None:
    created = kraft("topics", "--cluster", str(cluster.directory), "--create", "--topic",
                    name, "--partitions", "1", "--replication-factor", "1", timeout=60)
    assert created.returncode == 0, created.stderr


def test_a_tls_controller_survives_big_frames_and_1100_idle_connections(
        tls_cluster: Cluster) -> None:
    node = tls_cluster.node(VOTER)
    assert node.pid is not None
    assert node.controller_address is not None
    address = parse_address(node.controller_address)
    limit_descriptors(node.pid)
    create_topic_through_controller(tls_cluster, "before")
    rss_before = rss_kib(node.pid)

    # before any login: no TLS handshake, so nothing of the frames is buffered
    sent = announce_big_frames(address)
    assert all(total < SENT_PER_ATTACKER // 4 for total in sent), sent
    # logged in with the cluster's client certificate: a frame announcing more than
    # socket.request.max.bytes is closed on its size header
    context = tls_cluster.client_ssl
    assert context is not None
    sent = announce_big_frames(address, context, announced=ANNOUNCED + 1)
    assert all(total < SENT_PER_ATTACKER // 4 for total in sent), sent
    closes = [e for e in log_events(tls_cluster, VOTER) if "exceeds the" in
              str(e.get("reason", ""))]
    assert len(closes) == ATTACKERS

    with descriptors_for_the_test(IDLE_CONNECTIONS + 256):
        first_connect = time.monotonic()
        idle = open_idle(address)
        try:
            refused = wait_until(lambda: len(closed := closed_by_node(idle)) >=
                                 IDLE_CONNECTIONS - BUDGET and closed, ATTACK_S,
                                 "the connections over the budget to be closed")
            # before any admitted connection's handshake deadline: only refusals closed
            assert time.monotonic() - first_connect < HANDSHAKE_DEADLINE_S - 0.5
            assert len(refused) <= IDLE_CONNECTIONS - BUDGET + 16
            # the admitted ones, silent, are closed at the handshake deadline
            wait_until(lambda: len(closed_by_node(idle)) == IDLE_CONNECTIONS, ATTACK_S,
                       "every idle connection to be closed")
        finally:
            close_all(idle)

    deadline = f"no TLS handshake within {HANDSHAKE_DEADLINE_S} s"
    deadline_closes = [e for e in log_events(tls_cluster, VOTER)
                       if deadline in str(e.get("reason", ""))]
    assert len(deadline_closes) >= IDLE_CONNECTIONS - len(refused) - 16
    warnings = messages_of(tls_cluster, VOTER, "refused a connection")
    assert warnings
    assert len(warnings) <= 2
    assert_no_log_dir_failure(tls_cluster, VOTER)

    create_topic_through_controller(tls_cluster, "after")
    assert rss_kib(node.pid) - rss_before < RSS_GROWTH_MAX_KIB


# -- out of descriptors ----------------------------------------------------------------


def append_on(connection: socket.socket, cluster_id: str, correlation_id: int) -> Any:
    """One `Append` of a NoOp record on an open connection: its reply body, once
    committed (bounded by the socket's timeout)."""
    connection.sendall(encode_frame({
        "api": "Append", "version": 0, "correlation_id": correlation_id,
        "cluster_id": cluster_id, "body": {"count": 1, "batch": 1, "in_flight": 1}}))
    decoder = FrameDecoder()
    while True:
        data = connection.recv(65536)
        assert data, "the node closed the connection"
        for reply in decoder.feed(data):
            if reply["correlation_id"] == correlation_id:
                return reply["body"]


def test_a_node_out_of_descriptors_warns_and_keeps_serving_without_a_log_dir_failure(
        make_cluster: Any) -> None:
    """Every open() and accept() of the node fails (EMFILE) for a while: its high-watermark
    checkpoint is postponed and its listener waits, each with a WARNING; it commits on a
    connection it already had, and once descriptors are back it accepts the connection
    that waited, and serves it.

    The node closes descriptors of its own meanwhile, as it does just after a start (the
    connections `wait_for_leader` asked on, the checkpoint's files): `ended` stands for
    them. Under a soft limit at its lowest free descriptor one closed after the limit
    was set came free again: the listener's next try accepted the waiting connection,
    refused it over the descriptor budget (freeing it once more), and the checkpoint was
    written, so no "checkpoint postponed" WARNING came."""
    cluster = make_cluster(voters=1)
    node = cluster.node(VOTER)
    assert node.pid is not None
    assert node.controller_address is not None
    address = parse_address(node.controller_address)
    kept = socket.create_connection(address, timeout=ATTACK_S)
    ended = socket.create_connection(address, timeout=ATTACK_S)
    waiting = None
    try:
        assert append_on(kept, cluster.cluster_id, 1)["error_code"] == 0
        assert append_on(ended, cluster.cluster_id, 2)["error_code"] == 0  # accepted
        soft, hard = resource.prlimit(node.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(node.pid, resource.RLIMIT_NOFILE, (NO_DESCRIPTOR, hard))
        try:
            ended.close()  # the node closes its end of it
            waiting = socket.create_connection(address, timeout=ATTACK_S)  # in the backlog
            assert append_on(kept, cluster.cluster_id, 3)["error_code"] == 0
            wait_until(lambda: messages_of(cluster, VOTER, "checkpoint postponed") and
                       messages_of(cluster, VOTER, "cannot accept a connection"), ATTACK_S,
                       "the node's WARNINGs that it is out of descriptors")
        finally:
            resource.prlimit(node.pid, resource.RLIMIT_NOFILE, (soft, hard))
        assert append_on(waiting, cluster.cluster_id, 4)["error_code"] == 0
    finally:
        kept.close()
        ended.close()
        if waiting is not None:
            waiting.close()
    accept_warnings = messages_of(cluster, VOTER, "cannot accept a connection")
    assert len(accept_warnings) <= 2  # one per 10 s, though accept() failed every 0.1 s
    assert {e["level"] for e in accept_warnings} == {"WARNING"}
    assert "Too many open files" in accept_warnings[0]["error"]
    assert_no_log_dir_failure(cluster, VOTER)
    assert cluster.is_running(VOTER)
