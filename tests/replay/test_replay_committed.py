"""committed_prefix from the nodes' high-watermark checkpoints (exact, Raft §5.4.2) and
its fallback, the majority rule, when no node wrote one (tools.replay.checks)."""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from metadata.records import LeaderChange, RegisterBroker
from raft.common.uuid import Uuid
from raft.storage import HIGH_WATERMARK_CHECKPOINT
from raft.types import Batch
from tools.replay import METADATA_DIR
from tools.replay.inputs import from_cluster
from tools.replay.job import ReplayResult, run_replay

pytestmark = pytest.mark.spark

Replay = Callable[..., ReplayResult]  # the `replay` fixture (conftest)
VOTERS = (1, 2, 3)


def _leader_of(epoch: int) -> int:
    """The leader `synthetic.metadata_log` gives an epoch."""
    return VOTERS[0] if epoch == 1 else VOTERS[epoch % len(VOTERS)]


def _leader_change(offset: int, epoch: int, leader: int) -> Batch:
    return Batch(base_offset=offset, epoch=epoch,
                 records=(LeaderChange(leader_id=leader, voters=VOTERS).encode(),))


def test_committed_prefix_passes_when_a_majority_holds_an_older_epoch_record_not_yet_committed(
        replay: Replay, base_log: list[Batch], spark: Any, tmp_path: Path) -> None:
    """Raft §5.4.2, Figure 8: the leader of epoch E appends X at offset o and fails; M,
    leader of E+1, writes its LeaderChange at o and fails; the old leader, re-elected in
    E+2, copies X to F, so a majority holds X, but X is not committed until a record of
    E+2 is (its LeaderChange at o+1 reached no one). M may still win E+3 and overwrite X.
    The checkpoints (every node's HW is o) say so: no violation. The majority rule,
    without checkpoints, flags M's record: the false positive the checkpoints remove."""
    o = base_log[-1].next_offset
    epoch = base_log[-1].epoch
    leader = _leader_of(epoch)
    newer, follower = (n for n in VOTERS if n != leader)
    x = Batch(base_offset=o, epoch=epoch, records=(RegisterBroker(
        broker_id=9, incarnation_id=Uuid.random(random.Random(9)), broker_epoch=o).encode(),))
    logs = {leader: [*base_log, x, _leader_change(o + 1, epoch + 2, leader)],
            follower: [*base_log, x],
            newer: [*base_log, _leader_change(o, epoch + 1, newer)]}

    exact = replay(logs, high_watermarks=dict.fromkeys(VOTERS, o))
    check = exact.check("committed_prefix")
    assert check.passed, check.examples
    assert "from high-watermark checkpoints" in check.note
    assert exact.analysis.committed_end == o
    assert exact.passed, exact.failed

    root = tmp_path / "cluster"  # what `replay` wrote: drop the checkpoints, replay again
    for node in VOTERS:
        (root / f"node-{node}" / "data" / METADATA_DIR / HIGH_WATERMARK_CHECKPOINT).unlink()
    fallback = run_replay(spark, from_cluster(root), with_analysis=False).check(
        "committed_prefix")
    assert "committed prefix from majority: no high-watermark checkpoints" in fallback.note
    assert "majority" in fallback.description
    assert [(e["offset"], e["nodes"]) for e in fallback.examples] == [(o, [newer])]


def test_committed_prefix_fails_when_a_later_epoch_overwrites_a_checkpointed_record(
        replay: Replay, base_log: list[Batch], tmp_path: Path) -> None:
    """Raft §5.4 Leader Completeness: node 1 checkpointed its whole log as committed,
    yet nodes 2 and 3 (a majority) replaced its last records with a later epoch's. The
    majority rule takes node 1's copy for a stale tail; the checkpoint shows it was
    committed."""
    cut = base_log[-6].base_offset
    late = max(b.epoch for b in base_log) + 1
    rewritten = [*(b for b in base_log if b.base_offset < cut), _leader_change(cut, late, 3)]
    logs = {1: base_log, 2: rewritten, 3: rewritten}

    result = replay(logs, high_watermarks={1: base_log[-1].next_offset, 2: cut, 3: cut})
    check = result.check("committed_prefix")
    assert [(e["offset"], e["nodes"]) for e in check.examples] == [(cut, [2, 3])]
    assert "epoch" in check.examples[0]["reason"]

    shutil.rmtree(tmp_path / "cluster")
    assert replay(logs).check("committed_prefix").passed  # what the majority rule misses


def test_committed_prefix_fails_when_checkpoints_commit_different_records_or_a_log_is_short(
        replay: Replay, base_log: list[Batch]) -> None:
    """Two nodes whose checkpoints cover offset o hold different records there (one of
    them an older epoch, which the stale-tail allowance would otherwise excuse); and a
    node whose log ends below its own checkpoint lost committed records."""
    cut = base_log[-6].base_offset
    old = base_log[0].epoch
    forked = [*(b for b in base_log if b.base_offset < cut), _leader_change(cut, old, 1)]
    end = base_log[-1].next_offset
    result = replay({1: base_log, 2: base_log[:-8], 3: forked},
                    high_watermarks={1: end, 2: end, 3: cut + 1})
    check = result.check("committed_prefix")
    reasons = {(e["offset"], tuple(e["nodes"])): e["reason"] for e in check.examples}
    assert set(reasons) == {(cut, (1,)), (cut, (3,)), (base_log[-8].base_offset, (2,))}
    assert "different committed records" in reasons[(cut, (3,))]
    assert "committed records lost" in reasons[(base_log[-8].base_offset, (2,))]


def test_committed_prefix_passes_when_a_follower_below_its_checkpoint_holds_a_stale_tail(
        replay: Replay, base_log: list[Batch]) -> None:
    """A follower that missed an election holds an older epoch's record where the
    committed log has a newer one, above its own checkpoint: legal until truncated."""
    last_epoch = base_log[-1].epoch
    cut = next(b.base_offset for b in base_log if b.epoch == last_epoch)
    stale = [*(b for b in base_log if b.base_offset < cut),
             _leader_change(cut, last_epoch - 1, _leader_of(last_epoch - 1))]
    end = base_log[-1].next_offset
    result = replay({1: base_log, 2: base_log, 3: stale},
                    high_watermarks={1: end, 2: end - 3, 3: cut})
    check = result.check("committed_prefix")
    assert check.passed, check.examples
    assert "from high-watermark checkpoints" in check.note

