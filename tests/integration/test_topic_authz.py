"""Topic authorization holes on a real cluster (1 voter + 1 broker, authorizer on, the
broker's Kafka listener SASL_PLAINTEXT/PLAIN):
- a principal with WRITE on every topic cannot forge an offset commit in
  `__consumer_offsets` (INVALID_TOPIC_EXCEPTION): the group's committed offset is the
  same after the coordinator's restart, which reloads the offsets from that topic; and
  Metadata marks it internal;
- not even a super user's client may delete, grow or create `__consumer_offsets`;
- Metadata v10, v11 and v12 naming an unknown topic ID answer UNKNOWN_TOPIC_ID on one
  connection, which stays open (v10/v11 dropped it before);
- a Fetch without READ answers TOPIC_AUTHORIZATION_FAILED whatever partition count it
  carries, never the ordered topic's INVALID_PARTITION_METADATA;
- the controller judges a forwarded DeleteTopics by topic ID for the client it names,
  not for the broker that forwards it, and hides the name of a topic that client may
  not describe.
The controller listener is plaintext, so the broker reaches the controller as
User:ANONYMOUS, which super.users therefore holds (as in test_acls.py)."""

from __future__ import annotations

import socket
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.kafka.groups.offsets_records import (
    OFFSETS_TOPIC,
    OffsetKey,
    OffsetValue,
    encode_key,
    encode_value,
)
from metadata.admin import (
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
    encode_body,
)
from metadata.admin import (
    decode_response as decode_admin_response,
)
from raft.common.kafka.codec import build, request_schema
from raft.common.kafka.framing import read_frame
from raft.common.kafka.wire_client import decode_response, encode_request
from raft.common.uuid import Uuid
from tests.support.quorum_support import FAST_SETTINGS, kraft, running_cluster, wait_until
from tests.support.secure_cluster import bootstrap_servers, librdkafka_sasl
from tools.cluster import Cluster
from tools.config import flatten, to_toml
from tools.quorum_client import request

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

BROKER = 2
PASSWORDS = {"admin": "admin-pw", "mallory": "mallory-pw", "eve": "eve-pw",
             "broker": "broker-pw"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="broker" password="broker-pw" '
        + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "offsets.topic.num.partitions": 1,
            "authorizer.class.name": "standard",
            "super.users": "User:admin;User:broker;User:ANONYMOUS",
            # the controller listener is plaintext: no peer is bound to a node id
            "authorizer.allow.unbound.controller.listener": "true"}
WAIT_S = 30.0
INVALID_TOPIC_EXCEPTION, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_ID = 17, 29, 100
INVALID_PARTITION_METADATA = 253  # raft.common.kafka.ordered_schemas
GROUP = "payroll-readers"


def _sasl_broker(cluster: Cluster) -> None:
    config = Path(cluster.node(BROKER).config)
    flat = flatten(tomllib.loads(config.read_text()))
    flat["listeners"] = flat["listeners"].replace("PLAINTEXT://", "SASL_PLAINTEXT://")
    flat.update({"sasl.enabled.mechanisms": "PLAIN",
                 "sasl.mechanism.inter.broker.protocol": "PLAIN",
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    config.write_text(to_toml(flat))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("topic-authz") / "cluster", SETTINGS,
                         voters=1, brokers=1, prepare=_sasl_broker) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def bootstrap(cluster: Cluster) -> str:
    return bootstrap_servers(cluster, (BROKER,))


def conf(bootstrap: str, user: str) -> dict[str, Any]:
    return librdkafka_sasl(bootstrap, user, PASSWORDS[user], "PLAIN")


def create_topic(bootstrap: str, name: str, config: dict[str, str] | None = None
                 ) -> uuid.UUID:
    admin = admin_mod.AdminClient(conf(bootstrap, "admin"))
    (future,) = admin.create_topics([admin_mod.NewTopic(
        name, num_partitions=1, replication_factor=1, config=config or {})]).values()
    future.result(WAIT_S)
    return topic_id_of(bootstrap, name)


def topic_id_of(bootstrap: str, name: str) -> uuid.UUID:
    with logged_in(bootstrap, "admin") as sock:
        response = send(sock, build(request_schema(3, 12), {
            "topics": [{"name": name}], "allow_auto_topic_creation": False}))
    (topic,) = response.topics
    assert topic.error_code == 0, topic
    return topic.topic_id  # type: ignore[no-any-return]


def acls(cluster: Cluster, *args: str) -> None:
    done = kraft("acls", "--cluster", str(cluster.directory), *args, "--force")
    assert done.returncode == 0, done.stderr


class logged_in:  # noqa: N801 (a context manager used like a function)
    """A raw connection to the broker's Kafka listener, logged in with SASL/PLAIN."""

    def __init__(self, bootstrap: str, user: str) -> None:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=WAIT_S)
        try:
            handshake = send(self.sock, build(request_schema(17, 1), {"mechanism": "PLAIN"}))
            assert handshake.error_code == 0, handshake
            token = f"\0{user}\0{PASSWORDS[user]}".encode()
            login = send(self.sock, build(request_schema(36, 2), {"auth_bytes": token}))
            assert login.error_code == 0, login
        except BaseException:
            self.sock.close()
            raise

    def __enter__(self) -> socket.socket:
        return self.sock

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def send(sock: socket.socket, body: Any, *, tolerant: bool = False) -> Any:
    """`tolerant`: error codes Kafka lacks (INVALID_PARTITION_METADATA) as plain ints."""
    sock.sendall(encode_request(body, correlation_id=7))
    correlation_id, response = decode_response(read_frame(sock), body.__api_key__,
                                               body.__version__, tolerant=tolerant)
    assert correlation_id == 7
    return response


