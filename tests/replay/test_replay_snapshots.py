"""The replay over nodes that write snapshots and cut their logs below them
(tools/replay/snapshots.py): each node replays from its snapshot at its log start, every
snapshot is checked against the committed log, and `kraft replay` names a damaged
snapshot file. Snapshots are written by the snapshot writer and logs cut by DiskLog
(tests/replay/snapshot_logs.py); the one-fault plants of each snapshot check are in
test_replay_rules.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from raft.types import Batch
from tests.replay.snapshot_logs import CORRUPT, cut_log, drop_log, epoch_before, write_snapshot_of
from tests.support.synthetic_logs import write_cluster
from tools.cli import main
from tools.replay import METADATA_DIR
from tools.replay.inputs import from_cluster
from tools.replay.job import run_replay

pytestmark = pytest.mark.spark


def _node(root: Path, node: int) -> Path:
    return root / f"node-{node}" / "data"


def test_replay_passes_when_logs_start_at_their_snapshots(spark: Any, base_log: list[Batch],
                                                          tmp_path: Path) -> None:
    """KIP-630: node 2 cut its log at a segment boundary below its newest snapshot, node 3
    inside its first segment, node 4 (an observer) dropped its log for a fetched
    snapshot. Each replays from its snapshot (topics created below the cut are live in
    the scan of the records after it), every snapshot equals the committed log replayed
    from offset 0 on node 1, and the nodes' final images agree with it."""
    end = base_log[-1].next_offset
    logs = dict.fromkeys((1, 2, 3, 4), base_log)
    root = write_cluster(tmp_path / "c", logs, voters=(1, 2, 3), segment_records=50,
                         high_watermarks=dict.fromkeys((1, 2, 3, 4), end))
    segments = sorted((_node(root, 2) / METADATA_DIR).glob("*.log"))
    boundary = int(segments[3].name.removesuffix(".log"))
    inside = boundary + 7
    for node, ends in ((1, (100,)), (2, (boundary // 2, boundary)), (3, (inside,)),
                       (4, (inside,))):
        for snapshot_end in ends:
            write_snapshot_of(_node(root, node), base_log, snapshot_end)
    cut_log(_node(root, 2), boundary)
    cut_log(_node(root, 3), inside - 3)
    drop_log(_node(root, 4), inside, epoch_before(base_log, inside))
    (_node(root, 4) / METADATA_DIR / "high-watermark-checkpoint").unlink()

    result = run_replay(spark, from_cluster(root), with_analysis=False)

    assert result.passed, [c.to_json() for c in result.checks if not c.passed]
    nodes = {n["node"]: n for n in result.analysis.nodes}
    assert {n: nodes[n]["replay_from"] for n in nodes} == {1: 0, 2: boundary, 3: inside,
                                                            4: inside}
    assert nodes[2]["start_offset"] == boundary
    assert nodes[3]["start_offset"] < inside - 3  # the records below its start stay
    matches = result.check("snapshot_matches_log")
    assert matches.counts == {"checked": 5, "validity_only": 0, "uncommitted": 0}
    assert "5 snapshot file(s): 5 checked against a log replay" in matches.note
    assert "node 3: log from offset" in result.check("snapshot_at_log_start").note
    assert result.check("images_agree").skipped  # every snapshot base matched offset 0's
    assert result.analysis.committed_end == end
    assert result.analysis.reference_node == 1


def test_replay_exits_1_naming_the_file_when_a_snapshot_is_damaged(
        spark: Any, base_log: list[Batch], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A snapshot whose CRC fails is one snapshot_valid violation naming the file and the
    byte offset (raft/snapshot.py's reader), not a traceback: the other checks still run
    and pass, exit 1."""
    root = write_cluster(tmp_path / "c", dict.fromkeys((1, 2, 3), base_log),
                         segment_records=100)
    damaged = write_snapshot_of(_node(root, 2), base_log, 120, CORRUPT)
    code = main(["replay", "--cluster", str(root), "--json"])
    captured = capsys.readouterr()
    assert code == 1
    out = json.loads(captured.out)
    assert out["failed"] == ["snapshot_valid"]
    valid = next(c for c in out["checks"] if c["name"] == "snapshot_valid")
    assert [e["file"] for e in valid["examples"]] == [damaged.name]
    assert f"{damaged}: bad snapshot at byte offset" in valid["examples"][0]["reason"]
    assert "snapshot_valid" in captured.err
