"""The replay's KIP-253 checks on planted logs: a resize batch that does not match its
PartitionCount, a mark without one, a removal of an unmarked partition, growth while
partitions are marked. `PLANTS` joins tests/replay/test_replay_rules.py's (each fails
its check alone there, through Spark and in-process); here the same logs are scanned
directly, and a whole controller-made resize cycle passes every check."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgpack

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
from tests.replay.snapshot_logs import image_below
from tests.support.serial_spark import SerialSpark
from tests.support.synthetic_logs import write_cluster
from tools.replay.inputs import from_cluster
from tools.replay.job import run_replay
from tools.replay.sequential import NodeScan, plain_record

VOTERS = (1, 2, 3)
A, META, B, C = Uuid(2), Uuid(4), Uuid(5), Uuid(6)


def _part(index: int, after: rec.EpochMap | None = None) -> Partition:
    return Partition(topic_id=A, partition=index, replicas=(1,), isr=(1,), leader=1,
                     leader_epoch_after_creation=after)


def _bump(index: int) -> PartitionChange:
    return PartitionChange(topic_id=A, partition=index, bump_leader_epoch=True)


def _mark(index: int, before: rec.EpochMap) -> PartitionChange:
    return PartitionChange(topic_id=A, partition=index, leader_epoch_before_deletion=before)


def _move(index: int, leader: int) -> PartitionChange:
    return PartitionChange(topic_id=A, partition=index, leader=leader, isr=(1, 2))


def _count(count: int) -> PartitionCount:
    return PartitionCount(topic_id=A, undeleted_partition_count=count)


def _remove(index: int, epoch: int, end: int = 5) -> RemovePartition:
    return RemovePartition(topic_id=A, partition=index, leader_epoch=epoch,
                           log_start_offset=5, log_end_offset=end)


def _ordered(value: str | None) -> rec.TopicConfig:
    return rec.TopicConfig(topic_id=A, key="enable.ordered.delivery", value=value)


# the controller's batches: topic a (2 partitions, ordered: asked for at creation) grown
# to 3, shrunk back, removed
ORDERED = _ordered("true")
PLAIN_CREATE = (Topic(name="a", topic_id=A, initial_partition_count=2), _part(0), _part(1))
CREATE = (*PLAIN_CREATE, ORDERED)
GROW = (_count(3), _bump(0), _bump(1), _part(2, ((0, 0), (1, 0))))
SHRINK = (_count(2), _mark(2, ((0, 1), (1, 1))), _bump(0), _bump(1))
REMOVE = (_remove(2, 0),)
REGROW = (_count(3), _bump(0), _bump(1), _part(2, ((0, 2), (1, 2))))


def batches(*groups: Sequence[Record | dict[str, Any]]) -> list[Batch]:
    """LeaderChange, MetadataTopic, then each group of records (or raw msgpack maps) as
    one batch."""
    out: list[Batch] = []
    offset = 0
    for group in ((LeaderChange(leader_id=1, voters=VOTERS),), (MetadataTopic(topic_id=META),),
                  *groups):
        out.append(Batch(base_offset=offset, epoch=1, records=tuple(
            msgpack.packb(r) if isinstance(r, dict) else r.encode() for r in group)))
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
    return [(check, reason) for check, _, _, reason, _ in located(log)]


def located(log: Sequence[Batch], *, seed_at: int | None = None
            ) -> list[tuple[str, int, int, str, str]]:
    """(check, offset, epoch, reason, record type) of every violation a scan of `log`
    flags; with `seed_at`, the scan starts from the image of the records below it."""
    node = NodeScan()
    if seed_at is not None:
        node.seed(image_below(log, seed_at), seed_at)
    for seq, batch in enumerate(b for b in log if b.base_offset >= (seed_at or 0)):
        node.batch(seq, batch.base_offset, batch.epoch, list(batch.records))
    return [(v[1], v[2], v[3], v[5], v[6]["record_type"]) for v in node.result().violations]


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
    assert scan(batches(PLAIN_CREATE, (_count(3), _part(2)))) == []
    assert scan(batches(CREATE, (_ordered("false"),), (_count(3), _part(2)))) == []


def test_the_clean_cycle_passes_the_whole_replay(tmp_path: Path) -> None:
    """In-process replay (tests.support.serial_spark): every check, with images."""
    root = write_cluster(tmp_path / "cluster", _everywhere(CLEAN_CYCLE), voters=VOTERS,
                         segment_records=100)
    result: Any = run_replay(SerialSpark(), from_cluster(root), with_analysis=False)
    assert result.passed, [(c.name, c.examples) for c in result.checks if not c.passed]
    for name in ("partition_counts_consistent", "partition_removals_valid",
                 "no_growth_while_marked"):
        assert not result.check(name).skipped


# --- what each record does to the partitions replay follows ---------------------------------

def _raw_partition(index: int, **fields: Any) -> dict[str, Any]:
    """A Partition record of topic a as raw msgpack fields (to leave some out)."""
    return {"type": rec.RecordType.PARTITION, "version": 0, "topic_id": A.to_bytes(),
            "partition": index, "replicas": [1], "isr": [1], **fields}


def _full(index: int, epoch: int, before: rec.EpochMap | None = None) -> Partition:
    """A full Partition record replacing partition `index` (as after a reassignment)."""
    return Partition(topic_id=A, partition=index, replicas=(1,), isr=(1,), leader=1,
                     leader_epoch=epoch, leader_epoch_before_deletion=before)


def test_violations_name_the_record_that_broke_the_rule() -> None:
    """Each resize violation points at its record: offset, epoch and type."""
    assert [located(log)[0][:3] + located(log)[0][4:] for log, _ in RESIZE_PLANTS.values()] == [
        ("partition_counts_consistent", 6, 1, "PARTITION_COUNT"),
        ("partition_counts_consistent", 6, 1, "PARTITION_CHANGE"),
        ("partition_removals_valid", 10, 1, "REMOVE_PARTITION"),
        ("no_growth_while_marked", 14, 1, "PARTITION_COUNT")]
    added = located(batches(CREATE, GROW, (_part(3),)))
    assert [v[:3] + v[4:] for v in added] == [("partition_counts_consistent", 10, 1, "PARTITION")]


def test_a_full_partition_record_in_a_growth_counts_from_the_epoch_before_it() -> None:
    """Partitions at leader epoch 3; the growth replaces partition 0 by a full record at
    epoch 4 (not a PartitionChange): the new partition's map names epoch 3, as before."""
    create = (CREATE[0], _full(0, 3), _full(1, 3), ORDERED)
    grow = (_count(3), _full(0, 4), _bump(1), _part(2, ((0, 3), (1, 3))))
    assert scan(batches(create, grow)) == []
    late = (_count(3), _full(0, 3), _bump(1), _part(2, ((0, 3), (1, 3))))
    assert scan(batches(create, late)) == [
        ("partition_counts_consistent", "partitions [0] keep their leader epochs through a "
                                        "resize")]


