"""kraft chaos's wipe-voter fault, its pure parts: the schedule (only with --dynamic, one
fault at a time so no second voter is wiped before the first one's replacement ended,
voters or the leader as targets), which step a replacement still needs, how a voter set
is not whole, and the usage error without --dynamic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tools.chaos.nemesis import LEADER, schedule
from tools.chaos.voter_set import (
    ADD,
    DONE,
    REMOVE,
    STUCK,
    replacement_step,
    voter_keys,
    voter_set_problems,
)

NODES = [1, 2, 3, 4, 5, 6]
VOTERS = [1, 2, 3]
BROKERS = [4, 5, 6]
KINDS = ["kill", "pause", "leader", "partition", "wipe", "wipe-voter"]
OLD, NEW, OTHER = "old-dir", "new-dir", "third-dir"


def test_schedule_refuses_wipe_voter_when_the_quorum_is_static() -> None:
    with pytest.raises(ValueError, match="dynamic"):
        schedule(5, 60, KINDS, NODES, broker_ids=BROKERS, voter_ids=VOTERS)


def test_schedule_refuses_wipe_voter_when_no_voter_is_given() -> None:
    with pytest.raises(ValueError, match="voters"):
        schedule(5, 60, KINDS, NODES, broker_ids=BROKERS, dynamic=True)


@pytest.mark.parametrize("seed", range(30))
def test_wipe_voter_faults_run_one_at_a_time_on_voters_when_scheduled(seed: int) -> None:
    faults = schedule(seed, 180, KINDS, NODES, broker_ids=BROKERS, voter_ids=VOTERS,
                      dynamic=True)
    for before, after in zip(faults, faults[1:], strict=False):
        assert before.at_s + before.hold_s < after.at_s  # the next starts after the heal
    wipes = [f for f in faults if f.kind == "wipe-voter"]
    assert all(f.target == LEADER or f.target in VOTERS for f in wipes)
    assert all(f.target in BROKERS for f in faults if f.kind == "wipe")


def test_wipe_voter_targets_the_leader_and_named_voters_when_seeds_vary() -> None:
    targets = {f.target for seed in range(30)
               for f in schedule(seed, 180, KINDS, NODES, broker_ids=BROKERS,
                                 voter_ids=VOTERS, dynamic=True) if f.kind == "wipe-voter"}
    assert targets == {LEADER, *VOTERS}


def test_schedule_is_unchanged_when_wipe_voter_is_not_asked_for() -> None:
    kinds = ["kill", "pause", "leader", "partition", "wipe"]
    assert schedule(5, 120, kinds, NODES, broker_ids=BROKERS) == schedule(
        5, 120, kinds, NODES, broker_ids=BROKERS, voter_ids=VOTERS, dynamic=True)


def test_replacement_removes_the_old_key_first_when_it_is_still_a_voter() -> None:
    assert replacement_step([(1, "a"), (2, "b"), (3, OLD)], 3, OLD, NEW) == REMOVE


def test_replacement_adds_the_new_key_when_the_old_one_is_gone() -> None:
    assert replacement_step([(1, "a"), (2, "b")], 3, OLD, NEW) == ADD


def test_replacement_is_done_when_the_new_key_is_a_voter() -> None:
    assert replacement_step([(1, "a"), (2, "b"), (3, NEW)], 3, OLD, NEW) == DONE


def test_replacement_is_stuck_when_the_node_is_a_voter_under_a_third_directory() -> None:
    assert replacement_step([(1, "a"), (2, "b"), (3, OTHER)], 3, OLD, NEW) == STUCK


def test_voter_set_is_whole_when_each_voter_has_its_disk_directory_id() -> None:
    assert voter_set_problems([(1, "a"), (2, "b"), (3, "c")], {1: "a", 2: "b", 3: "c"}) == []


def test_voter_set_problems_name_each_difference_when_it_is_not_whole() -> None:
    problems = voter_set_problems([(1, "a"), (1, "x"), (3, OLD), (7, "z")],
                                  {1: "a", 2: "b", 3: NEW})
    assert "voter 1 is listed 2 times" in problems
    assert "node 2 is not a voter" in problems
    assert "node 7 is a voter but not one of the cluster's controllers" in problems
    assert f"voter 3 has directory id {OLD}, its disk {NEW}" in problems
    assert "voter 1 has directory id x, its disk a" in problems


def test_voter_keys_read_describe_quorum_voters_when_directory_ids_are_text() -> None:
    assert voter_keys([{"replica_id": 2, "replica_directory_id": "b"},
                       {"replica_id": 1, "replica_directory_id": None}]) == [(2, "b"), (1, None)]


def test_chaos_exits_2_in_one_line_when_wipe_voter_lacks_dynamic(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tools.cli", "chaos", "--cluster", str(tmp_path / "c"),
         "--duration", "10", "--faults", "kill,wipe-voter"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "--dynamic" in done.stderr
    assert not (tmp_path / "c").exists()
