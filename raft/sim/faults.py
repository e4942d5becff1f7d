"""Random fault schedules: network faults (partitions, one-way cuts, an isolated leader,
lossy and duplicating links) and process faults (crashes, leader crashes, graceful
leader shutdowns, several nodes down at once). Every fault is undone by `window_ms`, when
the network heals and every node is running again."""

from __future__ import annotations

import random
from collections.abc import Callable

from raft.sim.cluster import Cluster

FAULT_KINDS = ("all", "net", "crash", "none")
NET_FAULTS = ("partition", "isolate-leader", "one-way", "lossy", "partial", "slow-net")
CRASH_FAULTS = ("crash", "crash-leader", "shutdown-leader", "crash-many", "pause",
                "pause-leader", "slow-disk")


def schedule_faults(cluster: Cluster, kind: str, window_ms: float) -> float:
    """Plan faults in [0, window_ms) and a full heal at `window_ms`; returns the time the
    last fault heals (0 when there are none)."""
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r}, expected one of {FAULT_KINDS}")
    if kind == "none":
        return 0.0
    rng = cluster.fault_rng
    menu = {"all": NET_FAULTS + CRASH_FAULTS, "net": NET_FAULTS, "crash": CRASH_FAULTS}[kind]
    for _ in range(rng.randint(1, 6)):
        name = rng.choice(menu)
        start = rng.uniform(0, window_ms * 0.8)
        end = min(window_ms, start + rng.uniform(200, window_ms * 0.6))
        inject, undo = _fault(cluster, rng, name)
        cluster.at_ms(start, _counted(cluster, inject), name)
        cluster.at_ms(end, undo, f"end {name}")
    cluster.at_ms(window_ms, lambda: heal_all(cluster), "heal all")
    return window_ms


def heal_all(cluster: Cluster) -> None:
    cluster.network.heal()
    for node_id, node in cluster.nodes.items():
        node.disk.slowdown = 1.0
        if not node.up:
            cluster.start(node_id)
        elif node.paused:
            cluster.resume(node_id)


def _counted(cluster: Cluster, inject: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        cluster.faults += 1
        inject()
    return run


def _fault(cluster: Cluster, rng: random.Random,
           name: str) -> tuple[Callable[[], None], Callable[[], None]]:
    ids = sorted(cluster.nodes)
    net = cluster.network
    added: set[tuple[int, int]] = set()

    def cutting(make_cuts: Callable[[], None]) -> Callable[[], None]:
        def inject() -> None:
            before = net.cut_links
            make_cuts()
            added.update(net.cut_links - before)
        return inject

    def restore_links() -> None:
        for src, dst in added:
            net.restore(src, dst, both_ways=False)

    if name == "partition":
        side = [i for i in ids if rng.random() < 0.5]
        return cutting(lambda: net.partition(side, [i for i in ids if i not in side])), \
            restore_links
    if name == "isolate-leader":
        return cutting(lambda: net.isolate(_leader_or_random(cluster, rng), ids)), \
            restore_links
    if name == "one-way":
        victim, outbound = rng.choice(ids), rng.random() < 0.5
        return cutting(lambda: net.isolate(victim, ids, inbound=not outbound,
                                           outbound=outbound)), restore_links
    if name == "partial":
        links = [(a, b) for a in ids for b in ids if a < b and rng.random() < 0.4]

        def cut_links() -> None:
            for a, b in links:
                net.cut(a, b)
        return cutting(cut_links), restore_links
    if name == "lossy":
        loss, dup = rng.uniform(0.05, 0.5), rng.uniform(0.0, 0.2)

        def lossy() -> None:
            net.loss_probability, net.duplicate_probability = loss, dup

        def clean() -> None:
            net.loss_probability = net.config.loss_probability
            net.duplicate_probability = net.config.duplicate_probability
        return lossy, clean
    if name == "slow-net":
        factor = rng.uniform(10, 150)  # messages take ~30 ms to over a second

        def congest() -> None:
            net.slowdown = factor

        def clear() -> None:
            net.slowdown = 1.0
        return congest, clear
    victims: list[int] = []
    if name in ("pause", "pause-leader"):
        def pause() -> None:
            victim = (_leader_or_random(cluster, rng) if name == "pause-leader"
                      else rng.choice(ids))
            victims.append(victim)
            cluster.pause(victim)

        def resume() -> None:
            for node_id in victims:
                cluster.resume(node_id)
        return pause, resume
    if name == "slow-disk":
        victim, factor = rng.choice(ids), rng.uniform(20, 300)

        def slow() -> None:
            cluster.nodes[victim].disk.slowdown = factor

        def fast() -> None:
            cluster.nodes[victim].disk.slowdown = 1.0
        return slow, fast

    def restart() -> None:
        for node_id in victims:
            cluster.start(node_id)

    if name == "crash":
        victims.append(rng.choice(ids))
        return lambda: cluster.crash(victims[0]), restart
    if name == "crash-many":
        victims.extend(rng.sample(ids, rng.randint(2, max(2, len(ids)))) if len(ids) > 1
                       else ids)

        def crash_many() -> None:
            for victim in victims:
                cluster.crash(victim)
        return crash_many, restart
    if name in ("crash-leader", "shutdown-leader"):
        graceful = name == "shutdown-leader"

        def crash_leader() -> None:
            victim = _leader_or_random(cluster, rng)
            victims.append(victim)
            if graceful:
                cluster.resign(victim)
                cluster.at_ms(cluster.now_ms + 30, lambda: cluster.crash(victim),
                              f"stop n{victim}")
            else:
                cluster.crash(victim)
        return crash_leader, restart
    raise ValueError(f"unknown fault {name!r}")


def _leader_or_random(cluster: Cluster, rng: random.Random) -> int:
    leader = cluster.leader_id()
    return leader if leader is not None else rng.choice(sorted(cluster.nodes))
