"""The majority check over an even voter set (KIP-853, Raft's single-server change).

Seed 37 at 3 voters + 2 observers with reconfiguration: while voter 2 is replaced, leader
1 holds the record below its high watermark 34 alone of the voter set {1, 3}, half of
an even set. That is safe (no majority of {1, 3} forms without 1), and the checker must
say so; with the old rule (holders >= a majority of the set) it reports a violation on
this seed. (Seed 465 showed the same before the simulator crashed nodes between disk
steps, which moved its run.)"""

from __future__ import annotations

from raft.sim.sweep import RunSpec, run_seed


def test_no_violation_when_half_of_an_even_set_holds_the_high_watermark() -> None:
    result = run_seed(RunSpec(voters=3, observers=2, faults="all", dynamic=True), 37)
    assert result.invariant is None, result.detail
    assert result.reconfigurations >= 1
