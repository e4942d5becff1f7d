"""Replay of the logs a real multi-process run wrote (tools.cluster): 3 voters and 2
brokers, a topic created, deleted by ID and its name recreated, records produced with
acks=all to each of its partitions, then the cluster stopped and every node's log (and
every broker's partition logs, with the acknowledged writes) replayed (the `real_run`
fixture, tests/replay/conftest.py, which test_replay_standalone.py replays again on a
Spark standalone cluster)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from broker.kafka.partitions import log_start_checkpoint
from broker.kafka.replication.hw_checkpoint import CHECKPOINT_FILE
from tests.replay.conftest import PRODUCED, RealRun
from tools.replay.inputs import from_cluster
from tools.replay.job import run_replay
from tools.replay.views import run_query

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(180)]


def test_replay_passes_when_logs_come_from_a_real_cluster_run(real_run: RealRun) -> None:
    """The replay (tools/replay/job.py): logs of a real run (elections, broker
    registration, a topic deleted and its name reused with a new ID) pass every check,
    the committed prefix taken from the high-watermark checkpoints the nodes wrote."""
    first, second, result = real_run.first, real_run.second, real_run.local
    assert second["topic_id"] != first["topic_id"]
    assert result.passed, [c.to_json() for c in result.checks if not c.passed]
    assert result.replay_input.voters == (1, 2, 3)
    recreated = {r["name"]: r for r in result.analysis.recreated_names}
    assert recreated["orders"]["old_ids"] == [first["topic_id"]]
    assert recreated["orders"]["current_id"] == second["topic_id"]
    assert result.analysis.committed_end > 70
    # the nodes' high-watermark checkpoints, written on their graceful stop, decide it
    assert "from high-watermark checkpoints" in result.check("committed_prefix").note
    checkpoints = [n.high_watermark for n in result.replay_input.nodes]
    assert None not in checkpoints
    assert result.analysis.committed_end == max(h for h in checkpoints if h is not None)


def test_partition_checks_pass_on_the_brokers_data_after_real_produce_traffic(
        real_run: RealRun) -> None:
    """The brokers checkpointed every partition's high watermark
    (broker/kafka/replication/hw_checkpoint.py; the run waited for it), both replicas of
    each partition of `orders` were compared below it, and every acknowledged write was
    found there."""
    result = real_run.local
    for broker in (4, 5):
        marks = log_start_checkpoint.read(real_run.directory / f"node-{broker}" / "data",
                                          CHECKPOINT_FILE)
        assert marks == {("orders", p): PRODUCED for p in range(3)}
    agree = result.check("partition-replicas-agree")
    assert agree.passed
    assert not agree.skipped
    assert agree.counts["partitions_compared"] == 3
    assert agree.counts["batches_compared"] == 3
    assert result.check("partition-offsets-contiguous").counts == {"replicas": 6,
                                                                   "batches": 6}
    assert result.check("partition-epochs-match-metadata").passed
    acknowledged = result.check("acknowledged-writes-present")
    assert acknowledged.passed
    assert acknowledged.counts["checked"] == 3 * PRODUCED


def test_the_real_runs_batches_carry_the_leaders_times_when_replayed_as_views(
        real_run: RealRun, spark: Any) -> None:
    """Real nodes stamp their batches (raft/core via the node's clock): every epoch and
    every broker event of the run has a wall-clock time from the last few minutes, in log
    order, and the topic's story reads create, delete, create."""
    run_replay(spark, from_cluster(real_run.directory), views=True)
    now_ms = int(time.time() * 1000)
    _, epochs = run_query(spark, "SELECT start_ms FROM leadership ORDER BY epoch")
    _, events = run_query(spark, "SELECT time_ms FROM broker_sessions ORDER BY offset")
    times = [row[0] for row in epochs + events]
    assert times
    assert all(t is not None and now_ms - 600_000 < t <= now_ms for t in times)
    assert [row[0] for row in epochs] == sorted(row[0] for row in epochs)
    _, story = run_query(spark, "SELECT event, time_ms FROM topic_lifecycle "
                                "WHERE name = 'orders' ORDER BY offset")
    assert [event for event, _ in story] == ["create", "delete", "create"]
    assert [t for _, t in story] == sorted(t for _, t in story)
