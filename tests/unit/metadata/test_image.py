"""MetadataImage and replay: one behaviour per test (topic IDs, KRaft records)."""

from __future__ import annotations

import dataclasses
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metadata import records as rec
from metadata.delta import MetadataDelta, replay, replay_bytes
from metadata.image import MAX_KEPT_ANOMALIES, NO_LEADER, MetadataImage, PartitionImage
from raft.common.uuid import METADATA_TOPIC_ID, ZERO_UUID, Uuid

ROOT = Path(__file__).resolve().parents[3]
ID_A = Uuid.random(random.Random(1))
ID_B = Uuid.random(random.Random(2))
INCARNATION = Uuid.random(random.Random(3))


def part(topic_id: Uuid, partition: int, replicas: tuple[int, ...] = (1, 2)) -> rec.Partition:
    return rec.Partition(topic_id=topic_id, partition=partition, replicas=replicas,
                         isr=replicas, leader=replicas[0])


def numbered(*records: rec.Record, start: int = 0) -> list[tuple[int, rec.Record]]:
    return list(enumerate(records, start=start))


def sample_log() -> list[tuple[int, rec.Record]]:
    return numbered(
        rec.LeaderChange(leader_id=1, voters=(1, 2, 3)),
        rec.MetadataTopic(topic_id=Uuid.random(random.Random(9))),
        rec.RegisterBroker(broker_id=1, incarnation_id=INCARNATION, broker_epoch=2,
                           endpoints=("PLAINTEXT://127.0.0.1:9092",)),
        rec.UnfenceBroker(broker_id=1, broker_epoch=2),
        rec.Topic(name="orders", topic_id=ID_A, initial_partition_count=2),
        part(ID_A, 0), part(ID_A, 1),
        rec.Topic(name="audit", topic_id=ID_B), part(ID_B, 0, (2, 1)),
        rec.PartitionChange(topic_id=ID_A, partition=1, leader=2, isr=(2,)),
        rec.RemoveTopic(topic_id=ID_B),
        rec.NoOp(),
    )


def test_topic_is_found_by_id_and_by_name_when_its_record_is_replayed() -> None:
    """Topic IDs: the image maps name -> ID and ID -> topic."""
    image = replay(numbered(rec.Topic(name="orders", topic_id=ID_A), part(ID_A, 0)))
    assert image.topic_ids_by_name == {"orders": ID_A}
    topic = image.topic(ID_A)
    assert topic is not None
    assert topic.name == "orders"
    assert image.topic_by_name("orders") == topic
    assert [p.replicas for p in topic.partitions] == [(1, 2)]
    assert ID_A in image.used_topic_ids
    assert image.last_applied_offset == 1


def test_partition_record_is_skipped_when_its_topic_does_not_exist() -> None:
    """Replay never crashes on a record that contradicts the image: skip and note it."""
    image = replay(numbered(rec.Topic(name="orders", topic_id=ID_A), part(ID_B, 0)))
    assert image.partition_count() == 0
    assert image.anomaly_count == 1
    assert image.anomalies[0].offset == 1
    assert image.anomalies[0].record_type == "Partition"
    assert image.last_applied_offset == 1


def test_partition_record_is_skipped_when_it_leaves_a_gap() -> None:
    """Partition numbers of a topic are contiguous from 0."""
    image = replay(numbered(rec.Topic(name="orders", topic_id=ID_A), part(ID_A, 1)))
    assert image.topics[ID_A].partitions == ()
    assert image.anomaly_count == 1


def test_partition_record_replaces_the_partition_when_it_already_exists() -> None:
    """A PartitionRecord for a known partition is a full replacement, as in Kafka."""
    image = replay(numbered(rec.Topic(name="t", topic_id=ID_A), part(ID_A, 0),
                            part(ID_A, 0, (3, 4))))
    assert image.topics[ID_A].partitions[0].replicas == (3, 4)
    assert image.anomaly_count == 0


def test_topic_record_is_skipped_when_its_id_was_used_by_a_deleted_topic() -> None:
    """Topic IDs: topic IDs are never reused in the life of the cluster."""
    image = replay(numbered(rec.Topic(name="a", topic_id=ID_A), rec.RemoveTopic(topic_id=ID_A),
                            rec.Topic(name="b", topic_id=ID_A)))
    assert image.topics == {}
    assert image.anomaly_count == 1
    assert "already used" in image.anomalies[0].reason


@pytest.mark.parametrize("topic_id", [ZERO_UUID, METADATA_TOPIC_ID])
def test_topic_record_is_skipped_when_its_id_is_reserved(topic_id: Uuid) -> None:
    """Topic IDs: ZERO_UUID means null and the sentinel names the metadata topic."""
    image = replay(numbered(rec.Topic(name="a", topic_id=topic_id)))
    assert image.topics == {}
    assert image.anomaly_count == 1