def test_a_partition_record_without_a_leader_epoch_is_at_epoch_0() -> None:
    create = (CREATE[0], _raw_partition(0, leader=1), _raw_partition(1, leader=1), ORDERED)
    assert scan(batches(create, GROW)) == []


def test_a_partition_record_with_a_malformed_leader_or_epoch_is_not_followed() -> None:
    """As replay refuses them: no partition added, nothing flagged, the scan goes on."""
    for fields in ({"leader": "x", "leader_epoch": 0}, {"leader": 1, "leader_epoch": "x"}):
        log = batches(CREATE, (_raw_partition(2, **fields),), GROW)
        assert scan(log) == [], fields


def test_a_full_partition_record_marks_or_unmarks_by_its_before_deletion_map() -> None:
    """After the shrink marks partition 2, a full record without a map unmarks it (its
    removal is then flagged), and one with a map marks it again (its removal is valid)."""
    unmarked = batches(CREATE, GROW, SHRINK, (_full(2, 0),), REMOVE)
    assert scan(unmarked) == [("partition_removals_valid",
                               "partition 2 is not marked for deletion")]
    marked_again = batches(CREATE, GROW, SHRINK, (_full(2, 0),),
                           (_full(2, 0, ((0, 1), (1, 1))),), REMOVE)
    assert scan(marked_again) == []


def test_malformed_before_deletion_maps_mark_nothing() -> None:
    for before in ([[0, 1, 2]], [[0, "x"]], ["x"], "x"):
        log = batches(CREATE, GROW, SHRINK,
                      (_raw_partition(2, leader=1, leader_epoch_before_deletion=before),),
                      REMOVE)
        assert scan(log) == [("partition_removals_valid",
                              "partition 2 is not marked for deletion")], before


def test_a_new_leader_bumps_the_epoch_and_the_same_leader_does_not() -> None:
    moved = (_count(3), PartitionChange(topic_id=A, partition=0, leader=2), _bump(1),
             _part(2, ((0, 0), (1, 0))))
    assert scan(batches(CREATE, moved)) == []
    stayed = (_count(3), PartitionChange(topic_id=A, partition=0, leader=1), _bump(1),
              _part(2, ((0, 0), (1, 0))))
    assert scan(batches(CREATE, stayed)) == [
        ("partition_counts_consistent", "partitions [0] keep their leader epochs through a "
                                        "resize")]
    back = (_count(2), _mark(2, ((0, 2), (1, 1))),
            PartitionChange(topic_id=A, partition=0, leader=1), _bump(1))
    assert scan(batches(CREATE, GROW, (PartitionChange(topic_id=A, partition=0, leader=2),),
                        back)) == []


