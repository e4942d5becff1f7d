"""The checker has teeth: with a bug planted in the real core the sweep reports the
violation, names the seed, shows a trace, and the printed command replays the very same
failure."""

from __future__ import annotations

import json
import shlex

import pytest

from raft.sim.invariants import COMMITTED_DATA, LOG_MATCHING, MAJORITY_HOLDS_HW
from raft.sim.sweep import RunSpec, run_seed, sweep
from tools.cli import main as kraft

SAFETY = (COMMITTED_DATA, LOG_MATCHING, MAJORITY_HOLDS_HW)


def first_failure(spec: RunSpec, seeds: range):  # type: ignore[no-untyped-def]
    return next((r for r in sweep(spec, seeds) if not r.ok), None)


@pytest.mark.parametrize(("bug", "scenario", "observers"), [
    ("vote_without_log_check", None, 2),  # random faults find it
    ("commit_old_epoch_by_count", "figure-eight", 0),  # needs Raft's Figure 8 schedule
])
def test_sweep_reports_replayable_violation_when_bug_planted(bug: str, scenario: str | None,
                                                             observers: int) -> None:
    """Raft §5.4.1 (election restriction) and §5.4.2 (commit only the leader's own epoch
    by counting): each planted bug is caught as a safety violation with a seed that
    replays it exactly."""
    spec = RunSpec(voters=5, observers=observers, faults="all", planted_bug=bug,
                   scenario=scenario)
    failed = first_failure(spec, range(1, 400))
    assert failed is not None, f"{bug} went unnoticed over 400 seeds"
    assert failed.invariant in SAFETY
    assert failed.trace
    assert f"--seed {failed.seed} --seeds 1" in failed.replay
    assert f"--planted-bug {bug}" in failed.replay
    assert run_seed(spec, failed.seed) == failed


def test_cli_exits_1_with_replay_line_when_bug_planted(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """`kraft sim` on a violation: seed, invariant, trace and the replay command; exit 1;
    running that command reproduces the same violation."""
    spec = RunSpec(voters=5, observers=2, faults="all", planted_bug="vote_without_log_check")
    failed = first_failure(spec, range(1, 400))
    assert failed is not None
    argv = shlex.split(failed.replay)[1:] + ["--no-progress"]
    assert kraft(argv) == 1
    out = capsys.readouterr().out
    assert f"VIOLATION seed={failed.seed} invariant={failed.invariant}" in out
    assert f"replay: {failed.replay}" in out
    assert kraft(argv + ["--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["violations"] == 1
    assert report["failures"][0]["invariant"] == failed.invariant


def test_cli_exits_0_with_summary_when_all_clean(capsys: pytest.CaptureFixture[str]) -> None:
    """`kraft sim --json`: exit 0 and a summary of seeds, events, elections, commits and
    faults when no invariant is violated."""
    assert kraft(["sim", "--voters", "3", "--observers", "1", "--seeds", "4", "--seed", "7",
                  "--json", "--no-progress"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["seeds"] == 4
    assert report["violations"] == 0
    assert report["events"] > 0
    assert report["elections"] >= 4
    assert report["commits"] > 0


def test_cli_rejects_bad_sizes_when_voters_out_of_range(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """CLI convention: bad input exits 2 with one clear line."""
    assert kraft(["sim", "--voters", "0", "--seeds", "1"]) == 2
    assert "--voters" in capsys.readouterr().err


def test_cli_scenario_exits_1_when_figure_eight_bug_planted(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`kraft sim --scenario figure-eight` replays Raft's Figure 8: with the §5.4.2 rule
    removed it reports lost committed data (exit 1), without it the scenario is clean."""
    base = ["sim", "--voters", "5", "--observers", "0", "--scenario", "figure-eight",
            "--seeds", "2", "--no-progress"]
    assert kraft(base) == 0
    capsys.readouterr()
    assert kraft(base + ["--planted-bug", "commit_old_epoch_by_count"]) == 1
    out = capsys.readouterr().out
    assert "invariant=committed-data-never-lost" in out
    assert "--scenario figure-eight --seed 1 --seeds 1" in out
