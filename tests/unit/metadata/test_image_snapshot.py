"""metadata.image_snapshot: an image as snapshot records and back, with the same content
hash, through a real snapshot file too; records that contradict themselves are refused."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import event, given, settings

from metadata import records as rec
from metadata.delta import replay, replay_bytes
from metadata.image import MAX_KEPT_ANOMALIES, MetadataImage
from metadata.image_snapshot import ImageSnapshotError, image_from_records, image_records
from raft.common.uuid import METADATA_TOPIC_ID, Uuid
from raft.snapshot import SnapshotId, read_snapshot, write_snapshot
from tests.support.metadata_strategies import images

ID_A = Uuid.random(random.Random(1))
ID_B = Uuid.random(random.Random(2))
ID_META = Uuid.random(random.Random(9))
INCARNATION = Uuid.random(random.Random(3))


def rebuilt(image: MetadataImage) -> MetadataImage:
    """The image back from its records, through their bytes (as a snapshot file holds
    them)."""
    data = [r.encode() for r in image_records(image)]
    return image_from_records([rec.decode(d) for d in data], image.last_applied_offset)


def rich_image() -> MetadataImage:
    """Something of everything an image holds."""
    return replay_bytes(enumerate([r.encode() for r in (
        rec.LeaderChange(leader_id=1, voters=(1, 2, 3)),
        rec.MetadataTopic(topic_id=ID_META),
        rec.RegisterBroker(broker_id=1, incarnation_id=INCARNATION, broker_epoch=2,
                           endpoints=("PLAINTEXT://127.0.0.1:9092",), rack="r1"),
        rec.UnfenceBroker(broker_id=1, broker_epoch=2),
        rec.RegisterBroker(broker_id=2, incarnation_id=INCARNATION, broker_epoch=4),
        rec.Topic(name="gone", topic_id=ID_B),
        rec.RemoveTopic(topic_id=ID_B),
        rec.Topic(name="orders", topic_id=ID_A, initial_partition_count=2),
        rec.Partition(topic_id=ID_A, partition=0, replicas=(1, 2), isr=(1, 2), leader=1),
        rec.Partition(topic_id=ID_A, partition=1, replicas=(2, 1), isr=(2,), leader=2,
                      leader_epoch_after_creation=((0, 3),),
                      leader_epoch_before_deletion=((0, 7),)),
        rec.PartitionChange(topic_id=ID_A, partition=1, leader=1, isr=(1, 2)),
        rec.TopicConfig(topic_id=ID_A, key="retention.ms", value="1000"),
        rec.TopicConfig(topic_id=ID_A, key="min.insync.replicas", value="2"),
        rec.Topic(name="orders", topic_id=ID_B),  # a reused ID: an anomaly
    )] + [b"\xc1"]))  # undecodable: another


@settings(max_examples=200)
@given(images())
def test_rebuilt_image_has_the_same_content_hash_when_records_are_replayed(
        image: MetadataImage) -> None:
    """The round trip is exact for images of random logs (anomalies included), and
    rebuilding is stable: the rebuilt image gives the same records."""
    again = rebuilt(image)
    assert again.content_hash() == image.content_hash()
    assert image_records(again) == image_records(image)
    event(f"{len(image.topics)} topics, {len(image.brokers)} brokers")


def test_random_images_hold_everything_a_snapshot_must_carry() -> None:
    """The strategy above is worth its examples: over 200 of them, a fair share of the
    images hold each thing the snapshot records carry."""
    seen: Counter[str] = Counter()

    @settings(max_examples=200, derandomize=True, database=None)
    @given(images())
    def sample(image: MetadataImage) -> None:
        retired = set(image.used_topic_ids) - set(image.topics) - {image.metadata_topic_id}
        seen.update(name for name, present in {
            "metadata topic": image.metadata_topic_id is not None,
            "retired id": bool(retired),
            "two partitions": any(len(t.partitions) > 1 for t in image.topics.values()),
            "moved leader": any(p.leader_epoch > 0 for t in image.topics.values()
                                for p in t.partitions),
            "unfenced": bool(image.unfenced_broker_ids()),
            "fenced": any(b.fenced for b in image.brokers.values()),
            "anomalies": image.anomaly_count > 0,
            "topic configs": any(t.configs for t in image.topics.values()),
        }.items() if present)
        seen["images"] += 1

    sample()
    # A twentieth at least: alone the rarest share is about a quarter, but Hypothesis's
    # engine adapts its generation to the time it spends, so on a loaded host the
    # shares move even with derandomize (8% seen at load 10 for unfenced brokers).
    assert min(seen.values()) >= seen["images"] // 20, seen
    assert len(seen) == 9, seen


def test_rich_image_survives_a_snapshot_file_when_written_and_read(tmp_path: Path) -> None:
    image = rich_image()
    assert (len(image.topics), len(image.brokers), image.anomaly_count) == (1, 2, 2)
    end = SnapshotId(end_offset=image.last_applied_offset + 1, epoch=3)
    path = write_snapshot(tmp_path, end, (r.encode() for r in image_records(image)),
                          last_contained_log_timestamp=0, max_batch_bytes=64)
    snapshot = read_snapshot(path)
    loaded = image_from_records([rec.decode(d) for d in snapshot.records],
                                snapshot.snapshot_id.end_offset - 1)
    assert loaded.content_hash() == image.content_hash()
    assert loaded.topic_by_name("orders") == image.topic_by_name("orders")
    assert loaded.brokers == image.brokers
    assert loaded.anomalies == image.anomalies


def test_records_come_in_the_order_replay_needs_when_listed() -> None:
    kinds = [type(r).__name__ for r in image_records(rich_image())]
    assert kinds == ["MetadataTopic", "RetiredTopicId", "Topic", "Partition", "Partition",
                     "TopicConfig", "TopicConfig", "RegisterBroker", "UnfenceBroker",
                     "RegisterBroker", "ReplayAnomalies"]


def test_empty_image_has_no_records_when_listed() -> None:
    assert image_records(MetadataImage.empty()) == []
    assert image_from_records([], -1).content_hash() == MetadataImage.empty().content_hash()


def test_retired_id_stays_unusable_when_the_image_is_rebuilt() -> None:
    """A removed topic's ID is never reused, even by a node that started from a snapshot."""
    image = replay(enumerate([rec.Topic(name="t", topic_id=ID_A),
                              rec.RemoveTopic(topic_id=ID_A)]))
    again = rebuilt(image)
    after = replay([(5, rec.Topic(name="t", topic_id=ID_A))], base=again)
    assert after.topic(ID_A) is None
    assert after.anomalies[-1].reason == f"topic id {ID_A} already used"


