"""What the replay's snapshot checks report, whole (tools/replay/snapshots.py): every
field of each CheckResult (name, description, verdict, examples, note, counts), for plans
and replays given directly, and what reading the snapshot files yields for each file.
Each case plants what a wrong verdict, a lost example or a miscounted note would change;
tests/unit/tools/test_replay_snapshots.py follows the same checks from real logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metadata import records as rec
from raft.log import DiskLog
from raft.types import Batch
from tests.replay.snapshot_logs import image_below, write_snapshot_of
from tests.support.synthetic_logs import write_cluster
from tools.replay import METADATA_DIR
from tools.replay.checks import CheckResult
from tools.replay.images import ReplayBase
from tools.replay.inputs import from_cluster
from tools.replay.snapshots import (
    AT_LOG_START,
    DESCRIPTIONS,
    IMAGES_AGREE,
    MATCHES_LOG,
    VALID,
    ReplayPlan,
    SnapshotInfo,
    Span,
    Verdicts,
    check_files,
    check_images_agree,
    check_log_starts,
    check_matches,
    plan_replays,
    read_snapshot_files,
    replay_bases,
    spans,
)

ZERO = ReplayBase(0)
LOG = [Batch(base_offset=0, epoch=1, records=(rec.LeaderChange(leader_id=1, voters=(1, 2, 3))
                                              .encode(), rec.NoOp().encode())),
       Batch(base_offset=2, epoch=2, records=(rec.NoOp().encode(),) * 4)]


def _info(node: int, end: int, *, digest: str | None = None, valid: bool = True) -> SnapshotInfo:
    return SnapshotInfo(node=node, path=f"/{node}/{end}.checkpoint", end_offset=end, epoch=1,
                        image_hash=(digest or f"h{end}") if valid else None,
                        error=None if valid else "bad")


def _snapshots(*found: SnapshotInfo) -> dict[int, list[SnapshotInfo]]:
    out: dict[int, list[SnapshotInfo]] = {}
    for info in found:
        out.setdefault(info.node, []).append(info)
    return out


def _matches(**fields: Any) -> CheckResult:
    return CheckResult(name=MATCHES_LOG, description=DESCRIPTIONS[MATCHES_LOG], **fields)


def _agree(**fields: Any) -> CheckResult:
    return CheckResult(name=IMAGES_AGREE, description=DESCRIPTIONS[IMAGES_AGREE], **fields)


# --- snapshot_matches_log -----------------------------------------------------------------

def test_matches_reports_each_snapshot_by_what_its_replay_found() -> None:
    """In end order: 4 unchecked (no replay chosen), 6 on two nodes equal, 7 unchecked
    (its replay never ran), 8 another image, 9 at the committed end with another epoch,
    12 and 15 past it. Each is counted, and each violation named, once."""
    snapshot_base = ReplayBase(6, "/2/6.checkpoint", "h6")
    snapshots = _snapshots(_info(1, 4), _info(2, 6), _info(3, 6), _info(1, 7), _info(1, 8),
                           _info(3, 9), _info(1, 12), _info(2, 15))
    plan = ReplayPlan(order=[1, 2, 3], spans={}, chosen={
        6: (ZERO, 2), 7: (ZERO, 1), 8: (snapshot_base, 2), 9: (ZERO, 2)})
    replayed = {(ZERO, 2): {6: ("h6", 1), 9: ("h9", 2)}, (snapshot_base, 2): {8: ("x", 1)}}
    result, verdicts = check_matches(snapshots, plan, replayed, 9)
    assert result == _matches(violations=4, examples=(
        {"nodes": [1], "offset": 8, "epoch": 1, "file": "8.checkpoint",
         "reason": "its image differs from node 2's log replayed from snapshot 6.checkpoint "
                   "up to offset 8"},
        {"nodes": [3], "offset": 9, "epoch": 1, "file": "9.checkpoint",
         "reason": "its epoch is 1, but the record at offset 8 has epoch 2"},
        {"nodes": [1], "offset": 12, "epoch": 1, "file": "12.checkpoint",
         "reason": "the snapshot ends at offset 12, above the committed end 9: it holds "
                   "records that are not committed"},
        {"nodes": [2], "offset": 15, "epoch": 1, "file": "15.checkpoint",
         "reason": "the snapshot ends at offset 15, above the committed end 9: it holds "
                   "records that are not committed"}),
        note="8 snapshot file(s): 4 checked against a log replay, 2 for validity only (no "
             "log holds the committed records below them), 2 past the committed end 9",
        counts={"checked": 4, "validity_only": 2, "uncommitted": 2})
    assert verdicts == Verdicts(matched={(6, "h6"), (9, "h9")},
                                wrong={(8, "h8"), (12, "h12"), (15, "h15")})
    assert result.to_json()["counts"] == {"checked": 4, "validity_only": 2, "uncommitted": 2}
    assert "counts" not in _matches(violations=0).to_json()  # nothing counted: none shown


def test_matches_is_skipped_and_says_why_without_a_valid_snapshot() -> None:
    plan = ReplayPlan(order=[], spans={})
    assert check_matches({}, plan, {}, 9) == (
        _matches(violations=0, skipped=True, note="no snapshot files"), Verdicts())
    assert check_matches(_snapshots(_info(1, 4, valid=False)), plan, {}, 9) == (
        _matches(violations=0, skipped=True, note="no valid snapshot"), Verdicts())


# --- images_agree -------------------------------------------------------------------------

def test_agree_takes_the_largest_group_of_the_lowest_base_as_the_reference() -> None:
    """Two snapshots at 4 with different images: node 1 from one, nodes 2 and 3 from the
    other; the group of two is the reference, whatever the images' hashes."""
    lone = ReplayBase(4, "/1/4-a.checkpoint", "a")
    pair = ReplayBase(4, "/2/4-b.checkpoint", "b")
    bases = {1: lone, 2: pair, 3: pair}
    plan = plan_replays({}, bases, dict.fromkeys((1, 2, 3), Span(4, 9)), 9, [1, 2, 3])
    replayed = {(lone, 1): {9: ("ra", 3)}, (pair, 1): {9: ("rb", 3)}}
    assert check_images_agree(bases, plan, replayed, 9, Verdicts()) == _agree(
        violations=1, examples=({"nodes": [1], "offset": 9, "reason":
                                 "the image at the committed end, replayed from snapshot "
                                 "4-a.checkpoint, differs from the one replayed from "
                                 "snapshot 4-b.checkpoint (node(s) [2, 3])"},),
        note="2 distinct base(s) replayed to offset 9")


