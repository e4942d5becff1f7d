"""Chaos with snapshots (KIP-630): the `wipe` fault (a broker restarted with an empty
metadata directory), the controller image hashes the checker compares the brokers with
once the leader's log no longer starts at 0, the per-node counts of snapshots written,
log-start advances and snapshots fetched, and the settings `kraft chaos` gives the nodes
with and without --no-snapshots. Real files, no processes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from metadata import records as rec
from raft.common.uuid import Uuid
from raft.log import METADATA_PARTITION_DIR
from raft.types import Batch
from tests.replay.snapshot_logs import cut_log, write_snapshot_of
from tests.support.synthetic_logs import write_node
from tools.chaos import final
from tools.chaos.nemesis import LEADER, Nemesis, schedule
from tools.cluster import Cluster, ClusterError
from tools.commands import chaos

NODES = [1, 2, 3, 4, 5, 6]
BROKERS = [4, 5, 6]
VOTERS = (1, 2, 3)
A, B, META = Uuid(2), Uuid(3), Uuid(4)


def _batch(offset: int, epoch: int, *records: rec.Record) -> Batch:
    return Batch(base_offset=offset, epoch=epoch, records=tuple(r.encode() for r in records))


LOG = [_batch(0, 1, rec.LeaderChange(leader_id=1, voters=VOTERS),
              rec.MetadataTopic(topic_id=META)),
       _batch(2, 1, rec.Topic(name="a", topic_id=A), rec.NoOp()),
       _batch(4, 2, rec.Topic(name="b", topic_id=B)),
       _batch(5, 2, rec.RemoveTopic(topic_id=A)),
       _batch(6, 2, rec.NoOp())]


# --- the wipe fault --------------------------------------------------------------------


def test_wipe_faults_target_only_brokers_when_scheduled() -> None:
    faults = schedule(4, 600, ["wipe", "kill"], NODES, broker_ids=BROKERS)
    wipes = [f for f in faults if f.kind == "wipe"]
    assert wipes
    assert {f.target for f in wipes} <= set(BROKERS)
    assert all(f.target != LEADER and f.amount is None for f in wipes)
    assert {f.kind for f in faults} == {"wipe", "kill"}


def test_wipe_is_refused_when_no_broker_is_given() -> None:
    with pytest.raises(ValueError, match="brokers"):
        schedule(4, 60, ["wipe"], NODES)
    assert schedule(4, 60, ["kill"], NODES) == schedule(4, 60, ["kill"], NODES,
                                                        broker_ids=BROKERS)


def test_wipe_deletes_only_a_brokers_metadata_directory_when_applied(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path / "c", voters=3, brokers=3)  # formatted, not started
    for node_id in (1, 4):
        metadata = Path(cluster.node(node_id).data_dir) / METADATA_PARTITION_DIR
        metadata.mkdir()
        (metadata / "00000000000000000000.log").write_bytes(b"x")
        partition = Path(cluster.node(node_id).data_dir) / "t-0"
        partition.mkdir()
    nemesis = Nemesis(cluster, [])
    nemesis.wipe(4)
    broker = Path(cluster.node(4).data_dir)
    assert not (broker / METADATA_PARTITION_DIR).exists()
    assert (broker / "meta.properties").exists()
    assert (broker / "t-0").is_dir()
    nemesis.wipe(4)  # already empty: nothing to delete, no error
    with pytest.raises(ClusterError, match="voter"):
        nemesis.wipe(1)
    assert (Path(cluster.node(1).data_dir) / METADATA_PARTITION_DIR).is_dir()


# --- the controller's image hashes over a log cut below a snapshot ----------------------


def _hashes_of_whole_log(tmp_path: Path, offsets: list[int]) -> dict[int, str]:
    whole = tmp_path / "whole"
    write_node(whole, LOG, segment_records=1)
    return final.reference_hashes(whole, offsets)


@pytest.mark.parametrize(("segment_records", "start"), [(1, 4), (1000, 4), (1, 7)])
def test_reference_hashes_start_from_the_snapshot_when_the_log_was_cut(
        tmp_path: Path, segment_records: int, start: int) -> None:
    """The leader's log starts at its snapshot (whole segments below it deleted, or the
    start inside its first segment, or every record in the snapshot): the hashes at the
    brokers' offsets are those of the whole log, not of its remaining records replayed
    from an empty image."""
    offsets = [start - 1, 5, 6]
    expected = _hashes_of_whole_log(tmp_path, offsets)
    cut = tmp_path / "cut"
    write_node(cut, LOG, segment_records=segment_records)
    write_snapshot_of(cut, LOG, 2)  # older, further below: not the base
    write_snapshot_of(cut, LOG, start)
    cut_log(cut, start)
    got = final.reference_hashes(cut, offsets)
    assert got == {o: h for o, h in expected.items() if o >= start - 1}
    assert got[6] == expected[6]


def test_reference_hashes_leave_out_offsets_when_no_snapshot_covers_the_cut(
        tmp_path: Path) -> None:
    cut = tmp_path / "cut"
    write_node(cut, LOG, segment_records=1)
    write_snapshot_of(cut, LOG, 4)
    cut_log(cut, 4)
    for checkpoint in (cut / METADATA_PARTITION_DIR).glob("*.checkpoint"):
        checkpoint.unlink()
    assert final.reference_hashes(cut, [5, 6]) == {}  # the checker names the divergence


def test_reference_hashes_replay_from_zero_when_the_log_still_starts_there(
        tmp_path: Path) -> None:
    log_dir = tmp_path / "n"
    write_node(log_dir, LOG, segment_records=1)
    write_snapshot_of(log_dir, LOG, 4)
    snapshot_free = tmp_path / "s"
    shutil.copytree(log_dir, snapshot_free)
    for checkpoint in (snapshot_free / METADATA_PARTITION_DIR).glob("*.checkpoint"):
        checkpoint.unlink()
    assert final.reference_hashes(log_dir, [-1, 2, 6]) == \
        final.reference_hashes(snapshot_free, [-1, 2, 6])


# --- what each node did with snapshots ----------------------------------------------------


def _event(msg: str, **fields: object) -> str:
    return json.dumps({"ts": "t", "level": "INFO", "logger": "x", "msg": msg, **fields})


def test_snapshot_activity_counts_each_nodes_events_and_reads_its_log_start(
        tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path / "c", voters=1, brokers=1)
    voter, broker = cluster.node(1), cluster.node(2)
    voter.log_path.write_text("\n".join([
        _event(final.WROTE_SNAPSHOT), _event(final.ADVANCED_LOG_START),
        "not json", '{"torn', _event(final.WROTE_SNAPSHOT), _event("other")]) + "\n")
    broker.log_path.write_text(_event(final.LOADED_FETCHED) + "\n")
    write_node(Path(voter.data_dir), LOG, segment_records=1)
    write_snapshot_of(Path(voter.data_dir), LOG, 4)
    cut_log(Path(voter.data_dir), 4)
    activity = {n.node_id: n for n in final.snapshot_activity(cluster)}
    assert activity[1] == final.NodeSnapshots(
        node_id=1, written=2, log_start_advances=1, fetched=0, log_start=4,
        first_segment=4, checkpoints=1)
    # the broker's metadata directory is gone (wiped, never restarted)
    assert activity[2] == final.NodeSnapshots(
        node_id=2, written=0, log_start_advances=0, fetched=1, log_start=0,
        first_segment=None, checkpoints=0)


def test_snapshot_events_are_the_messages_the_nodes_log() -> None:
    """The counted messages are those of the code that logs them (a renamed message
    would silently count 0: the chaos run's snapshot error catches that too)."""
    root = Path(__file__).resolve().parents[3]
    assert f'"{final.WROTE_SNAPSHOT}"' in (root / "metadata/snapshot_writer.py").read_text()
    assert f'"{final.ADVANCED_LOG_START}"' in \
        (root / "metadata/snapshot_writer.py").read_text()
    assert f'"{final.LOADED_FETCHED}"' in (root / "tools/server/build.py").read_text()


# --- the chaos command's settings and verdict ------------------------------------------------


@pytest.mark.parametrize("snapshots", [True, False])
def test_nodes_get_the_small_snapshot_settings_unless_turned_off(
        tmp_path: Path, snapshots: bool) -> None:
    rig = chaos._build_rig(tmp_path / "c", seed=1, duration_s=60, voters=3, brokers=3,
                           faults=["kill", "wipe"], snapshots=snapshots)
    try:
        for info in rig.cluster.nodes.values():
            text = Path(info.config).read_text()
            for key in chaos.SNAPSHOT_SETTINGS:
                assert (key in text) == snapshots, (key, text)
        assert all(f.target in (4, 5, 6) for f in rig.nemesis.faults if f.kind == "wipe")
    finally:
        rig.history.close()


def test_no_snapshots_flag_turns_the_settings_off() -> None:
    import argparse
    parser = argparse.ArgumentParser()
    chaos.configure(parser, "chaos")
    assert parser.parse_args(["--cluster", "d"]).snapshots is True
    assert parser.parse_args(["--cluster", "d", "--no-snapshots"]).snapshots is False


def test_a_run_without_snapshot_activity_is_an_error_when_snapshots_are_on() -> None:
    idle = [{"node": 1, "written": 0, "log_start_advances": 0, "fetched": 0}]
    wrote = [{"node": 1, "written": 2, "log_start_advances": 0, "fetched": 0}]
    both = [{"node": 1, "written": 2, "log_start_advances": 1, "fetched": 0}]
    assert chaos._snapshots_unexercised(idle) == [
        "snapshots: no node wrote a snapshot", "snapshots: no node's log start advanced"]
    assert chaos._snapshots_unexercised(wrote) == ["snapshots: no node's log start advanced"]
    assert chaos._snapshots_unexercised(both) == []
    summary = chaos._snapshot_summary(True, both + [{"node": 2, "written": 1,
                                                     "log_start_advances": 1, "fetched": 3}])
    assert (summary["written"], summary["log_start_advances"], summary["fetched"]) == (3, 2, 3)


def test_verdict_text_prints_the_snapshot_counts_and_reproduces_no_snapshots() -> None:
    summary = chaos._snapshot_summary(False, [])
    verdict = chaos._verdict(seed=3, duration_s=60, voters=3, brokers=3, faults=["kill"],
                             injected=[], errors=[], result=None, final=None,
                             replay_result=None, elapsed_s=1.0, snapshots=summary)
    assert verdict["reproduce"].endswith("--faults kill --no-snapshots")
    text = chaos._text(verdict, Path("/d"))
    assert "snapshots      off: 0 written, 0 log start advance(s), 0 fetched" in text
