"""Finding the nodes, voters and segments to replay (driver side, no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raft.storage import HIGH_WATERMARK_CHECKPOINT
from tests.support.synthetic_logs import metadata_log, write_cluster
from tools.cli import main
from tools.replay import METADATA_DIR
from tools.replay.inputs import InputError, from_cluster, from_logs


def test_replay_exits_2_when_the_cluster_directory_is_missing(tmp_path, capsys):
    """`kraft replay`: bad input is exit 2 with one line naming the directory."""
    missing = tmp_path / "nowhere"
    assert main(["replay", "--cluster", str(missing)]) == 2
    assert str(missing) in capsys.readouterr().err


def test_from_cluster_reads_voters_and_node_ids_when_the_layout_is_the_launchers(tmp_path):
    """cluster.json names the voters; node ids come from meta.properties."""
    log = metadata_log(records=20)
    root = write_cluster(tmp_path, {1: log, 2: log, 3: log, 4: log}, voters=(1, 2, 3))
    found = from_cluster(root)
    assert [n.node_id for n in found.nodes] == [1, 2, 3, 4]
    assert found.voters == (1, 2, 3)
    assert found.majority == 2
    assert all(n.segments for n in found.nodes)


def test_from_logs_takes_voters_from_quorum_state_when_there_is_no_cluster_json(tmp_path):
    """Without cluster.json the voters persisted in quorum-state are used."""
    log = metadata_log(records=20)
    root = write_cluster(tmp_path, {1: log, 2: log})
    (root / "cluster.json").unlink()
    for node in (1, 2):
        (root / f"node-{node}" / "data" / "quorum-state").write_text(
            json.dumps({"epoch": 1, "leader_id": 1, "voters": [1, 2, 3]}))
    found = from_logs([root / "node-1" / "data",
                       root / "node-2" / "data" / "__cluster_metadata-0"])
    assert found.voters == (1, 2, 3)
    assert found.voters_source == "quorum-state"


def test_from_logs_fails_when_no_node_has_segments(tmp_path):
    """An empty log dir is not something to replay: exit 2 material."""
    (tmp_path / "a").mkdir()
    with pytest.raises(InputError, match="no metadata log segments"):
        from_logs([tmp_path / "a"])


def test_from_cluster_reads_each_nodes_high_watermark_when_some_nodes_wrote_one(
        tmp_path: Path) -> None:
    """The high-watermark checkpoint beside the segments; a node without one, or with an
    unparsable one, has None (the replay then knows nothing committed from it)."""
    log = metadata_log(records=20)
    root = write_cluster(tmp_path, {1: log, 2: log, 3: log}, high_watermarks={1: 20, 2: 7})
    (root / "node-2" / "data" / METADATA_DIR / HIGH_WATERMARK_CHECKPOINT).write_text("?")
    assert [n.high_watermark for n in from_cluster(root).nodes] == [20, None, None]
