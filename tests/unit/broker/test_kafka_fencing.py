"""broker.kafka.replication.replica: topic-ID fencing of Produce/Fetch (KIP-516 "stale reads")."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker import partition_dir
from broker.kafka.replication.follower import followed_partitions
from broker.kafka.replication.replica import ReplicaManager, check_partition
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from tests.support.kafka_support import (
    BROKER,
    OLD_TOPIC_ID,
    TOPIC_ID,
    image_with_topic,
    record_batch,
)


def test_unknown_topic_id_when_id_not_in_image() -> None:
    """KIP-516: an ID the broker's image does not hold -> UNKNOWN_TOPIC_ID."""
    image = image_with_topic()
    result = check_partition(image, BROKER, topic_id=OLD_TOPIC_ID, partition=0)
    assert result.error == ErrorCode.UNKNOWN_TOPIC_ID


def test_accepted_when_id_and_leader_match() -> None:
    """The leader of a known ID's partition may serve it."""
    result = check_partition(image_with_topic(), BROKER, topic_id=TOPIC_ID, partition=0)
    assert result.error == ErrorCode.NONE
    assert result.partition is not None
    assert result.partition.leader == BROKER


def test_not_leader_when_another_broker_leads() -> None:
    """Produce and Fetch go to the partition leader: NOT_LEADER_OR_FOLLOWER elsewhere."""
    image = image_with_topic(leader=5, replicas=(5, BROKER))
    result = check_partition(image, BROKER, topic_id=TOPIC_ID, partition=0)
    assert result.error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_fenced_leader_epoch_when_client_epoch_is_stale() -> None:
    """KIP-320: a request carrying an older leader epoch -> FENCED_LEADER_EPOCH; a newer
    one (the broker lags) -> UNKNOWN_LEADER_EPOCH."""
    image = image_with_topic(leader_epoch=5)
    stale = check_partition(image, BROKER, name="A", partition=0, current_leader_epoch=4)
    ahead = check_partition(image, BROKER, name="A", partition=0, current_leader_epoch=6)
    assert stale.error == ErrorCode.FENCED_LEADER_EPOCH
    assert ahead.error == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_unknown_partition_when_name_or_index_absent() -> None:
    """By name: an unknown name or partition -> UNKNOWN_TOPIC_OR_PARTITION."""
    image = image_with_topic()
    assert check_partition(image, BROKER, name="B", partition=0).error == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert check_partition(image, BROKER, name="A", partition=1).error == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_inconsistent_topic_id_when_partition_metadata_differs(tmp_path: Path) -> None:
    """KIP-516: the local A-0 still holds the deleted topic's ID (reconciliation has not
    moved it yet): serving it as the recreated topic -> INCONSISTENT_TOPIC_ID."""
    image = image_with_topic()
    (tmp_path / "A-0").mkdir()
    partition_dir.write_partition_metadata(tmp_path / "A-0", OLD_TOPIC_ID)
    replicas = ReplicaManager(log_dir=tmp_path, broker_id=BROKER, image=lambda: image)
    resolved = check_partition(image, BROKER, topic_id=TOPIC_ID, partition=0)
    error, state = await replicas.open(resolved)
    assert error == ErrorCode.INCONSISTENT_TOPIC_ID
    assert state is None
    assert replicas.open_partitions == ()


async def test_log_opened_when_partition_metadata_matches(tmp_path: Path) -> None:
    """A directory whose partition.metadata holds the image's ID is served."""
    image = image_with_topic()
    (tmp_path / "A-0").mkdir()
    partition_dir.write_partition_metadata(tmp_path / "A-0", TOPIC_ID)
    replicas = ReplicaManager(log_dir=tmp_path, broker_id=BROKER, image=lambda: image)
    error, state = await replicas.open(check_partition(image, BROKER, name="A", partition=0))
    assert error == ErrorCode.NONE
    assert state is not None
    assert state.topic_id == TOPIC_ID
    replicas.close_all()


