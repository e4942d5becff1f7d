"""KIP-253 records replayed into the image (metadata.delta): PartitionCount,
RemovePartition, the PartitionChange bump and mark, the epoch maps; what replay skips as
an anomaly; hashing and snapshots of resized topics."""

from __future__ import annotations

import pytest

from metadata import records as rec
from metadata.delta import replay
from metadata.image import MetadataImage, TopicImage
from metadata.image_snapshot import image_from_records, image_records
from raft.common.uuid import Uuid

T = Uuid(41)


def numbered(*records: rec.Record) -> list[tuple[int, rec.Record]]:
    return list(enumerate(records))


def part(index: int, leader: int = 1, **kwargs: object) -> rec.Partition:
    return rec.Partition(topic_id=T, partition=index, replicas=(1, 2), isr=(1, 2),
                         leader=leader, **kwargs)  # type: ignore[arg-type]


def base(count: int = 3, initial: int | None = 2) -> list[rec.Record]:
    return [rec.Topic(name="t", topic_id=T, initial_partition_count=initial),
            *(part(i) for i in range(count))]


def image_of(*records: rec.Record) -> MetadataImage:
    return replay(numbered(*records))


def the_topic(image: MetadataImage) -> TopicImage:
    found = image.topic(T)
    assert found is not None
    return found


def skipped(image: MetadataImage) -> list[str]:
    return [a.reason for a in image.anomalies]


# --- PartitionCount -----------------------------------------------------------------------


def test_partition_count_sets_the_undeleted_count_and_a_missing_initial_count() -> None:
    image = image_of(*base(initial=None), rec.PartitionCount(
        topic_id=T, undeleted_partition_count=2, initial_partition_count=2))
    t = the_topic(image)
    assert (t.undeleted_partition_count, t.undeleted_count, t.initial_partition_count) == (
        2, 2, 2)
    assert image.anomaly_count == 0


def test_undeleted_count_defaults_to_the_partitions_when_never_set() -> None:
    t = the_topic(image_of(*base()))
    assert (t.undeleted_partition_count, t.undeleted_count) == (None, 3)


@pytest.mark.parametrize(("record", "reason"), [
    (rec.PartitionCount(topic_id=Uuid(9), undeleted_partition_count=2), "no live topic"),
    (rec.PartitionCount(topic_id=T, undeleted_partition_count=1), "below 1 or the initial"),
    (rec.PartitionCount(topic_id=T, undeleted_partition_count=0), "below 1 or the initial"),
    (rec.PartitionCount(topic_id=T, undeleted_partition_count=3, initial_partition_count=3),
     "initial partition count 3, but the topic's is 2"),
])
def test_partition_count_contradicting_the_image_is_an_anomaly(record: rec.PartitionCount,
                                                               reason: str) -> None:
    clean = image_of(*base())
    image = image_of(*base(), record)
    assert reason in skipped(image)[0]
    assert the_topic(image) == the_topic(clean)


# --- PartitionChange: bump and mark -------------------------------------------------------


def test_bump_adds_one_epoch_even_when_the_leader_stays_and_only_one_with_a_new_one() -> None:
    image = image_of(*base(), rec.PartitionChange(topic_id=T, partition=0,
                                                  bump_leader_epoch=True),
                     rec.PartitionChange(topic_id=T, partition=1, bump_leader_epoch=True,
                                         leader=2),
                     rec.PartitionChange(topic_id=T, partition=2, bump_leader_epoch=False))
    assert [p.leader_epoch for p in the_topic(image).partitions] == [1, 1, 0]
    assert [p.partition_epoch for p in the_topic(image).partitions] == [1, 1, 1]


def test_a_before_deletion_map_marks_the_partition() -> None:
    image = image_of(*base(), rec.PartitionChange(
        topic_id=T, partition=2, leader_epoch_before_deletion=((0, 0), (1, 0))))
    t = the_topic(image)
    assert t.partitions[2].marked_for_deletion
    assert t.marked_partitions == (2,)
    assert t.partitions[2].leader_epoch_before_deletion == ((0, 0), (1, 0))
    assert t.partitions[2].leader_epoch == 0  # marking alone does not bump


