"""`kraft quorum add-controller` when no controller leads (real processes: a dynamic
3-voter quorum with two voters SIGKILLed, the third up alone, a new controller added
by `add-node`): through `--cluster` and `--bootstrap-controller` alike it asks until its
`--timeout`, then prints one line, rc 1; never a hang, never a traceback. Before, the
`--bootstrap-controller` path first waited 10 s for a leader to learn the cluster id,
whatever the timeout, then printed every attempt's problem in one enormous line."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.support.quorum_support import FAST_SETTINGS, kraft
from tests.support.secure_cluster import kill_recorded
from tools.cluster import Cluster
from tools.voter_changes import REQUEST_TIMEOUT_S

pytestmark = pytest.mark.integration

TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def leaderless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster.create(tmp_path_factory.mktemp("leaderless") / "cluster", voters=3,
                             settings=FAST_SETTINGS, dynamic=True)
    try:
        cluster.start()
        cluster.wait_for_leader(20)
        for node_id in (1, 2):  # before add-node: each kill rewrites cluster.json
            cluster.kill(node_id)
        added = kraft("quorum", "add-node", "--cluster", str(cluster.directory))
        assert added.returncode == 0, added.stderr
        yield Cluster.load(cluster.directory)  # with node 4, which add-node started
    finally:
        cluster.kill_all_started()
        kill_recorded(cluster.directory)


@pytest.mark.parametrize("target", ["cluster", "bootstrap-controller"])
def test_add_controller_without_a_leader_gives_up_at_its_timeout_in_one_line(
        leaderless: Cluster, target: str) -> None:
    new = leaderless.node(4)
    where = ["--cluster", str(leaderless.directory), "--node", "4"] if target == "cluster" \
        else ["--bootstrap-controller", f"{leaderless.node(3).controller_address},"
              f"{new.controller_address}", "--config", new.config]
    started = time.monotonic()
    result = kraft("quorum", "add-controller", *where, "--timeout", str(TIMEOUT_S))
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stdout
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: no leader made the change within {TIMEOUT_S:g} s"), line
    assert "not the leader" in line, line
    assert len(line) < 400, line  # each problem once, not once per attempt
    assert elapsed < REQUEST_TIMEOUT_S  # the old path waited this long before asking
