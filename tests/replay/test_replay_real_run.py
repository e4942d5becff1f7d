"""Replay of the logs a real multi-process run wrote (tools.cluster): 3 voters and 2
brokers, a topic created, deleted by ID and its name recreated, then the cluster stopped
and every node's log replayed (the `real_run` fixture, tests/replay/conftest.py, which
test_replay_standalone.py replays again on a Spark standalone cluster)."""

from __future__ import annotations

import pytest

from tests.replay.conftest import RealRun

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
