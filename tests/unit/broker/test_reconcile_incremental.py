"""A reconciliation of only the topics changed since the last one (`broker.hosting.
changed_topics`, as `broker.server.reconcile_once` does) decides exactly what a whole
reconciliation decides, through images that create, delete, rename, reassign and grow
topics, from any disk brought in line with the image before."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.hosting import assignment_for, changed_topics
from broker.reconcile import LocalPartition, StagedDeletion, after_actions, reconcile
from metadata import records as rec
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from raft.common.uuid import Uuid

BROKER = 4
NAMES = ["A", "B", "C", "D"]
DELAY_MS = 3_600_000
NOW_MS = 1_000_000


def topic_id(n: int) -> Uuid:
    return Uuid((n + 1) << 64 | 0xABC)


REPLICAS = st.sampled_from([(4,), (5,), (4, 5), (5, 4)])
OPERATION = st.tuples(st.sampled_from(["create", "delete", "rename", "reassign", "grow"]),
                      st.sampled_from(NAMES), st.sampled_from(NAMES), REPLICAS,
                      st.integers(1, 3))


class Images:
    """Successive images, each built from the last through a MetadataDelta, so they
    share structure as the broker's do."""

    def __init__(self) -> None:
        self.image = MetadataImage.empty()
        self.next_id = 0
        self.offset = 0

    def step(self, operations: list[tuple[str, str, str, tuple[int, ...], int]]) -> None:
        delta = MetadataDelta(self.image)
        for kind, name, other, replicas, count in operations:
            for record in self._records(kind, name, other, replicas, count):
                delta.apply(record, self.offset)
                self.offset += 1
        self.image = delta.build()

    def _records(self, kind: str, name: str, other: str, replicas: tuple[int, ...],
                 count: int) -> list[rec.Record]:
        image = self.image
        live = image.topic_ids_by_name.get(name)
        if kind == "create" and live is None:
            new = topic_id(self.next_id)
            self.next_id += 1
            return [rec.Topic(name=name, topic_id=new),
                    *(rec.Partition(topic_id=new, partition=p, replicas=replicas,
                                    isr=replicas, leader=replicas[0]) for p in range(count))]
        if live is None:
            return []
        if kind == "delete":
            return [rec.RemoveTopic(topic_id=live)]
        if kind == "rename" and other not in image.topic_ids_by_name:
            return [rec.RenameTopic(topic_id=live, new_name=other)]
        if kind == "reassign":
            return [rec.PartitionChange(topic_id=live, partition=0, replicas=replicas,
                                        isr=replicas, leader=replicas[0])]
        if kind == "grow":
            size = len(image.topics[live].partitions)
            return [rec.Partition(topic_id=live, partition=size, replicas=replicas,
                                  isr=replicas, leader=replicas[0])]
        return []


def whole(local: list[LocalPartition], staged: list[StagedDeletion],
          image: MetadataImage) -> list:
    return reconcile(local=local, staged=staged, assignment=assignment_for(image, BROKER),
                     now_ms=NOW_MS, delete_delay_ms=DELAY_MS)


@settings(max_examples=200)
@given(st.data())
def test_reconciling_the_changed_topics_decides_as_a_whole_reconciliation(
        data: st.DataObject) -> None:
    images = Images()
    images.step(data.draw(st.lists(OPERATION, max_size=6)))
    dirs = data.draw(st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 2),
                                        st.one_of(st.none(), st.integers(0, 8))),
                              unique_by=lambda d: d[:2], max_size=6))
    local = [LocalPartition(topic=name, partition=p,
                            topic_id=None if n is None else topic_id(n))
             for name, p, n in dirs]
    staged: list[StagedDeletion] = []
    local, staged = after_actions(local, staged, whole(local, staged, images.image))
    for _ in range(data.draw(st.integers(1, 5))):
        before = images.image
        images.step(data.draw(st.lists(OPERATION, min_size=1, max_size=3)))
        after = images.image
        names, topics = changed_topics(before, after)
        scope = [p for p in local if p.topic in names or p.topic_id in topics]
        expected = whole(local, staged, after)
        assert reconcile(local=scope, staged=staged,
                         assignment=assignment_for(after, BROKER, topics),
                         now_ms=NOW_MS, delete_delay_ms=DELAY_MS) == expected
        local, staged = after_actions(local, staged, expected)
