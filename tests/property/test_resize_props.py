"""KIP-253 resizes under any sequence of grow, shrink and empty-partition reports: the
image keeps its invariants, and a replay of the controller's records from scratch is
the controller's view."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.admin import (
    BrokerHeartbeatRequest,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    EmptyPartition,
)
from metadata.delta import replay
from metadata.image import TopicImage
from tests.support.controller_harness import Harness

# (kind, a number): a new count, or which marked partitions' leaders report them empty
STEPS = st.lists(st.tuples(st.sampled_from(("resize", "resize", "empty", "noise")),
                           st.integers(0, 9)), max_size=25)


def check_invariants(t: TopicImage) -> None:
    parts = t.partitions
    assert [p.partition for p in parts] == list(range(len(parts)))  # contiguous
    assert t.initial_partition_count is not None
    assert t.initial_partition_count <= t.undeleted_count <= len(parts)
    assert t.marked_partitions == tuple(range(t.undeleted_count, len(parts)))
    for p in parts:
        for epochs in (p.leader_epoch_after_creation, p.leader_epoch_before_deletion):
            for named, epoch in epochs or ():
                assert named < len(parts)
                assert epoch < parts[named].leader_epoch, (p, parts[named])


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 3), STEPS)
def test_any_resize_sequence_keeps_the_invariants_and_replays_to_the_view(
        initial: int, steps: list[tuple[str, int]]) -> None:
    h = Harness(brokers=2)
    h.create("t", partitions=initial, factor=1, ordered=True)
    for kind, number in steps:
        t = h.controller.view.topic_by_name("t")
        assert t is not None
        if kind == "resize":
            h.run(CreatePartitionsRequest(topics=(CreatePartitionsTopic(
                name="t", count=1 + number),)))
        elif kind == "empty":
            # each leader reports its marked partitions, some of them (by the bits of
            # `number`) with a non-empty log
            for broker_id in h.epochs:
                reports = tuple(EmptyPartition(
                    topic_id=t.topic_id, partition=p, leader_epoch=t.partitions[p].leader_epoch,
                    log_start_offset=0, log_end_offset=number >> (p % 4) & 1)
                    for p in t.marked_partitions if t.partitions[p].leader == broker_id)
                h.run(BrokerHeartbeatRequest(
                    broker_id=broker_id, broker_epoch=h.epochs[broker_id],
                    current_metadata_offset=len(h.log) - 1, empty_marked_partitions=reports))
        else:  # a leader change elsewhere: epochs move without a resize
            if t.partitions:
                h.heartbeat(1 + number % 2)
        t = h.controller.committed.topic_by_name("t")
        assert t is not None
        check_invariants(t)
    assert replay(h.log).content_hash() == h.controller.view.content_hash()
