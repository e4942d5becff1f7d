"""What the simulator's cluster hands its invariant checker, faked: nodes with the fields
the checker reads over the simulated disk's logs (`SimLog`, with its ledger), and toy-core
clusters (tests/support/toy_core.py) to test the simulator apart from the real core."""

from __future__ import annotations

from types import SimpleNamespace

from raft.sim.cluster import Cluster, SimConfig
from raft.sim.disk import SimLog
from tests.support.toy_core import ToyConfig, ToyCore


def fake_node(node_id: int, *, voter: bool = True, epoch: int = 1, leader: bool = False,
              leader_id: int | None = None, hw: int | None = 0, role: str = "follower",
              log: SimLog | None = None) -> SimpleNamespace:
    """A `CheckedNode`: id, voter flag, a log and a core with the fields the checker reads."""
    core = SimpleNamespace(epoch=epoch, is_leader=leader, leader_id=leader_id,
                           high_watermark=hw, role="leader" if leader else role)
    return SimpleNamespace(node_id=node_id, is_voter=voter, core=core,
                           log=log if log is not None else SimLog())


def log_with(*batches: tuple[int, list[bytes]], flush: bool = True) -> SimLog:
    """A log of one batch per (epoch, records), flushed unless told otherwise."""
    log = SimLog()
    for epoch, records in batches:
        log.append(epoch, records)
    if flush:
        log.flush()
    return log


def toy_cluster(config: SimConfig, bug: str | None = None) -> Cluster:
    """A cluster of toy cores: voters 1..config.voters, then the observers."""
    voters = tuple(range(1, config.voters + 1))
    nodes = tuple(range(1, config.voters + config.observers + 1))
    return Cluster(config, core_class=ToyCore,
                   core_config=ToyConfig(voters=voters, nodes=nodes, bug=bug))
