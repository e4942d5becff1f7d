"""Dynamic broker configs: the controller's decisions on BROKER resources (Kafka 3.9's keys,
types and errors), ConfigRecord replay into the image, snapshots and the content hash,
and the value a broker resolves by Kafka's precedence."""

from __future__ import annotations

from typing import Any

import pytest

from metadata import records as rec
from metadata.admin import (
    BROKER_RESOURCE,
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from metadata.broker_config_keys import PER_BROKER, READ_ONLY, STORED_ONLY
from metadata.broker_configs import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_KEYS,
    FOLLOWER_RATE,
    LEADER_RATE,
    STATIC_BROKER_CONFIG,
    UNLIMITED,
    rate,
    resolve,
)
from metadata.delta import replay
from metadata.features import BROKER_CONFIGS_LEVEL, METADATA_VERSION
from metadata.image_snapshot import image_from_records, image_records
from raft.common.errors import ErrorCode
from tests.support.controller_harness import Harness


def _harness() -> Harness:
    """Brokers 1-3 after kraft format's FeatureLevel at the level broker configs need."""
    h = Harness(brokers=0)
    h.log.append((0, rec.FeatureLevel(name=METADATA_VERSION, feature_level=BROKER_CONFIGS_LEVEL)))
    h.commit()
    for broker_id in range(1, 4):
        h.start_broker(broker_id)
    return h


def alter(h: Harness, name: str, *ops: tuple[str, int, str | None], replace: bool = False,
          validate_only: bool = False) -> Any:
    return h.run(IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=BROKER_RESOURCE, resource_name=name,
        configs=tuple(AlterableConfig(name=k, config_operation=op, value=v)
                      for k, op, v in ops)),), validate_only=validate_only,
        replace=replace or None)).response.responses[0]  # type: ignore[union-attr]


def configs(h: Harness) -> tuple[tuple[str, str, str], ...]:
    return h.controller.committed.broker_configs


def test_set_on_one_broker_and_the_default_writes_config_records() -> None:
    h = _harness()
    before = len(h.log)
    assert alter(h, "2", (LEADER_RATE, OP_SET, "0100")).error_code == ErrorCode.NONE
    assert alter(h, "", (FOLLOWER_RATE, OP_SET, "5")).error_code == ErrorCode.NONE
    assert [r for _, r in h.log[before:]] == [
        rec.ConfigRecord(resource_type=4, resource_name="2", name=LEADER_RATE, value="100"),
        rec.ConfigRecord(resource_type=4, resource_name="", name=FOLLOWER_RATE, value="5")]
    assert configs(h) == (("", FOLLOWER_RATE, "5"), ("2", LEADER_RATE, "100"))


def test_delete_removes_the_key_and_an_unchanged_set_writes_nothing() -> None:
    h = _harness()
    alter(h, "1", (LEADER_RATE, OP_SET, "7"))
    before = len(h.log)
    assert alter(h, "1", (LEADER_RATE, OP_SET, "7")).error_code == ErrorCode.NONE
    assert len(h.log) == before
    assert alter(h, "1", (LEADER_RATE, OP_DELETE, None)).error_code == ErrorCode.NONE
    assert configs(h) == ()


def test_the_legacy_alter_replaces_the_resources_whole_set() -> None:
    h = _harness()
    alter(h, "1", (LEADER_RATE, OP_SET, "7"), (FOLLOWER_RATE, OP_SET, "8"))
    alter(h, "", (LEADER_RATE, OP_SET, "9"))
    assert alter(h, "1", (FOLLOWER_RATE, OP_SET, "3"), replace=True).error_code == 0
    assert configs(h) == (("", LEADER_RATE, "9"), ("1", FOLLOWER_RATE, "3"))