def test_leader_moves_in_batches_without_a_resize_count_in_the_next_resize() -> None:
    """Plain PartitionChanges (a leader and an ISR: the scan reads them from their bytes,
    `plain_record`) in batches of their own still move the epochs a resize is judged by:
    the shrink's map must name epoch 2 for partition 0 (two moves, not the same leader
    again), and a change of a dead topic or of a partition past the end moves nothing."""
    assert plain_record(_move(0, 2).encode()) is not None
    moves = [(_move(0, 2),), (_move(0, 2), _move(0, 3)),
             (PartitionChange(topic_id=B, partition=0, leader=2, isr=(1,)), _move(5, 2))]
    shrink = (_count(1), _mark(1, ((0, 2),)), _bump(0))
    assert scan(batches(CREATE, *moves, shrink)) == [
        ("records_name_live_topic", "no live topic with this ID here")]
    stale = (_count(1), _mark(1, ((0, 1),)), _bump(0))
    assert scan(batches(CREATE, *moves, stale)) == [
        ("records_name_live_topic", "no live topic with this ID here"),
        ("partition_counts_consistent", "partition 1 leaves the undeleted count 2 -> 1 "
                                        "without a before-deletion map of the epochs before "
                                        "[(0, 2)]")]
    # in the resize's own batch a move counts from the epoch before the batch
    grow = (_count(3), _move(0, 2), _bump(1), _part(2, ((0, 0), (1, 0))))
    assert scan(batches(CREATE, grow)) == []


def test_a_count_that_stays_the_same_asks_nothing_of_the_batch() -> None:
    assert scan(batches(CREATE, (_count(2),))) == []
    assert scan(batches(CREATE, GROW, SHRINK, (_count(2),))) == []


def test_a_growth_whose_new_partition_goes_in_the_same_batch_leaves_too_few() -> None:
    """Counted 3, partition 2 added, then marked and removed (empty): 2 are left."""
    gone = (_count(3), _bump(0), _bump(1), _part(2, ((0, 0), (1, 0))),
            _mark(2, ((0, 0), (1, 0))), _remove(2, 0))
    assert scan(batches(CREATE, gone)) == [
        ("partition_counts_consistent", "undeleted count 2 -> 3, but the batch leaves 2 "
                                        "partitions")]


def test_a_shrink_judges_every_partition_it_drops_past_one_already_marked() -> None:
    """No count ever recorded, partition 1 marked (flagged alone); the shrink to 1 then
    drops 1 (marked before: nothing asked) and 2, which needs its map."""
    create = (Topic(name="a", topic_id=A), _part(0), _part(1), _part(2), ORDERED)
    shrink = (_count(1), _bump(0))
    assert [reason for _, reason in scan(batches(create, (_mark(1, ((0, 0),)),), shrink))] == [
        "partition 1 is marked for deletion without a PartitionCount",
        "partition 2 leaves the undeleted count 3 -> 1 without a before-deletion map of the "
        "epochs before [(0, 0)]"]


def test_a_second_shrink_while_a_partition_is_marked_is_no_growth() -> None:
    again = (_count(1), _mark(1, ((0, 2),)), _bump(0))
    assert scan(batches(CREATE, GROW, SHRINK, again)) == []


def test_records_of_no_partition_the_topic_has_are_not_followed() -> None:
    """A Partition past the last but one, or a PartitionChange naming no partition: replay
    skips them, and so does the scan (nothing flagged, nothing added)."""
    far = batches(CREATE, (_raw_partition(7, leader=1, leader_epoch=0),), GROW)
    assert scan(far) == []
    nameless = {"type": rec.RecordType.PARTITION_CHANGE, "version": 0,
                "topic_id": A.to_bytes(), "partition": "x", "leader": 2}
    assert scan(batches(CREATE, (nameless,), GROW)) == []


def test_ordered_delivery_follows_the_topic_config_records() -> None:
    """On only for `true`, as the image reads it (absent: off, as in a log written when
    it was the default); other keys leave it; a removed value turns it off; a config of
    a topic that is not live changes nothing."""
    grow_plain = (_count(3), _part(2))
    unmapped = [("partition_counts_consistent", "new partition 2's after-creation map None "
                                                "is not the epochs before the growth "
                                                "[(0, 0), (1, 0)]")]
    other = rec.TopicConfig(topic_id=A, key="retention.ms", value="1000")
    assert scan(batches(PLAIN_CREATE, grow_plain)) == []
    assert scan(batches(PLAIN_CREATE, (ORDERED,), (other,), grow_plain)) == unmapped
    assert scan(batches(CREATE, (_ordered(None),), grow_plain)) == []
    assert scan(batches(CREATE, (_ordered("false"),), grow_plain)) == []
    assert scan(batches(PLAIN_CREATE, (_ordered(" TRUE "),), grow_plain)) == []
    stranger = rec.TopicConfig(topic_id=B, key="enable.ordered.delivery", value="true")
    assert scan(batches(PLAIN_CREATE, (stranger,), grow_plain)) == []