def test_topic_record_is_skipped_when_its_name_is_live_under_another_id() -> None:
    """A name maps to at most one live topic ID."""
    image = replay(numbered(rec.Topic(name="a", topic_id=ID_A), rec.Topic(name="a", topic_id=ID_B)))
    assert image.topic_ids_by_name == {"a": ID_A}
    assert list(image.topics) == [ID_A]
    assert image.anomaly_count == 1


def test_name_is_free_when_remove_topic_is_applied() -> None:
    """Topic IDs: a topic is deleted the moment RemoveTopic applies; the name is free at once
    and its re-creation gets a new ID."""
    image = replay(numbered(rec.Topic(name="a", topic_id=ID_A), part(ID_A, 0),
                            rec.RemoveTopic(topic_id=ID_A), rec.Topic(name="a", topic_id=ID_B)))
    assert image.topic_ids_by_name == {"a": ID_B}
    assert image.topics[ID_B].partitions == ()
    assert image.used_topic_ids == {ID_A, ID_B}
    assert image.anomaly_count == 0


def test_remove_topic_is_skipped_when_the_topic_is_unknown() -> None:
    """Invalid records are skipped, not raised."""
    image = replay(numbered(rec.RemoveTopic(topic_id=ID_A)))
    assert image.anomaly_count == 1


def test_leader_epoch_grows_when_partition_change_moves_the_leader() -> None:
    """KRaft: a new leader bumps leader_epoch; every change bumps partition_epoch."""
    image = replay(numbered(
        rec.Topic(name="t", topic_id=ID_A), part(ID_A, 0, (1, 2, 3)),
        rec.PartitionChange(topic_id=ID_A, partition=0, isr=(1, 2)),
        rec.PartitionChange(topic_id=ID_A, partition=0, leader=2, isr=(2,))))
    partition = image.topics[ID_A].partitions[0]
    assert (partition.leader, partition.isr) == (2, (2,))
    assert partition.leader_epoch == 1
    assert partition.partition_epoch == 2
    assert partition.replicas == (1, 2, 3)


def test_leader_epoch_grows_when_the_leader_becomes_none() -> None:
    """Losing the leader (NO_LEADER) is a leader change too."""
    image = replay(numbered(rec.Topic(name="t", topic_id=ID_A), part(ID_A, 0, (1,)),
                            rec.PartitionChange(topic_id=ID_A, partition=0, leader=NO_LEADER)))
    assert image.topics[ID_A].partitions[0].leader_epoch == 1


def test_partition_change_is_skipped_when_the_partition_does_not_exist() -> None:
    """Invalid records are skipped, not raised."""
    image = replay(numbered(rec.Topic(name="t", topic_id=ID_A), part(ID_A, 0),
                            rec.PartitionChange(topic_id=ID_A, partition=1, leader=2)))
    assert image.anomaly_count == 1
    assert image.topics[ID_A].partitions[0].leader_epoch == 0


def test_rename_keeps_id_and_partitions_when_applied() -> None:
    """Topic IDs: with IDs a rename is possible; the ID and the data stay."""
    image = replay(numbered(rec.Topic(name="a", topic_id=ID_A), part(ID_A, 0),
                            rec.RenameTopic(topic_id=ID_A, new_name="b")))
    assert image.topic_ids_by_name == {"b": ID_A}
    assert image.topics[ID_A].name == "b"
    assert len(image.topics[ID_A].partitions) == 1


def test_rename_is_skipped_when_the_new_name_is_live() -> None:
    """A name maps to at most one live topic ID."""
    image = replay(numbered(rec.Topic(name="a", topic_id=ID_A), rec.Topic(name="b", topic_id=ID_B),
                            rec.RenameTopic(topic_id=ID_A, new_name="b")))
    assert image.topic_ids_by_name == {"a": ID_A, "b": ID_B}
    assert image.anomaly_count == 1


def test_broker_registers_fenced_and_unfences_when_epoch_matches() -> None:
    """A broker starts fenced; Fence/Unfence records carry the broker epoch."""
    registered = replay(numbered(rec.RegisterBroker(broker_id=1, incarnation_id=INCARNATION,
                                                    broker_epoch=0, endpoints=("X://h:1",))))
    assert registered.brokers[1].fenced
    assert registered.unfenced_broker_ids() == ()
    unfenced = replay([(1, rec.UnfenceBroker(broker_id=1, broker_epoch=0))], registered)
    assert unfenced.unfenced_broker_ids() == (1,)
    assert unfenced.brokers[1].endpoints == ("X://h:1",)