async def test_retriable_error_when_the_directory_is_staged_while_it_opens(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reconciliation stages the directory right after its partition.metadata was read
    (the partition was removed, or a rename): the request gets an error code, not a
    closed connection (integration series: FileNotFoundError out of the produce)."""
    image = image_with_topic()
    (tmp_path / "A-0").mkdir()
    partition_dir.write_partition_metadata(tmp_path / "A-0", TOPIC_ID)
    read = partition_dir.read_partition_metadata

    def read_then_stage(directory: Path) -> Uuid | None:
        found = read(directory)
        (tmp_path / "deleting").mkdir(exist_ok=True)
        directory.rename(tmp_path / "deleting" / f"{TOPIC_ID}_0")
        return found
    monkeypatch.setattr(partition_dir, "read_partition_metadata", read_then_stage)
    replicas = ReplicaManager(log_dir=tmp_path, broker_id=BROKER, image=lambda: image)
    error, state = await replicas.open(check_partition(image, BROKER, name="A", partition=0))
    assert (error, state) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, None)  # still in the image
    assert replicas.open_partitions == ()


async def test_log_closed_when_topic_id_leaves_the_image(tmp_path: Path) -> None:
    """After the topic is deleted (and recreated under a new ID) the old log is closed
    and never reached again through the new ID."""
    images = [image_with_topic()]
    (tmp_path / "A-0").mkdir()
    partition_dir.write_partition_metadata(tmp_path / "A-0", TOPIC_ID)
    replicas = ReplicaManager(log_dir=tmp_path, broker_id=BROKER, image=lambda: images[-1])
    await replicas.open(check_partition(images[-1], BROKER, name="A", partition=0))
    assert replicas.open_partitions == ((TOPIC_ID, 0),)
    new_id = Uuid(0xCCCC << 64)
    recreated = image_with_topic(topic_id=new_id)
    images.append(recreated)
    error, state = await replicas.open(check_partition(images[-1], BROKER, topic_id=new_id,
                                                       partition=0))
    assert error == ErrorCode.INCONSISTENT_TOPIC_ID
    assert state is None
    assert replicas.open_partitions == ()


def test_follower_plan_lists_partitions_led_elsewhere_when_broker_is_a_replica() -> None:
    """Followers fetch each partition they replicate from its leader, never their own."""
    image = image_with_topic(leader=5, replicas=(5, BROKER, 6), partitions=2, leader_epoch=3)
    assert followed_partitions(image, BROKER) == {5: ((TOPIC_ID, 0, 3), (TOPIC_ID, 1, 3))}
    assert followed_partitions(image, 5) == {}
    assert followed_partitions(image, 7) == {}


async def test_high_watermark_follows_the_slowest_in_sync_replica_when_followers_fetch(
        tmp_path: Path) -> None:
    """The leader's high watermark is the smallest log end among the ISR, and never goes
    back."""
    image = image_with_topic(replicas=(BROKER, 5, 6))
    (tmp_path / "A-0").mkdir()
    partition_dir.write_partition_metadata(tmp_path / "A-0", TOPIC_ID)
    replicas = ReplicaManager(log_dir=tmp_path, broker_id=BROKER, image=lambda: image)
    error, state = await replicas.open(check_partition(image, BROKER, name="A", partition=0))
    assert state is not None
    state.log.append([record_batch([b"a", b"b", b"c"])], 0)
    partition = image.topics[TOPIC_ID].partitions[0]
    state.observe_partition(partition, state.opened_at)  # as the fetch handler does
    assert not state.maybe_advance_high_watermark(partition, BROKER)
    state.follower_offsets[5] = 3
    assert not state.maybe_advance_high_watermark(partition, BROKER)
    state.follower_offsets[6] = 2
    assert state.maybe_advance_high_watermark(partition, BROKER)
    assert state.high_watermark == 2
    state.follower_offsets[6] = 1  # a late, older fetch offset
    assert not state.maybe_advance_high_watermark(partition, BROKER)
    assert state.high_watermark == 2
    replicas.close_all()


async def test_log_reopened_under_new_directory_when_topic_renamed(tmp_path: Path) -> None:
    """A renamed topic keeps its ID and data; once its directory has been moved the
    partition is served from the new path."""
    images = [image_with_topic("A")]
    (tmp_path / "A-0").mkdir()
    partition_dir.write_partition_metadata(tmp_path / "A-0", TOPIC_ID)
    replicas = ReplicaManager(log_dir=tmp_path, broker_id=BROKER, image=lambda: images[-1])
    error, state = await replicas.open(check_partition(images[-1], BROKER, name="A",
                                                       partition=0))
    assert state is not None
    state.log.append([record_batch([b"kept"])], 0)
    (tmp_path / "A-0").rename(tmp_path / "B-0")  # what reconciliation does on a rename
    images.append(image_with_topic("B"))
    error, moved = await replicas.open(check_partition(images[-1], BROKER, name="B",
                                                       partition=0))
    assert error == ErrorCode.NONE
    assert moved is not None
    assert moved is not state
    assert b"kept" in moved.log.read(0, 1 << 20, upper_offset=1)
    replicas.close_all()
