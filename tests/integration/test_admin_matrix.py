"""Every public method of confluent-kafka's `AdminClient` and kafka-python's
`KafkaAdminClient`, called with real arguments against one 1-voter + 3-broker cluster.

The rule: each method either works (its row checks the answer) or gets the error a Kafka
3.9 broker gives for the same call; a method this broker cannot serve yet is a "known
gap" row that states the error seen, so the row fails once the gap is closed and must be
reclassified. A client upgrade that adds a method fails `test_every_public_method_has_a_row`
until the method has a row. docs/kafka-compatibility.md holds the same table, rewritten
by `python -m tests.integration.test_admin_matrix`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.integration.test_kafka_clients import partition_counts
from tests.support.quorum_support import FAST_SETTINGS, running_cluster, wait_until
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")
kafka = pytest.importorskip("kafka")
kafka_admin = pytest.importorskip("kafka.admin")
kafka_errors = pytest.importorskip("kafka.errors")

WAIT_S = 20.0
BROKERS = (2, 3, 4)
TOPIC = "matrix"  # 3 partitions on all 3 brokers, RECORDS records in each
RECORDS = 10
RETENTION_MS = "86400000"  # set on TOPIC at creation: the one modified config
GROUP = "matrix-group"  # offset 5 committed on TOPIC-0, no members
READER = "User:matrix-reader"  # allowed to READ TOPIC
SCRAM_USER = "matrix-user"  # a SCRAM-SHA-256 credential, 4096 iterations
DOC = Path(__file__).resolve().parents[2] / "docs" / "kafka-compatibility.md"
TABLE_START, TABLE_END = "<!-- admin-matrix:start -->", "<!-- admin-matrix:end -->"


@dataclass(frozen=True)
class Matrix:
    cluster: Cluster
    bootstrap: str
    ck: Any  # confluent_kafka.admin.AdminClient
    kp: Any  # kafka.KafkaAdminClient


class Row(NamedTuple):
    client: str
    method: str
    call: str
    # "works", "refused: ERROR_NAME" (as Kafka 3.9 refuses it), "refused on purpose:
    # ERROR_NAME" (transactions, not served here) or "known gap: ERROR_NAME"
    outcome: str
    note: str
    run: Callable[[Matrix], str | None]  # None when it worked, else the error name seen


ROWS: list[Row] = []


def row(client: str, method: str, call: str, outcome: str, note: str
        ) -> Callable[[Callable[[Matrix], str | None]], Callable[[Matrix], str | None]]:
    def register(run: Callable[[Matrix], str | None]) -> Callable[[Matrix], str | None]:
        ROWS.append(Row(client, method, call, outcome, note, run))
        return run
    return register


def done(future: Any) -> Any:
    return future.result(WAIT_S)


def only(futures: dict[Any, Any]) -> Any:
    (future,) = futures.values()
    return done(future)


def commit_offsets(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    """`group` gets `offsets` (partition -> offset of TOPIC) committed, with no members."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                            "enable.auto.commit": False})
    try:
        # a coordinator still loading its offsets partition answers a retriable error
        # (COORDINATOR_LOAD_IN_PROGRESS), which a synchronous commit hands back: ask again
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                consumer.commit(offsets=[ck.TopicPartition(TOPIC, p, o)
                                         for p, o in offsets.items()], asynchronous=False)
                return
            except ck.KafkaException as exc:
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        consumer.close()


def wait_everywhere(m: Matrix, name: str, count: int | None) -> None:
    """Until every broker's metadata shows `name` with `count` partitions (None: absent),
    so the next call sees it whichever broker the client asks."""
    wait_until(lambda: partition_counts(m.kp, name) == [count] * len(BROKERS), WAIT_S,
               f"every broker to show {name} with {count} partitions")


def eventually(seen: Callable[[], Any], expected: Any, what: str) -> None:
    """Until `seen()` equals `expected`: a describe answered by another broker than the
    one that took the change shows it once that broker's image has caught up."""
    wait_until(lambda: seen() == expected, WAIT_S, what)


