"""The replay's snapshot side without Spark (tools/replay/snapshots.py, images.py, inputs.py,
and the parts of sequential.py, crossnode.py and checkpoint.py that logs cut below a
snapshot change): where a node's log starts and which snapshot its replay starts from,
a scan begun from a snapshot's image, the image replay from a base, which log replay each
snapshot is compared with, and what the checks report. The snapshots and cut logs are
real files (tests/replay/snapshot_logs.py); the RDD calls run in process
(tests/support/serial_spark.py)."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest

from metadata import records as rec
from raft.common.uuid import Uuid
from raft.storage import LOG_START_OFFSET
from raft.types import Batch
from tests.replay.snapshot_logs import (
    GOOD,
    OTHER_CONTENT,
    cut_log,
    image_below,
    write_snapshot_of,
)
from tests.support.serial_spark import SerialSpark
from tests.support.synthetic_logs import write_cluster
from tools.replay import METADATA_DIR
from tools.replay.batch_index import NodeIndex
from tools.replay.checkpoint import Checkpoint, check_checkpoints
from tools.replay.crossnode import batch_versions, committed_end, committed_prefix
from tools.replay.images import ReplayBase, load_snapshot_image, replayed_images
from tools.replay.inputs import InputError, from_cluster
from tools.replay.load import read_segments
from tools.replay.sequential import NodeScan
from tools.replay.snapshots import (
    SnapshotInfo,
    Span,
    Verdicts,
    check_files,
    check_images_agree,
    check_log_starts,
    check_matches,
    plan_replays,
    read_all,
    replay_bases,
    run_replays,
)

VOTERS = (1, 2, 3)
A, B, META = Uuid(2), Uuid(3), Uuid(4)


def _batch(offset: int, epoch: int, *records: rec.Record) -> Batch:
    return Batch(base_offset=offset, epoch=epoch, records=tuple(r.encode() for r in records))


# offsets 0-1 in epoch 1, 2-4 in one batch of epoch 2, 5 in epoch 3
LOG = [_batch(0, 1, rec.LeaderChange(leader_id=1, voters=VOTERS), rec.MetadataTopic(topic_id=META)),
       _batch(2, 2, rec.Topic(name="a", topic_id=A), rec.NoOp(),
              rec.PartitionChange(topic_id=A, partition=0)),
       _batch(5, 3, rec.RemoveTopic(topic_id=A))]


def _cluster(tmp_path: Path, *, segment_records: int = 1) -> Path:
    return write_cluster(tmp_path / "c", dict.fromkeys(VOTERS, LOG), voters=VOTERS,
                         segment_records=segment_records)


def _data(root: Path, node: int) -> Path:
    return root / f"node-{node}" / "data"


# --- inputs and bases -----------------------------------------------------------------------

def test_inputs_take_the_log_start_file_and_leave_out_segments_wholly_below_it(tmp_path):
    """raft/log.py DiskLog.advance_start: the log-start-offset file, then the segments
    below it deleted; a crash in between leaves one, which the node's recovery deletes
    and the replay leaves out too. Snapshots are listed, partial files not."""
    root = _cluster(tmp_path)
    write_snapshot_of(_data(root, 2), LOG, 5)
    cut_log(_data(root, 2), 5)
    cut_log(_data(root, 3), 3)  # inside the segment at offset 2
    (_data(root, 2) / METADATA_DIR / "00000000000000000000.log").write_bytes(b"")
    (_data(root, 2) / METADATA_DIR / "x.checkpoint.part").write_bytes(b"")
    nodes = {n.node_id: n for n in from_cluster(root).nodes}
    assert [p.name for p in nodes[2].segments] == ["00000000000000000005.log"]
    assert [p.name for p in nodes[2].snapshots] == ["00000000000000000005-0000000002.checkpoint"]
    assert [(n.log_start, n.start_offset) for n in nodes.values()] == [(0, 0), (5, 5), (3, 3)]
    assert [p.name for p in nodes[3].segments][0] == "00000000000000000002.log"


def test_inputs_fail_naming_the_file_when_the_log_start_file_is_damaged(tmp_path):
    root = _cluster(tmp_path)
    (_data(root, 2) / METADATA_DIR / LOG_START_OFFSET).write_text("offset: x\n")
    with pytest.raises(InputError, match=LOG_START_OFFSET):
        from_cluster(root)


def _info(node: int, end: int, *, valid: bool = True) -> SnapshotInfo:
    return SnapshotInfo(node=node, path=f"/d/{end}.checkpoint", end_offset=end, epoch=1,
                        image_hash=f"h{end}" if valid else None,
                        error=None if valid else "bad")


def test_replay_bases_take_the_nearest_valid_snapshot_at_or_above_the_log_start(tmp_path):
    """A log from 0 replays from 0; a cut one from its own valid snapshot ending nearest
    at or above its start (below it: a gap; invalid: passed over); none: not replayed."""
    root = _cluster(tmp_path)
    for node, start in ((2, 3), (3, 2)):
        cut_log(_data(root, node), start)
    replay_input = from_cluster(root)
    bases = replay_bases(replay_input, {
        1: [_info(1, 4)],
        2: [_info(2, 2), _info(2, 3, valid=False), _info(2, 5), _info(2, 4)],
        3: [_info(3, 1)]})
    assert bases == {1: ReplayBase(0), 2: ReplayBase(4, "/d/4.checkpoint", "h4")}
    result = check_log_starts(replay_input, {3: [_info(3, 1)]}, bases)
    assert [(e["nodes"], e["offset"]) for e in result.examples] == [([3], 2)]
    assert "(valid snapshots end at [1])" in result.examples[0]["reason"]
    assert result.note == "node 2: log from offset 3, replayed from snapshot 4.checkpoint"


def test_snapshot_files_are_read_whole_and_a_damaged_one_is_named(tmp_path):
    root = _cluster(tmp_path)
    good = write_snapshot_of(_data(root, 1), LOG, 5, GOOD)
    write_snapshot_of(_data(root, 2), LOG, 5, OTHER_CONTENT)
    damaged = _data(root, 3) / METADATA_DIR / "7.checkpoint"
    damaged.write_bytes(b"")
    found = read_all(SerialSpark(), from_cluster(root))
    assert found[1] == [SnapshotInfo(node=1, path=str(good), end_offset=5, epoch=2,
                                     image_hash=image_below(LOG, 5).content_hash())]
    assert found[2][0].image_hash != found[1][0].image_hash
    assert found[3][0].end_offset is None
    assert "not a snapshot file name" in str(found[3][0].error)
    result = check_files(found)
    assert (result.violations, result.note) == (1, "2 of 3 snapshot file(s) valid")
    assert result.examples[0]["file"] == "7.checkpoint"


# --- the scan and the image replay from a snapshot ------------------------------------------

def test_a_scan_seeded_with_a_snapshot_knows_its_topics_ids_and_metadata_topic(tmp_path):
    """sequential.NodeScan.seed: after the snapshot at 3, topic a is live (no dangling
    PartitionChange), its ID is used (a new topic taking it is flagged, the offset said
    to be in the snapshot) and the metadata topic ID is assigned (none missing)."""
    scan = NodeScan()
    scan.seed(image_below(LOG, 3), 3)
    scan.batch(0, 3, 2, [rec.NoOp().encode(),
                         rec.PartitionChange(topic_id=A, partition=0).encode()])
    scan.batch(1, 5, 3, [rec.RemoveTopic(topic_id=A).encode(),
                         rec.Topic(name="b", topic_id=A).encode()])
    result = scan.result()
    assert [(v[1], v[2], v[5]) for v in result.violations] == [
        ("topic_ids_valid", 6, "topic ID reused after RemoveTopic: first assigned at offset "
                               "below 3 (in the snapshot)")]
    assert result.view(2)[3] is False  # the metadata topic ID is not missing


def test_a_seeded_scan_flags_a_gap_between_the_snapshot_and_the_first_record():
    scan = NodeScan()
    scan.seed(image_below(LOG, 3), 3)
    scan.batch(0, 4, 2, [rec.NoOp().encode()])
    assert [v[5] for v in scan.result().violations] == ["gap: previous record is at offset 2"]


def test_image_replay_from_a_snapshot_skips_the_records_below_it_inside_a_batch(tmp_path):
    """images.replayed_images from the snapshot at 3, through a log whose batch 2-4 holds
    records on both sides: the image at 4 (after offset 4) and 5 equal a replay from 0;
    the snapshot's own last offset is its image; below it nothing."""
    root = _cluster(tmp_path, segment_records=1000)
    path = write_snapshot_of(_data(root, 1), LOG, 3)
    base = ReplayBase(3, str(path), load_snapshot_image(str(path))[1].content_hash())
    files = list(read_segments(str(p) for p in (_data(root, 1) / METADATA_DIR).glob("*.log")))
    found = list(replayed_images(files, [0, 2, 4, 5], base))
    assert found == [(2, image_below(LOG, 3).content_hash(), None),
                     (4, image_below(LOG, 5).content_hash(), 2),
                     (5, image_below(LOG, 6).content_hash(), 3)]


