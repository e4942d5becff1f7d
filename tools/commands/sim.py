"""`kraft sim`: a deterministic simulation sweep of the raft core with fault injection.

Runs seeds `--seed`, `--seed`+1, ... (`--seeds` of them); on the first invariant
violation prints the seed, the invariant, the last events as a trace and the one-line
command that replays exactly that run, and exits 1. All clean: a summary, exit 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from tools.errors import usage_error

_BAR_WIDTH = 30


def configure(parser: argparse.ArgumentParser, verb_name: str) -> None:
    parser.add_argument("--voters", type=int, default=5, help="number of voters (1-9)")
    parser.add_argument("--observers", type=int, default=2, help="number of observers")
    parser.add_argument("--seeds", type=int, default=None,
                        help="how many seeds to run (default 1000, or 1 with --seed)")
    parser.add_argument("--seed", type=int, default=None,
                        help="first seed (default 1); with --seeds 1 replays one run")
    parser.add_argument("--faults", choices=("all", "net", "crash", "none"), default="all")
    parser.add_argument("--scenario", default=None, metavar="NAME",
                        help="run a RaftEventSimulationTest scenario per seed instead of "
                             "random faults: " + ", ".join(_scenario_names()))
    parser.add_argument("--fault-window-ms", type=int, default=4000,
                        help="simulated time during which faults are injected")
    parser.add_argument("--no-pre-vote", dest="pre_vote", action="store_false",
                        help="disable KIP-996 pre-vote")
    parser.add_argument("--planted-bug", default=None,
                        help="switch on a deliberate core bug (to test the checker)")
    parser.add_argument("--codec", action="store_true",
                        help="round-trip every message through the wire codec")
    parser.add_argument("--trace", type=int, default=60,
                        help="events shown before a violation")
    parser.add_argument("--keep-going", action="store_true",
                        help="run every seed even after a violation")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--no-progress", dest="progress", action="store_false")


def _scenario_names() -> list[str]:
    from raft.sim.scenarios import SCENARIOS

    return sorted(SCENARIOS)


def run(args: argparse.Namespace) -> int:
    from raft.sim.sweep import RunSpec, sweep

    if not 1 <= args.voters <= 9:
        raise usage_error(f"--voters must be 1..9, got {args.voters}")
    if args.observers < 0 or args.voters + args.observers > 32:
        raise usage_error(f"--observers must be 0..{32 - args.voters}, got {args.observers}")
    count = args.seeds if args.seeds is not None else (1 if args.seed is not None else 1000)
    if count < 1:
        raise usage_error(f"--seeds must be at least 1, got {count}")
    first = args.seed if args.seed is not None else 1
    if args.scenario is not None and args.scenario not in _scenario_names():
        raise usage_error(f"unknown scenario {args.scenario!r}; one of "
                          + ", ".join(_scenario_names()))
    spec = RunSpec(voters=args.voters, observers=args.observers, faults=args.faults,
                   fault_window_ms=args.fault_window_ms, pre_vote=args.pre_vote,
                   planted_bug=args.planted_bug, codec_roundtrip=args.codec,
                   trace_size=args.trace, scenario=args.scenario)
    seeds = range(first, first + count)
    if not args.json:
        what = f"scenario {args.scenario}" if args.scenario else f"faults {args.faults}"
        print(f"kraft sim: seeds {first}..{first + count - 1}, {args.voters} voters, "
              f"{args.observers} observers, {what}", flush=True)
    started = time.monotonic()
    totals = {"seeds": 0, "events": 0, "elections": 0, "commits": 0, "faults": 0}
    violations = []
    bar = _Progress(count) if args.progress else None
    results = sweep(spec, seeds, stop_on_violation=not args.keep_going)
    for result in _guard(results):
        totals["seeds"] += 1
        totals["events"] += result.events
        totals["elections"] += result.elections
        totals["commits"] += result.commits
        totals["faults"] += result.faults
        if not result.ok:
            violations.append(result)
        if bar is not None:
            bar.update(totals["seeds"], len(violations))
    if bar is not None:
        bar.done()
    elapsed = time.monotonic() - started
    summary: dict[str, Any] = {**totals, "violations": len(violations),
                               "first_seed": first, "wall_seconds": round(elapsed, 2),
                               "events_per_second": round(totals["events"] / elapsed)
                               if elapsed > 0 else None}
    if args.json:
        summary["failures"] = [r.to_json() for r in violations]
        print(json.dumps(summary))
    else:
        for result in violations:
            _print_violation(result)
        print(f"{'FAILED' if violations else 'ok'}: {totals['seeds']} seeds, "
              f"{totals['events']} events, {totals['elections']} elections, "
              f"{totals['commits']} commits, {totals['faults']} faults injected, "
              f"{len(violations)} violations ({elapsed:.1f}s, "
              f"{summary['events_per_second']} events/s)")
    return 1 if violations else 0


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


class _Progress:
    def __init__(self, total: int) -> None:
        self.total = total
        self._shown = -1

    def update(self, done: int, failed: int) -> None:
        filled = _BAR_WIDTH * done // self.total
        if filled == self._shown and done != self.total:
            return
        self._shown = filled
        bar = "#" * filled + "." * (_BAR_WIDTH - filled)
        sys.stderr.write(f"\r[{bar}] {done}/{self.total} seeds, {failed} violations")
        sys.stderr.flush()

    def done(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()
