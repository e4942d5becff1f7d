"""The checker has teeth: with a bug planted in the real core (`raft.sim.planted`) the
random sweep reports the violation by itself, names the seed, shows a trace, and the
printed command replays the very same failure."""

from __future__ import annotations

import json
import shlex

import pytest

from raft.sim.invariants import (
    ACKNOWLEDGED_WRITES,
    ADDED_VOTER_CAUGHT_UP,
    COMMITTED_DATA,
    LOG_MATCHING,
    MAJORITY_HOLDS_HW,
    OBSERVER_NEVER_VOTES,
    ONE_VOTE_PER_EPOCH,
    ONE_VOTER_CHANGE,
    SNAPSHOT_AT_LOG_START,
    SNAPSHOT_MATCHES_COMMITTED,
    SNAPSHOT_WITHIN_COMMITTED,
)
from raft.sim.planted import PLANTED_BUGS
from raft.sim.sweep import RunResult, RunSpec, run_seed, sweep
from tools.cli import main as kraft

SAFETY = (COMMITTED_DATA, LOG_MATCHING, MAJORITY_HOLDS_HW)
TWO_CHANGES_SEEDS = (5, 7, 8)
OWN_EPOCH_SEEDS = (1, 10, 23)
NOT_CAUGHT_UP_SEEDS = (23, 24, 27)  # an operator adds only running nodes: 12 of seeds 1-60
DOUBLE_VOTE_SEEDS = (6, 7, 9)  # 88 of seeds 1-200 since the leader re-announces itself

# Seeds of the default sweep (5 voters, 2 observers, all faults) on which each bug is
# caught, found with `kraft sim --planted-bug BUG --seeds 300 --keep-going`.
KNOWN_SEEDS = {
    "vote_without_log_check": ((69, 3, 99), SAFETY),
    "commit_old_epoch_by_count": ((3, 21, 82), (COMMITTED_DATA,)),
    "diverging_hw": ((279, 186, 182), (COMMITTED_DATA,)),
    "hw_counts_observers": ((1, 2, 3), SAFETY),
    # 10 and 12: caught only by content (the diverging voter's log is long enough)
    "hw_counts_diverging_voter": ((10, 12, 1), (MAJORITY_HOLDS_HW,)),
    "vote_not_persisted": ((69, 91, 143), (ONE_VOTE_PER_EPOCH,)),
    "truncate_below_hw_allowed": ((147, 252, 104), (COMMITTED_DATA,)),
    "snapshot_uncommitted": ((1, 2, 3), (SNAPSHOT_WITHIN_COMMITTED,)),
    # the dynamic quorum (KIP-853), found with `kraft sim --dynamic --planted-bug BUG`
    "two_voter_changes_at_once": (TWO_CHANGES_SEEDS, (ONE_VOTER_CHANGE,)),
    "voter_change_before_own_epoch_commit": (OWN_EPOCH_SEEDS, (ONE_VOTER_CHANGE,)),
    "add_voter_not_caught_up": (NOT_CAUGHT_UP_SEEDS, (ADDED_VOTER_CAUGHT_UP,)),
    "wiped_disk_double_vote": (DOUBLE_VOTE_SEEDS, (OBSERVER_NEVER_VOTES, ONE_VOTE_PER_EPOCH,
                                                   *SAFETY)),
    # 6 of seeds 1-60: the production path writes raft's records into every snapshot
    "snapshot_voters_at_log_end": ((9, 27, 34), (SNAPSHOT_MATCHES_COMMITTED,)),
    # found by crashes between the steps of disk operations (raft.sim.disk_steps):
    # 9 of seeds 1-30, and all 30
    "snapshots_deleted_before_log_start": ((2, 3, 10), (SNAPSHOT_AT_LOG_START,)),
    "flush_skips_dir_fsync": ((1, 2, 3), (ACKNOWLEDGED_WRITES,)),
    "truncation_rewrites_segment": ((3, 15, 18), (ACKNOWLEDGED_WRITES,)),  # 7 of seeds 1-100
}
DYNAMIC_BUGS = frozenset({"two_voter_changes_at_once", "add_voter_not_caught_up",
                          "wiped_disk_double_vote", "voter_change_before_own_epoch_commit",
                          "snapshot_voters_at_log_end"})


def first_failure(spec: RunSpec, seeds: range | tuple[int, ...]) -> RunResult | None:
    return next((r for r in sweep(spec, seeds) if not r.ok), None)


def test_every_planted_bug_has_known_seeds() -> None:
    assert sorted(KNOWN_SEEDS) == sorted(PLANTED_BUGS)