def test_anomalies_beyond_those_kept_are_counted_when_rebuilt() -> None:
    image = replay_bytes((i, b"\xc1") for i in range(MAX_KEPT_ANOMALIES + 20))
    again = rebuilt(image)
    assert (again.anomaly_count, len(again.anomalies)) == (MAX_KEPT_ANOMALIES + 20,
                                                           MAX_KEPT_ANOMALIES)
    assert again.content_hash() == image.content_hash()


@pytest.mark.parametrize(("records", "error"), [
    ([rec.Partition(topic_id=ID_A, partition=0, replicas=(1,), isr=(1,), leader=1)],
     r"^snapshot record 0 \(Partition\) does not apply: no live topic"),
    ([rec.Topic(name="a", topic_id=ID_A), rec.Topic(name="b", topic_id=ID_A)],
     r"^snapshot record 1 \(Topic\) does not apply: topic id .* already used"),
    ([rec.RetiredTopicId(topic_id=METADATA_TOPIC_ID)],
     r"^snapshot record 0 \(RetiredTopicId\) does not apply: reserved topic id"),
    ([rec.ReplayAnomalies(count=0), rec.ReplayAnomalies(count=0)],
     r"^snapshot record 1: a second ReplayAnomalies"),
    ([rec.ReplayAnomalies(count=1, offsets=(3,), record_types=("?",))],
     r"^ReplayAnomalies lists 1 offsets, 1 record types and 0 reasons"),
    ([rec.ReplayAnomalies(count=3, offsets=(3,), record_types=("?",), reasons=("x",))],
     r"^ReplayAnomalies keeps 1 of 3 anomalies, not the first 100"),
])
def test_contradicting_records_are_refused_when_an_image_is_rebuilt(
        records: list[rec.Record], error: str) -> None:
    with pytest.raises(ImageSnapshotError, match=error):
        image_from_records(records, 10)


def test_snapshot_only_records_mean_what_they_say_when_found_in_a_log() -> None:
    """In a log, RetiredTopicId marks an ID used and ReplayAnomalies is skipped (only a
    snapshot may restore another replay's account); header and footer change nothing."""
    image = replay(enumerate([
        rec.RetiredTopicId(topic_id=ID_A),
        rec.Topic(name="t", topic_id=ID_A),
        rec.ReplayAnomalies(count=5),
        rec.SnapshotHeader(last_contained_log_timestamp=1),
        rec.SnapshotFooter(),
    ]))
    assert ID_A in image.used_topic_ids
    assert image.topics == {}
    assert [(a.offset, a.record_type) for a in image.anomalies] == [(1, "Topic"),
                                                                   (2, "ReplayAnomalies")]


def test_metadata_records_decode_raft_snapshot_records_when_dumped() -> None:
    """dump-log and the replay decode with metadata.records: raft's snapshot control
    records are part of it."""
    header = rec.SnapshotHeader(last_contained_log_timestamp=42)
    assert rec.decode(header.encode()) == header
    assert rec.decode(rec.SnapshotFooter().encode()) == rec.SnapshotFooter()
    assert rec.to_json(header) == {"type": "SnapshotHeader", "version": 0,
                                   "last_contained_log_timestamp": 42}
