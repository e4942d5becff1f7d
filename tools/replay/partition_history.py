"""What the metadata log says about the partitions the brokers hold: the leader epochs it
gave each partition, the topics ever compacted, and each live topic's name.

The reference node's log (the one holding the committed prefix) is replayed with
`metadata.delta` from its replay base (offset 0, or the snapshot its log starts at),
batch by batch: after each batch the leader epoch of every partition a Partition,
PartitionChange or PartitionCount record touched is read from the image. Replay moves a
partition's epoch up by one per change (a new leader, or a bump), so when it moved from e
to e' within one batch the epochs given are e+1 .. e'. A Partition record that replaces
a partition gives its own epoch. The whole log is replayed, past the committed end too:
a broker may act on records committed after the last high-watermark checkpoint, so an
epoch from an uncommitted tail is taken as given (the check may miss, never invent, an
epoch). Replayed from a snapshot, the epochs before it are unknown: every epoch up to the
snapshot's is taken as given, and the result says the history is partial.

A topic counts as compacted when its `cleanup.policy` held `compact` at any point
(a TopicConfig record, or the base image): its logs may have gaps at any time since.
Runs on the driver, only when some broker holds a partition log.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from metadata import records as rec
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from metadata.topic_configs import CLEANUP_POLICY, cleanup_policies
from raft.common.uuid import Uuid
from raft.segment import iter_batches
from tools.replay.images import ReplayBase, base_image
from tools.replay.inputs import NodeInput
from tools.replay.load import read_segments

PartitionKey = tuple[Uuid, int]


@dataclass(slots=True, kw_only=True)
class PartitionHistory:
    given: dict[PartitionKey, set[int]] = field(default_factory=dict)
    # from a snapshot base: every epoch up to this one counts as given
    floor: dict[PartitionKey, int] = field(default_factory=dict)
    compacted: set[Uuid] = field(default_factory=set)
    topic_ids: dict[str, Uuid] = field(default_factory=dict)  # live names, at the end
    known_topics: set[Uuid] = field(default_factory=set)  # every topic ID replayed
    from_snapshot: bool = False

    def epoch_given(self, key: PartitionKey, epoch: int) -> bool:
        return epoch in self.given.get(key, ()) or epoch <= self.floor.get(key, -1)

    def note_base(self, image: MetadataImage) -> None:
        for topic_id, topic in image.topics.items():
            self.known_topics.add(topic_id)
            if "compact" in cleanup_policies(topic.configs):
                self.compacted.add(topic_id)
            for part in topic.partitions:
                self.floor[(topic_id, part.partition)] = part.leader_epoch

    def note_epochs(self, delta: MetadataDelta, touched: set[Uuid | PartitionKey]) -> None:
        for item in touched:
            topic_id, only = (item, None) if isinstance(item, Uuid) else item
            topic = delta.topic(topic_id)
            if topic is None:
                continue
            for part in topic.partitions:
                if only is not None and part.partition != only:
                    continue
                epochs = self.given.setdefault((topic_id, part.partition), set())
                last = max(epochs, default=self.floor.get((topic_id, part.partition)))
                epochs.update(range(last + 1, part.leader_epoch + 1)
                              if last is not None and part.leader_epoch > last
                              else (part.leader_epoch,))


def _touched(record: rec.Record) -> Uuid | PartitionKey | None:
    """What a record may change the leader epochs of: a partition, or a whole topic."""
    if isinstance(record, rec.Partition | rec.PartitionChange):
        return record.topic_id, record.partition
    if isinstance(record, rec.PartitionCount):
        return record.topic_id
    return None


def partition_history(node: NodeInput, base: ReplayBase | None) -> PartitionHistory:
    """Replay `node`'s log from `base` (None: offset 0)."""
    history = PartitionHistory(from_snapshot=base is not None and base.path is not None)
    image = base_image(base)
    history.note_base(image)
    delta = MetadataDelta(image)
    start = 0 if base is None else base.end_offset
    for path, data in read_segments(str(p) for p in node.segments):
        for stored in iter_batches(data, path):
            batch = stored.batch
            touched: set[Uuid | PartitionKey] = set()
            for index, data_bytes in enumerate(batch.records):
                offset = batch.base_offset + index
                if offset < start or offset <= delta.last_applied_offset:
                    continue  # below the base, or repeated (offsets_contiguous says so)
                try:
                    record = rec.decode(data_bytes)
                except rec.RecordError:
                    continue  # records_decodable reports it
                delta.apply(record, offset)
                if isinstance(record, rec.Topic):
                    history.known_topics.add(record.topic_id)
                elif isinstance(record, rec.TopicConfig) and record.key == CLEANUP_POLICY \
                        and record.value is not None \
                        and "compact" in cleanup_policies([(record.key, record.value)]):
                    history.compacted.add(record.topic_id)
                if (item := _touched(record)) is not None:
                    touched.add(item)
            history.note_epochs(delta, touched)
    final = delta.build()
    history.topic_ids = {topic.name: topic_id for topic_id, topic in final.topics.items()}
    return history
