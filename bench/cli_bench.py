"""Wall time of the `kraft` verbs an operator runs most, start to exit, against a running
3-voter + 1-broker plaintext cluster on 127.0.0.1.

    python -m bench cli_bench

Each verb is a new process (the installed `kraft` script, as a user runs it), so the time
is the interpreter's start, the imports the verb takes, one round trip to the cluster and
the exit: `kraft quorum describe --cluster D --status` and `kraft topics --cluster D
--describe` (one topic of 3 partitions, created before the clock starts). Median over
`RUNS` runs each, against a target of `TARGET_MS`, twice: with the bytecode cached, as an
installed `kraft` starts (pip compiles it; here the children keep theirs under a temporary
PYTHONPYCACHEPREFIX, after one untimed run per verb), and compiled at every start, as
under PYTHONDONTWRITEBYTECODE=1 (a source tree that may not write `__pycache__`). Beside
the wall time, each verb's CPU time (user + system, of the process): on a busy host the
wall time stretches with the load, the CPU time much less.
Bounded: every run by `RUN_TIMEOUT_S` (`WARM_UP_TIMEOUT_S` the untimed one), the
cluster's start by `START_TIMEOUT_S`; only the nodes it started are stopped, by pid.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.stats import verdict
from tools.cluster import Cluster

RUNS = 10
TARGET_MS = 150.0
RUN_TIMEOUT_S = 10.0
WARM_UP_TIMEOUT_S = 60.0  # the run that compiles every module the verb imports
START_TIMEOUT_S = 30.0


def kraft_command() -> list[str]:
    """The `kraft` console script beside this interpreter, else `python -m tools.cli`."""
    script = Path(sys.executable).parent / "kraft"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tools.cli"]


def bytecode_env(cache_dir: Path | None) -> dict[str, str]:
    """The children's environment: bytecode kept under `cache_dir`, or never written."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    if cache_dir is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = str(cache_dir)
    return env


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str], env: dict[str, str] | None = None,
             timeout_s: float = RUN_TIMEOUT_S) -> tuple[float, float]:
    """(wall, CPU) seconds of one verb, from spawn to exit; raises if it fails."""
    cpu_before = _children_cpu_s()
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False, env=env)
    measured = time.perf_counter() - started, _children_cpu_s() - cpu_before
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: "
                           f"{done.stderr.decode(errors='replace').strip()}")
    return measured


def main() -> None:
    kraft = kraft_command()
    with tempfile.TemporaryDirectory(prefix="cli-bench-") as directory:
        cluster = Cluster.create(Path(directory) / "cluster", voters=3, brokers=1)
        try:
            cluster.start()
            cluster.wait_for_leader(START_TIMEOUT_S)
            cluster.wait_for_brokers(START_TIMEOUT_S)
            where = ["--cluster", str(cluster.directory)]
            run_once(kraft + ["topics", *where, "--create", "--topic", "bench",
                              "--partitions", "3", "--replication-factor", "1"],
                     timeout_s=WARM_UP_TIMEOUT_S)
            verbs = {"kraft quorum describe --status": ["quorum", "describe", *where,
                                                         "--status"],
                     "kraft topics --describe": ["topics", *where, "--describe"]}
            modes = {"bytecode cached": Path(directory) / "pycache",
                     "compiled at start": None}
            for mode, cache_dir in modes.items():
                env = bytecode_env(cache_dir)
                for name, argv in verbs.items():
                    run_once(kraft + argv, env, WARM_UP_TIMEOUT_S)  # fills the cache
                    runs = [run_once(kraft + argv, env) for _ in range(RUNS)]
                    walls = [wall * 1000 for wall, _ in runs]
                    median_ms = statistics.median(walls)
                    cpu_ms = statistics.median(cpu * 1000 for _, cpu in runs)
                    print(f"{name:30s} {mode:17s}: wall median {median_ms:6.1f} ms "
                          f"(min {min(walls):6.1f}, max {max(walls):6.1f}), CPU median "
                          f"{cpu_ms:6.1f} ms; {RUNS} runs, start to exit; target < "
                          f"{TARGET_MS:.0f} ms wall: {verdict(median_ms < TARGET_MS)}")
        finally:
            cluster.shut_down(timeout_s=5)


if __name__ == "__main__":
    main()
