"""`kraft chaos` end to end: real processes on 127.0.0.1, SIGKILL / SIGSTOP / leader faults,
and the same mixed with network faults and wiped brokers, under a recorded workload (with a
consumer group whose members are SIGKILLed too, and idempotent producers), the history
checker and the client checks, then the Spark replay of the logs. Every run has chaos's
default small snapshot settings: nodes snapshot every 150-200 records, their log starts
advance and early segments are deleted, and nodes left behind catch up by FetchSnapshot.

The cluster is started by the `kraft chaos` subprocess and stopped by it whatever happens;
`cli_cluster_dir` SIGKILLs by pid any node it left behind (e.g. on a test timeout)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tools.replay.faults import read_faults
from tools.voter_changes import directory_id_of

pytestmark = pytest.mark.integration

PROCESS_SEED = 8  # its schedule kills, pauses, slows or skews every node, the leader 5 times
PROCESS_DURATION_S = 120  # a 2-3 minute chaos run in `make test`
PROCESS_KINDS = "kill,pause,leader,slow-disk,clock"


def run_chaos(directory: Path, seed: int, duration_s: int, timeout_s: float,
              faults: str, extra: tuple[str, ...] = ()) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "tools.cli", "chaos", "--cluster", str(directory),
         "--duration", str(duration_s), "--seed", str(seed), "--voters", "3", "--brokers", "3",
         "--faults", faults, "--json", *extra],
        capture_output=True, text=True, timeout=timeout_s, check=False)
    verdict = json.loads((directory / "chaos-verdict.json").read_text())
    assert json.loads(done.stdout.strip().splitlines()[-1]) == verdict
    return done.returncode, verdict


def assert_snapshots_exercised(verdict: dict[str, Any]) -> None:
    """Snapshots were written, log starts advanced past deleted segments, and the replay
    checked the snapshot files (valid, at the log starts, against a log replay)."""
    snapshots = verdict["snapshots"]
    assert snapshots["enabled"]
    assert snapshots["written"] > 0, snapshots
    assert snapshots["log_start_advances"] > 0, snapshots
    assert any(n["log_start"] > 0 and (n["first_segment"] or 0) > 0
               for n in snapshots["nodes"]), snapshots
    checks = {c["name"]: c for c in verdict["replay"]["checks"]}
    for name in ("snapshot_valid", "snapshot_at_log_start", "snapshot_matches_log"):
        assert checks[name]["violations"] == 0, checks[name]
        assert not checks[name]["skipped"], checks[name]


def assert_passed(code: int, verdict: dict[str, Any], duration_s: int,
                  kinds: frozenset[str]) -> None:
    assert verdict["violations"] == [], verdict["reproduce"]
    assert verdict["errors"] == [], verdict["reproduce"]
    assert code == 0
    assert verdict["ok"]
    assert verdict["replay"]["exit_code"] == 0, verdict["replay"]
    assert all(check["violations"] == 0 for check in verdict["replay"]["checks"])
    # the run really was hostile, and the checker really had something to check
    faults = verdict["fault_log"]
    assert len(faults) >= duration_s // 10
    assert {f["kind"] for f in faults} == kinds
    assert any(f["target"] == "leader" for f in faults) == ("kill" in kinds)
    assert all(f["healed_s"] is not None and f["error"] is None for f in faults)
    assert verdict["operations"]["create"]["ok"] > 10
    assert verdict["operations"]["delete"]["ok"] > 10
    # acknowledged writes whose fate was checked: found at their offsets, or legally gone
    # (the stable topics roll a segment every 5 s and keep 20 s, so a good part of a
    # run's writes is deleted or cleaned by its end)
    assert verdict["writes_verified"] + verdict["writes_removed"] > 100
    # and some still in place: since a leader-aimed fault waits for a leader, the mixed
    # run kills it for real, and on a loaded host most writes are gone by the end (15
    # of 100+ in one fresh-clone run)
    assert verdict["writes_verified"] > 10
    assert verdict["partition_dirs_checked"] > 0
    # the replay found every acknowledged acks=all produce in the partition logs, once
    acknowledged = {c["name"]: c for c in verdict["replay"]["checks"]}[
        "acknowledged-writes-present"]
    assert not acknowledged["skipped"], acknowledged
    assert acknowledged["counts"]["checked"] > 100, (acknowledged, verdict["acknowledged"])
    assert_snapshots_exercised(verdict)
    # the group workload ran: idempotent produces, all consumed, commits, rebalances and
    # (with the kill fault) SIGKILLed members (tools/chaos/client_checks.py checked them)
    clients = verdict["clients"]
    assert clients["acked"] > 100, clients
    assert clients["consumed"] >= clients["acked"], clients
    assert clients["commits_ok"] > 0, clients
    assert clients["rebalances"] >= 3, clients
    assert (clients["member_kills"] > 0) == ("kill" in kinds), clients


@pytest.mark.soak  # the mixed run below covers the same kinds in half the time
@pytest.mark.timeout(600)
def test_chaos_run_passes_when_nodes_are_killed_paused_slowed_and_leaders_targeted(
        cli_cluster_dir: Path) -> None:
    """Every acknowledged create, delete and acks=all produce survives SIGKILL
    and SIGSTOP of voters, brokers and the leader, slow fsyncs and skewed clocks; brokers
    converge and keep no stale partition; replay agrees."""
    code, verdict = run_chaos(cli_cluster_dir, PROCESS_SEED, PROCESS_DURATION_S,
                              timeout_s=500, faults=PROCESS_KINDS)
    assert_passed(code, verdict, PROCESS_DURATION_S,
                  kinds=frozenset({"kill", "pause", "slow-disk", "clock"}))
    assert {f["node"] for f in verdict["fault_log"]} == {1, 2, 3, 4, 5, 6}
    assert verdict["network"] is None  # no network fault asked for: no proxies
    assert (cli_cluster_dir / "history.jsonl").stat().st_size > 0


# A short run of every kind in `make test` (the soak runs mix them for longer).
MIXED_SEED = 263  # kills the leader; pauses, slows the disk of and skews the clock of
# voters and brokers; partitions (both ways), slows and loses links of both; and, at
# +56 s (after the first log-start advances, which come about 30 s in), wipes broker 5
MIXED_DURATION_S = 60
MIXED_KINDS = "kill,pause,leader,slow-disk,clock,partition,slow-net,lossy-net,wipe"
PROCESS_FAULTS = frozenset({"kill", "pause", "slow-disk", "clock", "wipe"})
NETWORK_FAULTS = frozenset({"partition", "partition-one-way", "slow-net", "lossy-net"})


@pytest.mark.timeout(600)
def test_chaos_run_passes_when_process_and_network_faults_are_mixed(
        cli_cluster_dir: Path) -> None:
    """Process faults (SIGKILL, SIGSTOP, slow fsyncs, skewed clocks, the leader among the
    targets, a broker restarted with an empty metadata directory) and network faults
    through the proxies (symmetric and one-way partitions, delay, loss) in one run, on
    voters and brokers, with snapshots every 150-200 records: same guarantees as under
    either family alone, and the wiped broker caught up by FetchSnapshot."""
    code, verdict = run_chaos(cli_cluster_dir, MIXED_SEED, MIXED_DURATION_S, timeout_s=500,
                              faults=MIXED_KINDS)
    assert_passed(code, verdict, MIXED_DURATION_S, kinds=PROCESS_FAULTS | NETWORK_FAULTS)
    # the fault log kraft replay --faults reads: every fault, on the wall clock, held as
    # long as the verdict says
    logged = read_faults(cli_cluster_dir / "faults.jsonl")
    assert [(row[0], row[1]) for row in logged] == [(f["kind"], f["node"])
                                                    for f in verdict["fault_log"]]
    for row, fault in zip(logged, verdict["fault_log"], strict=True):
        held_s = (row[5] - row[4]) / 1000
        assert abs(held_s - (fault["healed_s"] - fault["start_s"])) < 0.05, (row, fault)
    # the stable topics' small segments were deleted by retention or cleaned, and the
    # checks told what that removed from what was lost
    assert verdict["writes_removed"] > 0, verdict["writes_verified"]
    faults = verdict["fault_log"]
    per_kind = Counter(f["kind"] for f in faults)
    assert all(per_kind[kind] > 0 for kind in PROCESS_FAULTS | NETWORK_FAULTS), per_kind
    for family in (PROCESS_FAULTS, NETWORK_FAULTS):
        nodes = {f["node"] for f in faults if f["kind"] in family}
        assert nodes & {1, 2, 3}, (family, nodes)  # voters
        assert nodes & {4, 5, 6}, (family, nodes)  # brokers
    assert any(f["target"] == "leader" for f in faults)
    # the losses happened: the proxies held chunks back for retransmission stalls
    network = verdict["network"]
    assert network["chunks"] > 0
    assert network["stalls"] > 0, network
    # the wiped broker could not fetch from offset 0 any more: it loaded a snapshot
    wiped = {f["node"] for f in faults if f["kind"] == "wipe"}
    assert wiped <= {4, 5, 6}
    fetched = {n["node"] for n in verdict["snapshots"]["nodes"] if n["fetched"] > 0}
    assert wiped & fetched, verdict["snapshots"]


def history_errors(directory: Path) -> Counter[str]:
    """The errors of the failed and unknown operations of every history of a run (the
    main one and the group members')."""
    errors: Counter[str] = Counter()
    for path in [directory / "history.jsonl", *sorted((directory / "members").glob("*.jsonl"))]:
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event.get("type") in ("failed", "unknown"):
                errors[str((event.get("result") or {}).get("error"))] += 1
    return errors


@pytest.mark.soak  # 60 s of faults, ~2-3 minutes in all: `make soak`
@pytest.mark.timeout(600)
def test_chaos_run_passes_when_the_cluster_is_secured(cli_cluster_dir: Path) -> None:
    """`--secure`: the mixed run of every fault kind against mutual TLS between the
    nodes (through the proxies), SASL_SSL/SCRAM-SHA-512 clients and the authorizer with
    the workload's ACLs: the same guarantees, no workload operation refused for want of
    an ACL, and every request outside the ACLs (or without TLS and SASL) refused."""
    code, verdict = run_chaos(cli_cluster_dir, MIXED_SEED, MIXED_DURATION_S, timeout_s=500,
                              faults=MIXED_KINDS, extra=("--secure",))
    assert_passed(code, verdict, MIXED_DURATION_S, kinds=PROCESS_FAULTS | NETWORK_FAULTS)
    assert verdict["reproduce"].endswith(" --secure")
    security = verdict["security"]
    assert security["kafka_listener"] == "SASL_SSL"
    assert security["acls"] > 0
    probes = dict(security["probes"])
    assert {k: probes.pop(k) for k in ("admin_delete_stable", "consumer_produce",
                                       "wrong_password", "plaintext_client")} == dict.fromkeys(
        ("admin_delete_stable", "consumer_produce", "wrong_password", "plaintext_client"),
        "refused"), security
    # the attacker (tools/chaos/attacker.py) was refused all along, never served
    assert int(probes.pop("attacker_refused")) > 0, security
    assert set(probes) <= {"attacker_unanswered"}, security
    assert verdict["network"]["chunks"] > 0  # TLS went through the proxies
    # the ACLs were enough: no operation of the workload was refused for want of one
    errors = history_errors(cli_cluster_dir)
    assert not [e for e in errors if "AUTHORIZATION" in e.upper()], errors
    # every workload user logged in over SASL (the brokers log each login's principal)
    logins = "".join(Path(cli_cluster_dir / f"node-{n}" / "node.log").read_text()
                     for n in (4, 5, 6))
    for user in ("broker", "chaos-producer", "chaos-consumer", "chaos-checker"):
        assert f'"User:{user}"' in logins, user


ALL_KINDS = "kill,pause,leader,partition,slow-disk,clock,slow-net,lossy-net,wipe"
SOAK_DURATION_S = 1800


@pytest.mark.soak
@pytest.mark.timeout(SOAK_DURATION_S + 1200)
@pytest.mark.parametrize("seed", [11, 23, 37])
def test_chaos_soak_passes_when_run_for_half_an_hour_over_several_seeds(
        cli_cluster_dir: Path, seed: int) -> None:
    """`make soak` runs 30-minute chaos runs with every fault kind."""
    code, verdict = run_chaos(cli_cluster_dir, seed, SOAK_DURATION_S,
                              timeout_s=SOAK_DURATION_S + 1100, faults=ALL_KINDS)
    assert_passed(code, verdict, SOAK_DURATION_S, kinds=frozenset(
        {"kill", "pause", "partition", "partition-one-way", "slow-disk", "clock",
         "slow-net", "lossy-net", "wipe"}))
    assert verdict["snapshots"]["fetched"] > 0, verdict["snapshots"]


# --dynamic with wipe-voter: the leader's disk is wiped at +29 s (after the first
# log-start advances, so its replacement catches up by FetchSnapshot), node 1's at +33 s
# and node 3's at +49 s, each replaced (old key removed, new key added) before the next
DYNAMIC_SEED = 345
DYNAMIC_KINDS = "kill,pause,leader,partition,wipe,wipe-voter"


@pytest.mark.soak  # 60 s of faults and three voter replacements, ~3-4 minutes in all
@pytest.mark.timeout(900)
def test_chaos_run_passes_when_voters_disks_are_wiped_and_replaced(
        cli_cluster_dir: Path) -> None:
    """`--dynamic`: a voter (the leader among them) SIGKILLed, its data directory
    deleted and formatted anew, then replaced by reconfiguration (remove-controller of
    the old replica key, add-controller of the new one), one voter at a time, with the
    other faults around: the same guarantees, and afterwards the leader's voter set holds
    voters 1, 2 and 3 once each with the directory id on their disks now."""
    code, verdict = run_chaos(cli_cluster_dir, DYNAMIC_SEED, MIXED_DURATION_S,
                              timeout_s=800, faults=DYNAMIC_KINDS, extra=("--dynamic",))
    assert_passed(code, verdict, MIXED_DURATION_S, kinds=frozenset(
        {"kill", "pause", "partition", "partition-one-way", "wipe", "wipe-voter"}))
    assert verdict["reproduce"].endswith(" --dynamic")
    wiped = [f for f in verdict["fault_log"] if f["kind"] == "wipe-voter"]
    assert len(wiped) == 3
    assert any(f["target"] == "leader" for f in wiped)
    assert {f["node"] for f in wiped} <= {1, 2, 3}
    assert verdict["voters_replaced"] == 3
    quorum = verdict["quorum"]
    assert quorum["problems"] == []
    on_disk = {n: directory_id_of(cli_cluster_dir / f"node-{n}" / "data") for n in (1, 2, 3)}
    assert sorted((v["id"], v["directory_id"]) for v in quorum["voters"]) == \
        sorted(on_disk.items())


# A broker that acknowledges acks=all writes before its ISR has them
# (tools/chaos/planted.py) under partitions that cut a leader off from its followers:
# the run must fail, by its own checker and by the replay's `--history` check.
PLANTED_SEED = 250  # partitions brokers 5 and 4 for 3.6-3.7 s at +41 s and +46 s
PLANTED_DURATION_S = 60


@pytest.mark.soak  # a failing run is what it checks: slower than the passing ones
@pytest.mark.timeout(900)
def test_chaos_run_fails_when_brokers_ack_before_the_isr_has_the_writes(
        cli_cluster_dir: Path) -> None:
    code, verdict = run_chaos(cli_cluster_dir, PLANTED_SEED, PLANTED_DURATION_S,
                              timeout_s=800, faults="partition",
                              extra=("--planted-bug", "dp_ack_before_isr"))
    assert code == 1
    assert not verdict["ok"]
    assert verdict["planted_bug"] == "dp_ack_before_isr"
    assert verdict["reproduce"].endswith(" --planted-bug dp_ack_before_isr")
    assert {v["kind"] for v in verdict["violations"]} & {"lost_write", "misplaced", "idem_lost"}, \
        Counter(v["kind"] for v in verdict["violations"])
    acknowledged = {c["name"]: c for c in verdict["replay"]["checks"]}[
        "acknowledged-writes-present"]
    assert acknowledged["violations"] > 0, acknowledged
