"""Hypothesis strategies for metadata logs and the images their replay builds.

A log is drawn step by step against a small model of the image so far, so replay
applies most records: topics are created with their partitions, grow, change leaders
and ISRs, are renamed and removed (their IDs retired); brokers register, are unfenced
and fenced; the metadata topic ID is named. Now and then an arbitrary record (IDs,
names and brokers from the same small pools) or undecodable bytes: replay skips most of
those, and an image holds the anomalies too.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

from hypothesis import strategies as st

from metadata import records as rec
from metadata.delta import replay_bytes
from metadata.image import NO_LEADER, MetadataImage
from raft.common.uuid import Uuid

T = TypeVar("T")

TOPIC_IDS = tuple(Uuid.random(random.Random(seed)) for seed in range(6))
NAMES = ("a", "b", "c", "d")
BROKERS = (1, 2, 3, 4)
INCARNATIONS = tuple(Uuid.random(random.Random(100 + seed)) for seed in range(3))
CONFIG_KEYS = ("min.insync.replicas", "retention.ms")
CONFIG_VALUES = (None, "1", "2")  # None deletes the key

_ids = st.sampled_from(TOPIC_IDS)
_small = st.integers(0, 3)
_maybe_small = st.none() | _small
# KIP-253 leader-epoch maps: (partition, epoch) pairs sorted by partition
_epoch_map = st.dictionaries(_small, _small, max_size=3).map(lambda m: tuple(sorted(m.items())))
_maybe_epoch_map = st.none() | _epoch_map
_replicas = st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True).map(tuple)
_maybe_replicas = st.none() | _replicas
_ENDPOINTS = ((), ("PLAINTEXT://h:1",), ("PLAINTEXT://h:1", "SSL://h:2"))


_index = st.integers(0, 1 << 16)  # one strategy for every pick: building one per draw is slow
_mask = st.integers(0, 7)


def _pick(draw: st.DrawFn, choices: Sequence[T]) -> T:
    return choices[draw(_index) % len(choices)]


@st.composite
def _partition(draw: st.DrawFn, topic_id: Uuid | None = None,
               partition: int | None = None) -> rec.Partition:
    replicas = draw(_replicas)
    mask = draw(_mask)
    return rec.Partition(
        topic_id=draw(_ids) if topic_id is None else topic_id,
        partition=draw(_small) if partition is None else partition, replicas=replicas,
        isr=tuple(r for i, r in enumerate(replicas) if mask >> i & 1),
        leader=_pick(draw, (*replicas, NO_LEADER)), leader_epoch=draw(_small),
        partition_epoch=draw(_small), leader_epoch_after_creation=draw(_maybe_epoch_map),
        leader_epoch_before_deletion=draw(_maybe_epoch_map))


_records: st.SearchStrategy[rec.Record] = st.one_of(
    st.builds(rec.Topic, name=st.sampled_from(NAMES), topic_id=_ids,
              initial_partition_count=_maybe_small),
    _partition(),
    _partition(),
    st.builds(rec.PartitionChange, topic_id=_ids, partition=_small,
              leader=st.none() | st.sampled_from((*BROKERS, NO_LEADER)),
              isr=st.none() | _replicas, replicas=st.none() | _replicas,
              bump_leader_epoch=st.none() | st.booleans(),
              leader_epoch_before_deletion=_maybe_epoch_map),
    st.builds(rec.PartitionCount, topic_id=_ids, undeleted_partition_count=_small,
              initial_partition_count=_maybe_small),
    st.builds(rec.RemovePartition, topic_id=_ids, partition=_small, leader_epoch=_small,
              log_start_offset=_small, log_end_offset=_small),
    st.builds(rec.RemoveTopic, topic_id=_ids),
    st.builds(rec.RenameTopic, topic_id=_ids, new_name=st.sampled_from(NAMES)),
    st.builds(rec.TopicConfig, topic_id=_ids, key=st.sampled_from(CONFIG_KEYS),
              value=st.sampled_from(CONFIG_VALUES)),
    st.builds(rec.RegisterBroker, broker_id=st.sampled_from(BROKERS),
              incarnation_id=st.sampled_from(INCARNATIONS), broker_epoch=_small,
              endpoints=st.lists(st.sampled_from(("PLAINTEXT://h:1", "SSL://h:2")),
                                 max_size=2).map(tuple),
              rack=st.none() | st.sampled_from(("r1", "r2"))),
    st.builds(rec.UnfenceBroker, broker_id=st.sampled_from(BROKERS), broker_epoch=_small),
    st.builds(rec.UnfenceBroker, broker_id=st.sampled_from(BROKERS), broker_epoch=_small),
    st.builds(rec.FenceBroker, broker_id=st.sampled_from(BROKERS), broker_epoch=_small),
    st.builds(rec.MetadataTopic, topic_id=_ids),
    st.builds(rec.RetiredTopicId, topic_id=_ids),
    st.builds(rec.LeaderChange, leader_id=st.sampled_from(BROKERS),
              voters=st.just((1, 2, 3))),
    st.just(rec.NoOp()),
)

_arbitrary = st.one_of(_records.map(lambda r: r.encode()), st.binary(max_size=6))


class _Model:
    """What replay has made of the records drawn so far: enough to draw valid ones."""

    def __init__(self) -> None:
        self.live: dict[Uuid, tuple[str, int]] = {}  # topic ID -> (name, partitions)
        self.used: set[Uuid] = set()
        self.brokers: dict[int, int] = {}  # broker id -> broker epoch
        self.next_epoch = 0


def _create(draw: st.DrawFn, model: _Model) -> list[rec.Record]:
    free = [t for t in TOPIC_IDS if t not in model.used]
    names = [n for n in NAMES if n not in {name for name, _ in model.live.values()}]
    if not free or not names:
        return []
    topic_id, name = _pick(draw, free), _pick(draw, names)
    count = 1 + draw(_small) % 3
    model.used.add(topic_id)
    model.live[topic_id] = (name, count)
    return [rec.Topic(name=name, topic_id=topic_id,
                      initial_partition_count=_pick(draw, (None, count)))] + [
        draw(_partition(topic_id, index)) for index in range(count)]


def _grow_or_replace(draw: st.DrawFn, model: _Model) -> list[rec.Record]:
    if not model.live:
        return []
    topic_id = _pick(draw, sorted(model.live))
    name, count = model.live[topic_id]
    index = draw(_index) % (count + 1)
    model.live[topic_id] = (name, max(count, index + 1))
    return [draw(_partition(topic_id, index))]


def _change(draw: st.DrawFn, model: _Model) -> list[rec.Record]:
    if not model.live:
        return []
    topic_id = _pick(draw, sorted(model.live))
    return [rec.PartitionChange(topic_id=topic_id,
                                partition=draw(_index) % model.live[topic_id][1],
                                leader=_pick(draw, (None, *BROKERS, NO_LEADER)),
                                isr=draw(_maybe_replicas), replicas=draw(_maybe_replicas))]


def _resize(draw: st.DrawFn, model: _Model) -> list[rec.Record]:
    """KIP-253 records: a new undeleted count, a bumped epoch, or the last partition
    marked for deletion and (when others stay) removed."""
    if not model.live:
        return []
    topic_id = _pick(draw, sorted(model.live))
    name, count = model.live[topic_id]
    last = count - 1
    choice = draw(_mask)
    if choice < 3:
        return [rec.PartitionCount(topic_id=topic_id,
                                   undeleted_partition_count=1 + draw(_small) % count)]
    if choice < 5:
        return [rec.PartitionChange(topic_id=topic_id, partition=draw(_index) % count,
                                    bump_leader_epoch=True)]
    mark = rec.PartitionChange(topic_id=topic_id, partition=last,
                               leader_epoch_before_deletion=((0, draw(_small)),))
    if count == 1:
        return [mark]
    model.live[topic_id] = (name, last)
    return [mark, rec.RemovePartition(topic_id=topic_id, partition=last, leader_epoch=0,
                                      log_start_offset=0, log_end_offset=0)]


def _remove_or_rename(draw: st.DrawFn, model: _Model) -> list[rec.Record]:
    if not model.live:
        return []
    topic_id = _pick(draw, sorted(model.live))
    name, count = model.live[topic_id]
    new_name = _pick(draw, NAMES)
    if draw(_mask) < 4:
        del model.live[topic_id]
        return [rec.RemoveTopic(topic_id=topic_id)]
    if new_name not in {n for t, (n, _) in model.live.items() if t != topic_id}:
        model.live[topic_id] = (new_name, count)
    return [rec.RenameTopic(topic_id=topic_id, new_name=new_name)]


def _config(draw: st.DrawFn, model: _Model) -> list[rec.Record]:
    if not model.live:
        return []
    return [rec.TopicConfig(topic_id=_pick(draw, sorted(model.live)),
                            key=_pick(draw, CONFIG_KEYS), value=_pick(draw, CONFIG_VALUES))]


def _broker(draw: st.DrawFn, model: _Model) -> list[rec.Record]:
    broker_id = _pick(draw, BROKERS)
    if broker_id not in model.brokers or draw(_mask) < 2:
        model.next_epoch += 1
        model.brokers[broker_id] = model.next_epoch
        return [rec.RegisterBroker(broker_id=broker_id,
                                   incarnation_id=_pick(draw, INCARNATIONS),
                                   broker_epoch=model.next_epoch,
                                   endpoints=_pick(draw, _ENDPOINTS),
                                   rack=_pick(draw, (None, "r1", "r2")))]
    kind = _pick(draw, (rec.UnfenceBroker, rec.UnfenceBroker, rec.FenceBroker))
    return [kind(broker_id=broker_id, broker_epoch=model.brokers[broker_id])]


def _retire_or_name_metadata_topic(draw: st.DrawFn, model: _Model) -> list[rec.Record]:
    free = [t for t in TOPIC_IDS if t not in model.used]
    if not free:
        return []
    topic_id = _pick(draw, free)
    model.used.add(topic_id)
    kind = _pick(draw, (rec.RetiredTopicId, rec.MetadataTopic))
    return [kind(topic_id=topic_id)]  # a second MetadataTopic is an anomaly


_STEPS = (_create, _create, _grow_or_replace, _change, _change, _remove_or_rename, _broker,
          _broker, _broker, _retire_or_name_metadata_topic, _config, _resize)


@st.composite
def metadata_logs(draw: st.DrawFn, max_steps: int = 30) -> list[tuple[int, bytes]]:
    """(offset, record bytes) pairs, offsets increasing with occasional gaps (records a
    test does not care about): mostly records replay applies, drawn against a model of
    the image so far, and now and then an arbitrary record or undecodable bytes."""
    model = _Model()
    entries: list[bytes] = []
    for _ in range(draw(_index) % (max_steps + 1)):
        if draw(_index) % 10 == 0:
            entries.append(draw(_arbitrary))
        else:
            entries.extend(r.encode() for r in _pick(draw, _STEPS)(draw, model))
    offsets, offset = [], -1
    for _ in entries:
        offset += _pick(draw, (1, 1, 1, 2, 5))
        offsets.append(offset)
    return list(zip(offsets, entries, strict=True))


def images(max_steps: int = 30) -> st.SearchStrategy[MetadataImage]:
    """Images built by replaying `metadata_logs`."""
    return metadata_logs(max_steps).map(replay_bytes)
