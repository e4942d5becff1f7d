"""ACLs on a real cluster with the authorizer on (authorizer.class.name=StandardAuthorizer),
clients told apart by SASL/PLAIN on the brokers' Kafka listeners (SASL_PLAINTEXT):
- a principal without DELETE on a topic gets TOPIC_AUTHORIZATION_FAILED and the topic
  stays (kafka-python and confluent-kafka);
- a principal with READ but not WRITE cannot produce (TOPIC_AUTHORIZATION_FAILED) and
  can consume in its group;
- a super user creates, produces to (RF 3, acks=all: the brokers replicate as the
  super user `broker`, their inter-broker login), consumes and deletes;
- `kraft acls --add/--list/--remove` round trip, seen by the broker's answers to alice.
One 1-voter + 3-broker module cluster. The controller listener is plaintext (started by
the explicit opt-out `authorizer.allow.unbound.controller.listener`), so the brokers
reach the controller as User:ANONYMOUS, which super.users therefore holds; the
Kafka listeners take SASL only, so no client there is anonymous."""

from __future__ import annotations

import json
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.quorum_support import FAST_SETTINGS, kraft, running_cluster, wait_until
from tests.support.secure_cluster import bootstrap_servers, kafka_python_sasl, librdkafka_sasl
from tools.cluster import Cluster
from tools.config import flatten, to_toml

pytestmark = pytest.mark.integration

kafka = pytest.importorskip("kafka")
kafka_errors = pytest.importorskip("kafka.errors")
confluent_kafka = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

BROKERS = (2, 3, 4)
PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw", "broker": "broker-pw"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="broker" password="broker-pw" '
        + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin;User:broker;User:ANONYMOUS",
            # the controller listener is plaintext: no peer is bound to a node id
            "authorizer.allow.unbound.controller.listener": "true"}
SASL_SETTINGS = {"sasl.enabled.mechanisms": "PLAIN",
                 "sasl.mechanism.inter.broker.protocol": "PLAIN",
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}
WAIT_S = 30.0
TOPIC_AUTHORIZATION_FAILED = 29


def _sasl_broker(config: Path) -> None:
    """Turn a launcher-written broker config's Kafka listener into SASL_PLAINTEXT/PLAIN."""
    flat = flatten(tomllib.loads(config.read_text()))
    flat["listeners"] = flat["listeners"].replace("PLAINTEXT://", "SASL_PLAINTEXT://")
    flat.update(SASL_SETTINGS)
    config.write_text(to_toml(flat))


def _sasl_brokers(cluster: Cluster) -> None:
    for node_id in BROKERS:
        _sasl_broker(Path(cluster.node(node_id).config))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("acls") / "cluster", SETTINGS, voters=1,
                         brokers=len(BROKERS), prepare=_sasl_brokers) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def bootstrap(cluster: Cluster) -> str:
    return bootstrap_servers(cluster, BROKERS)


def confluent_conf(bootstrap: str, user: str) -> dict[str, Any]:
    return librdkafka_sasl(bootstrap, user, PASSWORDS[user], "PLAIN")


def kafka_python_conf(bootstrap: str, user: str) -> dict[str, Any]:
    return kafka_python_sasl(bootstrap.split(","), user, PASSWORDS[user], "PLAIN")


def create_topic(bootstrap: str, name: str, replication_factor: int = 1) -> None:
    admin = admin_mod.AdminClient(confluent_conf(bootstrap, "admin"))
    (future,) = admin.create_topics([admin_mod.NewTopic(
        name, num_partitions=1, replication_factor=replication_factor)]).values()
    future.result(WAIT_S)


def topic_names(bootstrap: str) -> set[str]:
    admin = admin_mod.AdminClient(confluent_conf(bootstrap, "admin"))
    return set(admin.list_topics(timeout=WAIT_S).topics)


def acls(cluster: Cluster, *args: str) -> str:
    done = kraft("acls", "--cluster", str(cluster.directory), *args, "--force")
    assert done.returncode == 0, done.stderr
    return done.stdout


