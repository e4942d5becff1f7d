"""`kraft chaos` stopped by SIGTERM or SIGINT while its kafka-python producers run (a real
process, its own real cluster): one line on stderr, exit 143 or 130, no traceback and no
"Exception ignored" from kafka-python's exit handlers, and every node it started is
stopped (`cli_cluster_dir` SIGKILLs by pid any it left behind)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.cluster import Cluster, is_alive

pytestmark = pytest.mark.integration

PRODUCING_WAIT_S = 120  # cluster start, topic setup and the consumer group's members
STOP_WAIT_S = 90  # members stopped, faults healed, six nodes shut down


def kafka_python_produced(history: Path) -> bool:
    """Whether a kafka-python producer of the workload has an answer in the history."""
    if not history.is_file():
        return False
    for line in history.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:  # the line being written
            continue
        if event["process"].startswith("producer-") and event["type"] != "invoke":
            return True
    return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_chaos_run_prints_one_line_and_exits_with_the_signal(
        cli_cluster_dir: Path, signum: signal.Signals) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", "chaos", "--cluster", str(cli_cluster_dir),
         "--duration", "300", "--seed", "5", "--faults", "", "--skip-replay"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + PRODUCING_WAIT_S
        while not kafka_python_produced(cli_cluster_dir / "history.jsonl"):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "no kafka-python produce answered"
            time.sleep(0.2)
        process.send_signal(signum)
        out, err = process.communicate(timeout=STOP_WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert (process.returncode, err) == (128 + signum, f"chaos: stopped by {signum.name}\n")
    assert out.startswith("chaos: seed 5")
    cluster = Cluster.load(cli_cluster_dir)
    assert [n.id for n in cluster.nodes.values() if is_alive(n.pid, n.config)] == []