# --- which replay each snapshot is compared with, and the checks ----------------------------

def _bases(*ends: int) -> dict[int, ReplayBase]:
    return {node: ReplayBase(end) if end == 0 else ReplayBase(end, f"/d/{end}.checkpoint",
                                                                  f"h{end}")
            for node, end in zip(VOTERS, ends, strict=True)}


def _snapshots(*found: SnapshotInfo) -> dict[int, list[SnapshotInfo]]:
    out: dict[int, list[SnapshotInfo]] = {}
    for info in found:
        out.setdefault(info.node, []).append(info)
    return out


def test_a_snapshot_is_compared_with_the_lowest_base_some_log_continues_to_its_end():
    """Node 1's log holds [0, 4) only (it departs there), node 2's [0, 9): the snapshot at
    8 is replayed from 0 on node 2; node 3 holds [6, 9) from its snapshot at 6, which
    node 1 checks; a snapshot past the committed end is planned for nothing."""
    spans = {1: Span(0, 4), 2: Span(0, 9), 3: Span(6, 9)}
    snapshots = _snapshots(_info(3, 6), _info(3, 8), _info(2, 3), _info(1, 12))
    plan = plan_replays(snapshots, _bases(0, 0, 6), spans, 9, [1, 2, 3])
    assert {end: (base.end_offset, node) for end, (base, node) in plan.chosen.items()} == {
        3: (0, 1), 6: (0, 2), 8: (0, 2)}
    assert plan.replays == {(ReplayBase(0), 1): {3}, (ReplayBase(0), 2): {6, 8}}
    result, verdicts = check_matches(snapshots, plan, {
        (ReplayBase(0), 1): {3: ("h3", 1)}, (ReplayBase(0), 2): {6: ("h6", 1), 8: ("x", 1)}},
        9)
    assert [(e["offset"], e["reason"]) for e in result.examples] == [
        (8, "its image differs from node 2's log replayed from offset 0 up to offset 8"),
        (12, "the snapshot ends at offset 12, above the committed end 9: it holds records "
             "that are not committed")]
    assert result.counts == {"checked": 3, "validity_only": 0, "uncommitted": 1}
    assert verdicts.wrong == {(8, "h8"), (12, "h12")}
    assert verdicts.matched == {(3, "h3"), (6, "h6")}


