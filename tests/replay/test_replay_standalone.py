"""`kraft replay --master spark://...` on a real Spark standalone cluster: a master and two
workers (1 core, 512 MiB each), separate JVMs started from pyspark's own distribution
(`$SPARK_HOME/bin/spark-class`, SPARK_HOME the pyspark package directory), replaying the
logs of the real 3-voter + 2-broker run of tests/replay/conftest.py (`real_run`). Its
verdict must equal that run's local[2] one, and each worker must have run an executor
of the replay. Every process the test starts is ended by its PID; the workers' scratch
directory is the test's.

What made it fast enough for `make test` (it took 150-300 s on a loaded 2-core machine,
most of it JVMs starting one after the other; about 11 JVMs in all):
- the logs and their local[2] replay are shared with test_replay_real_run.py, and when
  this test runs alone they are made while the master's JVM starts;
- the driver (`kraft replay`) starts with the workers instead of after them: its JVM
  boots while theirs do, and it waits (`DRIVER_ARGS`) until both workers have given it
  an executor, so the replay still runs on both;
- every JVM here compiles with C1 only and collects with the serial collector
  (`JAVA_OPTIONS`): short-lived JVMs on 2 cores spend much of their start in C2
  compiler and parallel GC threads that compete with the work.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.replay.conftest import TEST_JAVA_OPTIONS, RealRun
from tools.ports import free_ports

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]

HOST = "127.0.0.1"
WORKERS = 2
START_TIMEOUT_S = 240  # a JVM on a loaded 2-core machine: 15-90 s each
REPLAY_TIMEOUT_S = 480
# picked up by every `java` this test starts (spark-class's launcher, the master, the
# workers, the driver, and the executors, which inherit their worker's environment)
JAVA_OPTIONS = TEST_JAVA_OPTIONS
# the driver's Spark settings (PySpark passes PYSPARK_SUBMIT_ARGS to spark-submit): one
# core of each worker, and the SparkContext starts only once both executors registered
DRIVER_ARGS = (f"--conf spark.cores.max={WORKERS} "
               "--conf spark.scheduler.minRegisteredResourcesRatio=1.0 "
               f"--conf spark.scheduler.maxRegisteredResourcesWaitingTime={START_TIMEOUT_S}s "
               "pyspark-shell")


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": HOST,
            "SPARK_LOG_DIR": str(tmp_path / "spark-logs"), "PYSPARK_PYTHON": sys.executable,
            "SPARK_NO_DAEMONIZE": "1", "JDK_JAVA_OPTIONS": JAVA_OPTIONS,
            # no REST submission server: it would take the fixed port 6066
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


class StandaloneCluster:
    """A master and WORKERS workers, each started when asked; `stop` ends every process
    started, workers first (they end their executors)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.port, self.webui, *self.worker_uis = free_ports(2 + WORKERS)
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def _start(self, name: str, args: list[str]) -> None:
        log = open(self.tmp_path / f"{name}.log", "wb")  # noqa: SIM115 (closed with it)
        self.processes.append(subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args], stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, env=_env(self.tmp_path), cwd=self.tmp_path))

    def start_master(self) -> None:
        self._start("master", ["org.apache.spark.deploy.master.Master", "--host", HOST,
                               "--port", str(self.port), "--webui-port", str(self.webui)])

    def wait_for_master(self) -> None:
        # a worker that finds no master retries only 5-15 s later: wait for it first
        self._wait_for(lambda: "New state: ALIVE" in _text(self.tmp_path / "master.log"))

    def start_workers(self) -> None:
        for index, worker_ui in enumerate(self.worker_uis):
            (self.tmp_path / f"work-{index}").mkdir()
            self._start(f"worker-{index}", [
                "org.apache.spark.deploy.worker.Worker", self.url, "--cores", "1",
                "--memory", "512m", "--host", HOST, "--webui-port", str(worker_ui),
                "--work-dir", str(self.tmp_path / f"work-{index}")])

    def registered_workers(self) -> int:
        return sum("Successfully registered with master" in _text(path)
                   for path in self.tmp_path.glob("worker-*.log"))

    def executors_run(self) -> list[int]:
        """Per worker, how many executors it started (a directory per executor under
        its work dir: work-N/<app id>/<executor id>/)."""
        return [len(list((self.tmp_path / f"work-{index}").glob("app-*/*")))
                for index in range(WORKERS)]

    def _wait_for(self, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not condition():
            assert time.monotonic() < deadline, _text(self.tmp_path / "master.log")[-2000:]
            assert all(p.poll() is None for p in self.processes), "a Spark JVM exited"
            time.sleep(0.1)

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.kill(process.pid, signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path)
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
                            env={**_env(tmp_path), "PYSPARK_SUBMIT_ARGS": DRIVER_ARGS})
    assert result.returncode == 0, result.stderr[-3000:]
    assert standalone.registered_workers() == WORKERS
    assert standalone.executors_run() == [1] * WORKERS  # both workers ran the replay
    remote = json.loads(result.stdout)
    assert _verdict(remote) == _verdict(run.local.to_json())
    assert remote["analysis"]["committed_end"] == run.local.analysis.committed_end
    html = (out / "report.html").read_text()
    assert standalone.url in html  # the header names the master it ran on
    assert (out / "records.parquet").is_dir()
