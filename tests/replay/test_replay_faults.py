"""The replay's checks have teeth: a clean cluster passes, and each planted fault is
caught by the check responsible for it (tools/replay/checks.py, crossnode.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from metadata.records import (
    LeaderChange,
    Partition,
    PartitionChange,
    Record,
    RemoveTopic,
    Topic,
    decode,
)
from raft.common.uuid import Uuid
from raft.types import Batch
from tests.support.synthetic_logs import replace_record
from tests.support.synthetic_logs import write_cluster as write_cluster_files
from tools.cli import main
from tools.replay.checkpoint import write_checkpoint

pytestmark = pytest.mark.spark


def _records(batches: list[Batch]) -> list[tuple[int, int, Record]]:
    return [(b.base_offset + i, b.epoch, decode(r))
            for b in batches for i, r in enumerate(b.records)]


def _first(batches: list[Batch], kind: type[Record], after: int = -1) -> tuple[int, int, Record]:
    return next(e for e in _records(batches) if isinstance(e[2], kind) and e[0] > after)


def _failed_except(result, allowed: set[str]) -> set[str]:  # type: ignore[no-untyped-def]
    return set(result.failed) - allowed


def test_replay_passes_when_copies_agree_and_one_follower_lags(replay, base_log, tmp_path):
    """A lagging follower is a shorter copy of the same log: every check passes, and the
    analysis reports its lag, every epoch's leader and the recreated names."""
    out = tmp_path / "report"
    result = replay({1: base_log, 2: base_log, 3: base_log[:-4]}, analysis=True, out_dir=out)
    assert result.passed, result.failed
    nodes = {n["node"]: n for n in result.analysis.nodes}
    assert nodes[3]["lag"] > 0
    assert nodes[1]["lag"] == 0
    assert result.analysis.committed_end == nodes[1]["end_offset"]
    epochs = {e["epoch"]: e["leader_id"] for e in result.analysis.leader_timeline}
    assert epochs == {b.epoch: [1, 2, 3][b.epoch % 3] if b.epoch > 1 else 1
                      for b in base_log}
    assert any(len(r["offsets"]) > 1 for r in result.analysis.recreated_names)
    assert result.check("broker_checkpoints").skipped
    summary = json.loads((out / "report.json").read_text())
    assert summary["passed"] is True
    page = (out / "report.html").read_text()
    assert "data:image/png;base64," in page
    assert (out / "records.parquet").is_dir()
    # the header: cluster id, when, kraft-py's version and the Spark master
    run = summary["run"]
    assert run["spark_master"] == "local[2]"
    assert run["version"]
    assert run["time"].endswith("+00:00")
    assert "Spark master <b>local[2]</b>" in page
    assert f"kraft-py <b>{run['version']}</b>" in page


def test_log_matching_fails_when_a_record_is_flipped_on_one_node(replay, base_log):
    """Raft §5.3 Log Matching: same (offset, epoch) on two nodes => same bytes."""
    offset, _, record = _first(base_log, PartitionChange, after=100)
    assert isinstance(record, PartitionChange)
    flipped = replace_record(base_log, offset, PartitionChange(
        topic_id=record.topic_id, partition=record.partition, leader=99))
    result = replay({1: base_log, 2: flipped, 3: base_log})
    check = result.check("log_matching")
    assert not check.passed
    assert any(e["offset"] == offset and 2 in e["nodes"] for e in check.examples)
    assert result.check("one_leader_per_epoch").passed


def test_one_leader_per_epoch_fails_when_two_leaders_claim_an_epoch(replay, base_log):
    """Raft: one leader per epoch; a second LeaderChange naming another leader in the
    same epoch is a split brain."""
    offset, epoch, _ = _first(base_log, PartitionChange, after=200)
    leader = next(r.leader_id for _, e, r in _records(base_log)
                  if isinstance(r, LeaderChange) and e == epoch)
    rival = next(v for v in (1, 2, 3) if v != leader)
    split = replace_record(base_log, offset, LeaderChange(leader_id=rival, voters=(1, 2, 3)))
    result = replay({1: split, 2: split, 3: split})
    check = result.check("one_leader_per_epoch")
    assert check.violations == 2  # both LeaderChange records of that epoch
    assert {e["record"]["leader_id"] for e in check.examples} == {leader, rival}
    assert _failed_except(result, {"one_leader_per_epoch"}) == set()


def test_topic_ids_valid_fails_when_a_removed_topic_id_is_reused(replay, base_log):
    """Topic IDs: a topic ID is never reused, even after its topic is deleted."""
    removed_at, _, removal = _first(base_log, RemoveTopic)
    assert isinstance(removal, RemoveTopic)
    offset, _, _ = _first(base_log, PartitionChange, after=removed_at)
    reused = replace_record(base_log, offset, Topic(name="reborn", topic_id=removal.topic_id))
    result = replay({1: reused, 2: reused, 3: reused})
    check = result.check("topic_ids_valid")
    assert check.violations == 1
    assert check.examples[0]["offset"] == offset
    assert sorted(check.examples[0]["nodes"]) == [1, 2, 3]


def test_records_name_live_topic_fails_when_a_partition_names_a_deleted_topic(replay, base_log):
    """Topic IDs: a topic is gone once its RemoveTopic commits; nothing may name it after."""
    removed_at, _, removal = _first(base_log, RemoveTopic)
    assert isinstance(removal, RemoveTopic)
    offset, _, _ = _first(base_log, PartitionChange, after=removed_at)
    ghost = replace_record(base_log, offset, Partition(
        topic_id=removal.topic_id, partition=0, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1))
    result = replay({1: ghost, 2: ghost, 3: ghost})
    check = result.check("records_name_live_topic")
    assert [e["offset"] for e in check.examples] == [offset]
    assert _failed_except(result, {"records_name_live_topic"}) == set()


