"""The committed metadata log on a time axis: who led each epoch, each broker's
registrations and fencing, each partition's changes and each topic's story, with the
append time of the batch that holds every record (`raft.types.Batch.append_time_ms`).

The rule: a record happened when the leader appended its batch; a batch from a log
written before batches were timed has no time (None), and nothing derived from it
pretends to one. The records are those of the reference log's committed prefix, applied
to `metadata.delta.MetadataDelta` from its replay base, so a change is reported only when
the image took it (a record the image skips is an anomaly `records_name_live_topic`
reports, not a change). Every table is a list of row tuples in the column order of its
schema (`tools.replay.views`); the tables and their columns are documented in
docs/replay.md. `timeline` is pure; `timed_records` reads a node's segments for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from metadata import records as rec
from metadata.delta import MetadataDelta
from metadata.image import NO_LEADER, MetadataImage
from raft.common.uuid import Uuid
from raft.segment import iter_batches
from tools.replay.images import ReplayBase, base_image
from tools.replay.inputs import NodeInput
from tools.replay.load import read_segments

LOG_END = "log end"
_RUN = (rec.Partition, rec.PartitionChange, rec.PartitionCount, rec.TopicConfig)
At = tuple[int, int, int | None]  # (offset, raft epoch, append time ms or None)


class TimedRecord(NamedTuple):
    offset: int
    epoch: int
    append_time_ms: int | None
    record: rec.Record


def timed_records(node: NodeInput, base: ReplayBase | None,
                  end: int) -> Iterator[TimedRecord]:
    """`node`'s records from its replay base up to `end` (the committed end), each with
    its batch's epoch and append time; undecodable or repeated offsets are left out
    (`records_decodable` and `offsets_contiguous` report them)."""
    start = 0 if base is None else base.end_offset
    last = start - 1
    for path, data in read_segments(str(p) for p in node.segments):
        for stored in iter_batches(data, path):
            batch = stored.batch
            for index, data_bytes in enumerate(batch.records):
                offset = batch.base_offset + index
                if offset >= end:
                    return
                if offset <= last:
                    continue
                try:
                    record = rec.decode(data_bytes)
                except rec.RecordError:
                    continue
                last = offset
                yield TimedRecord(offset, batch.epoch, batch.append_time_ms, record)


def elapsed(start_ms: int | None, end_ms: int | None) -> int | None:
    """end - start, or None when either time is unknown."""
    return None if start_ms is None or end_ms is None else end_ms - start_ms


@dataclass(slots=True, kw_only=True)
class Timeline:
    """The four event tables, and where (offset, time) the log ends."""

    leadership: list[tuple[Any, ...]] = field(default_factory=list)
    broker_sessions: list[tuple[Any, ...]] = field(default_factory=list)
    partition_history: list[tuple[Any, ...]] = field(default_factory=list)
    topic_lifecycle: list[tuple[Any, ...]] = field(default_factory=list)
    end_offset: int = 0
    end_ms: int | None = None


class _Builder:
    """Applies the records in offset order, keeping what the tables need. A record costs
    no more than its own partition: topics are read whole only when created or resized."""

    def __init__(self, image: MetadataImage, start_offset: int) -> None:
        self.delta = MetadataDelta(image)
        self.out = Timeline(end_offset=start_offset)
        # topic ID -> (its text, its name): a row's text made once per topic, not per row
        self.labels = {topic_id: (str(topic_id), topic.name)
                       for topic_id, topic in image.topics.items()}
        # epoch -> [leader, start offset, start ms, end offset, last ms]
        self.epochs: dict[int, list[Any]] = {}
        self.broker_events: dict[int, list[list[Any]]] = {}
        # A creation or a resize is the run of records from the one that starts it (a
        # Topic record; a Partition record past the topic's end, or a PartitionCount) on
        # while they set up that topic's partitions or configs (`_RUN`): (topic, its
        # create row, or None and its partition count before the resize).
        self.run: tuple[Uuid, int | None, int] | None = None
        self.run_last: At = (start_offset - 1, 0, None)

    def record(self, timed: TimedRecord) -> None:
        offset, epoch, time_ms, record = timed
        if self.run is not None and not (isinstance(record, _RUN)
                                         and record.topic_id == self.run[0]):
            self.end_run()
        self._epoch(offset, epoch, time_ms, record)
        held = len(self.delta.partitions(record.topic_id)) \
            if isinstance(record, rec.Partition | rec.RemoveTopic) else 0
        if self.run is None and (isinstance(record, rec.PartitionCount) or isinstance(
                record, rec.Partition) and record.partition >= held):
            topic = self.delta.topic(record.topic_id)
            if topic is not None:
                self.run = (record.topic_id, None, topic.undeleted_count)
        if self.delta.apply(record, offset) is None:
            self._event((offset, epoch, time_ms), record, held)
        self.run_last = (offset, epoch, time_ms)
        self.out.end_offset, self.out.end_ms = offset + 1, time_ms

    def _epoch(self, offset: int, epoch: int, time_ms: int | None, record: rec.Record) -> None:
        entry = self.epochs.get(epoch)
        if entry is None:
            entry = self.epochs[epoch] = [None, offset, time_ms, offset + 1, time_ms]
        entry[3], entry[4] = offset + 1, time_ms
        if isinstance(record, rec.LeaderChange) and entry[0] is None:
            entry[0] = record.leader_id

    def _event(self, at: At, record: rec.Record, held: int) -> None:
        """`held`: a RemoveTopic's topic's partition count before it."""
        if isinstance(record, rec.RegisterBroker):
            self._broker(record.broker_id, "register", at, str(record.incarnation_id),
                         record.broker_epoch, fenced=True)
        elif isinstance(record, rec.FenceBroker | rec.UnfenceBroker):
            fenced = isinstance(record, rec.FenceBroker)
            broker = self.delta.broker(record.broker_id)
            self._broker(record.broker_id, "fence" if fenced else "unfence", at,
                         None if broker is None else str(broker.incarnation_id),
                         record.broker_epoch, fenced=fenced)
        elif isinstance(record, rec.Topic):
            self.labels[record.topic_id] = (str(record.topic_id), record.name)
            self.run = (record.topic_id, len(self.out.topic_lifecycle), 0)
            self._topic(record.topic_id, "create", at)
        elif isinstance(record, rec.TopicConfig):
            self._topic(record.topic_id, "config", at, key=record.key, value=record.value)
        elif isinstance(record, rec.RenameTopic):
            self._topic(record.topic_id, "rename", at, new_name=record.new_name)
            self.labels[record.topic_id] = (self._label(record.topic_id)[0], record.new_name)
        elif isinstance(record, rec.RemoveTopic):
            self._topic(record.topic_id, "delete", at)
            for partition in range(held):
                self._partition(record.topic_id, partition, "deleted", at)
        elif isinstance(record, rec.Partition | rec.PartitionChange):
            change = "create" if isinstance(record, rec.Partition) else "change"
            self._partition(record.topic_id, record.partition, change, at)
        elif isinstance(record, rec.RemovePartition):
            self._partition(record.topic_id, record.partition, "removed", at)

    def _broker(self, broker_id: int, event: str, at: At,
                incarnation: str | None, broker_epoch: int, *, fenced: bool) -> None:
        self.broker_events.setdefault(broker_id, []).append(
            [broker_id, broker_epoch, incarnation, event, *at, fenced])

    def _topic(self, topic_id: Uuid, event: str, at: At, *, key: str | None = None,
               value: str | None = None, new_name: str | None = None,
               partitions: int | None = None) -> None:
        self.out.topic_lifecycle.append((*self._label(topic_id), event, *at,
                                         partitions, key, value, new_name))

    def _partition(self, topic_id: Uuid, partition: int, change: str, at: At) -> None:
        parts = self.delta.partitions(topic_id)
        if change in ("deleted", "removed") or partition >= len(parts):
            state: tuple[Any, ...] = (None, None, None, None, None)
        else:
            part = parts[partition]
            leader = None if part.leader == NO_LEADER else part.leader
            state = (leader, list(part.isr), list(part.replicas), part.leader_epoch,
                     part.marked_for_deletion)
        self.out.partition_history.append((*self._label(topic_id), partition, change, *at,
                                           *state))

    def _label(self, topic_id: Uuid) -> tuple[str, str | None]:
        label = self.labels.get(topic_id)
        return (str(topic_id), None) if label is None else label

    def end_run(self) -> None:
        """A creation's row gets the topic's partition count; a resize that changed the
        count gets its row, at the run's last record."""
        assert self.run is not None
        topic_id, index, before = self.run
        self.run = None
        topic = self.delta.topic(topic_id)
        if topic is None:
            return
        if index is not None:
            row = self.out.topic_lifecycle[index]
            self.out.topic_lifecycle[index] = (*row[:6], topic.undeleted_count, *row[7:])
        elif topic.undeleted_count != before:
            self._topic(topic_id, "resize", self.run_last, partitions=topic.undeleted_count)

    def finish(self) -> Timeline:
        if self.run is not None:
            self.end_run()
        out = self.out
        ordered = sorted(self.epochs.items())
        for index, (epoch, (leader, start, start_ms, end, last_ms)) in enumerate(ordered):
            following = ordered[index + 1][1] if index + 1 < len(ordered) else None
            if following is None:
                out.leadership.append((epoch, leader, start, start_ms, end, last_ms, LOG_END))
            else:
                out.leadership.append((epoch, leader, start, start_ms, following[1],
                                       following[2], "next epoch"))
        for events in self.broker_events.values():
            for index, event in enumerate(events):
                nxt = events[index + 1] if index + 1 < len(events) else None
                until = (LOG_END, out.end_offset, out.end_ms) if nxt is None \
                    else (nxt[3], nxt[4], nxt[6])
                out.broker_sessions.append((*event[:4], event[4], event[6], event[7], *until,
                                            elapsed(event[6], until[2])))
        return out


def timeline(records: Iterable[TimedRecord], image: MetadataImage,
             start_offset: int = 0) -> Timeline:
    """The tables of `records` (offset order) applied to `image` (the replay base's)."""
    builder = _Builder(image, start_offset)
    for timed in records:
        builder.record(timed)
    return builder.finish()


def node_timeline(node: NodeInput, base: ReplayBase | None, end: int) -> Timeline:
    """`timeline` of `node`'s committed records, from its replay base."""
    start = 0 if base is None else base.end_offset
    return timeline(timed_records(node, base, end), base_image(base), start)
