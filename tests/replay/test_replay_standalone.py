"""`kraft replay --master spark://...` on a real Spark standalone cluster: a master and two
workers (1 core, 512 MiB each), separate JVMs started from pyspark's own distribution
(tests/support/standalone_spark.py), replaying the logs of the real 3-voter + 2-broker
run of tests/replay/conftest.py (`real_run`). Its verdict must equal that run's local[2]
one, and each worker must have run an executor of the replay. Every process the test
starts is ended by its PID; the workers' scratch directory is the test's.

What made it fast enough for `make test` (it took 150-300 s on a loaded 2-core machine,
most of it JVMs starting one after the other; about 11 JVMs in all):
- the logs and their local[2] replay are shared with test_replay_real_run.py, and when
  this test runs alone they are made while the master's JVM starts;
- the driver (`kraft replay`) starts with the workers instead of after them: its JVM
  boots while theirs do, and it waits (`driver_args`) until both workers have given it
  an executor, so the replay still runs on both;
- every JVM here compiles with C1 only and collects with the serial collector
  (`JAVA_OPTIONS`): short-lived JVMs on 2 cores spend much of their start in C2
  compiler and parallel GC threads that compete with the work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.replay.conftest import TEST_JAVA_OPTIONS, RealRun
from tests.support.standalone_spark import WORKERS, StandaloneCluster, driver_args

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]

REPLAY_TIMEOUT_S = 480
# picked up by every `java` this test starts (spark-class's launcher, the master, the
# workers, the driver, and the executors, which inherit their worker's environment)
JAVA_OPTIONS = TEST_JAVA_OPTIONS


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path, java_options=JAVA_OPTIONS)
    try:
        yield cluster
    finally:
        cluster.stop()


def _verdict(result: dict[str, Any]) -> dict[str, Any]:
    return {"passed": result["passed"], "failed": result["failed"],
            "records": result["records"],
            "checks": {c["name"]: (c["passed"], c["violations"], c.get("skipped"))
                       for c in result["checks"]}}


def test_replay_on_a_standalone_cluster_matches_local(
        standalone: StandaloneCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    standalone.start_master()
    run: RealRun = request.getfixturevalue("real_run")  # made (if not yet) as it starts
    assert run.local.passed
    standalone.wait_for_master()
    standalone.start_workers()
    out = tmp_path / "report"
    command = [sys.executable, "-m", "tools.cli", "replay", "--cluster",
               os.path.relpath(run.directory), "--master", standalone.url, "--out",
               os.path.relpath(out), "--executor-memory", "512m", "--shuffle-partitions",
               "2", "--history", os.path.relpath(run.history), "--json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=REPLAY_TIMEOUT_S,
                            env={**standalone.env(), "PYSPARK_SUBMIT_ARGS": driver_args()})
    assert result.returncode == 0, result.stderr[-3000:]
    assert standalone.registered_workers() == WORKERS
    assert standalone.executors_run() == [1] * WORKERS  # both workers ran the replay
    remote = json.loads(result.stdout)
    assert _verdict(remote) == _verdict(run.local.to_json())
    assert remote["analysis"]["committed_end"] == run.local.analysis.committed_end
    html = (out / "report.html").read_text()
    assert standalone.url in html  # the header names the master it ran on
    assert (out / "records.parquet").is_dir()