def test_name_one_live_id_fails_when_a_live_name_is_created_again(replay, base_log):
    """Topic IDs: at any offset a name maps to at most one live topic ID."""
    created_at, _, topic = _first(base_log, Topic)
    assert isinstance(topic, Topic)
    offset, _, _ = _first(base_log, PartitionChange, after=created_at)
    twin = replace_record(base_log, offset, Topic(name=topic.name,
                                                  topic_id=Uuid.random(random.Random(3))))
    result = replay({1: twin, 2: twin, 3: twin})
    check = result.check("name_one_live_id")
    assert [e["offset"] for e in check.examples] == [offset]


def test_committed_prefix_fails_when_a_later_epoch_overwrites_a_committed_record(
        replay, base_log):
    """Raft §5.4 Leader Completeness: a record held by a majority is never replaced by a
    leader of a later epoch."""
    cut = base_log[-6].base_offset
    late = max(b.epoch for b in base_log) + 1
    rewritten = [b for b in base_log if b.base_offset < cut] + [
        Batch(base_offset=cut, epoch=late, records=(
            LeaderChange(leader_id=3, voters=(1, 2, 3)).encode(),))]
    result = replay({1: base_log, 2: base_log, 3: rewritten})
    check = result.check("committed_prefix")
    assert [(e["offset"], e["nodes"]) for e in check.examples] == [(cut, [3])]
    assert result.check("log_matching").passed


def test_committed_prefix_passes_when_a_follower_holds_a_stale_older_epoch_tail(
        replay, base_log):
    """A follower that missed an election may still hold records of an older epoch
    where the majority has newer ones, until its leader truncates them: legal."""
    last_epoch = base_log[-1].epoch
    cut = next(b.base_offset for b in base_log if b.epoch == last_epoch)
    topic_id = _first(base_log, Partition)[2].topic_id  # type: ignore[attr-defined]
    stale = [b for b in base_log if b.base_offset < cut] + [
        Batch(base_offset=cut, epoch=last_epoch - 1, records=(
            PartitionChange(topic_id=topic_id, partition=0, leader=2).encode(),))]
    result = replay({1: base_log, 2: base_log, 3: stale})
    assert result.check("committed_prefix").passed


def test_broker_checkpoints_fail_when_a_hash_is_wrong(replay, base_log):
    """Each broker's checkpointed image equals the image replayed from the controller's
    log at the same offset: a right hash passes, a wrong one names its broker."""
    from metadata.delta import replay_bytes

    applied = 150
    entries = [(b.base_offset + i, r) for b in base_log for i, r in enumerate(b.records)
               if b.base_offset + i <= applied]
    right = replay_bytes(entries).content_hash()

    def brokers(root: Path) -> None:
        for broker, digest in ((4, right), (5, "0" * 64)):
            log_dir = root / f"broker-{broker}" / "data"
            log_dir.mkdir(parents=True)
            write_checkpoint(log_dir, applied, digest)

    result = replay({1: base_log, 2: base_log, 3: base_log}, prepare=brokers)
    check = result.check("broker_checkpoints")
    assert not check.skipped
    assert [(e["nodes"], e["offset"]) for e in check.examples] == [([5], applied)]
    assert _failed_except(result, {"broker_checkpoints"}) == set()


def test_replay_exits_2_naming_file_and_byte_when_a_segment_is_corrupt(
        spark, base_log, tmp_path, capsys):
    """A bad CRC before the tail (raft/segment.py) is an error naming file and offset."""
    root = write_cluster_files(tmp_path / "c", {1: base_log, 2: base_log, 3: base_log},
                               segment_records=100)
    segment = sorted((root / "node-2" / "data" / "__cluster_metadata-0").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    data[200] ^= 0xFF
    segment.write_bytes(bytes(data))
    code = main(["replay", "--cluster", str(root)])
    err = capsys.readouterr().err
    assert code == 2
    assert segment.name in err
    assert "corrupt batch at byte" in err


def test_replay_exits_1_naming_the_failed_check_when_a_fault_is_planted(
        spark, base_log, tmp_path, capsys):
    """The command's verdict: exit 1 and a summary naming each failed check."""
    removed_at, _, removal = _first(base_log, RemoveTopic)
    offset, _, _ = _first(base_log, PartitionChange, after=removed_at)
    ghost = replace_record(base_log, offset, PartitionChange(
        topic_id=removal.topic_id, partition=0, leader=1))  # type: ignore[attr-defined]
    root = write_cluster_files(tmp_path / "c", {1: ghost, 2: ghost, 3: ghost})
    code = main(["replay", "--cluster", str(root), "--json"])
    captured = capsys.readouterr()
    assert code == 1
    assert json.loads(captured.out)["failed"] == ["records_name_live_topic"]
    assert "records_name_live_topic" in captured.err


def test_replay_exits_2_naming_the_file_when_a_segment_is_unreadable(
        spark, base_log, tmp_path, capsys):
    """The executors open the segment files themselves: one they cannot read (here a
    directory where a segment should be) is bad input, exit 2 naming it."""
    root = write_cluster_files(tmp_path / "c", {1: base_log, 2: base_log, 3: base_log},
                               segment_records=100)
    segment = sorted((root / "node-3" / "data" / "__cluster_metadata-0").glob("*.log"))[-1]
    segment.unlink()
    segment.mkdir()
    code = main(["replay", "--cluster", str(root)])
    err = capsys.readouterr().err
    assert code == 2
    assert segment.name in err
    assert "unreadable segment" in err
