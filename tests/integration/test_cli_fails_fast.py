"""Every verb fails fast and in one line where a newcomer trips: a cluster whose nodes
are not running (every address refuses the connection) is rc 1 at once, not after its
timeout (each verb is given an hour, and must end within the harness's guard: only the
refusal can end it); a closed stdout (`kraft ... | head`) and an unwritable `--out` are no
traceback. Real processes of the CLI on 127.0.0.1, against a cluster that was made and
never started (nothing listens on its ports)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.quorum_support import kraft
from tests.support.synthetic_logs import metadata_log, write_cluster
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

# A verb waits this long for a cluster that never answers; the harness kills it long
# before (how fast a refusal ends a call is cli_bench's business, not a test's).
PATIENCE = ("--timeout", "3600")
GUARD_S = 120.0


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cluster = Cluster.create(tmp_path_factory.mktemp("stopped") / "c", voters=1, brokers=1)
    return cluster.directory


@pytest.mark.parametrize(("verb", "expected"), [
    (["topics", "--list"], "error: DescribeTopics: every address refused the connection"),
    (["configs", "--entity-type", "topics", "--entity-name", "t", "--describe"],
     "error: DescribeTopics: every address refused the connection"),
    (["users", "--describe"],
     "error: DescribeUserScramCredentials: every address refused the connection"),
    (["produce", "--topic", "t", "v"], "error: every broker refused the connection"),
    (["consume", "--topic", "t"], "error: consume t in group console-consumer-"),
    (["quorum", "append", "--count", "1"],
     "error: append failed: every address refused the connection"),
])
def test_a_stopped_cluster_fails_at_once(stopped: Path, verb: list[str],
                                         expected: str) -> None:
    split = 2 if verb[0] == "quorum" else 1  # quorum's action comes before --cluster
    patience = ("--duration", "3600") if verb[0] == "consume" else PATIENCE
    result = kraft(*verb[:split], "--cluster", str(stopped), *verb[split:], *patience,
                   timeout=GUARD_S)
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(expected)


@pytest.mark.parametrize("verb", [["topics", "--list"], ["users", "--describe"],
                                  ["quorum", "describe", "--status"]])
def test_brokers_that_refuse_fail_at_once(stopped: Path, verb: list[str]) -> None:
    broker = Cluster.load(stopped).node(2).client_address
    assert broker is not None
    result = kraft(*verb, "--bootstrap-server", broker, *PATIENCE, timeout=GUARD_S)
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.endswith(f"every broker refused the connection: {broker} "
                         "(is the cluster running?)")


def test_a_closed_stdout_is_no_traceback() -> None:
    process = subprocess.Popen([sys.executable, "-m", "tools.cli", "config-keys", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.close()  # before the verb writes: its first write meets a closed pipe
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=30) == 1
    assert stderr == ""


def test_an_unwritable_report_directory_fails_before_the_spark_job(tmp_path: Path) -> None:
    logs = write_cluster(tmp_path / "logs", {1: metadata_log(records=20, voters=(1,))})
    result = kraft("replay", "--cluster", str(logs), "--out", "/proc/nope/report")
    assert result.returncode == 2
    # the one line, nothing a Spark session's start would print before it
    assert result.stderr.strip() == "error: --out /proc/nope/report: No such file or directory"
