"""The pure rules of metadata/features.py over every input: a level change is allowed
exactly when it stays put, or goes up by UPGRADE within this build's range (metadata.version
never goes down: every level changed the records); a record is refused below level 2
exactly when it carries a reassignment field; and replay of FeatureLevel records keeps
the last level of each feature, drops a feature set to 0, and survives a snapshot."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from metadata import records as rec
from metadata.delta import replay
from metadata.features import (
    KRAFT_VERSION,
    LATEST_METADATA_LEVEL,
    METADATA_VERSION,
    SUPPORTED,
    UpgradeType,
    update_refusal,
    write_refusal,
)
from metadata.image_snapshot import image_from_records, image_records
from raft.common.uuid import Uuid

TOPIC_ID = Uuid.from_string("AAAAAAAAAAAAAAAAAAAAAQ")
replicas = st.none() | st.tuples(st.integers(1, 5)).map(tuple)


@given(current=st.integers(1, LATEST_METADATA_LEVEL), new=st.integers(-2, 5),
       upgrade_type=st.sampled_from(list(UpgradeType)))
def test_metadata_version_moves_only_up_within_range_and_only_by_upgrade(
        current: int, new: int, upgrade_type: UpgradeType) -> None:
    refusal = update_refusal(METADATA_VERSION, current, new, upgrade_type)
    allowed = new == current or (current < new <= LATEST_METADATA_LEVEL
                                 and upgrade_type == UpgradeType.UPGRADE)
    assert (refusal is None) == allowed, refusal


@given(current=st.integers(0, 1), new=st.integers(-1, 3),
       upgrade_type=st.sampled_from(list(UpgradeType)))
def test_kraft_version_only_goes_from_0_to_1(current: int, new: int,
                                             upgrade_type: UpgradeType) -> None:
    refusal = update_refusal(KRAFT_VERSION, current, new, upgrade_type)
    assert (refusal is None) == (new == current or (
        (current, new) == (0, 1) and upgrade_type == UpgradeType.UPGRADE)), refusal


@given(name=st.text(min_size=1, max_size=20).filter(lambda n: n not in SUPPORTED),
       new=st.integers(-1, 5))
def test_a_feature_this_build_lacks_is_always_refused(name: str, new: int) -> None:
    assert update_refusal(name, 0, new, UpgradeType.UPGRADE) is not None


@given(level=st.integers(1, LATEST_METADATA_LEVEL), adding=replicas, removing=replicas,
       change=st.booleans())
def test_a_record_is_refused_below_level_2_exactly_when_it_carries_reassignment_fields(
        level: int, adding: tuple[int, ...] | None, removing: tuple[int, ...] | None,
        change: bool) -> None:
    record: rec.Record = rec.PartitionChange(
        topic_id=TOPIC_ID, partition=0, adding_replicas=adding, removing_replicas=removing
    ) if change else rec.Partition(
        topic_id=TOPIC_ID, partition=0, replicas=(1,), isr=(1,), leader=1,
        adding_replicas=adding, removing_replicas=removing)
    carries = adding is not None or removing is not None
    assert (write_refusal(record, level) is not None) == (level < 2 and carries)


@given(st.lists(st.tuples(st.sampled_from([METADATA_VERSION, "group.version", "x"]),
                          st.integers(0, LATEST_METADATA_LEVEL)), max_size=12))
def test_replay_keeps_each_features_last_level_and_a_snapshot_keeps_the_image(
        levels: list[tuple[str, int]]) -> None:
    image = replay((offset, rec.FeatureLevel(name=name, feature_level=level))
                   for offset, (name, level) in enumerate(levels))
    expected: dict[str, int] = {}
    for name, level in levels:
        if name == METADATA_VERSION and level == 0:
            continue  # not a level this build reads: skipped as an anomaly
        expected.pop(name, None)
        if level:
            expected[name] = level
    assert dict(image.finalized_features) == expected
    again = image_from_records(image_records(image), image.last_applied_offset)
    assert again.content_hash() == image.content_hash()