def produce_confluent(bootstrap: str, user: str, topic: str, values: list[bytes],
                      **extra: Any) -> list[Any]:
    """The delivery errors (None: delivered), one per value."""
    producer = confluent_kafka.Producer({**confluent_conf(bootstrap, user),
                                         "enable.idempotence": False, "retries": 0,
                                         "message.timeout.ms": 15000, **extra})
    outcomes: list[Any] = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(WAIT_S)
    assert len(outcomes) == len(values)
    return outcomes


def consume_confluent(bootstrap: str, user: str, topic: str, group: str, count: int
                      ) -> list[bytes]:
    consumer = confluent_kafka.Consumer({**confluent_conf(bootstrap, user), "group.id": group,
                                         "auto.offset.reset": "earliest",
                                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        def got_all() -> bool:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value())
            return len(values) >= count
        wait_until(got_all, WAIT_S, f"{count} records of {topic} for {user}")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def test_topic_stays_when_a_principal_without_delete_deletes_it_with_confluent(
        cluster: Cluster, bootstrap: str) -> None:
    create_topic(bootstrap, "keep-c")
    admin = admin_mod.AdminClient(confluent_conf(bootstrap, "alice"))
    (future,) = admin.delete_topics(["keep-c"], operation_timeout=10).values()
    with pytest.raises(confluent_kafka.KafkaException) as caught:
        future.result(WAIT_S)
    assert caught.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "keep-c" in topic_names(bootstrap)


def test_topic_stays_when_a_principal_without_delete_deletes_it_with_kafka_python(
        cluster: Cluster, bootstrap: str) -> None:
    create_topic(bootstrap, "keep-k")
    admin = kafka.KafkaAdminClient(**kafka_python_conf(bootstrap, "alice"))
    try:
        try:
            response = admin.delete_topics(["keep-k"], timeout_ms=10_000)
        except kafka_errors.TopicAuthorizationFailedError:
            pass  # kafka-python raises the topic's error ...
        else:  # ... or, in some versions, returns the response
            codes = [entry[1] for entry in response.topic_error_codes]
            assert codes == [TOPIC_AUTHORIZATION_FAILED]
    finally:
        admin.close()
    assert "keep-k" in topic_names(bootstrap)


def test_principal_with_read_cannot_produce_and_can_consume(
        cluster: Cluster, bootstrap: str) -> None:
    create_topic(bootstrap, "events")
    assert produce_confluent(bootstrap, "admin", "events", [b"a", b"b", b"c"]) == [None] * 3
    acls(cluster, "--add", "--allow-principal", "User:alice", "--operation", "Read",
         "--topic", "events", "--group", "readers")
    (error,) = produce_confluent(bootstrap, "alice", "events", [b"x"])
    assert error is not None
    assert error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    producer = kafka.KafkaProducer(**kafka_python_conf(bootstrap, "alice"), retries=0)
    try:
        with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
            producer.send("events", b"y").get(timeout=WAIT_S)
    finally:
        producer.close(timeout=5)
    assert consume_confluent(bootstrap, "alice", "events", "readers", 3) == [b"a", b"b", b"c"]
    consumer = kafka.KafkaConsumer("events", **kafka_python_conf(bootstrap, "alice"),
                                   group_id="readers-k", auto_offset_reset="earliest",
                                   consumer_timeout_ms=3000)
    try:  # no READ on group readers-k: the group is refused
        with pytest.raises(kafka_errors.GroupAuthorizationFailedError):
            for _ in consumer:
                pass
    finally:
        consumer.close()


def test_super_user_creates_produces_consumes_and_deletes_when_replicated(
        cluster: Cluster, bootstrap: str) -> None:
    """RF 3 and acks=all: the followers' fetches (as User:broker) must be authorized."""
    create_topic(bootstrap, "admin-rf3", replication_factor=3)
    values = [f"v{i}".encode() for i in range(5)]
    assert produce_confluent(bootstrap, "admin", "admin-rf3", values, acks="all") == \
        [None] * 5
    assert consume_confluent(bootstrap, "admin", "admin-rf3", "admins", 5) == values
    admin = admin_mod.AdminClient(confluent_conf(bootstrap, "admin"))
    (future,) = admin.delete_topics(["admin-rf3"], operation_timeout=10).values()
    future.result(WAIT_S)
    wait_until(lambda: "admin-rf3" not in topic_names(bootstrap), WAIT_S, "the deletion")


def test_kraft_acls_round_trip_when_added_listed_and_removed(
        cluster: Cluster, bootstrap: str) -> None:
    topic = f"writable-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic)
    (denied,) = produce_confluent(bootstrap, "alice", topic, [b"1"])
    assert denied is not None
    added = acls(cluster, "--add", "--allow-principal", "User:alice", "--operation", "Write",
                 "--operation", "Describe", "--topic", topic)
    assert f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, " \
           "patternType=LITERAL)`" in added
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in added
    listed = json.loads(acls(cluster, "--list", "--topic", topic, "--json"))
    assert sorted(a["operation"] for a in listed["acls"]) == ["DESCRIBE", "WRITE"]
    assert produce_confluent(bootstrap, "alice", topic, [b"2"]) == [None]
    removed = acls(cluster, "--remove", "--topic", topic)
    assert "Removed ACLs for resource" in removed
    assert json.loads(acls(cluster, "--list", "--topic", topic, "--json")) == {"acls": []}
    (again,) = produce_confluent(bootstrap, "alice", topic, [b"3"])
    assert again is not None
    assert again.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_metadata_hides_topics_when_the_principal_may_not_describe_them(
        cluster: Cluster, bootstrap: str) -> None:
    create_topic(bootstrap, "hidden")
    admin = admin_mod.AdminClient(confluent_conf(bootstrap, "alice"))
    assert "hidden" not in admin.list_topics(timeout=WAIT_S).topics
    assert "hidden" in topic_names(bootstrap)


def test_acls_survive_a_controller_restart_from_its_snapshot(
        cluster: Cluster, bootstrap: str) -> None:
    acls(cluster, "--add", "--allow-principal", "User:alice", "--operation", "Describe",
         "--topic", "kept-acl")
    snapshot = kraft("quorum", "snapshot", "--cluster", str(cluster.directory), "--node", "1")
    assert snapshot.returncode == 0, snapshot.stderr
    cluster.restart(1)
    cluster.wait_for_leader(20)
    listed = json.loads(acls(cluster, "--list", "--topic", "kept-acl", "--json"))
    assert [(a["principal"], a["operation"]) for a in listed["acls"]] == [
        ("User:alice", "DESCRIBE")]


def _command_config(cluster: Cluster, user: str) -> str:
    path = Path(cluster.directory) / f"{user}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                    f'required username="{user}" password="{PASSWORDS[user]}";\n')
    return str(path)


def test_kraft_acls_through_a_broker_needs_alter_on_the_cluster(
        cluster: Cluster, bootstrap: str) -> None:
    """--bootstrap-server: Kafka's CreateAcls and DescribeAcls, as the SASL login."""
    add = ("acls", "--bootstrap-server", bootstrap, "--add", "--allow-principal",
           "User:alice", "--operation", "Read", "--group", "via-broker")
    refused = kraft(*add, "--command-config", _command_config(cluster, "alice"))
    assert refused.returncode == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    added = kraft(*add, "--command-config", _command_config(cluster, "admin"))
    assert added.returncode == 0, added.stderr
    listed = kraft("acls", "--bootstrap-server", bootstrap, "--list", "--group",
                   "via-broker", "--json", "--command-config",
                   _command_config(cluster, "admin"))
    assert listed.returncode == 0, listed.stderr
    assert [(a["resource_type"], a["operation"]) for a in json.loads(listed.stdout)["acls"]] \
        == [("GROUP", "READ")]
