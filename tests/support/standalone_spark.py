"""A Spark standalone cluster on 127.0.0.1 for the replay: a master and WORKERS workers
(1 core each), separate JVMs started from pyspark's own distribution
(`$SPARK_HOME/bin/spark-class`, SPARK_HOME the pyspark package directory), each started
when asked and every one ended by its PID (`stop`). Used by
tests/replay/test_replay_standalone.py and bench/replay_scale_bench.py.

A driver joins it with `driver_args()` in PYSPARK_SUBMIT_ARGS (PySpark passes them to
spark-submit): one core of each worker, and its SparkContext starts only once every
worker has given it an executor, so the replay runs on all of them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tools.ports import free_ports

HOST = "127.0.0.1"
WORKERS = 2
START_TIMEOUT_S = 240  # a JVM on a loaded 2-core machine: 15-90 s each


def driver_args(workers: int = WORKERS) -> str:
    return (f"--conf spark.cores.max={workers} "
            "--conf spark.scheduler.minRegisteredResourcesRatio=1.0 "
            f"--conf spark.scheduler.maxRegisteredResourcesWaitingTime={START_TIMEOUT_S}s "
            "pyspark-shell")


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


class StandaloneCluster:
    """A master and WORKERS workers; `stop` ends every process started, workers first
    (they end their executors). `java_options` reach every `java` started with `env()`
    (spark-class's launcher, the master, the workers, a driver started with it, and the
    executors, which inherit their worker's environment)."""

    def __init__(self, directory: Path, *, java_options: str = "",
                 worker_memory: str = "512m") -> None:
        self.directory = directory
        self.java_options = java_options
        self.worker_memory = worker_memory
        self.port, self.webui, *self.worker_uis = free_ports(2 + WORKERS)
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment of the cluster's JVMs, and of a driver that joins it."""
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": HOST,
               "SPARK_LOG_DIR": str(self.directory / "spark-logs"),
               "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1",
               # no REST submission server: it would take the fixed port 6066
               "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
        if self.java_options:
            env["JDK_JAVA_OPTIONS"] = self.java_options
        return env

    def _start(self, name: str, args: list[str]) -> None:
        log = open(self.directory / f"{name}.log", "wb")  # noqa: SIM115 (closed with it)
        self.processes.append(subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args], stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, env=self.env(), cwd=self.directory))

    def start_master(self) -> None:
        self._start("master", ["org.apache.spark.deploy.master.Master", "--host", HOST,
                               "--port", str(self.port), "--webui-port", str(self.webui)])

    def wait_for_master(self) -> None:
        # a worker that finds no master retries only 5-15 s later: wait for it first
        self._wait_for(lambda: "New state: ALIVE" in _text(self.directory / "master.log"))

    def start_workers(self) -> None:
        for index, worker_ui in enumerate(self.worker_uis):
            (self.directory / f"work-{index}").mkdir()
            self._start(f"worker-{index}", [
                "org.apache.spark.deploy.worker.Worker", self.url, "--cores", "1",
                "--memory", self.worker_memory, "--host", HOST, "--webui-port",
                str(worker_ui), "--work-dir", str(self.directory / f"work-{index}")])

    def registered_workers(self) -> int:
        return sum("Successfully registered with master" in _text(path)
                   for path in self.directory.glob("worker-*.log"))

    def executors_run(self) -> list[int]:
        """Per worker, how many executors it started (a directory per executor under
        its work dir: work-N/<app id>/<executor id>/)."""
        return [len(list((self.directory / f"work-{index}").glob("app-*/*")))
                for index in range(WORKERS)]

    def _wait_for(self, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not condition():
            assert time.monotonic() < deadline, _text(self.directory / "master.log")[-2000:]
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
