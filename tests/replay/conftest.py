"""One SparkSession (local[2], no UI, two shuffle partitions) for the whole replay suite,
helpers that build synthetic clusters with `tests.support.synthetic_logs`, and the logs of one
real multi-process run with their local[2] replay, shared by test_replay_real_run.py and
test_replay_standalone.py (one cluster run and one local replay for both)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.kafka.partitions import log_start_checkpoint
from broker.kafka.replication.hw_checkpoint import CHECKPOINT_FILE as HIGH_WATERMARK_FILE
from raft.types import Batch
from tests.support.synthetic_logs import metadata_log, write_cluster
from tools.replay.acknowledged import read_history
from tools.replay.inputs import from_cluster
from tools.replay.job import ReplayResult, run_replay

# The tests' JVMs compile with C1 only and collect with the serial collector: their jobs
# are short, and on 2 cores C2 compiler and parallel GC threads compete with the work (a
# local replay with its report took 25 s instead of 34 s so). `kraft replay` keeps the
# JVM's defaults, for long replays.
TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from tools.replay.load import spark_session

    session = spark_session("local[2]", shuffle_partitions=2, app_name="kraft-replay-tests",
                            java_options=TEST_JAVA_OPTIONS)
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


# Old `quorum.*` key names on purpose (their deprecated spelling still works); brokers
# heartbeat every 200 ms so they are unfenced soon after the start.
REAL_RUN_SETTINGS = {
    "quorum.election.timeout.ms": 300, "quorum.fetch.timeout.ms": 600,
    "quorum.election.backoff.max.ms": 200, "quorum.request.timeout.ms": 400,
    "quorum.fetch.max.wait.ms": 150, "broker.heartbeat.interval.ms": 200,
    "broker.session.timeout.ms": 9000}


@dataclass(frozen=True, slots=True)
class RealRun:
    """A stopped 3-voter + 2-broker run: `orders` created (`first`), deleted by ID and
    created again (`second`), 70 appended records, `PRODUCED` records produced with
    acks=all to each partition of the second `orders` (the acknowledged writes in
    `history`, `kraft replay --history`'s format); `local` is its local[2] replay with
    that history."""

    directory: Path
    first: dict[str, Any]
    second: dict[str, Any]
    local: ReplayResult
    history: Path


PRODUCED = 3  # records per partition, in one batch


def _produce(directory: Path, partition: int) -> list[str]:
    """`PRODUCED` values to `orders-<partition>` with acks=all; their history lines."""
    values = [f"p{partition}-v{n}" for n in range(PRODUCED)]
    result = subprocess.run([sys.executable, "-m", "tools.cli", "produce", "--cluster",
                             str(directory), "--topic", "orders", "--partition",
                             str(partition), "--acks", "all", "--timeout", "30", "--json",
                             *values], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    base = json.loads(result.stdout)["base_offset"]
    return [json.dumps({"topic": "orders", "partition": partition, "offset": base + n,
                        "value": base64.b64encode(value.encode()).decode()})
            for n, value in enumerate(values)]


def _topics(directory: Path, *args: str) -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-m", "tools.cli", "topics", "--cluster",
                             str(directory), *args, "--json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _create_when_brokers_registered(directory: Path) -> dict[str, Any]:
    """Topic creation needs unfenced brokers; retry the (idempotent-in-effect) request
    while they register, bounded by a deadline."""
    deadline = time.monotonic() + 30
    while True:
        result = subprocess.run([sys.executable, "-m", "tools.cli", "topics", "--cluster",
                                 str(directory), "--create", "--topic", "orders",
                                 "--partitions", "3", "--replication-factor", "2", "--json"],
                                capture_output=True, text=True, timeout=60)
        if result.returncode == 0 or time.monotonic() > deadline:
            assert result.returncode == 0, result.stderr
            return json.loads(result.stdout)  # type: ignore[no-any-return]
        time.sleep(0.2)


def _wait_for_high_watermarks(directory: Path, brokers: Sequence[int]) -> None:
    """Until every broker checkpointed each `orders` partition at `PRODUCED` (a follower
    learns the high watermark on its next fetch, and checkpoints it within a second),
    bounded by a deadline: so both replicas are compared up to the produced records."""
    expected = {("orders", p): PRODUCED for p in range(3)}
    deadline = time.monotonic() + 20
    while any(log_start_checkpoint.read(directory / f"node-{b}" / "data",
                                        HIGH_WATERMARK_FILE) != expected for b in brokers):
        assert time.monotonic() < deadline, "the brokers never checkpointed the produce"
        time.sleep(0.1)


@pytest.fixture(scope="session")
def real_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> RealRun:
    from tools.cluster import Cluster

    cluster = Cluster.create(tmp_path_factory.mktemp("real-run") / "run", voters=3,
                             brokers=2, settings=REAL_RUN_SETTINGS)
    try:
        cluster.start()
        cluster.wait_for_leader(20)
        cluster.append(50, batch=5)
        first = _create_when_brokers_registered(cluster.directory)
        _topics(cluster.directory, "--delete", "--topic-id", first["topic_id"])
        second = _create_when_brokers_registered(cluster.directory)
        acknowledged = [line for p in range(3) for line in _produce(cluster.directory, p)]
        _wait_for_high_watermarks(cluster.directory, (4, 5))
        cluster.append(20, batch=5)
    finally:
        cluster.shut_down()
        cluster.kill_all_started()
    history = cluster.directory / "acknowledged.jsonl"
    history.write_text("\n".join(acknowledged) + "\n", encoding="utf-8")
    local = run_replay(spark, from_cluster(cluster.directory), with_analysis=True,
                       history=read_history(history))
    return RealRun(directory=cluster.directory, first=first, second=second, local=local,
                   history=history)
