"""The majority check over an even voter set (KIP-853, Raft's single-server change).

Seed 465 at 3 voters + 2 observers with reconfiguration: leader 4 of {1,2,3,4} appends a
VotersRecord removing voter 1 and commits the records below it with voters 2 and 4, a
majority of the new set {2,3,4}. Voter 2, which never received that record, then wins
the next epoch and counts {1,2,3,4} again, where those records are held by 2 of 4. That
is safe (any 3 of the 4 include 2 or 4, so no leader can be elected without them), and
the checker must say so; it once demanded 3 holders and reported a violation here."""

from __future__ import annotations

from raft.sim.sweep import RunSpec, run_seed


def test_no_violation_when_half_of_an_even_set_holds_the_high_watermark() -> None:
    result = run_seed(RunSpec(voters=3, observers=2, faults="all", dynamic=True), 465)
    assert result.invariant is None, result.detail
    assert result.reconfigurations >= 1