def test_fence_is_skipped_when_broker_epoch_is_stale() -> None:
    """Broker epochs fence out records about an older incarnation."""
    image = replay(numbered(
        rec.RegisterBroker(broker_id=1, incarnation_id=INCARNATION, broker_epoch=0),
        rec.UnfenceBroker(broker_id=1, broker_epoch=0),
        rec.FenceBroker(broker_id=1, broker_epoch=7),
        rec.FenceBroker(broker_id=2, broker_epoch=0)))
    assert not image.brokers[1].fenced
    assert image.anomaly_count == 2


def test_metadata_topic_id_is_kept_when_a_second_one_is_replayed() -> None:
    """Topic IDs: the first leader assigns the metadata topic's ID once; it joins the used IDs."""
    image = replay(numbered(rec.MetadataTopic(topic_id=ID_A), rec.MetadataTopic(topic_id=ID_B),
                            rec.Topic(name="t", topic_id=ID_A)))
    assert image.metadata_topic_id == ID_A
    assert image.topics == {}
    assert image.anomaly_count == 2


def test_apply_raises_when_the_offset_goes_backwards() -> None:
    """Offsets only grow; replaying one twice is a caller bug, loud."""
    image = replay(numbered(rec.NoOp(), rec.NoOp()))
    with pytest.raises(ValueError, match="not after"):
        replay([(1, rec.NoOp())], image)


def test_base_image_is_unchanged_when_a_delta_builds_on_it() -> None:
    """Images are immutable: a delta copies on write."""
    base = replay(sample_log())
    before = base.content_hash()
    delta = MetadataDelta(base)
    delta.apply(rec.RemoveTopic(topic_id=ID_A), 100)
    delta.apply(rec.FenceBroker(broker_id=1, broker_epoch=2), 101)
    after = delta.build()
    assert ID_A not in after.topics
    assert ID_A in base.topics
    assert not base.brokers[1].fenced
    assert replay(sample_log()).content_hash() == before
    with pytest.raises(TypeError):
        base.topics[ID_B] = base.topics[ID_A]  # type: ignore[index]


def test_partitions_are_the_topics_as_applied_so_far_when_read_without_the_topic() -> None:
    """`MetadataDelta.partitions` sees each change at once, as `topic` does."""
    delta = MetadataDelta(replay(sample_log()))
    delta.apply(rec.PartitionChange(topic_id=ID_A, partition=0, leader=NO_LEADER), 100)
    assert tuple(delta.partitions(ID_A)) == delta.topic(ID_A).partitions  # type: ignore[union-attr]
    assert delta.partitions(ID_A)[0].leader == NO_LEADER
    delta.apply(rec.RemoveTopic(topic_id=ID_A), 101)
    assert not delta.partitions(ID_A)


def test_content_hash_is_equal_when_the_same_log_is_replayed_in_any_chunking() -> None:
    """Two images of the same records at the same offset compare equal."""
    log = sample_log()
    whole = replay(log)
    one_by_one = MetadataImage.empty()
    for offset, record in log:
        one_by_one = replay([(offset, record)], one_by_one)
    in_two = replay(log[5:], base=replay(log[:5]))
    from_bytes = replay_bytes((offset, record.encode()) for offset, record in log)
    hashes = {whole.content_hash(), one_by_one.content_hash(), in_two.content_hash(),
              from_bytes.content_hash()}
    assert len(hashes) == 1


@pytest.mark.parametrize("extra", [
    rec.PartitionChange(topic_id=ID_A, partition=0, isr=(1,)),
    rec.FenceBroker(broker_id=1, broker_epoch=2),
    rec.RenameTopic(topic_id=ID_A, new_name="orders2"),
    rec.RegisterBroker(broker_id=1, incarnation_id=INCARNATION, broker_epoch=2,
                       endpoints=("PLAINTEXT://127.0.0.1:9093",)),
    rec.Partition(topic_id=ID_A, partition=2, replicas=(1,), isr=(1,), leader=1),
    rec.NoOp(),  # the offset is part of the content: images at different offsets differ
    rec.Partition(topic_id=ID_B, partition=0, replicas=(1,), isr=(1,), leader=1),  # anomaly
])
def test_content_hash_differs_when_one_more_record_changes_anything(extra: rec.Record) -> None:
    """The hash excludes nothing that matters."""
    base = replay(sample_log())
    assert replay([(100, extra)], base).content_hash() != base.content_hash()


