"""A plain `pip install .` (no extras) runs a cluster: `kraft quorum start`, `kraft topics`
and every `kraft node` they start, with pyspark, matplotlib and the Kafka clients hidden
from every process (a `sitecustomize` on PYTHONPATH sets them to None in sys.modules,
so importing one raises ImportError as a missing package does)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.quorum_support import FAST_SETTINGS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

HIDDEN = ("pyspark", "matplotlib", "kafka", "confluent_kafka")
ROOT = Path(__file__).resolve().parents[2]


def test_a_cluster_runs_and_serves_topics_without_the_extras(
        cli_cluster_dir: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in HIDDEN))
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(site), str(ROOT),
                                                       os.environ.get("PYTHONPATH")]))}

    def kraft(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tools.cli", *args], env=env,
                              capture_output=True, text=True, timeout=60, cwd=ROOT)

    hidden = kraft("replay", "--cluster", str(cli_cluster_dir))  # the hiding works
    assert hidden.returncode == 2
    assert "[replay] extra" in hidden.stderr
    directory = str(cli_cluster_dir)
    settings = [a for key, value in FAST_SETTINGS.items() for a in ("--set", f"{key}={value}")]
    started = kraft("quorum", "start", "--cluster", directory, "--voters", "1", "--brokers",
                    "1", *settings)
    assert started.returncode == 0, started.stdout + started.stderr
    created = kraft("topics", "--cluster", directory, "--create", "--topic", "plain",
                    "--partitions", "2", "--replication-factor", "1")
    assert created.returncode == 0, created.stderr
    described = kraft("topics", "--cluster", directory, "--describe", "--topic", "plain")
    assert described.returncode == 0, described.stderr
    assert "PartitionCount: 2" in described.stdout
    stopped = kraft("quorum", "stop", "--cluster", directory)
    assert stopped.returncode == 0, stopped.stderr
    for log in cli_cluster_dir.glob("node-*/node.log"):
        assert "Traceback" not in log.read_text(), log
