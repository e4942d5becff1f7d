"""metadata.version (metadata/features.py, metadata/feature_control.py): the level table,
FeatureLevel replayed into the image and kept in snapshots, a log without one replayed at
level 2, the controller's UpdateFeatures with Kafka's errors, and reassignments gated
on the finalized level (refused below it; a record above it never emitted)."""

from __future__ import annotations

import pytest

from metadata import records as rec
from metadata.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
    FeatureUpdate,
    ReassignablePartition,
    ReassignableTopic,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from metadata.controller import Controller
from metadata.delta import replay
from metadata.feature_control import describe_features
from metadata.features import (
    BROKER_CONFIGS_LEVEL,
    LATEST_METADATA_LEVEL,
    METADATA_LEVELS,
    METADATA_VERSION,
    MIN_METADATA_LEVEL,
    UNRECORDED_METADATA_LEVEL,
    UpgradeType,
    metadata_level,
    parse_metadata_version,
    release_name,
    write_refusal,
)
from metadata.image import MetadataImage
from metadata.image_snapshot import image_from_records, image_records
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from tests.support.controller_harness import Harness

UPGRADE, SAFE, UNSAFE = (UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE,
                         UpgradeType.UNSAFE_DOWNGRADE)
TOPIC_ID = Uuid.from_string("AAAAAAAAAAAAAAAAAAAAAQ")


def _harness_at(level: int) -> Harness:
    """Brokers 1-4 after a FeatureLevel(metadata.version=level), as kraft format's
    bootstrap puts it first; topic t on [1, 2, 3]."""
    h = Harness(brokers=0)
    h.log.append((0, rec.FeatureLevel(name=METADATA_VERSION, feature_level=level)))
    h.commit()
    for broker_id in range(1, 5):
        h.start_broker(broker_id)
    created = h.run(CreateTopicsRequest(topics=(CreatableTopic(
        name="t", assignments=(CreatableReplicaAssignment(partition_index=0,
                                                          broker_ids=(1, 2, 3)),)),)))
    assert created.response.topics[0].error_code == 0  # type: ignore[union-attr]
    return h


def _update(h: Harness, level: int, upgrade_type: int = UPGRADE, *,
            feature: str = METADATA_VERSION, validate_only: bool = False
            ) -> tuple[int, str | None, int]:
    """(error code, message, records written) of one UpdateFeatures."""
    decision = h.run(UpdateFeaturesRequest(feature_updates=(FeatureUpdate(
        feature=feature, max_version_level=level, upgrade_type=upgrade_type),),
        validate_only=validate_only))
    assert isinstance(decision.response, UpdateFeaturesResponse)
    result = decision.response.results[0]
    return result.error_code, result.error_message, len(decision.records)


def _reassign(h: Harness) -> int:
    decision = h.run(AlterPartitionReassignmentsRequest(topics=(ReassignableTopic(
        name="t", partitions=(ReassignablePartition(partition_index=0,
                                                    replicas=(2, 3, 4)),)),)))
    assert isinstance(decision.response, AlterPartitionReassignmentsResponse)
    return decision.response.responses[0].partitions[0].error_code


# --- the table ----------------------------------------------------------------------


def test_levels_are_consecutive_from_one_and_each_has_a_release_name() -> None:
    assert [e.level for e in METADATA_LEVELS] == list(range(1, len(METADATA_LEVELS) + 1))
    assert (MIN_METADATA_LEVEL, LATEST_METADATA_LEVEL) == (1, 3)
    for entry in METADATA_LEVELS:
        assert parse_metadata_version(entry.release) == entry.level
        assert parse_metadata_version(str(entry.level)) == entry.level
        assert release_name(entry.level) == entry.release
    with pytest.raises(ValueError, match="unknown metadata.version '9.9'"):
        parse_metadata_version("9.9")


# --- replay and snapshots -----------------------------------------------------------


def test_a_log_without_feature_level_replays_at_level_2() -> None:
    """Logs written before FeatureLevel records existed held reassignment fields: they
    stay at the level that allows them."""
    image = replay([(0, rec.Topic(name="t", topic_id=TOPIC_ID, initial_partition_count=1))])
    assert image.finalized_features == ()
    assert metadata_level(image.finalized_features) == UNRECORDED_METADATA_LEVEL == 2


def test_feature_level_replays_into_the_image_and_survives_a_snapshot() -> None:
    image = replay([(0, rec.FeatureLevel(name=METADATA_VERSION, feature_level=1)),
                    (1, rec.FeatureLevel(name="group.version", feature_level=1)),
                    (2, rec.FeatureLevel(name="group.version", feature_level=0))])
    assert image.finalized_features == ((METADATA_VERSION, 1),)  # level 0 removed it
    assert image.anomaly_count == 0
    records = image_records(image)
    assert rec.FeatureLevel(name=METADATA_VERSION, feature_level=1) in records
    again = image_from_records(records, image.last_applied_offset)
    assert again.content_hash() == image.content_hash()
    assert metadata_level(again.finalized_features) == 1


def test_an_image_without_features_hashes_as_before_and_one_with_differs() -> None:
    plain = replay([(0, rec.NoOp())])
    assert plain.content_hash() == replay([(0, rec.NoOp())]).content_hash()
    leveled = replay([(0, rec.FeatureLevel(name=METADATA_VERSION, feature_level=2))])
    assert leveled.content_hash() != plain.content_hash()


