"""`kraft replay --master spark://...` on a real Spark standalone cluster: a master and two
workers (1 core, 512 MiB each), separate JVMs started from pyspark's own distribution
(`$SPARK_HOME/bin/spark-class`, SPARK_HOME the pyspark package directory), replaying the
logs of a real 3-voter + 1-broker run. Its verdict must equal the local[2] one. Every
process the test starts is ended by its PID; the workers' scratch directory is the
test's."""

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

from tests.support.quorum_support import FAST_SETTINGS
from tools.cluster import Cluster, free_ports
from tools.replay.inputs import from_cluster
from tools.replay.job import run_replay

# Behind `soak` (make soak), not in make test: three more JVMs (master, two workers, and
# their executors) take 40-150 s on the shared 2-core machine before the replay starts,
# over the ~60 s a default-suite test may cost.
pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.soak,
              pytest.mark.timeout(900)]

HOST = "127.0.0.1"
WORKERS = 2
START_TIMEOUT_S = 240  # a JVM on a loaded 2-core machine: 15-90 s each


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": HOST,
            "SPARK_LOG_DIR": str(tmp_path / "spark-logs"), "PYSPARK_PYTHON": sys.executable,
            "SPARK_NO_DAEMONIZE": "1",
            # no REST submission server: it would take the fixed port 6066
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}


def _start(name: str, args: list[str], tmp_path: Path) -> subprocess.Popen[bytes]:
    log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            env=_env(tmp_path), cwd=tmp_path)


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _registered_workers(tmp_path: Path) -> int:
    return sum("Successfully registered with master" in _text(path)
               for path in tmp_path.glob("worker-*.log"))


def _wait_for(condition: Callable[[], bool], processes: list[subprocess.Popen[bytes]],
              tmp_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, _text(tmp_path / "master.log")[-2000:]
        assert all(p.poll() is None for p in processes), "a Spark JVM exited"
        time.sleep(0.3)


@pytest.fixture
def run_logs(tmp_path: Path) -> Path:
    """The logs of a real run, stopped: before the Spark JVMs start, not beside them."""
    cluster = Cluster.create(tmp_path / "run", voters=3, brokers=1, settings=FAST_SETTINGS)
    try:
        cluster.start()
        cluster.wait_for_leader(30)
        cluster.wait_for_brokers(30)
        cluster.append(60, batch=6)
    finally:
        cluster.shut_down()
        cluster.kill_all_started()
    return cluster.directory


@pytest.fixture
def standalone(run_logs: Path, tmp_path: Path) -> Iterator[str]:
    """spark://127.0.0.1:PORT with WORKERS registered workers."""
    port, webui, *worker_uis = free_ports(2 + WORKERS)
    processes = [_start("master", ["org.apache.spark.deploy.master.Master", "--host", HOST,
                                   "--port", str(port), "--webui-port", str(webui)], tmp_path)]
    try:
        _wait_for(lambda: "New state: ALIVE" in _text(tmp_path / "master.log"), processes,
                  tmp_path)
        for index, worker_ui in enumerate(worker_uis):
            (tmp_path / f"work-{index}").mkdir()
            processes.append(_start(f"worker-{index}", [
                "org.apache.spark.deploy.worker.Worker", f"spark://{HOST}:{port}",
                "--cores", "1", "--memory", "512m", "--host", HOST,
                "--webui-port", str(worker_ui), "--work-dir", str(tmp_path / f"work-{index}")],
                tmp_path))
        _wait_for(lambda: _registered_workers(tmp_path) == WORKERS, processes, tmp_path)
        yield f"spark://{HOST}:{port}"
    finally:
        for process in reversed(processes):  # workers first: they end their executors
            if process.poll() is None:
                os.kill(process.pid, signal.SIGTERM)
        for process in reversed(processes):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def _verdict(result: dict[str, Any]) -> dict[str, Any]:
    return {"passed": result["passed"], "failed": result["failed"],
            "records": result["records"],
            "checks": {c["name"]: (c["passed"], c["violations"], c.get("skipped"))
                       for c in result["checks"]}}


def test_replay_on_a_standalone_cluster_matches_local(
        run_logs: Path, standalone: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    root = run_logs
    out = tmp_path / "report"
    command = [sys.executable, "-m", "tools.cli", "replay", "--cluster",
               os.path.relpath(root), "--master", standalone, "--out", os.path.relpath(out),
               "--executor-memory", "512m", "--json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=480)
    assert result.returncode == 0, result.stderr[-3000:]
    remote = json.loads(result.stdout)
    spark = request.getfixturevalue("spark")  # local[2], once the standalone run is done
    local = run_replay(spark, from_cluster(root), with_analysis=True)
    assert local.passed
    assert _verdict(remote) == _verdict(local.to_json())
    assert remote["analysis"]["committed_end"] == local.analysis.committed_end
    html = (out / "report.html").read_text()
    assert standalone in html  # the header names the master it ran on
    assert (out / "records.parquet").is_dir()