@pytest.mark.parametrize("bug", sorted(KNOWN_SEEDS))
def test_random_sweep_reports_replayable_violation_when_bug_planted(bug: str) -> None:
    """Each planted bug (Raft §5.4.1 and §5.4.2, a high watermark taken on divergence,
    observers counted in the majority, a vote not persisted, committed records cut, a
    snapshot of uncommitted records) is caught by random faults alone, as the invariant
    it breaks, with a seed that replays it exactly."""
    seeds, invariants = KNOWN_SEEDS[bug]
    spec = RunSpec(voters=5, observers=2, faults="all", planted_bug=bug,
                   dynamic=bug in DYNAMIC_BUGS)
    failed = first_failure(spec, seeds)
    assert failed is not None, f"{bug} went unnoticed on seeds {seeds}"
    assert failed.invariant in invariants, failed.detail
    assert failed.trace
    assert f"--seed {failed.seed} --seeds 1" in failed.replay
    assert f"--planted-bug {bug}" in failed.replay
    assert ("--dynamic" in failed.replay) == (bug in DYNAMIC_BUGS)
    assert run_seed(spec, failed.seed) == failed


def test_cli_exits_1_with_replay_line_when_bug_planted(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """`kraft sim` on a violation: seed, invariant, trace and the replay command; exit 1;
    running that command reproduces the same violation."""
    spec = RunSpec(voters=5, observers=2, faults="all", planted_bug="vote_without_log_check")
    failed = first_failure(spec, KNOWN_SEEDS["vote_without_log_check"][0])
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
    """`kraft sim --json`: exit 0 and a summary of seeds, events, elections (per seed:
    median, min, max), divergences, commits and faults when nothing is violated."""
    assert kraft(["sim", "--voters", "3", "--observers", "1", "--seeds", "4", "--seed", "7",
                  "--fault-window-ms", "10000", "--jobs", "1", "--json",
                  "--no-progress"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["seeds"] == 4
    assert report["violations"] == 0
    assert report["events"] > 0
    assert report["elections"] >= 4
    assert report["elections_per_seed"]["min"] >= 1
    assert report["divergences"] >= report["multi_epoch_divergences"]
    assert report["commits"] > 0
    assert report["jobs"] == 1


def test_cli_prints_depth_when_all_clean(capsys: pytest.CaptureFixture[str]) -> None:
    """The text summary names elections per seed, divergences and simulated time."""
    assert kraft(["sim", "--voters", "3", "--observers", "0", "--seeds", "2",
                  "--fault-window-ms", "5000", "--jobs", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "elections per seed: median" in out
    assert "divergences:" in out
    assert "multi-epoch:" in out
    assert "simulated time per seed: median" in out


@pytest.mark.parametrize("argv", [["--voters", "0"], ["--planted-bug", "no_such_bug"],
                                  ["--jobs", "0"], ["--scenario", "no-such-scenario"],
                                  ["--dead-voters", "6"], ["--dead-voters", "-1"]])
def test_cli_rejects_bad_input_with_one_line(argv: list[str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """CLI convention: bad input exits 2 with one clear line naming the option."""
    assert kraft(["sim", "--seeds", "1", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert argv[0] in err
    assert len(err.strip().splitlines()) == 1


def test_cli_scenario_exits_1_when_figure_eight_bug_planted(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`kraft sim --scenario figure-eight` replays Raft's Figure 8: with the §5.4.2 rule
    removed it reports lost committed data (exit 1), without it the scenario is clean."""
    base = ["sim", "--voters", "5", "--observers", "0", "--scenario", "figure-eight",
            "--seeds", "2", "--jobs", "1", "--no-progress"]
    assert kraft(base) == 0
    capsys.readouterr()
    assert kraft(base + ["--planted-bug", "commit_old_epoch_by_count"]) == 1
    out = capsys.readouterr().out
    assert "invariant=committed-data-never-lost" in out
    assert "--scenario figure-eight --seed 1 --seeds 1" in out


def test_cli_scenario_exits_1_when_diverging_hw_planted(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`kraft sim --scenario divergence`: clean with the real core; a core that takes the
    high watermark from a diverging Fetch answer loses committed data on every seed."""
    base = ["sim", "--voters", "5", "--observers", "2", "--scenario", "divergence",
            "--seeds", "3", "--jobs", "1", "--no-progress", "--keep-going"]
    assert kraft(base) == 0
    capsys.readouterr()
    assert kraft(base + ["--planted-bug", "diverging_hw", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [f["invariant"] for f in report["failures"]] == [COMMITTED_DATA] * 3