def test_a_snapshot_no_log_reaches_from_below_is_checked_for_validity_only():
    spans = {1: Span(4, 9), 2: Span(4, 9)}
    snapshots = _snapshots(_info(1, 4), _info(2, 4))
    plan = plan_replays(snapshots, {1: ReplayBase(4, "/d/4.checkpoint", "h4"),
                                    2: ReplayBase(4, "/e/4.checkpoint", "h4")}, spans, 9, [1, 2])
    assert (plan.chosen, plan.replays) == ({}, {})  # one image at 4: nothing to compare
    result, _ = check_matches(snapshots, plan, {}, 9)
    assert result.counts == {"checked": 0, "validity_only": 2, "uncommitted": 0}
    assert check_images_agree({1: ReplayBase(4, "/d/4.checkpoint", "h4")}, plan, {}, 9,
                              Verdicts()).skipped


def test_images_agree_compares_one_replay_per_base_and_skips_a_base_found_wrong():
    """Nodes 1 and 2 start from snapshots at 4 no log checks, node 3 from another at 4:
    one replay each to the committed end 9, node 3's differs. A snapshot found wrong by
    snapshot_matches_log is left to that check."""
    bases = {1: ReplayBase(4, "/1/4.checkpoint", "h4"), 2: ReplayBase(4, "/2/4.checkpoint", "h4"),
             3: ReplayBase(4, "/3/4.checkpoint", "w4")}
    spans = dict.fromkeys(VOTERS, Span(4, 9))
    plan = plan_replays({}, bases, spans, 9, [1, 2, 3])
    assert set(plan.replays) == {(bases[1], 1), (bases[3], 1)}
    replayed = {(bases[1], 1): {9: ("r", 3)}, (bases[3], 1): {9: ("w", 3)}}
    result = check_images_agree(bases, plan, replayed, 9, Verdicts())
    assert [(e["nodes"], e["offset"]) for e in result.examples] == [([3], 9)]
    assert result.examples[0]["reason"] == (
        "the image at the committed end, replayed from snapshot 4.checkpoint, differs from "
        "the one replayed from snapshot 4.checkpoint (node(s) [1, 2])")
    assert check_images_agree(bases, plan, replayed, 9, Verdicts(wrong={(4, "w4")})).passed


