"""`kraft quorum start` fails fast and says why, on real processes: ports another
cluster holds, a bad or unknown `--set`, and a node that dies at start. Each failure is
one line naming its cause, rc != 0 within 5 s (10 s for a node that must start and die),
and leaves no node of the new cluster running; the cluster that holds the ports is
untouched."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.quorum_support import FAST_SETTINGS, kraft, running_cluster
from tools.cluster import CLUSTER_FILE, Cluster
from tools.ports import HOST

pytestmark = pytest.mark.integration


def node_processes(directory: Path) -> list[int]:
    """Pids of the processes whose command line names a file under `directory`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(directory) in cmdline:
            found.append(int(proc.name))
    return found


# Half the 30 s `quorum start` waits for a leader: a failure found first must not wait
# (how fast it fails is a benchmark's business, not a test's).
WELL_BEFORE_THE_WAIT_S = 15.0


def timed_start(*args: str) -> tuple[int, str, float]:
    started = time.monotonic()
    result = kraft("quorum", "start", *args, timeout=60)
    return result.returncode, result.stderr.strip(), time.monotonic() - started


@pytest.fixture(scope="module")
def holder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("holder") / "c1", FAST_SETTINGS,
                         voters=1, brokers=0) as started:
        yield started


def test_ports_held_by_another_cluster_fail_at_once(holder: Cluster,
                                                    cli_cluster_dir: Path) -> None:
    port = int(str(holder.node(1).controller_address).rpartition(":")[2])
    code, stderr, elapsed = timed_start("--cluster", str(cli_cluster_dir), "--voters", "3",
                                        "--base-port", str(port))
    assert code == 1
    assert elapsed < WELL_BEFORE_THE_WAIT_S
    (line,) = stderr.splitlines()  # the holder's node 2 may sit on the next port too
    assert line.startswith("error: port")
    assert f"{HOST}:{port} (node 1)" in line
    assert not (cli_cluster_dir / CLUSTER_FILE).exists()
    assert node_processes(cli_cluster_dir) == []
    assert holder.describe()["leader_id"] == 1  # the holder still serves


def test_a_port_taken_since_the_cluster_was_made_fails_before_any_node_starts(
        cli_cluster_dir: Path) -> None:
    made = Cluster.create(cli_cluster_dir, voters=3, settings=FAST_SETTINGS)
    address = str(made.node(2).controller_address)
    with socket.socket() as squatter:
        squatter.bind((HOST, int(address.rpartition(":")[2])))
        squatter.listen()
        code, stderr, elapsed = timed_start("--cluster", str(cli_cluster_dir))
    assert code == 1
    assert elapsed < WELL_BEFORE_THE_WAIT_S
    assert stderr == f"error: port in use by another process: {address} (node 2)"
    assert node_processes(cli_cluster_dir) == []


def test_a_bad_set_value_names_the_key_and_the_value(cli_cluster_dir: Path) -> None:
    code, stderr, elapsed = timed_start(
        "--cluster", str(cli_cluster_dir), "--voters", "1",
        "--set", "controller.quorum.election.timeout.ms=abc")
    assert code == 2
    assert elapsed < WELL_BEFORE_THE_WAIT_S
    assert stderr.splitlines()[-1] == (
        "error: --set 'controller.quorum.election.timeout.ms=abc': "
        "controller.quorum.election.timeout.ms: expected an integer, got 'abc'")
    assert not cli_cluster_dir.exists()


def test_an_unknown_set_key_is_named_with_a_close_one(cli_cluster_dir: Path) -> None:
    code, stderr, _ = timed_start("--cluster", str(cli_cluster_dir), "--voters", "1",
                                  "--set", "controller.quorum.election.timeout=300")
    assert code == 2
    assert "unknown node setting 'controller.quorum.election.timeout' (did you mean " \
        "'controller.quorum.election.timeout.ms'?)" in stderr
    assert not cli_cluster_dir.exists()


def test_a_node_that_dies_at_start_stops_the_start_with_its_error(
        cli_cluster_dir: Path) -> None:
    # valid alone, refused by the node against the election timeout's default (1000)
    code, stderr, elapsed = timed_start(
        "--cluster", str(cli_cluster_dir), "--voters", "3", "--timeout", "30",
        "--set", "controller.quorum.fetch.timeout.ms=500")
    assert code == 1, stderr
    assert elapsed < WELL_BEFORE_THE_WAIT_S
    (line,) = stderr.splitlines()
    assert re.match(r"error: node [123] exited with code 2: ", line), line
    assert "controller.quorum.fetch.timeout.ms: must not be below " \
        "controller.quorum.election.timeout.ms" in line
    assert line.endswith("the cluster's nodes are stopped")
    assert node_processes(cli_cluster_dir) == []