def test_each_topic_of_a_batch_is_judged() -> None:
    """One batch touching several topics: each is judged, whatever comes first (a topic
    the batch creates, one whose resize is valid, one growing while marked)."""
    b_topic = (Topic(name="b", topic_id=B), Partition(topic_id=B, partition=0, replicas=(1,),
                                                      isr=(1,), leader=1))
    stray_b = PartitionChange(topic_id=B, partition=0, leader_epoch_before_deletion=((0, 0),))
    stray_a = _mark(1, ((0, 0),))
    created_first = batches(CREATE, (Topic(name="c", topic_id=C), stray_a))
    assert scan(created_first) == [
        ("partition_counts_consistent", "partition 1 is marked for deletion without a "
                                        "PartitionCount")]
    valid_first = batches(CREATE, b_topic, (*GROW, stray_b))
    assert scan(valid_first) == [
        ("partition_counts_consistent", "partition 0 is marked for deletion without a "
                                        "PartitionCount")]
    grown_first = batches(CREATE, b_topic, GROW, SHRINK,
                          (_count(3), _bump(0), _bump(1), _part(3, ((0, 2), (1, 2), (2, 0))),
                           stray_b))
    assert [check for check, _ in scan(grown_first)] == [
        "no_growth_while_marked", "partition_counts_consistent"]


def test_a_topic_removed_in_the_batch_that_marks_it_is_not_judged() -> None:
    assert scan(batches(CREATE, (_mark(1, ((0, 0),)), rec.RemoveTopic(topic_id=A)))) == []


# --- a scan that starts from a snapshot's image ------------------------------------------------

def test_a_seeded_scan_judges_resizes_as_a_scan_from_the_start() -> None:
    """Seeded below each batch of the whole cycle (with a leaderless partition, and a
    leader moving in the regrowth), the scan flags what a scan from offset 0 flags."""
    create = (*CREATE[:2], Partition(topic_id=A, partition=1, replicas=(1,), isr=(1,),
                                     leader=-1), ORDERED)
    regrow = (_count(3), PartitionChange(topic_id=A, partition=0, leader=2), _bump(1),
              _part(2, ((0, 2), (1, 2))))
    for log in (batches(create, GROW, SHRINK, REMOVE, regrow),
                batches(create, GROW, SHRINK, (_remove(1, 0),), REMOVE)):
        whole = located(log)
        for batch in log[2:]:
            assert located(log, seed_at=batch.base_offset) == [
                v for v in whole if v[1] >= batch.base_offset], batch.base_offset


def test_a_seeded_scan_keeps_the_undeleted_count_and_ordered_delivery() -> None:
    """From an image where 2 of 3 partitions count (ordered delivery off), a growth to 3
    that adds a fourth is flagged against the undeleted count; with ordered delivery on,
    a growth without maps is flagged."""
    plain = batches(CREATE, (_ordered("false"),), GROW, SHRINK, (_count(3), _part(3)))
    assert [v[3] for v in located(plain, seed_at=plain[-1].base_offset)] == [
        "undeleted count 2 -> 3, but the batch leaves 4 partitions"]
    ordered = batches(CREATE, (_count(3), _part(2)))
    assert [v[3] for v in located(ordered, seed_at=ordered[-1].base_offset)] == [
        "new partition 2's after-creation map None is not the epochs before the growth "
        "[(0, 0), (1, 0)]"]


def test_a_seeded_scan_knows_the_metadata_topic_was_assigned_before_its_first_batch() -> None:
    log = batches(CREATE, (MetadataTopic(topic_id=META),))
    node = NodeScan()
    node.seed(image_below(log, 2), 2)
    assert node.result().metadata_topic_batch == -1
    for seq, batch in enumerate(log[2:]):
        node.batch(seq, batch.base_offset, batch.epoch, list(batch.records))
    assert [v[1] for v in node.result().violations] == ["metadata_topic_once"]


def test_a_seeded_scan_expects_the_first_record_at_the_seed() -> None:
    """Seeded at 1 the next record must be at 1; seeded at 0 (an empty snapshot) the scan
    starts as one from the beginning, wherever the first record is."""
    log = batches(CREATE)
    for start, first, gaps in ((1, 3, 1), (1, 1, 0), (0, 2, 0)):
        node = NodeScan()
        node.seed(image_below(log, start), start)
        node.batch(0, first, 1, [rec.NoOp().encode()])
        assert len(node.result().violations) == gaps, (start, first)
