"""`kraft sim`: a deterministic simulation sweep of the raft core with fault injection.

With `--data-plane`, the brokers' data plane instead (`broker.dataplane.sim`): a topic
resized under KIP-253 on `--brokers` brokers under the real pure controller, idempotent
and plain producers with acks 0, 1 and all, ordered producers and an ordered consumer
group, crashes, cut links, slow followers and lagging metadata.

Runs seeds `--seed`, `--seed`+1, ... (`--seeds` of them), in `--jobs` worker processes
(results in seed order; `--jobs 1` runs them in this process). On the first invariant
violation prints the seed, the invariant, the last events as a trace and the one-line
command that replays exactly that run, and exits 1. All clean: a summary (how deep the
seeds went: elections, divergences, simulated time), exit 0.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from tools.errors import usage_error
from tools.progress import ProgressDisplay


def configure(parser: argparse.ArgumentParser, verb_name: str) -> None:
    parser.add_argument("--data-plane", action="store_true",
                        help="simulate the brokers' data plane (partition replication) "
                             "instead of the metadata quorum")
    parser.add_argument("--brokers", type=int, default=3,
                        help="with --data-plane: number of brokers (2-7)")
    parser.add_argument("--metadata-freezes", action="store_true",
                        help="with --data-plane: also freeze a broker's metadata for 1-5 s "
                             "across a resize, among the faults")
    parser.add_argument("--voters", type=int, default=5, help="number of voters (1-9)")
    parser.add_argument("--observers", type=int, default=2, help="number of observers")
    parser.add_argument("--seeds", type=int, default=None,
                        help="how many seeds to run (default 1000, or 1 with --seed)")
    parser.add_argument("--seed", type=int, default=None,
                        help="first seed (default 1); with --seeds 1 replays one run")
    parser.add_argument("--faults", choices=("all", "net", "crash", "none"), default="all",
                        help="the kinds of faults injected (default all)")
    parser.add_argument("--scenario", default=None, metavar="NAME",
                        help="run a RaftEventSimulationTest scenario per seed instead of "
                             "random faults: " + ", ".join(_scenario_names()))
    parser.add_argument("--fault-window-ms", type=int, default=None,
                        help="simulated time during which faults are injected (default "
                             f"{_default_window_ms()})")
    parser.add_argument("--no-pre-vote", dest="pre_vote", action="store_false",
                        help="disable KIP-996 pre-vote")
    parser.add_argument("--planted-bug", default=None, metavar="BUG",
                        help="run a core with a deliberate bug (to test the checker): "
                             + ", ".join(_planted_bugs()) + "; with --data-plane: "
                             + ", ".join(_data_plane_bugs()))
    parser.add_argument("--codec", action="store_true",
                        help="round-trip every message through the wire codec")
    parser.add_argument("--dynamic", action="store_true",
                        help="kraft.version 1 (KIP-853): voters from the log, directory "
                             "ids, and voters added, removed, wiped and replaced among "
                             "the faults")
    parser.add_argument("--dead-voters", type=int, default=0, metavar="N",
                        help="at the heal, leave N voters (drawn from the seed) dead for "
                             "good: the others must still commit (a partial heal)")
    parser.add_argument("--lying-fsync", type=int, default=0, metavar="N",
                        help="disks whose crash loses the last N batches they acknowledged "
                             "as flushed (the invariants must report it)")
    parser.add_argument("--trace", type=int, default=60,
                        help="events shown before a violation")
    parser.add_argument("--keep-going", action="store_true",
                        help="run every seed even after a violation")
    parser.add_argument("--jobs", type=int, default=None,
                        help="worker processes (default: the number of CPUs; 1 runs the "
                             "seeds in this process)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="no progress line (there is none when stderr is not a "
                             "terminal)")


def _scenario_names() -> list[str]:
    from raft.sim.scenarios import SCENARIOS

    return sorted(SCENARIOS)


def _planted_bugs() -> tuple[str, ...]:
    from raft.sim.planted import PLANTED_BUGS

    return PLANTED_BUGS


def _data_plane_bugs() -> tuple[str, ...]:
    from broker.dataplane.sim.planted import PLANTED_BUGS

    return PLANTED_BUGS


def _default_window_ms() -> int:
    from raft.sim.sweep import RunSpec

    return RunSpec().fault_window_ms


def _seeds_and_jobs(args: argparse.Namespace) -> tuple[range, int]:
    count = args.seeds if args.seeds is not None else (1 if args.seed is not None else 1000)
    if count < 1:
        raise usage_error(f"--seeds must be at least 1, got {count}")
    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
    if jobs < 1:
        raise usage_error(f"--jobs must be at least 1, got {jobs}")
    first = args.seed if args.seed is not None else 1
    return range(first, first + count), min(jobs, count)  # one seed needs no worker


def run(args: argparse.Namespace) -> int:
    from raft.sim.sweep import summarize, sweep

    if args.data_plane:
        return _run_data_plane(args)
    spec = _spec(args)
    seeds, jobs = _seeds_and_jobs(args)
    if not args.json:
        what = f"scenario {spec.scenario}" if spec.scenario else f"faults {spec.faults}"
        if spec.dynamic:
            what += " (dynamic quorum)"
        print(f"kraft sim: seeds {seeds.start}..{seeds.stop - 1}, {spec.voters} voters, "
              f"{spec.observers} observers, {what}, {jobs} jobs", flush=True)
    started = time.monotonic()
    results = []
    failed = 0
    with ProgressDisplay("sim", total=len(seeds), unit="seeds", rate=True,
                         enabled=args.progress) as display:
        for result in _guard(sweep(spec, seeds, stop_on_violation=not args.keep_going,
                                   jobs=jobs)):
            results.append(result)
            failed += not result.ok
            display.update(completed=len(results), violations=failed)
    summary: dict[str, Any] = {**summarize(results, time.monotonic() - started),
                               "first_seed": seeds.start, "jobs": jobs}
    violations = [r for r in results if not r.ok]
    if args.json:
        summary["failures"] = [r.to_json() for r in violations]
        print(json.dumps(summary))
    else:
        for result in violations:
            _print_violation(result)
        _print_summary(summary)
    return 1 if violations else 0


def _spec(args: argparse.Namespace) -> Any:
    """The run spec, from validated arguments (bad ones: exit 2)."""
    from raft.sim.sweep import RunSpec

    if not 1 <= args.voters <= 9:
        raise usage_error(f"--voters must be 1..9, got {args.voters}")
    if args.observers < 0 or args.voters + args.observers > 32:
        raise usage_error(f"--observers must be 0..{32 - args.voters}, got {args.observers}")
    if args.scenario is not None and args.scenario not in _scenario_names():
        raise usage_error(f"unknown --scenario {args.scenario!r}; one of "
                          + ", ".join(_scenario_names()))
    if args.planted_bug is not None and args.planted_bug not in _planted_bugs():
        raise usage_error(f"unknown --planted-bug {args.planted_bug!r}; one of "
                          + ", ".join(_planted_bugs()))
    if args.lying_fsync < 0:
        raise usage_error(f"--lying-fsync must be at least 0, got {args.lying_fsync}")
    if not 0 <= args.dead_voters <= args.voters:
        raise usage_error(f"--dead-voters must be 0..{args.voters}, got {args.dead_voters}")
    window = args.fault_window_ms if args.fault_window_ms is not None else _default_window_ms()
    if window < 0:
        raise usage_error(f"--fault-window-ms must be at least 0, got {window}")
    spec = RunSpec(voters=args.voters, observers=args.observers, faults=args.faults,
                   fault_window_ms=window, pre_vote=args.pre_vote,
                   planted_bug=args.planted_bug, codec_roundtrip=args.codec,
                   trace_size=args.trace, scenario=args.scenario, dynamic=args.dynamic,
                   dead_voters=args.dead_voters, lying_fsync_writes=args.lying_fsync)
    return spec


def _run_data_plane(args: argparse.Namespace) -> int:
    from broker.dataplane.sim.run import DataPlaneSpec, summarize, sweep

    if not 2 <= args.brokers <= 7:
        raise usage_error(f"--brokers must be 2..7, got {args.brokers}")
    if args.planted_bug is not None and args.planted_bug not in _data_plane_bugs():
        raise usage_error(f"unknown --planted-bug {args.planted_bug!r} for --data-plane; "
                          "one of " + ", ".join(_data_plane_bugs()))
    if args.faults not in ("all", "none"):
        raise usage_error("--data-plane takes --faults all or none")
    seeds, jobs = _seeds_and_jobs(args)
    spec = DataPlaneSpec(brokers=args.brokers, faults=args.faults == "all",
                         metadata_freezes=args.metadata_freezes, planted_bug=args.planted_bug,
                         **({} if args.fault_window_ms is None
                            else {"fault_window_ms": max(0, args.fault_window_ms)}))
    if not args.json:
        print(f"kraft sim --data-plane: seeds {seeds.start}..{seeds.stop - 1}, "
              f"{spec.brokers} brokers, faults {args.faults}, {jobs} jobs", flush=True)
    started, results = time.monotonic(), []
    with ProgressDisplay("sim", total=len(seeds), unit="seeds", rate=True,
                         enabled=args.progress) as display:
        for result in sweep(spec, seeds, jobs=jobs, stop_on_violation=not args.keep_going):
            results.append(result)
            display.update(completed=len(results),
                           violations=sum(not r.ok for r in results))
    summary = summarize(results, time.monotonic() - started)
    failures = [r for r in results if not r.ok]
    if args.json:
        print(json.dumps({**summary, "failures": [
            {"seed": r.seed, "invariant": r.invariant, "detail": r.detail,
             "replay": spec.replay_command(r.seed)} for r in failures]}))
        return 1 if failures else 0
    for result in failures:
        print(f"\nVIOLATION seed={result.seed} invariant={result.invariant}")
        print(f"  {result.detail}\n  last events:")
        for line in result.trace[-args.trace:]:
            print(f"  {line}")
        print(f"replay: {spec.replay_command(result.seed)}")
    print(f"{'FAILED' if failures else 'ok'}: {summary['seeds']} seeds, "
          f"{summary['violations']} violations ({summary['wall_s']:.1f}s wall)")
    print("  per seed (every partition), median (max): " + ", ".join(
        f"{name} {summary[key]['median']:g} ({summary[key]['max']})" for name, key in (
            ("leader changes", "leader_changes_per_seed"),
            ("ISR changes", "isr_changes_per_seed"),
            ("truncations", "truncations_per_seed"))))
    print("  faults by kind: " + ", ".join(
        f"{name} {count}" for name, count in summary["faults_injected"].items()))
    acked = summary["writes_acked"]
    print(f"  batches: acks=all {acked['acks_all']} acknowledged, acks=1 {acked['acks_1']} "
          f"acknowledged, acks=0 {summary['writes_sent_acks_0']} sent; "
          f"{summary['writes_refused']} refused")
    print(f"  producers: {summary['produce_retries']} retries, "
          f"{summary['duplicates_refused']} duplicates refused by the producer state, "
          f"{summary['producer_epoch_bumps']} epoch bumps")
    ordered = summary["ordered"]
    print(f"  KIP-253: {ordered['growths']} growths, {ordered['shrinks']} shrinks, "
          f"{ordered['removals']} partitions removed; {ordered['ordered_acked']} keyed "
          f"records acknowledged, {ordered['ordered_delivered']} delivered in key order "
          f"by the group's members over {ordered['generations']} generations")
    return 1 if failures else 0


def _print_summary(summary: dict[str, Any]) -> None:
    elections = summary["elections_per_seed"]
    sim_seconds = summary["sim_seconds_per_seed"]
    print(f"{'FAILED' if summary['violations'] else 'ok'}: {summary['seeds']} seeds, "
          f"{summary['violations']} violations ({summary['wall_seconds']:.1f}s wall, "
          f"{summary['jobs']} jobs, {summary['events_per_second']} events/s)")
    print(f"  elections per seed: median {elections['median']:g}, min {elections['min']}, "
          f"max {elections['max']} ({summary['elections']} in all)")
    print(f"  divergences: {summary['divergences']} (median "
          f"{summary['divergences_per_seed']['median']:g} per seed), multi-epoch: "
          f"{summary['multi_epoch_divergences']} (median "
          f"{summary['multi_epoch_divergences_per_seed']['median']:g} per seed)")
    print(f"  simulated time per seed: median {sim_seconds['median']:g} s; "
          f"{summary['events']} events, {summary['commits']} commits, "
          f"{summary['faults']} faults injected")
    counts = summary["fault_counts"]
    print("  faults by kind: " + ", ".join(f"{name} {count}" for name, count in counts.items()))
    if summary.get("reconfigurations"):
        print(f"  voter changes committed: {summary['reconfigurations']}")


def _guard(results: Any) -> Any:
    """Turn a scenario that does not fit the cluster size into a usage error."""
    from raft.sim.scenarios import NotApplicable

    try:
        yield from results
    except NotApplicable as exc:
        raise usage_error(f"--scenario: {exc}") from None


def _print_violation(result: Any) -> None:
    print(f"\nVIOLATION seed={result.seed} invariant={result.invariant}")
    print(f"  {result.detail}")
    print(f"  at {result.sim_time_ms:.3f} ms simulated, after {result.events} events; "
          "last events:")
    for line in result.trace:
        print(f"  {line}")
    print(f"replay: {result.replay}")

