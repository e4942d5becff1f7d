"""The replay's KIP-253 checks on planted logs: a resize batch that does not match its
PartitionCount, a mark without one, a removal of an unmarked partition, growth while
partitions are marked. `PLANTS` joins tests/replay/test_replay_rules.py's (each fails
its check alone there, through Spark and in-process); here the same logs are scanned
directly, and a whole controller-made resize cycle passes every check."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from metadata import records as rec
from metadata.records import (
    LeaderChange,
    MetadataTopic,
    Partition,
    PartitionChange,
    PartitionCount,
    Record,
    RemovePartition,
    Topic,
)
from raft.common.uuid import Uuid
from raft.types import Batch
from tests.support.serial_spark import SerialSpark
from tests.support.synthetic_logs import write_cluster
from tools.replay.inputs import from_cluster
from tools.replay.job import run_replay
from tools.replay.sequential import NodeScan

VOTERS = (1, 2, 3)
A, META = Uuid(2), Uuid(4)


def _part(index: int, after: rec.EpochMap | None = None) -> Partition:
    return Partition(topic_id=A, partition=index, replicas=(1,), isr=(1,), leader=1,
                     leader_epoch_after_creation=after)


def _bump(index: int) -> PartitionChange:
    return PartitionChange(topic_id=A, partition=index, bump_leader_epoch=True)


def _mark(index: int, before: rec.EpochMap) -> PartitionChange:
    return PartitionChange(topic_id=A, partition=index, leader_epoch_before_deletion=before)


def _count(count: int) -> PartitionCount:
    return PartitionCount(topic_id=A, undeleted_partition_count=count)


def _remove(index: int, epoch: int, end: int = 5) -> RemovePartition:
    return RemovePartition(topic_id=A, partition=index, leader_epoch=epoch,
                           log_start_offset=5, log_end_offset=end)


# the controller's batches: topic a (2 partitions) grown to 3, shrunk back, removed
CREATE = (Topic(name="a", topic_id=A, initial_partition_count=2), _part(0), _part(1))
GROW = (_count(3), _bump(0), _bump(1), _part(2, ((0, 0), (1, 0))))
SHRINK = (_count(2), _mark(2, ((0, 1), (1, 1))), _bump(0), _bump(1))
REMOVE = (_remove(2, 0),)
REGROW = (_count(3), _bump(0), _bump(1), _part(2, ((0, 2), (1, 2))))


def batches(*groups: Sequence[Record]) -> list[Batch]:
    """LeaderChange, MetadataTopic, then each group of records as one batch."""
    out: list[Batch] = []
    offset = 0
    for group in ((LeaderChange(leader_id=1, voters=VOTERS),), (MetadataTopic(topic_id=META),),
                  *groups):
        out.append(Batch(base_offset=offset, epoch=1,
                         records=tuple(r.encode() for r in group)))
        offset += len(group)
    return out


def _everywhere(log: Sequence[Batch]) -> dict[int, Sequence[Batch]]:
    return dict.fromkeys(VOTERS, log)


CLEAN_CYCLE = batches(CREATE, GROW, SHRINK, REMOVE, REGROW)

# rule -> (log, what the reason says); built into test_replay_rules' Plant list there
RESIZE_PLANTS: dict[str, tuple[list[Batch], str]] = {
    "partition_counts_consistent:growth_unbumped": (
        batches(CREATE, (_count(3), _part(2, ((0, 0), (1, 0))))),
        "keep their leader epochs through a resize"),
    "partition_counts_consistent:mark_without_count": (
        batches(CREATE, (_mark(1, ((0, 0),)),)),
        "is marked for deletion without a PartitionCount"),
    "partition_removals_valid:unmarked": (
        batches(CREATE, GROW, (_remove(2, 1),)), "is not marked for deletion"),
    "no_growth_while_marked:grown": (
        batches(CREATE, GROW, SHRINK, (_count(3), _bump(0), _bump(1),
                                       _part(3, ((0, 2), (1, 2), (2, 0))))),
        "while partitions [2] are marked for deletion"),
}


def scan(log: Sequence[Batch]) -> list[tuple[str, str]]:
    """(check, reason) of every violation a scan of `log` flags."""
    node = NodeScan()
    for seq, batch in enumerate(log):
        node.batch(seq, batch.base_offset, batch.epoch, list(batch.records))
    return [(v[1], v[5]) for v in node.result().violations]


def test_a_controller_resize_cycle_flags_nothing() -> None:
    assert scan(CLEAN_CYCLE) == []


def test_each_plant_flags_only_its_check() -> None:
    for rule, (log, says) in RESIZE_PLANTS.items():
        flagged = scan(log)
        assert len(flagged) == 1, (rule, flagged)
        assert flagged[0][0] == rule.split(":")[0]
        assert says in flagged[0][1], (rule, flagged)


def test_growth_maps_must_name_the_epochs_before_the_batch() -> None:
    wrong = batches(CREATE, (_count(3), _bump(0), _bump(1), _part(2, ((0, 1), (1, 1)))))
    ((check, reason),) = scan(wrong)
    assert check == "partition_counts_consistent"
    assert "is not the epochs before the growth [(0, 0), (1, 0)]" in reason


def test_shrink_maps_must_name_the_staying_epochs_before() -> None:
    wrong = batches(CREATE, GROW, (_count(2), _mark(2, ((0, 2), (1, 2))), _bump(0), _bump(1)))
    ((check, reason),) = scan(wrong)
    assert check == "partition_counts_consistent"
    assert "without a before-deletion map of the epochs before [(0, 1), (1, 1)]" in reason


def test_growth_that_adds_other_partitions_than_counted_is_flagged() -> None:
    wrong = batches(CREATE, (_count(4), _bump(0), _bump(1), _part(2, ((0, 0), (1, 0)))))
    ((check, reason),) = scan(wrong)
    assert (check, "undeleted count 2 -> 4, but the batch leaves 3 partitions") == (
        check, reason)


def test_a_partition_added_after_the_count_was_recorded_needs_a_count() -> None:
    wrong = batches(CREATE, GROW, (_part(3),))
    assert scan(wrong) == [("partition_counts_consistent",
                            "partition 3 is added without a PartitionCount")]


def test_removal_of_a_non_empty_or_not_last_partition_is_flagged() -> None:
    not_empty = scan(batches(CREATE, GROW, SHRINK, (_remove(2, 0, end=9),)))
    assert not_empty == [("partition_removals_valid",
                          "partition 2 was reported with log start 5 != log end 9")]
    not_last = scan(batches(CREATE, GROW, SHRINK, (_remove(1, 0),)))
    assert not_last == [("partition_removals_valid", "partition 1 is not the topic's last (2)")]


def test_growth_without_ordered_delivery_needs_no_maps() -> None:
    plain = batches(CREATE, (rec.TopicConfig(topic_id=A, key="enable.ordered.delivery",
                                             value="false"),),
                    (_count(3), _part(2)))
    assert scan(plain) == []


def test_the_clean_cycle_passes_the_whole_replay(tmp_path: Path) -> None:
    """In-process replay (tests.support.serial_spark): every check, with images."""
    root = write_cluster(tmp_path / "cluster", _everywhere(CLEAN_CYCLE), voters=VOTERS,
                         segment_records=100)
    result: Any = run_replay(SerialSpark(), from_cluster(root), with_analysis=False)
    assert result.passed, [(c.name, c.examples) for c in result.checks if not c.passed]
    for name in ("partition_counts_consistent", "partition_removals_valid",
                 "no_growth_while_marked"):
        assert not result.check(name).skipped