def test_content_hash_remembers_deleted_ids() -> None:
    """Every ID ever used is content: a deleted topic's ID can never come back."""
    with_delete = replay(numbered(rec.Topic(name="a", topic_id=ID_A),
                                  rec.RemoveTopic(topic_id=ID_A)))
    without = replay(numbered(rec.NoOp(), rec.NoOp()))
    assert with_delete.topics == without.topics
    assert with_delete.content_hash() != without.content_hash()


def test_content_hash_is_stable_when_computed_in_other_processes() -> None:
    """sha256 over msgpack of sorted content: no dependence on PYTHONHASHSEED or the run."""
    script = ("import tests.unit.metadata.test_image as t; from metadata.delta import replay; "
              "print(replay(t.sample_log()).content_hash())")
    outputs = {
        subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, text=True,
                       capture_output=True, env={"PYTHONHASHSEED": seed, "PATH": ""},
                       timeout=60).stdout.strip()
        for seed in ("1", "2")}
    assert outputs == {replay(sample_log()).content_hash()}


def test_undecodable_bytes_become_an_anomaly_when_replayed() -> None:
    """Replay of raw log bytes survives garbage: noted, offset advanced."""
    image = replay_bytes([(0, b"\xc1"), (1, rec.Topic(name="a", topic_id=ID_A).encode())])
    assert image.anomaly_count == 1
    assert image.anomalies[0].record_type == "?"
    assert image.topic_ids_by_name == {"a": ID_A}


def test_anomalies_are_counted_but_capped_when_there_are_many() -> None:
    """A bounded description, an exact count."""
    image = replay(numbered(*[rec.RemoveTopic(topic_id=ID_A)] * (MAX_KEPT_ANOMALIES + 5)))
    assert image.anomaly_count == MAX_KEPT_ANOMALIES + 5
    assert len(image.anomalies) == MAX_KEPT_ANOMALIES


# --- partition images are built from their records by position (metadata.delta) ---------

SMALL = st.integers(-3, 1 << 40)
REPLICAS = st.lists(st.integers(0, 9), max_size=4).map(tuple)
EPOCH_MAPS = st.dictionaries(st.integers(0, 9), SMALL, max_size=3).map(
    lambda m: tuple(sorted(m.items())))


@given(st.builds(rec.Partition, topic_id=st.just(ID_A), partition=st.just(0),
                 replicas=REPLICAS, isr=REPLICAS, leader=SMALL, leader_epoch=SMALL,
                 partition_epoch=SMALL, leader_epoch_after_creation=st.none() | EPOCH_MAPS,
                 leader_epoch_before_deletion=st.none() | EPOCH_MAPS,
                 adding_replicas=st.none() | REPLICAS, removing_replicas=st.none() | REPLICAS),
       st.builds(rec.PartitionChange, topic_id=st.just(ID_A), partition=st.just(0),
                 leader=st.none() | SMALL, isr=st.none() | REPLICAS,
                 replicas=st.none() | REPLICAS, adding_replicas=st.none() | REPLICAS))
def test_partition_image_holds_its_records_fields_by_name_when_replayed(
        record: rec.Partition, change: rec.PartitionChange) -> None:
    """Replay fills a PartitionImage positionally (without its __init__): every field
    lands under its own name, and a change is the dataclasses.replace it stands for."""
    topic = rec.Topic(name="t", topic_id=ID_A)
    image = replay(numbered(topic, record))
    (made,) = image.topics[ID_A].partitions
    reassignment = ("adding_replicas", "removing_replicas")  # a record's None: none
    assert made == PartitionImage(**{
        f.name: (getattr(record, f.name) or ()) if f.name in reassignment
        else getattr(record, f.name) for f in dataclasses.fields(PartitionImage)})
    changed = replay([(2, change)], image).topics[ID_A].partitions[0]
    leader = made.leader if change.leader is None else change.leader
    assert changed == dataclasses.replace(
        made, leader=leader, isr=made.isr if change.isr is None else change.isr,
        replicas=made.replicas if change.replicas is None else change.replicas,
        adding_replicas=(made.adding_replicas if change.adding_replicas is None
                         else change.adding_replicas),
        leader_epoch=made.leader_epoch + (leader != made.leader),
        partition_epoch=made.partition_epoch + 1)


def test_topic_digest_is_remembered_but_not_content_when_compared() -> None:
    """TopicImage.digest is a memo: equality, repr and the constructor ignore it, and an
    image hashes the same whether its topics' digests were remembered or not."""
    image = replay(sample_log())
    fresh = replay(sample_log())
    topic = image.topics[ID_A]
    first = topic.digest()
    assert topic.digest() is first
    assert topic == fresh.topics[ID_A]
    assert "_digest" not in repr(topic)
    assert image.content_hash() == fresh.content_hash()
