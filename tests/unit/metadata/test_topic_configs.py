"""Topic configs: validation (metadata.topic_configs) and TopicConfig replay into the image
(set, delete, kept by a rename, gone with the topic, hashed, carried by snapshots)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metadata import records as rec
from metadata import topic_configs as tc
from metadata.delta import MetadataDelta, replay
from metadata.image_snapshot import image_from_records, image_records
from raft.common.uuid import Uuid

ID_A = Uuid.random(random.Random(1))
ID_B = Uuid.random(random.Random(2))


def topic(topic_id: Uuid = ID_A, name: str = "t") -> list[rec.Record]:
    return [rec.Topic(name=name, topic_id=topic_id),
            rec.Partition(topic_id=topic_id, partition=0, replicas=(1,), isr=(1,), leader=1)]


def conf(key: str, value: str | None, topic_id: Uuid = ID_A) -> rec.TopicConfig:
    return rec.TopicConfig(topic_id=topic_id, key=key, value=value)


# --- validation ----------------------------------------------------------------------


@pytest.mark.parametrize(("key", "value", "canonical"), [
    ("min.insync.replicas", "2", "2"),
    ("min.insync.replicas", " 007", "7"),
    ("retention.ms", "-1", "-1"),
    ("retention.ms", str(2**63 - 1), str(2**63 - 1)),
    ("retention.bytes", "1048576", "1048576"),
    ("segment.bytes", "14", "14"),
    ("segment.ms", "1", "1"),
    ("cleanup.policy", "delete", "delete"),
    ("cleanup.policy", "compact", "compact"),
    ("cleanup.policy", "delete, compact", "compact,delete"),
    ("min.cleanable.dirty.ratio", "0.25", "0.25"),
    ("min.cleanable.dirty.ratio", "1", "1.0"),
    ("min.compaction.lag.ms", "0", "0"),
    ("max.compaction.lag.ms", "1", "1"),
    ("delete.retention.ms", "0", "0"),
])
def test_value_is_canonical_when_valid(key: str, value: str, canonical: str) -> None:
    assert tc.validate(key, value) == canonical


@pytest.mark.parametrize(("key", "value", "words"), [
    ("min.insync.replicas", "0", "between 1"),
    ("min.insync.replicas", "two", "not a number"),
    ("min.insync.replicas", str(2**31), "between"),
    ("retention.ms", "-2", "between -1"),
    ("retention.bytes", str(2**63), "between"),
    ("segment.bytes", "13", "between 14"),
    ("segment.bytes", "-1", "between 14"),
    ("segment.ms", "0", "between 1"),
    ("retention.ms", "abc", "retention.ms: not a number"),
    ("cleanup.policy", "bogus", "cleanup.policy: must be 'delete', 'compact' or both"),
    ("cleanup.policy", "compact,bogus", "cleanup.policy: must be"),
    ("min.cleanable.dirty.ratio", "1.5", "min.cleanable.dirty.ratio: must be between 0 and 1"),
    ("min.cleanable.dirty.ratio", "-0.1", "min.cleanable.dirty.ratio: must be between"),
    ("min.cleanable.dirty.ratio", "nan", "min.cleanable.dirty.ratio: must be between"),
    ("min.cleanable.dirty.ratio", "half", "min.cleanable.dirty.ratio: not a number"),
    ("min.compaction.lag.ms", "-1", "min.compaction.lag.ms: must be between 0"),
    ("max.compaction.lag.ms", "-1", "max.compaction.lag.ms: must be between 1"),
    ("delete.retention.ms", "-1", "delete.retention.ms: must be between 0"),
    ("cleanup.policy", "", "empty"),
    ("no.such.key", "1", "unknown topic config"),
    ("max.message.bytes", "-1", "max.message.bytes: must be between 0"),
    ("message.timestamp.type", "WallTime", "must be one of CreateTime, LogAppendTime"),
    ("compression.type", "brotli", "compression.type: must be one of"),
    ("compression.zstd.level", "23", "between -131072 and 22"),
    ("unclean.leader.election.enable", "yes", "must be true or false"),
    ("remote.storage.enable", "true", "tiered storage is not supported"),
    ("follower.replication.throttled.replicas", "0-1", "PARTITION:BROKER"),
    ("flush.messages", "0", "between 1"),
    ("min.insync.replicas", None, "no value"),
])
def test_value_is_refused_with_a_reason_when_invalid(key: str, value: str | None,
                                                     words: str) -> None:
    with pytest.raises(tc.InvalidConfig, match=words):
        tc.validate(key, value)


@pytest.mark.parametrize(("key", "value", "canonical"), [
    ("compression.type", " zstd", "zstd"),
    ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
    ("leader.replication.throttled.replicas", "0:1, 1:2", "0:1,1:2"),
    ("leader.replication.throttled.replicas", "*", "*"),
    ("unclean.leader.election.enable", "FALSE", "false"),
    ("unclean.leader.election.enable", " True", "true"),
    ("flush.ms", "1000", "1000"),
])
def test_kafka_topic_configs_are_accepted_in_kafka_form(key: str, value: str,
                                                        canonical: str) -> None:
    assert tc.validate(key, value) == canonical


def test_every_stored_only_key_says_so_in_its_documentation() -> None:
    assert all("no effect here" in key.documentation for key in tc.STORED_ONLY)
    assert {k.name for k in tc.STORED_ONLY} <= set(tc.KEYS)


def test_a_key_given_twice_is_refused_when_validated_together() -> None:
    with pytest.raises(tc.InvalidConfig, match="more than once"):
        tc.validate_all([("retention.ms", "1"), ("retention.ms", "2")])


@given(key=st.sampled_from(sorted(tc.KEYS)), value=st.text(max_size=12))
def test_validation_accepts_only_what_it_can_read_back_when_fuzzed(key: str, value: str
                                                                  ) -> None:
    """Never a crash: a canonical value (a fixed point) or InvalidConfig."""
    try:
        canonical = tc.validate(key, value)
    except tc.InvalidConfig:
        return
    assert tc.validate(key, canonical) == canonical


@given(number=st.integers(-(2**64), 2**64))
def test_integer_keys_keep_their_bounds_when_fuzzed(number: int) -> None:
    for key, low, high in (("min.insync.replicas", 1, 2**31 - 1),
                           ("retention.ms", -1, 2**63 - 1),
                           ("retention.bytes", -1, 2**63 - 1),
                           ("segment.bytes", 14, 2**31 - 1)):
        if low <= number <= high:
            assert tc.validate(key, str(number)) == str(number)
        else:
            with pytest.raises(tc.InvalidConfig):
                tc.validate(key, str(number))


def test_effective_value_is_the_default_when_not_set() -> None:
    assert tc.effective({}, "min.insync.replicas") == "1"
    assert tc.min_insync_replicas([("min.insync.replicas", "3")]) == 3


# --- replay --------------------------------------------------------------------------


def test_configs_are_set_and_deleted_when_replayed() -> None:
    image = replay(enumerate([*topic(), conf("retention.ms", "5"),
                              conf("min.insync.replicas", "2"), conf("retention.ms", "6")]))
    assert image.topics[ID_A].configs == (("min.insync.replicas", "2"), ("retention.ms", "6"))
    assert image.topics[ID_A].config("retention.ms") == "6"
    after = replay([(10, conf("retention.ms", None))], image)
    assert after.topics[ID_A].configs == (("min.insync.replicas", "2"),)
    assert after.anomaly_count == 0


def test_config_for_a_dead_topic_is_an_anomaly_when_replayed() -> None:
    image = replay(enumerate([conf("retention.ms", "5")]))
    assert image.anomaly_count == 1
    assert "no live topic" in image.anomalies[0].reason


def test_configs_follow_the_id_when_the_topic_is_renamed() -> None:
    image = replay(enumerate([*topic(), conf("retention.ms", "5"),
                              rec.RenameTopic(topic_id=ID_A, new_name="u")]))
    renamed = image.topic_by_name("u")
    assert renamed is not None
    assert renamed.configs == (("retention.ms", "5"),)


def test_configs_go_with_the_topic_when_it_is_removed_and_the_name_reused() -> None:
    image = replay(enumerate([*topic(), conf("retention.ms", "5"),
                              rec.RemoveTopic(topic_id=ID_A), *topic(ID_B)]))
    again = image.topic_by_name("t")
    assert again is not None
    assert again.topic_id == ID_B
    assert again.configs == ()


def test_configs_survive_partition_changes_in_one_delta() -> None:
    """The delta rebuilds a topic whose partitions changed: the configs must come along."""
    delta = MetadataDelta(replay(enumerate(topic())))
    delta.apply(conf("retention.ms", "5"), 10)
    delta.apply(rec.PartitionChange(topic_id=ID_A, partition=0, isr=(1,)), 11)
    delta.apply(rec.Partition(topic_id=ID_A, partition=1, replicas=(1,), isr=(1,), leader=1), 12)
    assert delta.build().topics[ID_A].configs == (("retention.ms", "5"),)


def test_content_hash_differs_when_a_config_changes() -> None:
    base = replay(enumerate(topic()))
    one = replay([(5, conf("retention.ms", "5"))], base)
    other = replay([(5, conf("retention.ms", "6"))], base)
    hashes = {base.content_hash(), one.content_hash(), other.content_hash()}
    assert len(hashes) == 3
    deleted = replay([(6, conf("retention.ms", None))], one)
    assert deleted.topics == replay([(6, rec.NoOp())], replay([(5, rec.NoOp())], base)).topics


def test_configs_survive_a_snapshot_when_rebuilt() -> None:
    image = replay(enumerate([*topic(), conf("retention.ms", "5"),
                              conf("cleanup.policy", "delete")]))
    records = image_records(image)
    assert [r for r in records if isinstance(r, rec.TopicConfig)] == [
        conf("cleanup.policy", "delete"), conf("retention.ms", "5")]
    again = image_from_records([rec.decode(r.encode()) for r in records],
                               image.last_applied_offset)
    assert again.content_hash() == image.content_hash()
    assert again.topics[ID_A].configs == image.topics[ID_A].configs
