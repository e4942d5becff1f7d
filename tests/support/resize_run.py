"""A resize run: ordered producers and consumers as real processes while a topic's
partition count changes, then the per-key order check (tests/support/order_check.py).

Used by the end-to-end tests and by the resize benchmark. Every process is a `kraft`
subprocess started here and ended here, by PID; every wait is bounded.

    producers: kraft produce --ordered --json  (keys `p<i>-key-<k>`, values 0, 1, ...)
    consumers: kraft consume --ordered --json  (one group)
    resizes:   kraft topics --alter --partitions N, each once every producer has had
               `records_per_step` more records acknowledged under the previous count

Each output line is stamped with the time it was read (`seen_ms`), so the run can say
how long a resize paused the producers and the consumers.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.client.order_check import OrderReport, check_outputs


class RunError(RuntimeError):
    """The run could not be carried out (a command failed, a wait timed out)."""


def kraft_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "tools.cli", *args]


class OutputProcess:
    """A `kraft` subprocess whose JSON stdout lines are collected, each stamped with the
    wall-clock millisecond it was read."""

    def __init__(self, name: str, args: Sequence[str], log_dir: Path) -> None:
        self.name = name
        self.stderr_path = log_dir / f"{name}.stderr"
        self._stderr = self.stderr_path.open("w")
        self.process = subprocess.Popen(kraft_command(*args), stdout=subprocess.PIPE,
                                        stderr=self._stderr, text=True)
        self.rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            row["seen_ms"] = time.time() * 1000
            with self._lock:
                self.rows.append(row)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.rows)

    def count(self) -> int:
        with self._lock:
            return len(self.rows)

    def stop(self, timeout_s: float = 20.0) -> int:
        """SIGTERM, then SIGKILL after `timeout_s`; the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._reader.join(5)
        self._stderr.close()
        return self.process.returncode

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)

    def stderr_tail(self, lines: int = 5) -> str:
        try:
            return "\n".join(self.stderr_path.read_text().splitlines()[-lines:])
        except OSError:
            return ""

    def failure(self) -> str:
        """Why it failed: a `--json` command prints its error as a JSON line on stdout."""
        errors = [str(row["error"]) for row in self.snapshot() if "error" in row]
        return "\n".join(errors) or self.stderr_tail()


@dataclass(frozen=True, slots=True, kw_only=True)
class ResizeRunConfig:
    cluster_dir: Path
    topic: str
    counts: tuple[int, ...] = (2, 3, 4, 8, 5, 3)  # the first is the created count
    producers: int = 3
    keys_per_producer: int = 8
    unkeyed_per_producer: int = 0  # records without a key in every keys + unkeyed
    consumers: int = 2
    group: str = "ordered-group"
    gates: bool = True
    rate: float = 60.0  # records per second per producer
    records_per_step: int = 40  # acks per producer between two resizes
    process_delay_ms: int = 0  # consumers' per-record processing time (builds a backlog)
    replication_factor: int = 3
    topic_configs: tuple[str, ...] = ()  # KEY=VALUE set on the topic once created
    step_timeout_s: float = 60.0
    drain_timeout_s: float = 90.0


@dataclass(slots=True)
class ResizeRunResult:
    report: OrderReport
    resize_ms: list[float] = field(default_factory=list)  # when each resize was accepted
    produced: list[list[dict[str, Any]]] = field(default_factory=list)
    consumed: list[list[dict[str, Any]]] = field(default_factory=list)
    exit_codes: dict[str, int] = field(default_factory=dict)


Hook = Callable[[int, "ResizeRun"], None]


