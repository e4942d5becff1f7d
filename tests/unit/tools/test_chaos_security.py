"""`kraft chaos --secure`'s pure parts (tools/chaos/security.py): the nodes' settings as
the config loader reads them, the workload's ACLs judged by the real StandardAuthorizer
rules (each principal may do what the workload does and nothing else), and the client
settings as kafka-python and librdkafka accept them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from metadata.authorizer import (
    CLUSTER_NAME,
    AclImage,
    AclOperation,
    AuthorizerSettings,
    ResourceType,
    StandardAcl,
    acl_image_of,
    authorize,
    invalid_binding_reason,
)
from raft.common.uuid import Uuid
from tools.chaos.group_workload import GroupConfig
from tools.chaos.security import (
    BROKER_USER,
    CHECKER_USER,
    CONSUMER_USER,
    PRODUCER_USER,
    ClientSecurity,
    node_settings,
    workload_acls,
)
from tools.chaos.workload import WorkloadConfig
from tools.config import flatten, load

NODES = ["User:CN=kraft-node-1,O=kraft-py", "User:CN=kraft-node-2,O=kraft-py"]
OPERATOR = "User:CN=kraft-admin,O=kraft-py"
ADMIN = "User:CN=chaos-admin,O=kraft-py"
CHURN, STABLE = WorkloadConfig().churn_names, WorkloadConfig().stable_names
GROUP_TOPIC, GROUP = GroupConfig().topic, GroupConfig().group
Op, Res = AclOperation, ResourceType
ON = AuthorizerSettings(enabled=True)


def acls_image() -> AclImage:
    bindings = workload_acls(admin_principal=ADMIN, churn_topics=CHURN, stable_topics=STABLE,
                             group_topic=GROUP_TOPIC, group=GROUP)
    return acl_image_of({(i := Uuid.random()): StandardAcl(id=i, binding=b)
                         for b in bindings})


def allowed(principal: str, operation: AclOperation, resource: ResourceType,
            name: str) -> bool:
    image = acls_image()
    return authorize(image, principal, "127.0.0.1", int(operation), int(resource), name, ON)


def test_node_settings_map_the_kafka_listener_to_sasl_ssl_when_secured() -> None:
    settings = node_settings(node_principals=NODES, operator_principal=OPERATOR,
                             broker_password="pw")
    assert settings["listener.security.protocol.map"] == \
        "CONTROLLER:SSL,SSL:SASL_SSL,STATUS:SSL"
    assert settings["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert settings["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert 'username="broker" password="pw"' in \
        settings["listener.name.ssl.scram-sha-512.sasl.jaas.config"]
    assert settings["super.users"].split(";") == [*NODES, f"User:{BROKER_USER}", OPERATOR]


def test_node_settings_name_each_super_user_once_when_the_operator_is_a_node() -> None:
    settings = node_settings(node_principals=NODES, operator_principal=NODES[0],
                             broker_password="pw")
    assert settings["super.users"].split(";") == [*NODES, f"User:{BROKER_USER}"]


def test_node_config_loads_with_sasl_ssl_and_the_authorizer_when_secured(
        tmp_path: Path) -> None:
    """The launcher's TLS broker config plus the secured settings, through the loader
    every node uses: the Kafka listener is SASL_SSL without client certificates, the
    controller listener keeps mutual TLS, the authorizer is on with the super users."""
    from tools.cluster import Cluster
    settings = node_settings(node_principals=NODES, operator_principal=OPERATOR,
                             broker_password="pw")
    cluster = Cluster.create(tmp_path / "c", voters=1, brokers=1, settings=settings, tls=True)
    broker = load(cluster.node(2).config)
    assert broker.listener_protocol("SSL") == "SASL_SSL"
    assert broker.listener_protocol("CONTROLLER") == "SSL"
    assert broker.listener_sasl() is not None
    authorizer = broker.authorizer_settings()
    assert authorizer.enabled
    assert {OPERATOR, f"User:{BROKER_USER}", *NODES} <= authorizer.super_users
    voter = flatten(tomllib.loads(Path(cluster.node(1).config).read_text()))
    assert voter["ssl.client.auth"] == "required"
    assert load(cluster.node(1).config).authorizer_settings().enabled


def test_workload_acls_are_valid_literal_allows_when_built() -> None:
    bindings = workload_acls(admin_principal=ADMIN, churn_topics=CHURN, stable_topics=STABLE,
                             group_topic=GROUP_TOPIC, group=GROUP)
    assert bindings
    assert all(invalid_binding_reason(b) is None for b in bindings)
    assert len(set(bindings)) == len(bindings)  # no duplicate ACL
    assert all(b.host == "*" and b.resource_name != "*" for b in bindings)


@pytest.mark.parametrize("topic", [*STABLE, *CHURN, GROUP_TOPIC])
def test_producer_may_write_and_describe_when_producing_to_a_workload_topic(
        topic: str) -> None:
    producer = f"User:{PRODUCER_USER}"
    assert allowed(producer, Op.WRITE, Res.TOPIC, topic)
    assert allowed(producer, Op.DESCRIBE, Res.TOPIC, topic)
    assert not allowed(producer, Op.READ, Res.TOPIC, topic)
    assert not allowed(producer, Op.DELETE, Res.TOPIC, topic)
    assert not allowed(producer, Op.CREATE, Res.TOPIC, topic)


def test_producer_may_write_idempotently_when_asking_for_a_producer_id() -> None:
    assert allowed(f"User:{PRODUCER_USER}", Op.IDEMPOTENT_WRITE, Res.CLUSTER, CLUSTER_NAME)
    assert not allowed(f"User:{PRODUCER_USER}", Op.WRITE, Res.TOPIC, "other")
    assert not allowed(f"User:{PRODUCER_USER}", Op.READ, Res.GROUP, GROUP)


def test_consumer_may_read_only_its_topic_and_group_when_in_the_group() -> None:
    consumer = f"User:{CONSUMER_USER}"
    assert allowed(consumer, Op.READ, Res.TOPIC, GROUP_TOPIC)
    assert allowed(consumer, Op.DESCRIBE, Res.TOPIC, GROUP_TOPIC)  # implied by READ
    assert allowed(consumer, Op.READ, Res.GROUP, GROUP)
    assert allowed(consumer, Op.DESCRIBE, Res.GROUP, GROUP)
    assert not allowed(consumer, Op.WRITE, Res.TOPIC, GROUP_TOPIC)
    assert not allowed(consumer, Op.READ, Res.TOPIC, STABLE[0])
    assert not allowed(consumer, Op.READ, Res.GROUP, "another-group")
    assert not allowed(consumer, Op.IDEMPOTENT_WRITE, Res.CLUSTER, CLUSTER_NAME)


def test_checker_may_read_every_workload_topic_and_write_none_when_reading_back() -> None:
    checker = f"User:{CHECKER_USER}"
    for topic in (*STABLE, *CHURN, GROUP_TOPIC):
        assert allowed(checker, Op.READ, Res.TOPIC, topic)
        assert not allowed(checker, Op.WRITE, Res.TOPIC, topic)
    assert not allowed(checker, Op.READ, Res.TOPIC, "__consumer_offsets")
    assert not allowed(checker, Op.READ, Res.GROUP, GROUP)


def test_admin_may_delete_only_churned_topics_when_churning() -> None:
    for topic in CHURN:
        assert allowed(ADMIN, Op.CREATE, Res.TOPIC, topic)
        assert allowed(ADMIN, Op.DELETE, Res.TOPIC, topic)
        assert allowed(ADMIN, Op.DESCRIBE, Res.TOPIC, topic)
    for topic in STABLE:
        assert allowed(ADMIN, Op.CREATE, Res.TOPIC, topic)
        assert allowed(ADMIN, Op.DESCRIBE, Res.TOPIC, topic)
        assert not allowed(ADMIN, Op.DELETE, Res.TOPIC, topic)
    assert allowed(ADMIN, Op.CREATE, Res.TOPIC, GROUP_TOPIC)
    assert not allowed(ADMIN, Op.DELETE, Res.TOPIC, GROUP_TOPIC)
    assert not allowed(ADMIN, Op.CREATE, Res.CLUSTER, CLUSTER_NAME)  # no topic of its own
    assert not allowed(ADMIN, Op.WRITE, Res.TOPIC, STABLE[0])
    assert not allowed(ADMIN, Op.ALTER, Res.CLUSTER, CLUSTER_NAME)  # no ACL changes


def test_client_settings_are_known_to_both_clients_when_logging_in(tmp_path: Path) -> None:
    from tools import tls_certs
    kafka = pytest.importorskip("kafka")
    confluent_kafka = pytest.importorskip("confluent_kafka")
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(tls_certs.certificate_pem(tls_certs.make_ca()))
    security = ClientSecurity(ca_file=str(ca_file), passwords={PRODUCER_USER: "secret"})
    python_login = security.kafka_python(PRODUCER_USER)
    assert python_login["security_protocol"] == "SASL_SSL"
    assert python_login["sasl_mechanism"] == "SCRAM-SHA-512"
    assert set(python_login) <= set(kafka.KafkaProducer.DEFAULT_CONFIG)
    assert set(python_login) <= set(kafka.KafkaConsumer.DEFAULT_CONFIG)
    librdkafka = security.confluent(PRODUCER_USER)
    assert librdkafka["sasl.password"] == "secret"
    # librdkafka refuses unknown keys when the client is made (nothing is dialled yet)
    producer = confluent_kafka.Producer({**librdkafka, "bootstrap.servers": "127.0.0.1:9"})
    assert producer is not None