def test_agree_takes_a_snapshot_at_the_committed_end_as_its_own_image() -> None:
    """Node 3 starts from a snapshot at the committed end that no log reaches: its image
    is the snapshot's, compared with the replay of nodes 1 and 2 from offset 0."""
    at_end = ReplayBase(9, "/3/9.checkpoint", "h9")
    bases = {1: ZERO, 2: ZERO, 3: at_end}
    plan = plan_replays({}, bases, {1: Span(0, 9), 2: Span(0, 9), 3: Span(9, 9)}, 9, [1, 2])
    assert check_images_agree(bases, plan, {(ZERO, 1): {9: ("h9", 2)}}, 9, Verdicts()) == \
        _agree(violations=0, note="2 distinct base(s) replayed to offset 9")
    replayed = {(ZERO, 1): {9: ("r", 2)}}
    assert check_images_agree(bases, plan, replayed, 9, Verdicts()) == _agree(
        violations=1, examples=({"nodes": [3], "offset": 9, "reason":
                                 "the image at the committed end, replayed from snapshot "
                                 "9.checkpoint, differs from the one replayed from offset 0 "
                                 "(node(s) [1, 2])"},),
        note="2 distinct base(s) replayed to offset 9")


def test_agree_leaves_out_a_group_no_replay_reached() -> None:
    """Node 3's snapshot at 2 is continued by no log of the plan (node 3's own is not
    replayed), and node 1's replay from node 2's snapshot never ran: only node 1's image
    from its own snapshot is known, so nothing disagrees."""
    first, second = ReplayBase(4, "/1/4.checkpoint", "a"), ReplayBase(4, "/2/4.checkpoint", "b")
    bases = {1: first, 2: second, 3: ReplayBase(2, "/3/2.checkpoint", "c")}
    plan = ReplayPlan(order=[1, 2], spans={1: Span(4, 9), 2: Span(4, 9), 3: Span(2, 9)})
    result = check_images_agree(bases, plan, {(first, 1): {9: ("ra", 3)}}, 9, Verdicts())
    assert result == _agree(violations=0, note="1 distinct base(s) replayed to offset 9")