def produce_records(bootstrap: str) -> None:
    """RECORDS records into each partition of TOPIC, from one idempotent producer."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for partition in range(3):
        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"v%d" % i, partition=partition)
    assert producer.flush(WAIT_S) == 0


def new_topic(m: Matrix, name: str, partitions: int = 1,
              config: dict[str, str] | None = None) -> None:
    done(m.ck.create_topics([ck_admin.NewTopic(name, partitions, 3, config=config or {})])[
        name])
    wait_everywhere(m, name, partitions)


# confluent-kafka's AdminClient

@row("confluent-kafka", "alter_configs", "alter_configs([topic matrix-legacy: "
     "retention.ms=1000000])", "works", "the legacy whole-set replace: "
     "segment.ms set at creation is back to its default")
def ck_alter_configs(m: Matrix) -> None:
    new_topic(m, "matrix-legacy", config={"segment.ms": "100000"})
    resource = ck_admin.ConfigResource("topic", "matrix-legacy",
                                       set_config={"retention.ms": "1000000"})
    with pytest.warns(DeprecationWarning, match="alter_configs has been deprecated"):
        only(m.ck.alter_configs([resource]))
    def values() -> tuple[str, str]:
        configs = only(m.ck.describe_configs([ck_admin.ConfigResource("topic",
                                                                      "matrix-legacy")]))
        return configs["retention.ms"].value, configs["segment.ms"].value
    eventually(values, ("1000000", "604800000"), "the replaced set")


@row("confluent-kafka", "alter_consumer_group_offsets",
     "alter_consumer_group_offsets([ck-alter: matrix-0 at 3])", "works",
     "the group's committed offset is 3 afterwards")
def ck_alter_group_offsets(m: Matrix) -> None:
    commit_offsets(m.bootstrap, "ck-alter", {0: 5})
    request = ck.ConsumerGroupTopicPartitions("ck-alter", [ck.TopicPartition(TOPIC, 0, 3)])
    only(m.ck.alter_consumer_group_offsets([request]))
    listed = only(m.ck.list_consumer_group_offsets(
        [ck.ConsumerGroupTopicPartitions("ck-alter", [ck.TopicPartition(TOPIC, 0)])]))
    assert [tp.offset for tp in listed.topic_partitions] == [3]


@row("confluent-kafka", "alter_user_scram_credentials",
     "alter_user_scram_credentials([upsert ck-user SCRAM-SHA-512, 8192])", "works",
     "the credential is described afterwards")
def ck_alter_scram(m: Matrix) -> None:
    info = ck_admin.ScramCredentialInfo(ck_admin.ScramMechanism.SCRAM_SHA_512, 8192)
    only(m.ck.alter_user_scram_credentials(
        [ck_admin.UserScramCredentialUpsertion("ck-user", info, b"secret")]))
    (described,) = only(m.ck.describe_user_scram_credentials(["ck-user"])
                        ).scram_credential_infos
    assert (described.mechanism, described.iterations) == \
        (ck_admin.ScramMechanism.SCRAM_SHA_512, 8192)


@row("confluent-kafka", "cluster_id", "cluster_id()", "works",
     "the id the cluster was formatted with")
def ck_cluster_id(m: Matrix) -> None:
    assert m.ck.cluster_id() == m.kp.describe_cluster()["cluster_id"]


def ck_acl(principal: str) -> Any:
    return ck_admin.AclBinding(ck_admin.ResourceType.TOPIC, TOPIC,
                               ck_admin.ResourcePatternType.LITERAL, principal, "*",
                               ck_admin.AclOperation.READ, ck_admin.AclPermissionType.ALLOW)


def ck_acl_filter(principal: str) -> Any:
    return ck_admin.AclBindingFilter(ck_admin.ResourceType.ANY, None,
                                     ck_admin.ResourcePatternType.ANY, principal, None,
                                     ck_admin.AclOperation.ANY, ck_admin.AclPermissionType.ANY)


@row("confluent-kafka", "create_acls", "create_acls([User:ck-writer READ topic matrix])",
     "works", "described afterwards")
def ck_create_acls(m: Matrix) -> None:
    assert only(m.ck.create_acls([ck_acl("User:ck-writer")])) is None
    eventually(lambda: done(m.ck.describe_acls(ck_acl_filter("User:ck-writer"))),
               [ck_acl("User:ck-writer")], "the created binding")


@row("confluent-kafka", "create_partitions", "create_partitions([matrix-grow-ck to 4])",
     "works", "the topic has 4 partitions afterwards")
def ck_create_partitions(m: Matrix) -> None:
    new_topic(m, "matrix-grow-ck", 2)
    only(m.ck.create_partitions([ck_admin.NewPartitions("matrix-grow-ck", 4)]))
    wait_everywhere(m, "matrix-grow-ck", 4)


@row("confluent-kafka", "create_topics", "create_topics([NewTopic(ck-new, 3, 3)])", "works",
     "described with 3 partitions of 3 replicas; again: TOPIC_ALREADY_EXISTS")
def ck_create_topics(m: Matrix) -> None:
    new_topic(m, "ck-new", 3)
    described = done(m.ck.describe_topics(ck.TopicCollection(["ck-new"]))["ck-new"])
    assert [len(p.replicas) for p in described.partitions] == [3, 3, 3]
    with pytest.raises(ck.KafkaException) as again:
        new_topic(m, "ck-new", 3)
    assert again.value.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS


@row("confluent-kafka", "delete_acls", "delete_acls([filter principal User:ck-deleter])",
     "works", "answers the binding it deleted; none is left")
def ck_delete_acls(m: Matrix) -> None:
    only(m.ck.create_acls([ck_acl("User:ck-deleter")]))
    assert only(m.ck.delete_acls([ck_acl_filter("User:ck-deleter")])) == \
        [ck_acl("User:ck-deleter")]
    eventually(lambda: done(m.ck.describe_acls(ck_acl_filter("User:ck-deleter"))), [],
               "no binding left")


@row("confluent-kafka", "delete_consumer_groups", "delete_consumer_groups([ck-doomed])",
     "works", "the group is no longer listed")
def ck_delete_groups(m: Matrix) -> None:
    commit_offsets(m.bootstrap, "ck-doomed", {0: 1})
    only(m.ck.delete_consumer_groups(["ck-doomed"]))
    assert "ck-doomed" not in [g.group_id for g in done(m.ck.list_consumer_groups()).valid]


@row("confluent-kafka", "delete_records", "delete_records([matrix-1 below 2])", "works",
     "low watermark 2, and the earliest offset is 2 afterwards")
def ck_delete_records(m: Matrix) -> None:
    assert only(m.ck.delete_records([ck.TopicPartition(TOPIC, 1, 2)])).low_watermark == 2
    earliest = only(m.ck.list_offsets({ck.TopicPartition(TOPIC, 1):
                                       ck_admin.OffsetSpec.earliest()}))
    assert earliest.offset == 2


@row("confluent-kafka", "delete_topics", "delete_topics([ck-doomed])", "works",
     "the topic is no longer listed")
def ck_delete_topics(m: Matrix) -> None:
    new_topic(m, "ck-doomed")
    only(m.ck.delete_topics(["ck-doomed"]))
    wait_everywhere(m, "ck-doomed", None)
    assert "ck-doomed" not in m.ck.list_topics(timeout=WAIT_S).topics


@row("confluent-kafka", "describe_acls", "describe_acls(filter principal User:matrix-reader)",
     "works", "the one binding the fixture created")
def ck_describe_acls(m: Matrix) -> None:
    assert done(m.ck.describe_acls(ck_acl_filter(READER))) == [ck_acl(READER)]


@row("confluent-kafka", "describe_cluster", "describe_cluster()", "works",
     "the 3 brokers and a controller among them")
def ck_describe_cluster(m: Matrix) -> None:
    described = done(m.ck.describe_cluster())
    assert sorted(n.id for n in described.nodes) == list(BROKERS)
    assert described.controller.id in BROKERS


@row("confluent-kafka", "describe_configs", "describe_configs([topic matrix])", "works",
     "retention.ms set at creation, its source DYNAMIC_TOPIC_CONFIG")
def ck_describe_configs(m: Matrix) -> None:
    entry = only(m.ck.describe_configs([ck_admin.ConfigResource("topic", TOPIC)]))[
        "retention.ms"]
    assert (entry.value, entry.source) == \
        (RETENTION_MS, ck_admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


@row("confluent-kafka", "describe_consumer_groups", "describe_consumer_groups([matrix-group])",
     "works", "EMPTY, no members")
def ck_describe_groups(m: Matrix) -> None:
    described = only(m.ck.describe_consumer_groups([GROUP]))
    assert (described.state, described.members) == (ck.ConsumerGroupState.EMPTY, [])


@row("confluent-kafka", "describe_topics", "describe_topics(TopicCollection([matrix]))",
     "works", "3 partitions, each with 3 replicas all in sync")
def ck_describe_topics(m: Matrix) -> None:
    described = done(m.ck.describe_topics(ck.TopicCollection([TOPIC]))[TOPIC])
    assert [(len(p.replicas), len(p.isr)) for p in described.partitions] == [(3, 3)] * 3


@row("confluent-kafka", "describe_user_scram_credentials",
     "describe_user_scram_credentials([matrix-user])", "works",
     "SCRAM-SHA-256, 4096 iterations")
def ck_describe_scram(m: Matrix) -> None:
    (info,) = only(m.ck.describe_user_scram_credentials([SCRAM_USER])).scram_credential_infos
    assert (info.mechanism, info.iterations) == (ck_admin.ScramMechanism.SCRAM_SHA_256, 4096)


@row("confluent-kafka", "elect_leaders", "elect_leaders(PREFERRED, [matrix-0])",
     "refused: ELECTION_NOT_NEEDED", "the preferred replica already leads; Kafka answers "
     "the same for the partition")
def ck_elect_leaders(m: Matrix) -> str:
    (error,) = done(m.ck.elect_leaders(ck.ElectionType.PREFERRED,
                                       [ck.TopicPartition(TOPIC, 0)])).values()
    return str(error.name())


@row("confluent-kafka", "incremental_alter_configs",
     "incremental_alter_configs([topic matrix-incr: SET retention.ms=2000000])", "works",
     "described afterwards as set")
def ck_incremental_alter(m: Matrix) -> None:
    new_topic(m, "matrix-incr")
    entry = ck_admin.ConfigEntry("retention.ms", "2000000",
                                 incremental_operation=ck_admin.AlterConfigOpType.SET)
    only(m.ck.incremental_alter_configs([ck_admin.ConfigResource(
        "topic", "matrix-incr", incremental_configs=[entry])]))
    eventually(lambda: only(m.ck.describe_configs([ck_admin.ConfigResource(
        "topic", "matrix-incr")]))["retention.ms"].value, "2000000", "the set value")


@row("confluent-kafka", "list_consumer_group_offsets",
     "list_consumer_group_offsets([matrix-group: matrix-0])", "works", "offset 5")
def ck_list_group_offsets(m: Matrix) -> None:
    listed = only(m.ck.list_consumer_group_offsets(
        [ck.ConsumerGroupTopicPartitions(GROUP, [ck.TopicPartition(TOPIC, 0)])]))
    assert [tp.offset for tp in listed.topic_partitions] == [5]


@row("confluent-kafka", "list_consumer_groups", "list_consumer_groups()", "works",
     "matrix-group listed, EMPTY")
def ck_list_consumer_groups(m: Matrix) -> None:
    states = {g.group_id: g.state for g in done(m.ck.list_consumer_groups()).valid}
    assert states[GROUP] == ck.ConsumerGroupState.EMPTY


@row("confluent-kafka", "list_groups", "list_groups(timeout=20)", "works",
     "(deprecated) matrix-group listed")
def ck_list_groups(m: Matrix) -> None:
    with pytest.warns(DeprecationWarning, match=r"list_groups\(\) is deprecated"):
        groups = m.ck.list_groups(timeout=WAIT_S)
    assert GROUP in [g.id for g in groups]


@row("confluent-kafka", "list_offsets", "list_offsets({matrix-0: latest})", "works",
     f"offset {RECORDS}")
def ck_list_offsets(m: Matrix) -> None:
    latest = only(m.ck.list_offsets({ck.TopicPartition(TOPIC, 0): ck_admin.OffsetSpec.latest()}))
    assert latest.offset == RECORDS


@row("confluent-kafka", "list_topics", "list_topics(timeout=20)", "works",
     "matrix listed with 3 partitions")
def ck_list_topics(m: Matrix) -> None:
    assert len(m.ck.list_topics(timeout=WAIT_S).topics[TOPIC].partitions) == 3


@row("confluent-kafka", "poll", "poll(0)", "works",
     "serves the client's callbacks: none queued, 0")
def ck_poll(m: Matrix) -> None:
    assert m.ck.poll(0) == 0


@row("confluent-kafka", "set_sasl_credentials", "set_sasl_credentials(u, p) on its own "
     "client", "works", "local: sets the credentials for the next SASL handshake")
def ck_set_sasl_credentials(m: Matrix) -> None:
    client = ck_admin.AdminClient({"bootstrap.servers": m.bootstrap})
    assert client.set_sasl_credentials("u", "p") is None


# kafka-python's KafkaAdminClient

@row("kafka-python", "alter_configs", "alter_configs([TOPIC matrix-kp-configs: "
     "retention.ms=3000000])", "works", "described afterwards as set")
def kp_alter_configs(m: Matrix) -> None:
    new_topic(m, "matrix-kp-configs")
    resource = kafka_admin.ConfigResource("TOPIC", "matrix-kp-configs",
                                          {"retention.ms": "3000000"})
    assert m.kp.alter_configs([resource]) == {"topic": {"matrix-kp-configs": "OK"}}
    eventually(lambda: m.kp.describe_configs([kafka_admin.ConfigResource(
        "TOPIC", "matrix-kp-configs")])["topic"]["matrix-kp-configs"]["retention.ms"]["value"],
        "3000000", "the set value")


@row("kafka-python", "alter_group_offsets", "alter_group_offsets(kp-alter, {matrix-0: 4})",
     "works", "offset 4 listed afterwards")
def kp_alter_group_offsets(m: Matrix) -> None:
    commit_offsets(m.bootstrap, "kp-alter", {0: 5})
    partition = kafka.TopicPartition(TOPIC, 0)
    assert m.kp.alter_group_offsets("kp-alter", {partition: kafka.OffsetAndMetadata(4)}) == \
        {partition: kafka_errors.NoError}
    assert m.kp.list_group_offsets({"kp-alter": None})["kp-alter"][partition].offset == 4


@row("kafka-python", "alter_user_scram_credentials",
     "alter_user_scram_credentials([upsert kp-user SCRAM-SHA-256])", "works",
     "described afterwards")
def kp_alter_scram(m: Matrix) -> None:
    upsert = kafka_admin.UserScramCredentialUpsertion(
        "kp-user", kafka_admin.ScramMechanism.SCRAM_SHA_256, "secret")
    assert m.kp.alter_user_scram_credentials([upsert]) == {"kp-user": None}
    described = m.kp.describe_user_scram_credentials(["kp-user"])["kp-user"]
    assert [c["mechanism"] for c in described["credential_infos"]] == \
        [kafka_admin.ScramMechanism.SCRAM_SHA_256]


@row("kafka-python", "api_versions", "api_versions()", "works",
     "Kafka's keys only: this project's two ordered-delivery APIs are listed to its own "
     "client alone")
def kp_api_versions(m: Matrix) -> None:
    versions = m.kp.api_versions()
    assert len(versions) > 30
    assert all(int(key) < 1000 for key in versions)


@row("kafka-python", "close", "close() on its own client", "works", "local")
def kp_close(m: Matrix) -> None:
    client = kafka.KafkaAdminClient(bootstrap_servers=m.bootstrap.split(","))
    assert client.close() is None


def kp_acl(principal: str) -> Any:
    return kafka_admin.ACL(principal, "*", kafka_admin.ACLOperation.READ,
                           kafka_admin.ACLPermissionType.ALLOW,
                           kafka_admin.ResourcePattern(kafka_admin.ResourceType.TOPIC, TOPIC))


def kp_acl_filter(principal: str) -> Any:
    return kafka_admin.ACLFilter(principal, None, kafka_admin.ACLOperation.ANY,
                                 kafka_admin.ACLPermissionType.ANY,
                                 kafka_admin.ResourcePatternFilter(
                                     kafka_admin.ResourceType.ANY, None,
                                     kafka_admin.ACLResourcePatternType.ANY))


@row("kafka-python", "create_acls", "create_acls([User:kp-writer READ topic matrix])",
     "works", "succeeded, and described afterwards")
def kp_create_acls(m: Matrix) -> None:
    assert m.kp.create_acls([kp_acl("User:kp-writer")]) == \
        {"succeeded": [kp_acl("User:kp-writer")], "failed": []}
    eventually(lambda: m.kp.describe_acls(kp_acl_filter("User:kp-writer")),
               ([kp_acl("User:kp-writer")], kafka_errors.NoError), "the created binding")


@row("kafka-python", "create_partitions", "create_partitions({matrix-grow-kp: 5})", "works",
     "the topic has 5 partitions afterwards")
def kp_create_partitions(m: Matrix) -> None:
    new_topic(m, "matrix-grow-kp", 2)
    (result,) = m.kp.create_partitions({"matrix-grow-kp": 5}).results
    assert result.error_code == 0
    wait_everywhere(m, "matrix-grow-kp", 5)


@row("kafka-python", "create_topics", "create_topics({kp-new: 2 partitions, RF 3, "
     "cleanup.policy=compact})", "works", "answered with its topic id and config")
def kp_create_topics(m: Matrix) -> None:
    (created,) = m.kp.create_topics({"kp-new": {"num_partitions": 2, "replication_factor": 3,
                                                "configs": {"cleanup.policy": "compact"}}}
                                    )["topics"]
    assert (created["error_code"], created["num_partitions"]) == (0, 2)
    assert created["configs"]["cleanup.policy"]["value"] == "compact"
    wait_everywhere(m, "kp-new", 2)
    (described,) = m.kp.describe_topics(["kp-new"])
    assert described["topic_id"] == created["topic_id"]


@row("kafka-python", "delete_acls", "delete_acls([filter principal User:kp-deleter])",
     "works", "the binding deleted; none left")
def kp_delete_acls(m: Matrix) -> None:
    m.kp.create_acls([kp_acl("User:kp-deleter")])
    ((_, deleted, error),) = m.kp.delete_acls([kp_acl_filter("User:kp-deleter")])
    assert (deleted, error) == ([kp_acl("User:kp-deleter")], kafka_errors.NoError)
    eventually(lambda: m.kp.describe_acls(kp_acl_filter("User:kp-deleter"))[0], [],
               "no binding left")


@row("kafka-python", "delete_group_offsets",
     "delete_group_offsets(kp-forget, [matrix-0])", "works",
     "only matrix-1's offset is left")
def kp_delete_group_offsets(m: Matrix) -> None:
    commit_offsets(m.bootstrap, "kp-forget", {0: 5, 1: 6})
    partition = kafka.TopicPartition(TOPIC, 0)
    assert m.kp.delete_group_offsets("kp-forget", [partition]) == \
        {partition: kafka_errors.NoError}
    assert list(m.kp.list_group_offsets({"kp-forget": None})["kp-forget"]) == \
        [kafka.TopicPartition(TOPIC, 1)]


@row("kafka-python", "delete_groups", "delete_groups([kp-doomed])", "works",
     "OK, and the group is no longer listed")
def kp_delete_groups(m: Matrix) -> None:
    commit_offsets(m.bootstrap, "kp-doomed", {0: 1})
    assert m.kp.delete_groups(["kp-doomed"]) == {"kp-doomed": "OK"}
    assert "kp-doomed" not in [g["group_id"] for g in m.kp.list_groups()]


@row("kafka-python", "delete_records", "delete_records({matrix-2: 4})", "works",
     "low watermark 4")
def kp_delete_records(m: Matrix) -> None:
    partition = kafka.TopicPartition(TOPIC, 2)
    answer = m.kp.delete_records({partition: 4})[partition]
    assert (answer["error_code"], answer["low_watermark"]) == (0, 4)


@row("kafka-python", "delete_topics", "delete_topics([kp-doomed])", "works",
     "the topic is no longer listed")
def kp_delete_topics(m: Matrix) -> None:
    new_topic(m, "kp-doomed")
    (deleted,) = m.kp.delete_topics(["kp-doomed"])["topics"]
    assert deleted["error_code"] == 0
    wait_everywhere(m, "kp-doomed", None)
    assert "kp-doomed" not in m.kp.list_topics()


@row("kafka-python", "describe_acls", "describe_acls(filter principal User:matrix-reader)",
     "works", "the one binding the fixture created")
def kp_describe_acls(m: Matrix) -> None:
    assert m.kp.describe_acls(kp_acl_filter(READER)) == ([kp_acl(READER)], kafka_errors.NoError)


@row("kafka-python", "describe_cluster", "describe_cluster()", "works", "the 3 brokers")
def kp_describe_cluster(m: Matrix) -> None:
    assert sorted(b["broker_id"] for b in m.kp.describe_cluster()["brokers"]) == list(BROKERS)


@row("kafka-python", "describe_configs", "describe_configs([TOPIC matrix])", "works",
     "the modified configs: retention.ms, DYNAMIC_TOPIC_CONFIG")
def kp_describe_configs(m: Matrix) -> None:
    configs = m.kp.describe_configs([kafka_admin.ConfigResource("TOPIC", TOPIC)])["topic"][TOPIC]
    assert {k: (v["value"], v["config_source"]) for k, v in configs.items()} == \
        {"retention.ms": (RETENTION_MS, "DYNAMIC_TOPIC_CONFIG")}


@row("kafka-python", "describe_features", "describe_features()", "works",
     "kraft.version supported 0-1, finalized 0 (a static quorum); metadata.version "
     "supported 1-3, finalized 3 (the latest)")
def kp_describe_features(m: Matrix) -> None:
    features = m.kp.describe_features()
    assert {name: (f["supported"], f["finalized"]) for name, f in features.items()} == {
        "kraft.version": ((0, 1), (0, 0)), "metadata.version": ((1, 3), (3, 3))}


@row("kafka-python", "update_features",
     "update_features({metadata.version: 3, kraft.version: 1}, validate_only=True)", "works",
     "both OK, nothing changed (forwarded: metadata.version to the active controller, "
     "kraft.version checked by the broker, an upgrade sent to the raft leader), as Kafka 3.9")
def kp_update_features(m: Matrix) -> None:
    assert m.kp.update_features({"metadata.version": 3, "kraft.version": 1},
                                validate_only=True) == {"metadata.version": "OK",
                                                        "kraft.version": "OK"}
    assert m.kp.describe_features()["kraft.version"]["finalized"] == (0, 0)


@row("kafka-python", "describe_groups", "describe_groups([matrix-group])", "works",
     "Empty, no members")
def kp_describe_groups(m: Matrix) -> None:
    described = m.kp.describe_groups([GROUP])[GROUP]
    assert (described["group_state"], described["members"]) == ("Empty", [])


@row("kafka-python", "describe_log_dirs", "describe_log_dirs()", "works",
     "each broker holds the 3 partitions of matrix")
def kp_describe_log_dirs(m: Matrix) -> None:
    for answer in m.kp.describe_log_dirs():
        (log_dir,) = answer["log_dirs"]
        (topic,) = [t for t in log_dir["topics"] if t["name"] == TOPIC]
        assert sorted(p["partition_index"] for p in topic["partitions"]) == [0, 1, 2]


@row("kafka-python", "describe_metadata_quorum", "describe_metadata_quorum()", "works",
     "the 1 voter leads; the 3 brokers are observers")
def kp_describe_quorum(m: Matrix) -> None:
    (partition,) = m.kp.describe_metadata_quorum()["topics"][0]["partitions"]
    assert [v["replica_id"] for v in partition["current_voters"]] == [partition["leader_id"]]
    assert sorted(o["replica_id"] for o in partition["observers"]) == list(BROKERS)


@row("kafka-python", "describe_producers", "describe_producers([matrix-0])", "works",
     f"the fixture's idempotent producer, last sequence {RECORDS - 1}")
def kp_describe_producers(m: Matrix) -> None:
    (state,) = m.kp.describe_producers([kafka.TopicPartition(TOPIC, 0)]).values()
    assert [p.last_sequence for p in state.active_producers] == [RECORDS - 1]


@row("kafka-python", "describe_topic_partitions", "describe_topic_partitions([matrix])",
     "works", "3 partitions, no further page")
def kp_describe_topic_partitions(m: Matrix) -> None:
    answer = m.kp.describe_topic_partitions([TOPIC])
    (topic,) = answer["topics"]
    assert (len(topic["partitions"]), answer["next_cursor"]) == (3, None)


@row("kafka-python", "describe_topics", "describe_topics([matrix])", "works",
     "3 partitions of 3 replicas")
def kp_describe_topics(m: Matrix) -> None:
    (described,) = m.kp.describe_topics([TOPIC])
    assert [len(p["replica_nodes"]) for p in described["partitions"]] == [3, 3, 3]


@row("kafka-python", "describe_transactions", "describe_transactions([matrix-txn])",
     "refused on purpose: TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "no transactions here: "
     "FindCoordinator refuses every transactional id, so transactional producers fail at "
     "once; Kafka 3.9 answers TRANSACTIONAL_ID_NOT_FOUND")
def kp_describe_transactions(m: Matrix) -> None:
    m.kp.describe_transactions(["matrix-txn"])


@row("kafka-python", "describe_user_scram_credentials",
     "describe_user_scram_credentials([matrix-user])", "works",
     "SCRAM-SHA-256, 4096 iterations")
def kp_describe_scram(m: Matrix) -> None:
    described = m.kp.describe_user_scram_credentials([SCRAM_USER])[SCRAM_USER]
    assert described["credential_infos"] == \
        [{"mechanism": kafka_admin.ScramMechanism.SCRAM_SHA_256, "iterations": 4096}]


@row("kafka-python", "elect_leaders", "elect_leaders(PREFERRED, {matrix: [0]})",
     "refused: ELECTION_NOT_NEEDED", "the preferred replica already leads; Kafka answers "
     "the same for the partition")
def kp_elect_leaders(m: Matrix) -> str:
    answer = m.kp.elect_leaders(0, {TOPIC: [0]})
    ((result,),) = [r.partition_result for r in answer.replica_election_results]
    return str(kafka_errors.for_code(result.error_code).message)


@row("kafka-python", "get_broker_version_data", "get_broker_version_data(2)", "works",
     "local: the versions broker 2 advertised")
def kp_broker_version_data(m: Matrix) -> None:
    assert m.kp.get_broker_version_data(BROKERS[0]) is not None


@row("kafka-python", "list_group_offsets", "list_group_offsets({matrix-group: None})",
     "works", "matrix-0 at 5")
def kp_list_group_offsets(m: Matrix) -> None:
    offsets = m.kp.list_group_offsets({GROUP: None})[GROUP]
    assert {tp: o.offset for tp, o in offsets.items()} == {kafka.TopicPartition(TOPIC, 0): 5}


@row("kafka-python", "list_groups", "list_groups()", "works", "matrix-group listed, Empty")
def kp_list_groups(m: Matrix) -> None:
    states = {g["group_id"]: g["group_state"] for g in m.kp.list_groups()}
    assert states[GROUP] == "Empty"


@row("kafka-python", "list_partition_offsets",
     "list_partition_offsets({matrix-0: OffsetSpec.LATEST})", "works", f"offset {RECORDS}")
def kp_list_partition_offsets(m: Matrix) -> None:
    partition = kafka.TopicPartition(TOPIC, 0)
    answer = m.kp.list_partition_offsets({partition: kafka_admin.OffsetSpec.LATEST})
    assert answer[partition].offset == RECORDS


@row("kafka-python", "list_topics", "list_topics()", "works", "matrix listed")
def kp_list_topics(m: Matrix) -> None:
    assert TOPIC in m.kp.list_topics()


@row("kafka-python", "remove_group_members", "remove_group_members(matrix-static, "
     "[group_instance_id matrix-member])", "works", "the joined static member is removed; "
     "the group has no members afterwards")
def kp_remove_group_members(m: Matrix) -> None:
    consumer = ck.Consumer({"bootstrap.servers": m.bootstrap, "group.id": "matrix-static",
                            "group.instance.id": "matrix-member"})
    try:
        consumer.subscribe([TOPIC])
        def assigned() -> list[Any]:
            consumer.poll(0.1)  # joins and takes the assignment in the poll's callbacks
            return list(consumer.assignment())
        wait_until(assigned, WAIT_S, "the static member to be assigned partitions")
        member = kafka_admin.MemberToRemove(group_instance_id="matrix-member")
        assert m.kp.remove_group_members("matrix-static", [member]) == \
            {"matrix-member": kafka_errors.NoError}
        assert m.kp.describe_groups(["matrix-static"])["matrix-static"]["members"] == []
    finally:
        consumer.close()


@row("kafka-python", "reset_configs", "reset_configs([TOPIC matrix-reset: retention.ms])",
     "works", "no modified config left")
def kp_reset_configs(m: Matrix) -> None:
    new_topic(m, "matrix-reset", config={"retention.ms": "5000000"})
    resource = kafka_admin.ConfigResource("TOPIC", "matrix-reset", ["retention.ms"])
    assert m.kp.reset_configs([resource]) == {"topic": {"matrix-reset": "OK"}}
    eventually(lambda: m.kp.describe_configs([kafka_admin.ConfigResource("TOPIC",
                                                                         "matrix-reset")]),
               {"topic": {"matrix-reset": {}}}, "no modified config left")


@row("kafka-python", "reset_group_offsets",
     "reset_group_offsets(kp-reset, {matrix-0: OffsetSpec.EARLIEST})", "works", "offset 0")
def kp_reset_group_offsets(m: Matrix) -> None:
    commit_offsets(m.bootstrap, "kp-reset", {0: 5})
    partition = kafka.TopicPartition(TOPIC, 0)
    assert m.kp.reset_group_offsets("kp-reset", {partition: kafka_admin.OffsetSpec.EARLIEST}
                                    ) == {partition: {"error": kafka_errors.NoError, "offset": 0}}


@row("kafka-python", "wait_for_topics", "wait_for_topics([matrix])", "works",
     "returns once matrix is in the metadata")
def kp_wait_for_topics(m: Matrix) -> None:
    assert m.kp.wait_for_topics([TOPIC]) is None


@row("kafka-python", "alter_partition_reassignments",
     "alter_partition_reassignments({kp-moved-0: [4, 3, 2]})", "works",
     "accepted; the replicas are reordered (nothing to copy: it completes at once)")
def kp_alter_partition_reassignments(m: Matrix) -> None:
    new_topic(m, "kp-moved")
    partition = kafka.TopicPartition("kp-moved", 0)
    assert m.kp.alter_partition_reassignments({partition: [4, 3, 2]}) == {partition: None}
    eventually(lambda: m.kp.describe_topics(["kp-moved"])[0]["partitions"][0]["replica_nodes"],
               [4, 3, 2], "the new replica order")


@row("kafka-python", "list_partition_reassignments", "list_partition_reassignments()",
     "works", "none ongoing: an empty answer, as Kafka 3.9's")
def kp_list_partition_reassignments(m: Matrix) -> None:
    assert m.kp.list_partition_reassignments() == {}


@row("kafka-python", "abort_transaction",
     "abort_transaction(AbortTransactionSpec(matrix-0, producer 0, epoch 0))",
     "refused on purpose: INVALID_TXN_STATE", "no transactions here (transactional "
     "producers are refused), so no producer has one to abort; Kafka 3.9 writes the marker")
def kp_abort_transaction(m: Matrix) -> None:
    m.kp.abort_transaction(kafka_admin.AbortTransactionSpec(kafka.TopicPartition(TOPIC, 0),
                                                            0, 0))


@row("kafka-python", "alter_replica_log_dirs",
     "alter_replica_log_dirs({matrix-0 on broker 2: /tmp, and: its log dir})", "works",
     "/tmp: LOG_DIR_NOT_FOUND, as Kafka answers a path outside log.dirs; the broker's one "
     "log dir: done already")
def kp_alter_replica_log_dirs(m: Matrix) -> None:
    replica = kafka.TopicPartitionReplica(TOPIC, 0, BROKERS[0])
    moved = m.kp.alter_replica_log_dirs({replica: "/tmp"})
    assert moved == {replica: kafka_errors.LogDirNotFoundError}
    here = str(m.cluster.node(BROKERS[0]).data_dir)
    assert m.kp.alter_replica_log_dirs({replica: here}) == {replica: kafka_errors.NoError}


@row("kafka-python", "find_hanging_transactions", "find_hanging_transactions()", "works",
     "none: no transactions here, as on a Kafka 3.9 cluster without any")
def kp_find_hanging_transactions(m: Matrix) -> None:
    assert m.kp.find_hanging_transactions() == []


@row("kafka-python", "list_config_resources", "list_config_resources()", "works",
     "ListClientMetricsResources (KIP-714): none here, an empty answer")
def kp_list_config_resources(m: Matrix) -> None:
    assert m.kp.list_config_resources() == {}


@row("kafka-python", "list_transactions", "list_transactions()", "works",
     "every broker answers an empty list, as a Kafka 3.9 cluster without transactions")
def kp_list_transactions(m: Matrix) -> None:
    assert m.kp.list_transactions() == {broker: [] for broker in BROKERS}


CLIENTS = {"confluent-kafka": ck_admin.AdminClient, "kafka-python": kafka.KafkaAdminClient}


def public_methods(client: type) -> set[str]:
    return {name for name in dir(client)
            if not name.startswith("_") and callable(getattr(client, name))}


def test_every_public_method_has_a_row() -> None:
    for client, cls in CLIENTS.items():
        classified = {r.method for r in ROWS if r.client == client}
        assert public_methods(cls) - classified == set(), f"{client}: methods with no row"
        assert classified - public_methods(cls) == set(), f"{client}: rows with no method"
    assert len({(r.client, r.method) for r in ROWS}) == len(ROWS)


def render_table() -> str:
    lines = ["| client | method | call | outcome | note |", "|---|---|---|---|---|"]
    lines += [f"| {r.client} | `{r.method}` | `{r.call}` | {r.outcome} | {r.note} |"
              for r in sorted(ROWS, key=lambda r: (r.client, r.method))]
    return "\n".join(lines)


def documented_table(text: str) -> str:
    return text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()


def test_the_docs_hold_this_table() -> None:
    assert documented_table(DOC.read_text()) == render_table(), \
        f"rewrite it: python -m tests.integration.test_admin_matrix (then review {DOC.name})"


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    """The cluster and what the rows read: TOPIC with RECORDS records in each partition from
    one idempotent producer, GROUP's committed offset, READER's ACL, SCRAM_USER."""
    with running_cluster(tmp_path_factory.mktemp("matrix") / "cluster", FAST_SETTINGS,
                         voters=1, brokers=len(BROKERS)) as cluster:
        bootstrap = ",".join(a for n in BROKERS if (a := cluster.node(n).client_address))
        confluent = ck_admin.AdminClient({"bootstrap.servers": bootstrap})
        client = kafka.KafkaAdminClient(bootstrap_servers=bootstrap,
                                        request_timeout_ms=int(WAIT_S * 1000))
        started = Matrix(cluster, bootstrap, confluent, client)
        only(confluent.create_acls([ck_acl(READER)]))
        info = ck_admin.ScramCredentialInfo(ck_admin.ScramMechanism.SCRAM_SHA_256, 4096)
        only(confluent.alter_user_scram_credentials(
            [ck_admin.UserScramCredentialUpsertion(SCRAM_USER, info, b"secret")]))
        # created last: every broker applies the metadata log in order, so once each
        # shows TOPIC each holds READER's ACL too
        new_topic(started, TOPIC, 3, {"retention.ms": RETENTION_MS})
        produce_records(bootstrap)
        commit_offsets(bootstrap, GROUP, {0: 5})
        try:
            yield started
        finally:
            client.close()


def error_name(error: Exception) -> str:
    """The name a row's outcome uses: Kafka's error name when a broker answered one."""
    if isinstance(error, ck.KafkaException):
        return str(error.args[0].name())
    if isinstance(error, kafka_errors.BrokerResponseError):
        return str(error.message)
    return type(error).__name__


@pytest.mark.parametrize("entry", ROWS, ids=lambda r: f"{r.client}.{r.method}")
def test_the_call_has_the_outcome_of_its_row(entry: Row, matrix: Matrix) -> None:
    try:
        seen = entry.run(matrix) or "works"
    except AssertionError:
        raise
    except Exception as error:  # a refusal: compared with the row's below
        seen = error_name(error)
    assert seen == entry.outcome.split(": ")[-1], f"{entry.call}: {seen}"


def rewrite_doc() -> None:
    text = DOC.read_text()
    before, rest = text.split(TABLE_START, 1)
    after = rest.split(TABLE_END, 1)[1]
    DOC.write_text(f"{before}{TABLE_START}\n{render_table()}\n{TABLE_END}{after}")


if __name__ == "__main__":
    rewrite_doc()
