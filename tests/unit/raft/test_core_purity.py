"""The core is pure: no trio, socket, os or time, no module-level `random`
functions; randomness and the clock come in from outside. And KIP-996 in a small
cluster: pre-vote keeps a partially partitioned node from disrupting a live leader."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.core_harness import Cluster

CORE_MODULES = ["core/__init__", "core/_base", "core/_election", "core/_replication",
                "core/_raft_core", "core/_topic_id", "core/_quorum_state",
                "core/_leader_state", "messages"]
FORBIDDEN_IMPORTS = {"trio", "socket", "os", "time", "asyncio", "threading", "datetime"}
RAFT = Path(__file__).resolve().parents[3] / "raft"


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_no_io_clock_or_global_random_when_loaded(module: str) -> None:
    """The core never imports trio, socket, os or time, and never calls the
    module-level `random` functions (an injected `random.Random` only)."""
    tree = ast.parse((RAFT / f"{module}.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names = {(node.module or "").split(".")[0]}
            if node.module == "random":
                pytest.fail(f"{module} imports names from random: {ast.dump(node)}")
        else:
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "random" and node.attr != "Random"):
                pytest.fail(f"{module} calls random.{node.attr}")
            continue
        assert not names & FORBIDDEN_IMPORTS, f"{module} imports {names & FORBIDDEN_IMPORTS}"


def _kip996_partition(cluster: Cluster, leader: int) -> None:
    """KIP-996's example: only links 1-3, 2-4, 3-4, 3-5, 4-5 up, the leader playing 3."""
    others = [n for n in (1, 2, 3, 4, 5) if n != leader]
    role = dict(zip((1, 2, 4, 5), others, strict=True)) | {3: leader}
    up = {frozenset((role[a], role[b])) for a, b in ((1, 3), (2, 4), (3, 4), (3, 5), (4, 5))}
    for a in range(1, 6):
        for b in range(a + 1, 6):
            if frozenset((a, b)) not in up:
                cluster.cut.add(frozenset((a, b)))


@pytest.mark.parametrize("seed", range(3))
def test_partial_partition_never_changes_leader_when_pre_vote_is_on(seed: int) -> None:
    """KIP-996: a node that cannot reach the leader but can reach a follower of it gets no
    pre-vote majority, so the live leader keeps its epoch."""
    cluster = Cluster((1, 2, 3, 4, 5), seed=seed)
    leader = cluster.elect()
    epoch = leader.epoch
    _kip996_partition(cluster, leader.node_id)
    cluster.run(30_000)
    assert cluster.leaders() == [leader.node_id]
    assert max(core.epoch for core in cluster.cores.values()) == epoch


def test_partial_partition_disrupts_the_leader_when_pre_vote_is_off() -> None:
    """The control for the test above: without pre-vote the isolated node's campaigns
    bump the epoch (the disruption KIP-996 removes)."""
    cluster = Cluster((1, 2, 3, 4, 5), seed=0, pre_vote=False)
    leader = cluster.elect()
    epoch = leader.epoch
    _kip996_partition(cluster, leader.node_id)
    cluster.run(30_000)
    assert max(core.epoch for core in cluster.cores.values()) > epoch