def committed(bootstrap: str, topic: str) -> int | None:
    """The group's committed offset of partition 0 (None while the coordinator loads)."""
    consumer = confluent_kafka.Consumer({**conf(bootstrap, "admin"), "group.id": GROUP,
                                         "enable.auto.commit": False})
    try:
        (partition,) = consumer.committed([confluent_kafka.TopicPartition(topic, 0)],
                                          timeout=5)
        return None if partition.error is not None or partition.offset < 0 \
            else int(partition.offset)
    except confluent_kafka.KafkaException:
        return None
    finally:
        consumer.close()


def may_write(bootstrap: str, user: str, topic: str) -> bool:
    """Whether one record `user` produces to `topic` is accepted."""
    producer = confluent_kafka.Producer({**conf(bootstrap, user), "enable.idempotence": False,
                                         "retries": 0, "message.timeout.ms": 2000})
    outcomes: list[Any] = []
    producer.produce(topic, b"probe", on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(5)
    return outcomes == [None]


def test_forged_offset_commit_is_refused_and_the_offset_survives_a_coordinator_restart(
        cluster: Cluster, bootstrap: str) -> None:
    create_topic(bootstrap, "payroll")
    consumer = confluent_kafka.Consumer({**conf(bootstrap, "admin"), "group.id": GROUP,
                                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition("payroll", 0, 3)],
                        asynchronous=False)
    finally:
        consumer.close()
    assert committed(bootstrap, "payroll") == 3
    acls(cluster, "--add", "--allow-principal", "User:mallory", "--operation", "Write",
         "--topic", "*")
    # the grant is committed, not yet applied by the broker: wait until it is in force
    wait_until(lambda: may_write(bootstrap, "mallory", "payroll"), WAIT_S,
               "mallory's Write on every topic in force on the broker")
    producer = confluent_kafka.Producer({**conf(bootstrap, "mallory"),
                                         "enable.idempotence": False, "retries": 0,
                                         "message.timeout.ms": 15000})
    outcomes: list[Any] = []
    producer.produce(OFFSETS_TOPIC, partition=0,
                     key=encode_key(OffsetKey(group_id=GROUP, topic="payroll", partition=0)),
                     value=encode_value(OffsetValue(offset=999999)),
                     on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(WAIT_S)
    (error,) = outcomes
    assert error is not None
    assert error.code() == INVALID_TOPIC_EXCEPTION
    with logged_in(bootstrap, "admin") as sock:
        response = send(sock, build(request_schema(3, 12), {
            "topics": [{"name": OFFSETS_TOPIC}], "allow_auto_topic_creation": False}))
    assert [(t.name, t.is_internal) for t in response.topics] == [(OFFSETS_TOPIC, True)]
    cluster.restart(BROKER)  # the coordinator reloads the group from __consumer_offsets
    cluster.wait_for_brokers(WAIT_S)
    assert wait_until(lambda: committed(bootstrap, "payroll"), WAIT_S,
                      "the reloaded committed offset") == 3


def test_not_even_a_super_user_may_delete_grow_or_create_the_offsets_topic(
        cluster: Cluster, bootstrap: str) -> None:
    admin = admin_mod.AdminClient(conf(bootstrap, "admin"))
    if OFFSETS_TOPIC not in admin.list_topics(timeout=WAIT_S).topics:
        consumer = confluent_kafka.Consumer({**conf(bootstrap, "admin"), "group.id": "any",
                                             "enable.auto.commit": False})
        try:  # the coordinator creates it on a group's first use
            consumer.committed([confluent_kafka.TopicPartition("x", 0)], timeout=WAIT_S)
        finally:
            consumer.close()
    futures = [*admin.delete_topics([OFFSETS_TOPIC], operation_timeout=10).values(),
               *admin.create_partitions([admin_mod.NewPartitions(OFFSETS_TOPIC, 5)]).values(),
               *admin.create_topics([admin_mod.NewTopic(OFFSETS_TOPIC, 1, 1)]).values()]
    for future in futures:
        with pytest.raises(confluent_kafka.KafkaException) as caught:
            future.result(WAIT_S)
        assert caught.value.args[0].code() == INVALID_TOPIC_EXCEPTION
    metadata = admin.list_topics(topic=OFFSETS_TOPIC, timeout=WAIT_S)
    assert len(metadata.topics[OFFSETS_TOPIC].partitions) == 1


def test_metadata_by_an_unknown_topic_id_is_answered_at_each_version_on_one_connection(
        cluster: Cluster, bootstrap: str) -> None:
    unknown = uuid.UUID(bytes=Uuid.random().to_bytes())
    with logged_in(bootstrap, "eve") as sock:
        for version in (10, 11, 12):
            response = send(sock, build(request_schema(3, version), {
                "topics": [{"name": None, "topic_id": unknown}],
                "allow_auto_topic_creation": False}))
            assert [(t.error_code, t.topic_id) for t in response.topics] == [
                (UNKNOWN_TOPIC_ID, unknown)], version


def _fetch_errors(bootstrap: str, user: str, topic_id: uuid.UUID, count: int) -> list[int]:
    """A consumer's Fetch v13 by topic ID carrying an undeleted partition count (the
    ordered-delivery tagged field): each partition's error code."""
    body = build(request_schema(1, 13), {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic_id": topic_id, "undeleted_partition_count": count,
                    "partitions": [{"partition": 0, "fetch_offset": 0,
                                    "partition_max_bytes": 1 << 20,
                                    "current_leader_epoch": -1, "last_fetched_epoch": -1,
                                    "log_start_offset": -1}]}]})
    with logged_in(bootstrap, user) as sock:
        response = send(sock, body, tolerant=True)
    return [int(p.error_code) for t in response.responses for p in t.partitions]


