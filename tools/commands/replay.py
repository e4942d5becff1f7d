"""`kraft replay`: replay every node's metadata log with Spark and check the copies agree.

    kraft replay (--cluster DIR | --logs PATH ...) [--master local[*] | spark://HOST:PORT]
                 [--out REPORT_DIR] [--history FILE] [--faults FILE]
                 [--sql QUERY | --sql-file FILE] [--json]
    kraft replay --compare RUN_A RUN_B [--json]

`--history FILE`: acknowledged writes, one JSON object a line (format in
`tools.replay.acknowledged`), checked against the brokers' partition logs.

`--faults FILE`: a chaos run's fault log (`kraft chaos` writes DIR/faults.jsonl; format
in `tools.replay.faults`), the `faults` table beside the time-axis tables, and a lane of
the report's timeline.

`--compare RUN_A RUN_B`: two earlier replays' report directories (`--out`), their
availability and election figures side by side (`tools.replay.compare`), as a table or
with `--json` one object; no Spark runs. A missing run directory is one line, exit 2.

`--sql QUERY` / `--sql-file FILE`: after the replay, run one Spark SQL query over its
tables (temp views: `tools.replay.views`, docs/replay.md) and print its rows, as a table
or, with `--json`, one JSON object a line, in place of the report. A query Spark refuses
is one error line, exit 2; failed checks still exit 1 (one line on stderr).

Exit 0 when every check passes, 1 naming each failed check, 2 on bad input (a missing
directory, a corrupt segment named with its file and byte position). Running the same
job under `spark-submit` is described in `tools.replay`.

The text report is a legend line, then one line per check (its verdict, name, violations
and note, with its first examples below a failure), then the nodes. When no node holds a
record or a snapshot (nodes formatted that never ran) there is nothing to check: one line
says so, exit 0, and no Spark job runs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.errors import CommandError

if TYPE_CHECKING:
    from tools.replay.inputs import ReplayInput


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--cluster", type=Path, metavar="DIR",
                        help="a local cluster directory (DIR/node-N/data per node)")
    source.add_argument("--logs", type=Path, nargs="+", metavar="PATH",
                        help="log dirs (or their __cluster_metadata-0 directories)")
    source.add_argument("--compare", type=Path, nargs=2, metavar=("RUN_A", "RUN_B"),
                        help="compare two replays' report directories (their --out): "
                        "availability and election figures side by side")
    parser.add_argument("--master", default=None,
                        help="Spark master: local[*] (default), local[N] or spark://HOST:PORT")
    parser.add_argument("--out", type=Path, metavar="REPORT_DIR",
                        help="write report.json, Parquet tables and report.html here")
    parser.add_argument("--shuffle-partitions", type=int, default=8,
                        help="spark.sql.shuffle.partitions (default 8)")
    parser.add_argument("--executor-memory", metavar="SIZE",
                        help="spark.executor.memory on a cluster, e.g. 512m (at most a "
                        "worker's --memory; default: Spark's, 1g)")
    parser.add_argument("--history", type=Path, metavar="FILE",
                        help="acknowledged writes (JSON lines: topic, partition, offset, "
                        "value or value_sha256, key) to find in the partition logs")
    parser.add_argument("--faults", type=Path, metavar="FILE",
                        help="a chaos run's fault log (DIR/faults.jsonl) as the faults table "
                        "and on the report's timeline")
    query = parser.add_mutually_exclusive_group()
    query.add_argument("--sql", metavar="QUERY",
                       help="a Spark SQL query over the replay's tables, run after it")
    query.add_argument("--sql-file", type=Path, metavar="FILE",
                       help="the same, read from FILE")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


LEGEND = ("legend: VERDICT CHECK: N violation(s) (NOTE); ok = none found, FAIL = the rule "
          "is broken (first examples below it), skip = nothing of its kind to check")


def nothing_to_replay(replay_input: ReplayInput, segment_bytes: int) -> str | None:
    """The line to print instead of a report when the logs hold no record and no node has
    a snapshot (`segment_bytes`: the size of every segment together); None otherwise."""
    if segment_bytes or replay_input.snapshot_count:
        return None
    ids = ", ".join(str(n.node_id) for n in replay_input.nodes)
    return (f"nothing to replay: the metadata logs of node(s) {ids} hold no record and no "
            "snapshot (formatted, never run)")


def report_text(result: Any) -> str:
    """The text report: the legend, a line per check, then the nodes."""
    lines = [LEGEND]
    for check in result.checks:
        status = "skip" if check.skipped else ("ok  " if check.passed else "FAIL")
        lines.append(f"{status} {check.name}: {check.violations} violation(s)"
                     + (f"  ({check.note})" if check.note else ""))
        for example in check.examples[:3]:
            lines.append(f"       {json.dumps(example, default=str)}")
    nodes = result.analysis.nodes
    lines.append(f"{result.record_copies} record copies on {len(nodes)} node(s); committed "
                 f"prefix ends at offset {result.analysis.committed_end}")
    for node in nodes:
        lines.append(f"  node {node['node']} ({node['role']}): log end {node['end_offset']}, "
                     f"lag {node['lag']}, last epoch {node['last_epoch']}")
    if result.report_path is not None:
        lines.append(f"report: {result.report_path}")
    return "\n".join(lines)


def require_extra(extra: str, command: str, modules: Iterable[str]) -> None:
    """Exit 2 with one line naming the extra (pyproject.toml) when one of its `modules`
    does not import: `pip install .` leaves out pyspark and matplotlib ([replay]) and
    the Kafka clients ([chaos]), which only these commands need (kraft chaos and kraft
    demo call this too, before a cluster starts)."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            raise CommandError(f"{command} needs the [{extra}] extra: "
                               f"pip install 'kraft-py[{extra}]'", exit_code=2) from None