@pytest.mark.parametrize(("name", "op", "value", "code", "words"), [
    ("log.retention.hours", OP_SET, "1", ErrorCode.INVALID_CONFIG,
     "Cannot update these configs dynamically: Set(log.retention.hours)"),
    ("broker.id", OP_DELETE, None, ErrorCode.INVALID_CONFIG,
     "Cannot update these configs dynamically: Set(broker.id)"),
    ("log.dirs", OP_SET, "/tmp/x", ErrorCode.INVALID_CONFIG,
     "Cannot update these configs dynamically: Set(log.dirs)"),
    ("ssl.keystore.location", OP_SET, "/k.jks", ErrorCode.INVALID_CONFIG,
     "These security configs can be dynamically updated only per-listener using the "
     "listener prefix: Set(ssl.keystore.location)"),
    ("background.threads", OP_SET, "0", ErrorCode.INVALID_CONFIG, "between 1 and"),
    ("sasl.kerberos.min.time.before.relogin", OP_SET, "soon", ErrorCode.INVALID_CONFIG,
     "not a number"),
    ("log.cleaner.min.cleanable.ratio", OP_SET, "2", ErrorCode.INVALID_CONFIG,
     "between 0 and 1"),
    ("sasl.login.refresh.buffer.seconds", OP_SET, "40000", ErrorCode.INVALID_CONFIG,
     "between -32768 and 32767"),
    ("ssl.client.auth", OP_SET, "maybe", ErrorCode.INVALID_CONFIG, "must be one of"),
    ("log.preallocate", OP_SET, "yes", ErrorCode.INVALID_CONFIG, "true or false"),
    ("log.cleanup.policy", OP_APPEND, "shred", ErrorCode.INVALID_CONFIG, "must be one of"),
    (LEADER_RATE, OP_SET, "-1", ErrorCode.INVALID_CONFIG, "between 0 and"),
    (LEADER_RATE, OP_SET, "fast", ErrorCode.INVALID_CONFIG, "not a number"),
    (LEADER_RATE, OP_APPEND, "1", ErrorCode.INVALID_CONFIG, "append is not allowed"),
    (LEADER_RATE, 9, "1", ErrorCode.INVALID_REQUEST, "unknown config operation"),
])
def test_refusals_carry_kafkas_error_and_write_nothing(name: str, op: int, value: str | None,
                                                       code: ErrorCode, words: str) -> None:
    h = _harness()
    before = len(h.log)
    result = alter(h, "1", (FOLLOWER_RATE, OP_SET, "5"), (name, op, value))
    assert (result.error_code, words in (result.error_message or "")) == (code, True)
    assert len(h.log) == before  # all or nothing: the valid key was not written either


def test_kafkas_dynamic_keys_are_accepted_typed_and_stored_as_given_once_checked() -> None:
    h = _harness()
    assert alter(h, "1", ("sasl.kerberos.min.time.before.relogin", OP_SET, " 58000"),
                 ("log.cleaner.min.cleanable.ratio", OP_SET, "0.25"),
                 ("listener.name.plaintext.ssl.keystore.location", OP_SET, "/k.jks"),
                 ("ssl.cipher.suites", OP_SET, "A, B")).error_code == 0
    assert alter(h, "", ("background.threads", OP_SET, "9"),
                 ("log.retention.ms", OP_SET, "600000")).error_code == 0
    assert configs(h) == (
        ("", "background.threads", "9"), ("", "log.retention.ms", "600000"),
        ("1", "listener.name.plaintext.ssl.keystore.location", "/k.jks"),
        ("1", "log.cleaner.min.cleanable.ratio", "0.25"),
        ("1", "sasl.kerberos.min.time.before.relogin", "58000"),
        ("1", "ssl.cipher.suites", "A,B"))


def test_a_key_kafka_does_not_know_is_stored_as_kafka_stores_it() -> None:
    h = _harness()
    assert alter(h, "2", ("my.plugin.setting", OP_SET, "anything")).error_code == 0
    assert configs(h) == (("2", "my.plugin.setting", "anything"),)


def test_append_and_subtract_work_on_list_keys_from_their_default() -> None:
    h = _harness()
    assert alter(h, "1", ("log.cleanup.policy", OP_APPEND, "compact")).error_code == 0
    assert configs(h) == (("1", "log.cleanup.policy", "delete,compact"),)
    assert alter(h, "1", ("log.cleanup.policy", OP_SUBTRACT, "delete")).error_code == 0
    assert configs(h) == (("1", "log.cleanup.policy", "compact"),)


@pytest.mark.parametrize("name", ["sasl.kerberos.min.time.before.relogin", "listeners",
                                  "ssl.client.auth", "listener.name.internal.ssl.protocol"])
def test_per_broker_keys_are_refused_on_the_cluster_default_with_kafkas_message(
        name: str) -> None:
    h = _harness()
    result = alter(h, "", (name, OP_SET, "1"), (FOLLOWER_RATE, OP_SET, "5"))
    assert (result.error_code, result.error_message) == (
        ErrorCode.INVALID_CONFIG, "Cannot update these configs at default cluster level, "
                                  f"broker id must be specified: Set({name})")
    assert configs(h) == ()


