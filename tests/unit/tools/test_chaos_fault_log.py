"""The nemesis's fault log (tools/chaos/nemesis.py, FAULT_LOG_FILE): a line per fault as
it ends, on the wall clock, in the format `kraft replay --faults` reads
(tools/replay/faults.py). Real files and a formatted cluster that never starts: a
slow-disk fault only writes its node's fault file, and a fault aimed at the leader finds
none."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tools.chaos.nemesis import LEADER, Fault, Nemesis, wall_ms
from tools.cluster import Cluster
from tools.replay.faults import read_faults

RUN_S = 20.0  # bound on the two faults' run (they hold for 0.05 s each)


def test_each_fault_is_logged_with_its_wall_clock_span_when_it_ends(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path / "c", voters=3, brokers=3)  # formatted, not started
    log = tmp_path / "faults.jsonl"
    plan = [Fault(at_s=0.0, kind="slow-disk", target=4, hold_s=0.05, amount=100),
            Fault(at_s=0.1, kind="pause", target=LEADER, hold_s=0.05)]
    nemesis = Nemesis(cluster, plan, fault_log=log, leader_wait_s=0.5)
    before = wall_ms()
    nemesis.start()
    deadline = time.monotonic() + RUN_S
    while nemesis.is_alive and time.monotonic() < deadline:
        time.sleep(0.02)  # polls the thread's end, bounded by RUN_S
    assert not nemesis.is_alive
    after = wall_ms()
    slow, paused = [json.loads(line) for line in log.read_text().splitlines()]
    assert slow["kind"] == "slow-disk"
    assert slow["target"] == 4
    assert slow["amount"] == 100
    assert before <= slow["start_ms"] <= slow["end_ms"] <= after
    assert slow["end_ms"] - slow["start_ms"] >= 50  # held 0.05 s
    assert slow["leader"] is False
    assert slow["error"] is None
    # no leader answers a cluster that never started: logged, no node, never healed
    assert (paused["kind"], paused["target"], paused["leader"], paused["end_ms"]) == \
        ("pause", None, True, None)
    assert paused["error"].startswith("no leader")
    assert slow["end_ms"] <= paused["start_ms"] <= after
    assert [row[0] for row in read_faults(log)] == ["slow-disk", "pause"]