def java_problem() -> str | None:
    """Why PySpark could not start a JVM here (it runs $JAVA_HOME/bin/java, else `java` on
    the PATH); None when one is there."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = Path(java_home) / "bin" / "java"
        return None if os.access(java, os.X_OK) else \
            f"JAVA_HOME is {java_home}, but {java} is not an executable"
    if shutil.which("java") is None:
        return "no java on the PATH and JAVA_HOME is not set"
    return None


def run(args: argparse.Namespace) -> int:
    if args.compare is not None:
        return _compare(*args.compare, as_json=args.json)
    return _replay(args)


def _replay(args: argparse.Namespace) -> int:
    # matplotlib draws the report's plots: only --out needs it
    require_extra("replay", "kraft replay",
                  ("pyspark", "matplotlib") if args.out is not None else ("pyspark",))
    from tools.replay.acknowledged import read_history
    from tools.replay.faults import read_faults
    from tools.replay.inputs import InputError, from_cluster, from_logs

    try:  # absolute paths: a cluster's executors do not run in this directory
        replay_input = from_cluster(args.cluster.resolve()) if args.cluster \
            else from_logs([p.resolve() for p in args.logs])
        history = None if args.history is None else read_history(args.history)
        faults = None if args.faults is None else read_faults(args.faults)
    except InputError as exc:
        raise CommandError(str(exc), exit_code=2) from None
    query = _query(args)
    if args.out is not None:  # before the Spark job, not after it
        try:
            args.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CommandError(f"--out {args.out}: {exc.strerror or exc}", exit_code=2) \
                from None

    from pyspark.sql import SparkSession

    from tools.replay.job import run_replay
    from tools.replay.load import spark_session
    from tools.replay.progress import Progress

    owned = SparkSession.getActiveSession() is None  # tests share their own session
    if owned and (problem := java_problem()) is not None:
        raise CommandError(f"kraft replay needs Java 17 for Spark: {problem} (install it with "
                           "'apt-get install openjdk-17-jre-headless')", exit_code=2)
    empty = nothing_to_replay(replay_input, sum(
        segment.stat().st_size for node in replay_input.nodes for segment in node.segments))
    if empty is not None:
        print(json.dumps({"passed": True, "nothing_to_replay": empty}) if args.json else empty)
        return 0
    spark = spark_session(args.master, shuffle_partitions=args.shuffle_partitions,
                          executor_memory=args.executor_memory)
    out_dir = None if args.out is None else args.out.resolve()  # written by executors too
    try:
        with Progress(spark) as progress:
            result = run_replay(spark, replay_input, out_dir=out_dir, progress=progress,
                                history=history, views=query is not None, faults=faults)
        if query is not None:
            return _print_query(spark, query, result, as_json=args.json)
    except InputError as exc:
        raise CommandError(str(exc), exit_code=2) from None
    finally:
        if owned:
            spark.stop()
    if args.json:
        print(json.dumps(result.to_json(), default=str))
    else:
        print(report_text(result))
    if not result.passed:
        message = "replay failed check(s): " + ", ".join(result.failed)
        if args.json:
            print(message, file=sys.stderr)
            return 1
        raise CommandError(message, exit_code=1)
    return 0


def _query(args: argparse.Namespace) -> str | None:
    """The query of --sql or --sql-file; an unreadable file is exit 2."""
    if args.sql_file is None:
        return str(args.sql) if args.sql is not None else None
    try:
        return str(args.sql_file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CommandError(f"--sql-file {args.sql_file}: {exc.strerror or exc}",
                           exit_code=2) from None
    except UnicodeDecodeError as exc:
        raise CommandError(f"--sql-file {args.sql_file}: {exc}", exit_code=2) from None


def _print_query(spark: Any, query: str, result: Any, *, as_json: bool) -> int:
    """The query's rows on stdout; exit 2 for a query Spark refuses, 1 for failed checks."""
    from tools.replay.views import QueryError, query_json_lines, query_table, run_query

    try:
        columns, rows = run_query(spark, query)
    except QueryError as exc:
        raise CommandError(f"bad --sql query: {exc}", exit_code=2) from None
    text = query_json_lines(columns, rows) if as_json else query_table(columns, rows)
    if text:
        print(text)
    if not result.passed:
        print("replay failed check(s): " + ", ".join(result.failed), file=sys.stderr)
        return 1
    return 0


def _compare(run_a: Path, run_b: Path, *, as_json: bool) -> int:
    """Two report directories' figures side by side; exit 2 for a run that is not one."""
    from tools.replay.compare import compare_runs, comparison_rows
    from tools.replay.inputs import InputError
    from tools.replay.views import query_table

    try:
        compared = compare_runs(run_a, run_b)
    except InputError as exc:
        raise CommandError(str(exc), exit_code=2) from None
    print(json.dumps(compared) if as_json else query_table(*comparison_rows(compared)))
    return 0