def test_fetch_without_read_learns_nothing_of_an_ordered_topics_count(
        cluster: Cluster, bootstrap: str) -> None:
    topic_id = create_topic(bootstrap, "counted", {"enable.ordered.delivery": "true"})
    assert _fetch_errors(bootstrap, "admin", topic_id, 5) == [INVALID_PARTITION_METADATA]
    for count in (5, 1):  # a wrong count and the right one: the same refusal
        assert _fetch_errors(bootstrap, "eve", topic_id, count) == \
            [TOPIC_AUTHORIZATION_FAILED]


def _forwarded_delete(cluster: Cluster, topic_id: uuid.UUID, client: str
                      ) -> DeleteTopicsResponse:
    """What the broker sends the controller for `client`'s DeleteTopics by ID (the
    controller listener's caller, User:ANONYMOUS, holds CLUSTER_ACTION as a broker)."""
    body = encode_body(DeleteTopicsRequest(
        topics=(DeleteTopicState(topic_id=Uuid.from_bytes(topic_id.bytes)),),
        forwarded_principal=client, forwarded_host="127.0.0.1"))
    reply = request(cluster.controller_addresses()[0], "DeleteTopics", body,
                    cluster_id=cluster.cluster_id, timeout_s=WAIT_S)
    response = decode_admin_response("DeleteTopics", reply)
    assert isinstance(response, DeleteTopicsResponse), response
    return response


def test_controller_judges_the_forwarded_client_of_a_delete_by_topic_id(
        cluster: Cluster, bootstrap: str) -> None:
    """A broker whose image lacks a new topic's ID forwards the delete: the controller,
    not the broker's CLUSTER_ACTION, decides for the client."""
    topic_id = create_topic(bootstrap, "secret-payroll")
    (refused,) = _forwarded_delete(cluster, topic_id, "User:eve").responses
    assert (refused.name, refused.error_code) == (None, TOPIC_AUTHORIZATION_FAILED)
    assert "secret-payroll" not in (refused.error_message or "")
    assert topic_id_of(bootstrap, "secret-payroll") == topic_id  # still there
    (deleted,) = _forwarded_delete(cluster, topic_id, "User:admin").responses
    assert (deleted.name, deleted.error_code) == ("secret-payroll", 0)