def test_agree_merges_a_matched_snapshot_into_its_replay_and_not_a_wrong_one() -> None:
    """Node 3 starts from its snapshot at 4, compared with node 1's replay from 0: found
    equal, nodes 1-3 are one image (skipped); found wrong, it is its own group, left to
    snapshot_matches_log."""
    snapshot = ReplayBase(4, "/3/4.checkpoint", "h4")
    bases = {1: ZERO, 2: ZERO, 3: snapshot}
    info = SnapshotInfo(node=3, path="/3/4.checkpoint", end_offset=4, epoch=1,
                        image_hash="h4")
    plan = plan_replays({3: [info]}, bases, {1: Span(0, 9), 2: Span(0, 9), 3: Span(4, 9)}, 9,
                        [1, 2, 3])
    assert plan.chosen == {4: (ZERO, 1)}
    replayed = {(ZERO, 1): {4: ("h4", 2), 9: ("r", 2)}, (snapshot, 1): {9: ("w", 2)}}
    assert check_images_agree(bases, plan, replayed, 9, Verdicts(matched={(4, "h4")})) == \
        _agree(violations=0, skipped=True,
               note="the nodes holding the committed prefix replay from one base, or from "
                    "snapshots equal to its replay: their images agree when their logs do")
    assert check_images_agree(bases, plan, replayed, 9, Verdicts(wrong={(4, "h4")})) == \
        _agree(violations=0, note="2 distinct base(s) replayed to offset 9")


def test_agree_is_skipped_when_every_image_reached_is_of_a_wrong_snapshot() -> None:
    first, second = ReplayBase(4, "/1/4.checkpoint", "a"), ReplayBase(4, "/2/4.checkpoint", "b")
    bases = {1: first, 2: second}
    plan = plan_replays({}, bases, dict.fromkeys((1, 2), Span(4, 9)), 9, [1, 2])
    replayed = {(first, 1): {9: ("ra", 3)}, (second, 1): {9: ("rb", 3)}}
    assert check_images_agree(bases, plan, replayed, 9,
                              Verdicts(wrong={(4, "a"), (4, "b")})) == _agree(
        violations=0, skipped=True, note="no trusted replay reached the committed end")


# --- reading the files, and the spans the plan replays from -------------------------------

def test_reading_yields_every_file_in_order_with_its_id_or_why_it_is_not_valid(
        tmp_path: Path) -> None:
    """A name that is no snapshot's, a good file, a damaged one with a snapshot's name,
    another good one: each read on, none dropped."""
    data = tmp_path / "data"
    (data / METADATA_DIR).mkdir(parents=True)
    good = write_snapshot_of(data, LOG, 2)
    later = write_snapshot_of(data, LOG, 6)
    damaged = good.with_name("00000000000000000004-0000000002.checkpoint")
    damaged.write_bytes(good.read_bytes()[:-5])
    stray = good.with_name("stray.checkpoint")
    stray.write_bytes(b"")
    found = list(read_snapshot_files(7, [str(stray), str(good), str(damaged), str(later)]))
    assert [(i.node, i.path, i.end_offset, i.epoch, i.valid) for i in found] == [
        (7, str(stray), None, None, False), (7, str(good), 2, 1, True),
        (7, str(damaged), 4, 2, False), (7, str(later), 6, 2, True)]
    assert [i.image_hash for i in found] == [
        None, image_below(LOG, 2).content_hash(), None, image_below(LOG, 6).content_hash()]


