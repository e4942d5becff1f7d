"""The partition checks inside the whole replay (tools/replay/job.py) and `kraft replay
--history` (tools/commands/replay.py), on synthetic clusters with broker partition data
(tests/support/partition_data.py): they run after the metadata checks, a planted
divergence fails only its check, and a bad history file is exit 2 before any Spark job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.partition_data import (
    StoredWrite,
    clean_log,
    history_line,
    write_partition_cluster,
)
from tools.cli import main
from tools.replay.acknowledged import read_history
from tools.replay.inputs import from_cluster
from tools.replay.job import run_replay

pytestmark = [pytest.mark.spark, pytest.mark.timeout(120)]

PARTITION_CHECKS = ["partition-replicas-agree", "partition-offsets-contiguous",
                    "partition-epochs-match-metadata", "acknowledged-writes-present"]


def test_the_replay_runs_the_partition_checks_after_the_metadata_ones(
        spark: Any, tmp_path: Path) -> None:
    log = clean_log()
    diverged = [*log[:5], StoredWrite(10, 1, ((b"k1", b"x"), (b"k2", b"y")))]
    root = write_partition_cluster(tmp_path / "c", {4: log, 5: diverged},
                                   high_watermarks={4: 12, 5: 12})
    history = tmp_path / "acked.jsonl"
    history.write_text(history_line(0, b"v0", key=b"k0") + "\n", encoding="utf-8")
    result = run_replay(spark, from_cluster(root), with_analysis=False,
                        history=read_history(history))
    names = [c.name for c in result.checks]
    assert names[-4:] == PARTITION_CHECKS
    assert result.failed == ["partition-replicas-agree"]
    assert result.check("acknowledged-writes-present").counts["checked"] == 1
    assert "partitions" in result.seconds


def test_a_bad_history_file_is_exit_2_naming_its_line(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    root = write_partition_cluster(tmp_path / "c", {4: clean_log()}, high_watermarks={4: 12})
    history = tmp_path / "acked.jsonl"
    history.write_text('{"topic": "orders"}\n', encoding="utf-8")
    assert main(["replay", "--cluster", str(root), "--history", str(history)]) == 2
    assert "acked.jsonl, line 1: " in capsys.readouterr().err
