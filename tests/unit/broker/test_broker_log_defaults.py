"""The broker's `log.retention.*` / `log.roll.*` defaults (segments.LogDefaults) for
topics that set no retention.ms, retention.bytes or segment.ms: retention and the roll
limits use them, a topic's own values come first, and DescribeConfigs shows them as
STATIC_BROKER_CONFIG where they differ from Kafka's defaults."""

from __future__ import annotations

from broker.kafka.admin.configs_api import (
    describe_topic_configs,
)
from broker.kafka.partitions.retention import topic_retention
from broker.kafka.partitions.segments import LogDefaults, Retention, RollLimits, topic_defaults
from broker.kafka.replication.replica import roll_limits
from metadata import records as rec
from metadata.broker_configs import DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG
from metadata.delta import replay
from metadata.image import MetadataImage, TopicImage
from tests.support.kafka_support import TOPIC_ID

DEFAULTS = LogDefaults(retention_ms=60_000, retention_bytes=1 << 20, segment_ms=5_000)


def _image(**configs: str) -> MetadataImage:
    return replay(enumerate([rec.Topic(name="t", topic_id=TOPIC_ID), *(
        rec.TopicConfig(topic_id=TOPIC_ID, key=key.replace("_", "."), value=value)
        for key, value in configs.items())]))


def _topic(**configs: str) -> TopicImage:
    topic = _image(**configs).topic(TOPIC_ID)
    assert topic is not None
    return topic


def test_a_topic_that_sets_none_takes_the_broker_s_defaults() -> None:
    assert topic_retention(_topic(), DEFAULTS) == Retention(retention_ms=60_000,
                                                            retention_bytes=1 << 20)
    assert roll_limits(_topic(), DEFAULTS) == RollLimits(segment_ms=5_000)
    assert topic_retention(_topic(), LogDefaults()) == Retention(retention_ms=604_800_000)


def test_a_topic_s_own_values_come_before_the_broker_s() -> None:
    assert topic_retention(_topic(retention_ms="5", retention_bytes="-1"), DEFAULTS) == \
        Retention(retention_ms=5, retention_bytes=-1)
    assert roll_limits(_topic(segment_ms="7", segment_bytes="4096"), DEFAULTS) == \
        RollLimits(segment_ms=7, segment_bytes=4096)


def test_describe_shows_a_broker_default_that_differs_from_kafka_s() -> None:
    result = describe_topic_configs(
        _image(retention_bytes="5"), "t", ("retention.ms", "retention.bytes", "segment.ms"),
        broker_defaults=topic_defaults(LogDefaults(retention_ms=60_000)))
    assert {c["name"]: (c["value"], c["config_source"], c["is_default"])
            for c in result["configs"]} == {
        "retention.ms": ("60000", STATIC_BROKER_CONFIG, False),
        "retention.bytes": ("5", DYNAMIC_TOPIC_CONFIG, False),
        "segment.ms": ("604800000", DEFAULT_CONFIG, True)}