def test_spans_end_at_the_first_of_log_end_committed_end_and_divergence(
        tmp_path: Path) -> None:
    root = write_cluster(tmp_path / "c", dict.fromkeys((1, 2, 3), LOG), voters=(1, 2, 3))
    replay_input = from_cluster(root)
    assert spans(replay_input, {1: 6, 2: 4, 3: None}, 5, {1: 6, 2: 3}) == {
        1: Span(0, 5), 2: Span(0, 3), 3: Span(0, 0)}


def test_spans_leave_out_a_node_without_segments_and_go_on_to_the_next(
        tmp_path: Path) -> None:
    root = write_cluster(tmp_path / "c", {1: [], 2: LOG, 3: LOG}, voters=(1, 2, 3))
    replay_input = from_cluster(root)
    assert [n.segments == () for n in replay_input.nodes] == [True, False, False]
    assert spans(replay_input, {2: 6, 3: 6}, 5, {}) == {2: Span(0, 5), 3: Span(0, 5)}


def test_files_and_log_starts_are_skipped_and_say_why_when_there_is_nothing_to_check(
        tmp_path: Path) -> None:
    replay_input = from_cluster(write_cluster(tmp_path / "c", dict.fromkeys((1, 2, 3), LOG),
                                              voters=(1, 2, 3)))
    assert check_files({}) == CheckResult(name=VALID, description=DESCRIPTIONS[VALID],
                                          violations=0, skipped=True,
                                          note="no snapshot checkpoint files")
    assert check_log_starts(replay_input, {}, {}) == CheckResult(
        name=AT_LOG_START, description=DESCRIPTIONS[AT_LOG_START], violations=0,
        skipped=True, note="every log starts at offset 0")


def test_log_starts_name_each_cut_log_and_its_base_or_the_valid_snapshots_it_lacks(
        tmp_path: Path) -> None:
    """Node 1's log starts at 1 and node 2's at 3, each at or below a valid snapshot of
    its own; node 3's at 2, above its only valid snapshot (1), an invalid one at 3."""
    root = write_cluster(tmp_path / "c", dict.fromkeys((1, 2, 3), LOG), voters=(1, 2, 3),
                         segment_records=1)
    for node, start in ((1, 1), (2, 3), (3, 2)):
        with DiskLog.open_metadata_log(root / f"node-{node}" / "data") as log:
            log.advance_start(start)
    replay_input = from_cluster(root)
    snapshots = _snapshots(_info(1, 2), _info(2, 4), _info(3, 1), _info(3, 3, valid=False))
    bases = replay_bases(replay_input, snapshots)
    assert check_log_starts(replay_input, snapshots, bases) == CheckResult(
        name=AT_LOG_START, description=DESCRIPTIONS[AT_LOG_START], violations=1,
        examples=({"nodes": [3], "offset": 2,
                   "reason": "the log starts at offset 2 and no valid snapshot of this node "
                             "ends at or above it (valid snapshots end at [1]): its records "
                             "are not replayed"},),
        note="node 1: log from offset 1, replayed from snapshot 2.checkpoint; node 2: log "
             "from offset 3, replayed from snapshot 4.checkpoint")


def test_files_name_each_invalid_file_and_count_the_valid_ones() -> None:
    assert check_files(_snapshots(_info(1, 4), _info(2, 6, valid=False))) == CheckResult(
        name=VALID, description=DESCRIPTIONS[VALID], violations=1,
        examples=({"nodes": [2], "offset": 6, "file": "6.checkpoint",
                   "reason": "not a valid snapshot: bad"},),
        note="1 of 2 snapshot file(s) valid")


def test_a_snapshot_at_the_committed_end_is_compared_with_a_replay() -> None:
    plan = plan_replays(_snapshots(_info(1, 9)), {1: ZERO}, {1: Span(0, 9)}, 9, [1])
    assert plan.chosen == {9: (ZERO, 1)}