class ResizeRun:
    """One run; `hooks[i]` (optional) is called just before resize i (i from 1), e.g. to
    kill a controller mid-resize."""

    def __init__(self, config: ResizeRunConfig, log_dir: Path) -> None:
        self.config = config
        self.log_dir = log_dir
        self.producers: list[OutputProcess] = []
        self.consumers: list[OutputProcess] = []

    def topics(self, *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(kraft_command("topics", "--cluster", str(self.config.cluster_dir),
                                            *args), capture_output=True, text=True,
                              timeout=timeout_s)

    def start_consumer(self, index: int) -> OutputProcess:
        c = self.config
        args = ["consume", "--cluster", str(c.cluster_dir), "--topic", c.topic,
                "--group", c.group, "--ordered", "--json", "--duration", "600"]
        if not c.gates:
            args.append("--no-gates")
        if c.process_delay_ms:
            args += ["--process-delay-ms", str(c.process_delay_ms)]
        consumer = OutputProcess(f"consumer-{index}", args, self.log_dir)
        self.consumers.append(consumer)
        return consumer

    def run(self, hooks: dict[int, Hook] | None = None) -> ResizeRunResult:
        c = self.config
        hooks = hooks or {}
        created = self.topics("--create", "--topic", c.topic, "--partitions", str(c.counts[0]),
                              "--replication-factor", str(c.replication_factor), "--ordered")
        # A failover can lose the answer to a create that committed; the CLI's retry then
        # reads TOPIC_ALREADY_EXISTS. The name is this run's own: the topic at the asked
        # count is the one it created.
        if created.returncode != 0 and self.undeleted_count() != c.counts[0]:
            raise RunError(f"create {c.topic}: {created.stderr.strip()}")
        if c.topic_configs:
            altered = subprocess.run(kraft_command(
                "configs", "--cluster", str(c.cluster_dir), "--entity-type", "topics",
                "--entity-name", c.topic, "--alter", "--add-config", ",".join(c.topic_configs)),
                capture_output=True, text=True, timeout=60)
            if altered.returncode != 0:
                raise RunError(f"configs of {c.topic}: {altered.stderr.strip()}")
        result = ResizeRunResult(report=OrderReport())
        try:
            for index in range(c.consumers):
                self.start_consumer(index)
            for index in range(c.producers):
                self.producers.append(OutputProcess(f"producer-{index}", [
                    "produce", "--cluster", str(c.cluster_dir), "--topic", c.topic,
                    "--ordered", "--keys", str(c.keys_per_producer),
                    "--unkeyed", str(c.unkeyed_per_producer),
                    "--key-prefix", f"p{index}-key-", "--count", "1000000",
                    "--rate", str(c.rate), "--json"], self.log_dir))
            for step, count in enumerate(c.counts[1:], start=1):
                self._wait_for_progress()
                if step in hooks:
                    hooks[step](step, self)
                self._alter(count)
                result.resize_ms.append(time.time() * 1000)
            self._wait_for_progress()
            for producer in self.producers:
                result.exit_codes[producer.name] = producer.stop()
            result.produced = [p.snapshot() for p in self.producers]
            self._drain(result.produced)
        finally:
            for process in [*self.producers, *self.consumers]:
                if process.name not in result.exit_codes:
                    result.exit_codes[process.name] = process.stop()
        result.consumed = [p.snapshot() for p in self.consumers]
        result.report = check_outputs(result.produced, result.consumed)
        return result

    def _alter(self, count: int) -> None:
        """Resize to `count`; after a failed attempt (a controller failover makes the CLI
        fail for a moment) the describe tells whether the resize committed anyway."""
        deadline = time.monotonic() + self.config.step_timeout_s
        while True:
            altered = self.topics("--alter", "--topic", self.config.topic,
                                  "--partitions", str(count))
            if altered.returncode == 0 or self.undeleted_count() == count:
                return
            if time.monotonic() > deadline:
                raise RunError(f"alter to {count} partitions: {altered.stderr.strip()}")
            time.sleep(0.5)

    def describe(self) -> dict[str, Any] | None:
        """The topic as `kraft topics --describe --json` shows it (None: not answered)."""
        described = self.topics("--describe", "--topic", self.config.topic, "--json")
        if described.returncode != 0:
            return None
        topic: dict[str, Any] = json.loads(described.stdout)["topics"][0]
        return topic

    def undeleted_count(self) -> int | None:
        topic = self.describe()
        return None if topic is None else int(topic["undeleted_partition_count"])

    def wait_for_removal(self, timeout_s: float) -> float:
        """Until every partition marked for deletion is removed (emptied by retention or
        DeleteRecords); the seconds it took."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            topic = self.describe()
            if topic is not None and not any(p["marked_for_deletion"]
                                             for p in topic["partitions"]):
                return time.monotonic() - start
            time.sleep(0.2)
        raise RunError(f"marked partitions of {self.config.topic} not removed within "
                       f"{timeout_s} s: {self.describe()}")

    def _wait_for_progress(self) -> None:
        """Until every live producer has `records_per_step` more acknowledged records."""
        start = [p.count() for p in self.producers]
        deadline = time.monotonic() + self.config.step_timeout_s
        while any(p.count() < s + self.config.records_per_step
                  for p, s in zip(self.producers, start, strict=True)):
            for p in self.producers:
                if p.process.poll() is not None:
                    raise RunError(f"{p.name} exited {p.process.returncode}: "
                                   f"{p.failure()}")
            if time.monotonic() > deadline:
                raise RunError("producers made no progress within "
                               f"{self.config.step_timeout_s} s")
            time.sleep(0.05)

    def _drain(self, produced: list[list[dict[str, Any]]]) -> None:
        """Until the consumers have delivered every acknowledged record (or the drain
        timeout passes: the check then reports what is missing)."""
        wanted = {(row["key"], row["value"]) for rows in produced for row in rows}
        deadline = time.monotonic() + self.config.drain_timeout_s
        while time.monotonic() < deadline:
            delivered = {(row["key"], row["value"])
                         for consumer in self.consumers for row in consumer.snapshot()}
            if wanted <= delivered:
                return
            time.sleep(0.2)


def write_outputs(result: ResizeRunResult, directory: Path) -> None:
    """Each process's rows as JSON lines, for a look after a failure."""
    directory.mkdir(parents=True, exist_ok=True)
    for kind, outputs in (("producer", result.produced), ("consumer", result.consumed)):
        for index, rows in enumerate(outputs):
            with open(directory / f"{kind}-{index}.jsonl", "w") as out:
                for row in rows:
                    out.write(json.dumps(row) + "\n")
