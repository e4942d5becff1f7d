"""One SparkSession (local[2], no UI, two shuffle partitions) for the whole replay suite,
and helpers that build synthetic clusters with `tools.replay.synthetic`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from raft.types import Batch
from tools.replay.inputs import from_cluster
from tools.replay.job import ReplayResult, run_replay
from tools.replay.synthetic import metadata_log, write_cluster


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from tools.replay.load import spark_session

    session = spark_session("local[2]", shuffle_partitions=2, app_name="kraft-replay-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def base_log() -> list[Batch]:
    """About 300 records over five epochs with topics created, changed, deleted and
    their names reused."""
    return metadata_log(records=300, seed=7)


Replay = Callable[..., ReplayResult]


@pytest.fixture
def replay(spark: Any, tmp_path: Path) -> Replay:
    """replay({node: batches}, voters=..., analysis=False, high_watermarks=None) ->
    ReplayResult. Without `high_watermarks` (node -> checkpoint) no node has a
    high-watermark checkpoint: the committed prefix is the majority rule's."""

    def run(logs: dict[int, Sequence[Batch]], *, voters: Sequence[int] | None = (1, 2, 3),
            analysis: bool = False, out_dir: Path | None = None,
            prepare: Callable[[Path], None] | None = None,
            high_watermarks: dict[int, int] | None = None) -> ReplayResult:
        root = write_cluster(tmp_path / "cluster", logs, voters=voters, segment_records=100,
                             high_watermarks=high_watermarks)
        if prepare is not None:
            prepare(root)
        return run_replay(spark, from_cluster(root), out_dir=out_dir, with_analysis=analysis)

    return run
