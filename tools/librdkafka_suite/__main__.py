"""Run librdkafka's own test suite against a local kraft-py cluster (a manual run, not
part of `make test`: it needs a librdkafka checkout; docs/librdkafka-suite.md):

    python -m tools.librdkafka_suite --source DIR [--tests 0001-0099,0112-0137]
                                     [--timeout 120] [--work-dir DIR] [--json]
                                     [--include-exceptions] [--full] [--markdown]

It checks the checkout (DIR/tests/test.c, DIR/src/rdkafka.h), builds librdkafka and its
test-runner when DIR/tests/test-runner is missing, groups the selected tests by the
scenario they run on (`scenarios.py`: librdkafka's default and noautocreate broker
settings, an SSL and a SASL/PLAIN cluster), and per scenario in turn starts 3
controllers and 3 brokers on 127.0.0.1 (`tools.cluster`) with its settings, writes a
test.conf naming the brokers (how to log in, and the timeout multiplier of librdkafka's
own harness), and runs each test number in its own `test-runner -Q -L` (quick mode,
unless `--full`; tests that need no broker are left out), one at a time, killed by its
pid at `--timeout` seconds (`LONG_TESTS`: more); then it stops that cluster by pid
before the next one starts. A scenario whose selected tests are all exceptions starts
no cluster. It prints a table (test, name, scenario, outcome, seconds, note;
`--markdown`: as Markdown), stops the running cluster by pid on SIGINT and on SIGTERM
too (exit 130, 143), and exits 0 when no test outside the exceptions failed
(`tools/librdkafka_suite/exception_list.py`), 1 when one did, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from tools.cluster import Cluster, ClusterError
from tools.errors import CommandError, StoppedBySignal, stop_on_signals
from tools.librdkafka_suite.client_certs import write_client_files
from tools.librdkafka_suite.exception_list import EXCEPTIONS, FULL_MODE_EXCEPTIONS
from tools.librdkafka_suite.outcomes import (
    Row,
    SuiteInputError,
    SuiteTest,
    counts,
    parse_test_ranges,
    parse_test_table,
    render_markdown,
    render_table,
    rows_for_run,
    runs_by_scenario,
    split_runs,
    unexpected_failures,
)
from tools.librdkafka_suite.scenarios import (
    SCENARIOS,
    ClientFiles,
    Scenario,
    conf_text,
    file_suffix,
    runner_environment,
)

DEFAULT_TESTS = "0001-0099,0112-0137"
BUILD_TIMEOUT_S = 3600.0
CLUSTER_START_TIMEOUT_S = 60.0
# the Kafka release whose protocol the brokers speak (docs/kafka-compatibility.md): tests
# gated on a broker version (TEST_BRKVER in test.c) run when 3.9 has what they need
KAFKA_VERSION = "3.9.0"
# test numbers whose run takes longer than --timeout's default: the bound is raised to
# this for them (0081_admin: 241 s of sub-tests on two cores shared with a soak)
LONG_TESTS = {81: 420.0}


def checkout_version(source: Path) -> str:
    """`2.15.0 (v2.15.0-1-g4c3b017c3)`: rdkafka.h's version and, in a git checkout,
    `git describe`. SuiteInputError when `source` is no librdkafka checkout."""
    header, test_c = source / "src" / "rdkafka.h", source / "tests" / "test.c"
    if not (header.is_file() and test_c.is_file()):
        raise SuiteInputError(f"{source} is not a librdkafka checkout (no src/rdkafka.h "
                              "and tests/test.c)")
    match = re.search(r"#define RD_KAFKA_VERSION 0x([0-9a-f]{8})", header.read_text())
    if match is None:
        raise SuiteInputError(f"{header} defines no RD_KAFKA_VERSION")
    raw = int(match.group(1), 16)
    version = f"{raw >> 24}.{(raw >> 16) & 0xff}.{(raw >> 8) & 0xff}"
    described = subprocess.run(["git", "-C", str(source), "describe", "--tags", "--always"],
                               capture_output=True, text=True, check=False, timeout=30)
    return f"{version} ({described.stdout.strip()})" if described.returncode == 0 \
        else version


def build(source: Path, log: Path) -> None:
    """Configure (when not configured) and build the libraries and the test-runner, each
    step bounded by BUILD_TIMEOUT_S; CommandError naming the log on a failed step."""
    steps = ([] if (source / "Makefile.config").is_file() else [["./configure"]]) + [
        ["make", "-j2", "libs"], ["make", "-C", "tests", "build"]]
    with open(log, "ab") as out:
        for step in steps:
            print(f"building: {' '.join(step)} (log: {log})", file=sys.stderr)
            try:
                code = subprocess.run(step, cwd=source, stdout=out, stderr=subprocess.STDOUT,
                                      timeout=BUILD_TIMEOUT_S, check=False).returncode
            except subprocess.TimeoutExpired:
                code = None
            if code != 0:
                raise CommandError(f"`{' '.join(step)}` in {source} failed (exit {code}); "
                                   f"see {log}")


def start_cluster(directory: Path, scenario: Scenario) -> Cluster:
    cluster = Cluster.create(directory, voters=3, brokers=3, settings=scenario.settings,
                             tls=scenario.tls)
    try:
        cluster.start()
        cluster.wait_for_leader(CLUSTER_START_TIMEOUT_S)
        cluster.wait_for_brokers(CLUSTER_START_TIMEOUT_S, watch=True)
    except BaseException:
        cluster.shut_down()
        raise
    return cluster


def run_number(source: Path, number: int, conf: Path, log: Path, timeout_s: float,
               quick: bool, environment: Mapping[str, str]) -> tuple[str, int | None, float]:
    """One `test-runner` for the tests numbered `number`, `environment` added to its
    own: its output, its exit code (None: killed by its pid at `timeout_s`) and the
    seconds it took."""
    env = dict(os.environ, **environment, TESTS=f"{number:04d}",
               TEST_KAFKA_VERSION=KAFKA_VERSION, RDKAFKA_TEST_CONF=str(conf),
               LD_LIBRARY_PATH=f"{source / 'src'}:{source / 'src-cpp'}")
    start = time.monotonic()
    with open(log, "wb") as out:
        process = subprocess.Popen(["./test-runner", *(["-Q"] if quick else []), "-L", "-p1"],
                                   cwd=source / "tests",
                                   env=env, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            exit_code: int | None = process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
            exit_code = None
        finally:
            if process.poll() is None:  # stopped by a signal mid-test: not left behind
                os.kill(process.pid, signal.SIGKILL)
                process.wait(10)
    return log.read_text(errors="replace"), exit_code, time.monotonic() - start


def run_scenario(source: Path, work: Path, scenario: Scenario,
                 runs: Sequence[list[SuiteTest]], timeout_s: float,
                 listed: Mapping[str, str], *, include_exceptions: bool,
                 quick: bool) -> list[Row]:
    """The rows of `runs` (the tests of each test number) on a cluster of `scenario`,
    started here and stopped by pid before it returns; none started when every test is
    an exception that is not to be run."""
    to_run, not_run = split_runs(runs, listed, include_exceptions=include_exceptions)
    rows = [row for tests in not_run for row in rows_for_run(tests, "", 0, 0.0, listed)]
    if not to_run:
        return rows
    suffix = file_suffix(scenario.name)
    print(f"scenario {scenario.name}: starting its cluster", file=sys.stderr)
    cluster = start_cluster(work / f"cluster{suffix}", scenario)
    try:
        client: ClientFiles | None = (write_client_files(work / f"client{suffix}",
                                                         cluster.directory)
                                      if scenario.tls else None)
        conf = work / f"test{suffix}.conf"
        conf.write_text(conf_text(scenario, [info.client_address
                                             for info in cluster.nodes.values()
                                             if info.client_address], client))
        environment = runner_environment(scenario, client)
        for tests in to_run:
            number = tests[0].number
            cluster.raise_if_a_node_died()
            output, code, seconds = run_number(source, number, conf,
                                               work / f"test-{number:04d}{suffix}.log",
                                               max(timeout_s, LONG_TESTS.get(number, 0.0)),
                                               quick, environment)
            new = rows_for_run(tests, output, code, seconds, listed)
            for row in new:
                print(f"{row.number:04d} {row.name} [{row.scenario}]: {row.outcome} "
                      f"({row.seconds:.1f} s) {row.note}", file=sys.stderr)
            rows += new
    finally:
        cluster.shut_down()
    return rows


def run_suite(source: Path, work: Path, table: list[SuiteTest], numbers: list[int],
              timeout_s: float, listed: Mapping[str, str], *, include_exceptions: bool,
              quick: bool) -> list[Row]:
    """Every scenario's runs in turn (one cluster at a time); the rows in test.c's
    order."""
    rows: list[Row] = []
    for name, runs in runs_by_scenario(table, numbers):
        rows += run_scenario(source, work, SCENARIOS[name], runs, timeout_s, listed,
                             include_exceptions=include_exceptions, quick=quick)
    order = {test.name: index for index, test in enumerate(table)}
    return sorted(rows, key=lambda row: order[row.name])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.librdkafka_suite",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, type=Path,
                        help="a librdkafka checkout (built here when tests/test-runner is "
                             "missing)")
    parser.add_argument("--tests", default=DEFAULT_TESTS,
                        help=f"test numbers, e.g. {DEFAULT_TESTS}")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds one test number may run before it is killed")
    parser.add_argument("--work-dir", type=Path,
                        help="where the cluster, test.conf and each test's log go "
                             "(default: a new temporary directory, kept)")
    parser.add_argument("--include-exceptions", action="store_true",
                        help="run the listed exceptions too (their failures do not fail "
                             "the run)")
    parser.add_argument("--full", action="store_true",
                        help="every sub-test, not test-runner's quick mode (-Q); adds the "
                             "full-mode exceptions")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--markdown", action="store_true",
                        help="the table as Markdown (docs/librdkafka-suite.md)")
    args = parser.parse_args(argv)
    try:
        numbers = parse_test_ranges(args.tests)
        source = args.source.resolve()
        version = checkout_version(source)
        table = parse_test_table((source / "tests" / "test.c").read_text())
        if args.timeout <= 0:
            raise SuiteInputError("--timeout must be positive")
    except SuiteInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="librdkafka-suite-"))
    work.mkdir(parents=True, exist_ok=True)
    listed = {**EXCEPTIONS, **FULL_MODE_EXCEPTIONS} if args.full else EXCEPTIONS
    stop_on_signals()
    start = time.monotonic()
    try:
        if not (source / "tests" / "test-runner").is_file():
            build(source, work / "build.log")
        rows = run_suite(source, work, table, numbers, args.timeout, listed,
                         include_exceptions=args.include_exceptions, quick=not args.full)
    except (CommandError, ClusterError) as error:
        print(f"error: {error}", file=sys.stderr)
        return getattr(error, "exit_code", 1)
    except StoppedBySignal as stopped:
        print(f"error: {stopped} (the cluster is stopped; logs in {work})", file=sys.stderr)
        return stopped.exit_code
    wall = time.monotonic() - start
    failed = unexpected_failures(rows, listed, {t.name: t for t in table})
    if args.json:
        print(json.dumps({"librdkafka": version, "mode": "full" if args.full else "quick",
                          "wall_seconds": round(wall, 1),
                          "counts": counts(rows), "work_dir": str(work),
                          "rows": [asdict(row) for row in rows]}, indent=2))
    else:
        print(render_markdown(rows) if args.markdown else render_table(rows))
        summary = ", ".join(f"{n} {outcome}" for outcome, n in counts(rows).items())
        print(f"librdkafka {version} ({'full' if args.full else 'quick'} mode): {summary}; "
              f"{len(failed)} unexpected failure(s) in "
              f"{wall:.0f} s (logs in {work})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