@pytest.mark.parametrize("level", [0, 4, -1])
def test_replay_skips_a_metadata_version_this_build_cannot_read(level: int) -> None:
    image = replay([(0, rec.FeatureLevel(name=METADATA_VERSION, feature_level=level))])
    assert image.finalized_features == ()
    assert image.anomaly_count == 1
    assert "metadata.version" in image.anomalies[0].reason or "negative" in \
        image.anomalies[0].reason


def test_feature_level_record_round_trips_its_bytes() -> None:
    record = rec.FeatureLevel(name=METADATA_VERSION, feature_level=2)
    assert rec.decode(record.encode()) == record


# --- the gating rule ----------------------------------------------------------------


def test_reassignment_fields_are_refused_below_level_2_only() -> None:
    change = rec.PartitionChange(topic_id=TOPIC_ID, partition=0, adding_replicas=(4,),
                                 removing_replicas=())
    plain = rec.PartitionChange(topic_id=TOPIC_ID, partition=0, isr=(1, 2))
    assert write_refusal(change, 1) is not None
    assert write_refusal(change, 2) is None
    assert write_refusal(plain, 1) is None


def test_reassignment_at_level_1_is_unsupported_and_writes_nothing() -> None:
    h = _harness_at(1)
    before = len(h.log)
    assert _reassign(h) == ErrorCode.UNSUPPORTED_VERSION
    assert len(h.log) == before


def test_reassignment_starts_after_an_upgrade_to_level_2() -> None:
    h = _harness_at(1)
    assert _update(h, 2) == (ErrorCode.NONE, None, 1)
    assert metadata_level(h.controller.committed.finalized_features) == 2
    assert _reassign(h) == ErrorCode.NONE


def test_a_controller_decision_above_the_level_is_an_assertion() -> None:
    """The safety rule is asserted where records are emitted, not only checked by the
    requests that know about it."""
    h = _harness_at(1)
    controller: Controller = h.controller
    topic = controller.view.topic_by_name("t")
    assert topic is not None
    with pytest.raises(AssertionError, match="above its level"):
        controller.bootstrap([rec.PartitionChange(topic_id=topic.topic_id, partition=0,
                                                  adding_replicas=(4,))],
                             next_offset=len(h.log))


# --- UpdateFeatures -----------------------------------------------------------------


def test_update_features_refusals_are_kafkas() -> None:
    h = _harness_at(1)
    assert _update(h, 4)[:2] == (ErrorCode.INVALID_UPDATE_VERSION,
                                 "Invalid update version 4 for feature metadata.version. "
                                 "The controller supports levels 1-3 of metadata.version.")
    code, message, _ = _update(h, 1, feature="no.such.feature")
    assert code == ErrorCode.INVALID_UPDATE_VERSION
    assert message is not None
    assert "does not support the given feature" in message
    assert _update(h, 2, SAFE)[0] == ErrorCode.INVALID_UPDATE_VERSION  # up, not UPGRADE
    assert _update(h, 2)[0] == ErrorCode.NONE
    code, message, written = _update(h, 1)
    assert code == ErrorCode.INVALID_UPDATE_VERSION
    assert written == 0
    assert message is not None
    assert "Can't downgrade without setting" in message
    code, message, _ = _update(h, 1, SAFE)
    assert message == ("Invalid metadata.version 1. Refusing to perform the requested "
                       "downgrade because it might delete metadata information.")
    code, message, _ = _update(h, 1, UNSAFE)
    assert message == ("Invalid metadata.version 1. Unsafe metadata downgrade is not "
                       "supported in this version.")
    assert _update(h, 0, SAFE)[0] == ErrorCode.INVALID_UPDATE_VERSION  # no disabling it
    assert metadata_level(h.controller.committed.finalized_features) == 2


def test_validate_only_and_the_current_level_write_nothing() -> None:
    h = _harness_at(1)
    assert _update(h, 2, validate_only=True) == (ErrorCode.NONE, None, 0)
    assert _update(h, 1) == (ErrorCode.NONE, None, 0)
    assert metadata_level(h.controller.committed.finalized_features) == 1


def test_kraft_version_is_left_to_the_raft_leader() -> None:
    h = _harness_at(1)
    assert _update(h, 1, feature="kraft.version")[0] == ErrorCode.INVALID_REQUEST


def test_a_feature_named_twice_is_refused_for_each() -> None:
    h = _harness_at(1)
    update = FeatureUpdate(feature=METADATA_VERSION, max_version_level=2)
    decision = h.run(UpdateFeaturesRequest(feature_updates=(update, update)))
    assert isinstance(decision.response, UpdateFeaturesResponse)
    assert [r.error_code for r in decision.response.results] == [ErrorCode.INVALID_REQUEST] * 2
    assert decision.records == ()


def test_describe_features_names_the_supported_and_finalized_levels() -> None:
    described = describe_features(MetadataImage.empty(), kraft_version=0)
    assert {(f.name, f.min_version, f.max_version) for f in described.supported} == {
        ("metadata.version", 1, 3), ("kraft.version", 0, 1)}
    # an unrecorded log is at level 2
    assert [(f.name, f.max_version) for f in described.finalized] == [
        ("kraft.version", 0), ("metadata.version", 2)]
    assert described.epoch == -1


def test_a_broker_config_record_needs_its_level() -> None:
    record = rec.ConfigRecord(resource_type=4, resource_name="", name="x", value="1")
    assert write_refusal(record, BROKER_CONFIGS_LEVEL - 1) is not None
    assert write_refusal(record, BROKER_CONFIGS_LEVEL) is None