@pytest.mark.parametrize("bad", [(), ((1, 0), (0, 0)), ((0, 1, 2),), ((0, 0), (0, 1))])
def test_a_malformed_before_deletion_map_is_an_anomaly(bad: rec.EpochMap) -> None:
    image = image_of(*base(), rec.PartitionChange(topic_id=T, partition=2,
                                                  leader_epoch_before_deletion=bad))
    assert image.anomaly_count == 1
    assert the_topic(image).marked_partitions == ()


def test_a_partition_with_a_malformed_map_is_an_anomaly() -> None:
    image = image_of(*base(), part(3, leader_epoch_after_creation=((2, 0), (1, 0))))
    assert "not (partition, epoch) pairs by partition" in skipped(image)[0]
    assert len(the_topic(image).partitions) == 3


# --- RemovePartition ----------------------------------------------------------------------


def remove(partition: int, topic_id: Uuid = T) -> rec.RemovePartition:
    return rec.RemovePartition(topic_id=topic_id, partition=partition, leader_epoch=0,
                               log_start_offset=5, log_end_offset=5)


def mark(partition: int) -> rec.PartitionChange:
    return rec.PartitionChange(topic_id=T, partition=partition,
                               leader_epoch_before_deletion=((0, 0),))


def test_remove_partition_drops_the_last_marked_partition() -> None:
    image = image_of(*base(), rec.PartitionCount(topic_id=T, undeleted_partition_count=2),
                     mark(2), remove(2))
    t = the_topic(image)
    assert [p.partition for p in t.partitions] == [0, 1]
    assert (t.undeleted_count, t.marked_partitions, image.anomaly_count) == (2, (), 0)


@pytest.mark.parametrize(("records", "reason"), [
    ((mark(1), remove(1)), "is not the last"),
    ((remove(2),), "is not marked for deletion"),
    ((mark(2), remove(2, Uuid(9))), "no live topic"),
    ((mark(2), remove(3)), "is not the last"),
])
def test_remove_partition_of_anything_but_the_marked_last_one_is_an_anomaly(
        records: tuple[rec.Record, ...], reason: str) -> None:
    image = image_of(*base(), *records)
    assert reason in skipped(image)[-1]
    assert len(the_topic(image).partitions) == 3


# --- hashing and snapshots ----------------------------------------------------------------


def test_topics_without_resize_fields_hash_as_before() -> None:
    """The count enters the canonical form only when set, after the configs."""
    t = the_topic(image_of(*base()))
    assert len(t.canonical()) == 4
    counted = the_topic(image_of(*base(), rec.PartitionCount(topic_id=T,
                                                             undeleted_partition_count=3)))
    assert counted.canonical()[4:] == [(), 3]
    assert counted.digest() != t.digest()


def test_resized_image_survives_a_snapshot_round_trip() -> None:
    records = [*base(count=2, initial=2),
               rec.PartitionCount(topic_id=T, undeleted_partition_count=4),
               rec.PartitionChange(topic_id=T, partition=0, bump_leader_epoch=True),
               rec.PartitionChange(topic_id=T, partition=1, bump_leader_epoch=True),
               part(2, leader_epoch_after_creation=((0, 0), (1, 0))),
               part(3, leader_epoch_after_creation=((0, 0), (1, 0))),
               rec.PartitionCount(topic_id=T, undeleted_partition_count=2),
               rec.PartitionChange(topic_id=T, partition=2,
                                   leader_epoch_before_deletion=((0, 1), (1, 1))),
               rec.PartitionChange(topic_id=T, partition=3,
                                   leader_epoch_before_deletion=((0, 1), (1, 1))),
               rec.PartitionChange(topic_id=T, partition=0, bump_leader_epoch=True),
               rec.PartitionChange(topic_id=T, partition=1, bump_leader_epoch=True),
               remove(3)]
    image = image_of(*records)
    assert image.anomaly_count == 0
    snapshot = image_records(image)
    assert any(isinstance(r, rec.PartitionCount) for r in snapshot)
    rebuilt = image_from_records(snapshot, image.last_applied_offset)
    assert rebuilt.content_hash() == image.content_hash()
    assert the_topic(rebuilt) == the_topic(image)
    assert the_topic(rebuilt).marked_partitions == (2,)