@pytest.mark.parametrize("name", ["max.connections", "num.network.threads",
                                  "listener.name.internal.max.connection.creation.rate"])
def test_cluster_level_listener_keys_are_taken_on_the_default(name: str) -> None:
    h = _harness()
    assert alter(h, "", (name, OP_SET, "100")).error_code == 0
    assert configs(h) == (("", name, "100"),)


def test_the_tables_agree_with_each_other() -> None:
    assert not READ_ONLY & set(DYNAMIC_KEYS)
    assert PER_BROKER <= set(DYNAMIC_KEYS)
    assert set(DYNAMIC_KEYS) - {k.name for k in STORED_ONLY} == {LEADER_RATE, FOLLOWER_RATE}
    assert all("no effect here" in k.documentation for k in STORED_ONLY)


@pytest.mark.parametrize("name", ["x", "-1", "1.0", " 1"])
def test_a_resource_that_names_no_broker_is_an_invalid_request(name: str) -> None:
    result = alter(_harness(), name, (LEADER_RATE, OP_SET, "1"))
    assert result.error_code == ErrorCode.INVALID_REQUEST
    assert "Invalid broker name" in result.error_message


def test_validate_only_writes_nothing() -> None:
    h = _harness()
    before = len(h.log)
    assert alter(h, "1", (LEADER_RATE, OP_SET, "1"), validate_only=True).error_code == 0
    assert len(h.log) == before


def test_replay_skips_non_broker_resources_and_bad_names_as_anomalies() -> None:
    image = replay([
        (0, rec.ConfigRecord(resource_type=2, resource_name="t", name="a", value="1")),
        (1, rec.ConfigRecord(resource_type=4, resource_name="b", name=LEADER_RATE, value="1")),
        (2, rec.ConfigRecord(resource_type=4, resource_name="3", name=LEADER_RATE, value="1")),
        (3, rec.ConfigRecord(resource_type=4, resource_name="3", name=FOLLOWER_RATE,
                             value="2")),
        (4, rec.ConfigRecord(resource_type=4, resource_name="3", name=LEADER_RATE)),
    ])
    assert image.broker_configs == (("3", FOLLOWER_RATE, "2"),)
    assert [a.offset for a in image.anomalies] == [0, 1]


def test_snapshots_carry_them_and_they_change_the_content_hash() -> None:
    base = replay([(0, rec.NoOp())])
    image = replay([(1, rec.ConfigRecord(resource_type=4, resource_name="", name=LEADER_RATE,
                                         value="10"))], base)
    assert image.content_hash() != replay([(1, rec.NoOp())], base).content_hash()
    records = image_records(image)
    assert rec.ConfigRecord(resource_type=4, resource_name="", name=LEADER_RATE,
                            value="10") in records
    again = image_from_records(records, image.last_applied_offset)
    assert again.broker_configs == image.broker_configs
    assert again.content_hash() == image.content_hash()


def test_resolution_follows_kafkas_precedence_with_every_level_as_a_synonym() -> None:
    configs = (("", LEADER_RATE, "30"), ("1", LEADER_RATE, "10"))
    own = resolve(configs, 1, LEADER_RATE, {LEADER_RATE: "50"})
    assert (own.value, own.source) == ("10", DYNAMIC_BROKER_CONFIG)
    assert own.synonyms == (("10", DYNAMIC_BROKER_CONFIG), ("30", DYNAMIC_DEFAULT_BROKER_CONFIG),
                            ("50", STATIC_BROKER_CONFIG), (str(UNLIMITED), DEFAULT_CONFIG))
    assert resolve(configs, 2, LEADER_RATE).source == DYNAMIC_DEFAULT_BROKER_CONFIG
    assert resolve((), 2, LEADER_RATE, {LEADER_RATE: "50"}).source == STATIC_BROKER_CONFIG
    assert resolve((), 2, FOLLOWER_RATE).source == DEFAULT_CONFIG
    assert (rate(configs, 1, LEADER_RATE), rate(configs, 2, FOLLOWER_RATE)) == (10, None)


def test_below_the_level_broker_configs_need_the_alter_is_unsupported_and_writes_nothing(
        ) -> None:
    h = Harness()  # no FeatureLevel: an older log, replayed at level 2
    before = len(h.log)
    result = alter(h, "1", (LEADER_RATE, OP_SET, "100"))
    assert result.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert "metadata.version 3" in result.error_message
    assert len(h.log) == before