def test_run_replays_gives_the_image_and_epoch_at_each_end_offset(tmp_path):
    root = _cluster(tmp_path)
    replay_input = from_cluster(root)
    plan = plan_replays(_snapshots(_info(2, 3), _info(2, 5)), _bases(0, 0, 0),
                        {n: Span(0, 6) for n in VOTERS}, 6, [2, 1, 3])
    replayed = run_replays(SerialSpark(), replay_input, plan)
    assert replayed == {(ReplayBase(0), 2): {3: (image_below(LOG, 3).content_hash(), 2),
                                             5: (image_below(LOG, 5).content_hash(), 2)}}


# --- broker checkpoints and the cross-node checks over cut logs -----------------------------

def test_broker_checkpoints_below_the_reference_snapshot_are_noted_not_compared(tmp_path):
    """checkpoint.check_checkpoints replays the reference log from its snapshot: a
    checkpoint at or above its last offset is compared, one below it cannot be."""
    root = _cluster(tmp_path)
    path = write_snapshot_of(_data(root, 1), LOG, 3)
    cut_log(_data(root, 1), 3)
    base = ReplayBase(3, str(path), image_below(LOG, 3).content_hash())
    reference = from_cluster(root).node(1)
    checkpoints = [Checkpoint(node_id=4, applied_offset=2, image_hash=image_below(LOG, 3)
                              .content_hash()),
                   Checkpoint(node_id=5, applied_offset=4, image_hash=image_below(LOG, 5)
                              .content_hash()),
                   Checkpoint(node_id=6, applied_offset=0, image_hash="?")]
    result = check_checkpoints(SerialSpark(), checkpoints, reference, 6, base)
    assert result.passed
    assert result.note == ("replayed from node 1's log (replayed from snapshot "
                           f"{path.name}); brokers [6] checkpointed below offset 2, where "
                           "that log's replay starts: not compared")


def _index(node: int, *batches: tuple[str, int, int]) -> NodeIndex:
    """(digest label, base offset, records) per batch, epoch 1."""
    return NodeIndex(node=node, files=("segment",), file_ids=array("l", [0] * len(batches)),
                     positions=array("q", range(len(batches))),
                     offsets=array("q", [b[1] for b in batches]),
                     epochs=array("l", [1] * len(batches)),
                     counts=array("l", [b[2] for b in batches]),
                     digests=b"".join(b[0].encode().ljust(16, b".") for b in batches))


def test_committed_end_by_majority_counts_a_log_cut_at_a_snapshot_as_holding_what_it_cut():
    """Nodes 2 and 3 start at 4 (their snapshots hold [0, 4)): with node 1's copy of
    [0, 4) a majority holds it; where every voter cut its log, its start is committed.
    Not counting the snapshots, only node 1 holds offset 0: nothing is committed."""
    indexes = {1: _index(1, ("a", 0, 4), ("b", 4, 2)), 2: _index(2, ("b", 4, 2)),
               3: _index(3, ("b", 4, 2))}
    comparison = batch_versions(indexes, 1, {1: 2}, VOTERS, log_starts={2: 4, 3: 4})
    assert comparison.holders(comparison.versions[0]) == 3
    assert committed_end(comparison) == 6
    cut = batch_versions({n: _index(n, ("b", 4, 2)) for n in VOTERS}, 1,
                         dict.fromkeys(VOTERS, 1), VOTERS, log_starts=dict.fromkeys(VOTERS, 4))
    assert committed_end(cut) == 6
    assert committed_end(batch_versions(indexes, 1, {1: 2}, VOTERS)) == 0


def test_a_log_emptied_for_a_snapshot_ends_at_its_start_not_below_its_checkpoint():
    """DiskLog.reset_to: node 3 holds no record, its log starts (and ends) at 4, its
    checkpoint is 4: no committed record lost."""
    indexes = {1: _index(1, ("a", 0, 6)), 2: _index(2, ("a", 0, 6)), 3: _index(3)}
    comparison = batch_versions(indexes, 1, {1: 1, 2: 1, 3: 0}, VOTERS,
                                {1: 6, 2: 6, 3: 4}, log_starts={3: 4})
    assert committed_prefix(comparison, 6).passed
    short = batch_versions(indexes, 1, {1: 1, 2: 1, 3: 0}, VOTERS, {1: 6, 2: 6, 3: 4})
    assert not committed_prefix(short, 6).passed

