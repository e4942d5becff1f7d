"""`kraft replay --compare RUN_A RUN_B`: two runs' availability and election figures side
by side, without Spark.

A run is the report directory a replay wrote (`kraft replay ... --out REPORT_DIR`): its
`report.json` holds the run's figures (`figures`, `tools.replay.time_axis.figures`). The
rule: a figure is compared only as the two reports give it; one unknown in either run
(a log without times, no `--faults`) shows as `null`, and its difference too. A missing
directory, one without report.json, or a report.json that is not a replay's report or
has no figures (written before them) is bad input: InputError, one line, exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tools.replay.inputs import InputError

REPORT_FILE = "report.json"
# (key in `figures`, what the text table calls it)
FIGURES = (
    ("span_ms", "time span of the log (ms)"),
    ("elections", "elections (epochs)"),
    ("elections_during_faults", "elections during a fault"),
    ("faults", "chaos faults"),
    ("fencings", "broker fencings"),
    ("fenced_ms", "time brokers were fenced (ms)"),
    ("isr_shrinks", "ISR shrinks"),
    ("isr_expands", "ISR expansions"),
    ("partitions", "partition lives"),
    ("partitions_leaderless", "partitions ever without a leader"),
    ("leaderless_ms", "time without a leader (ms, all partitions)"),
    ("max_leaderless_ms", "longest partition without a leader (ms)"),
    ("partitions_under_replicated", "partitions ever under-replicated"),
    ("under_replicated_ms", "time under-replicated (ms, all partitions)"),
    ("partitions_under_min_isr", "partitions ever below min.insync.replicas"),
    ("under_min_isr_ms", "time below min.insync.replicas (ms, all partitions)"),
)


def read_figures(run: Path) -> dict[str, Any]:
    """The figures of the replay report in `run`; InputError saying what is missing."""
    if not run.is_dir():
        raise InputError(f"--compare {run}: no such run directory (a replay's --out "
                         "REPORT_DIR)")
    path = run / REPORT_FILE
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"--compare {run}: no {REPORT_FILE} (not a replay's --out "
                         "REPORT_DIR)") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"--compare {path}: unreadable: {exc}") from None
    figures = report.get("figures") if isinstance(report, dict) else None
    if not isinstance(figures, dict):
        raise InputError(f"--compare {path}: no figures (a report written before kraft "
                         "replay kept them: replay the run again with --out)")
    return figures


def _difference(a: Any, b: Any) -> Any:
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    return b - a if numbers else None


def comparison(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per figure either run has: its key, label, both values and b - a."""
    return [{"figure": key, "label": label, "a": a.get(key), "b": b.get(key),
             "difference": _difference(a.get(key), b.get(key))}
            for key, label in FIGURES if key in a or key in b]


def compare_runs(run_a: Path, run_b: Path) -> dict[str, Any]:
    """What `--compare --json` prints."""
    return {"runs": {"a": str(run_a), "b": str(run_b)},
            "figures": comparison(read_figures(run_a), read_figures(run_b))}


def comparison_rows(compared: dict[str, Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
    """(columns, rows) of the text table: the figure, RUN_A, RUN_B, B - A."""
    runs = compared["runs"]
    columns = ["figure", runs["a"], runs["b"], "B - A"]
    rows = [(row["label"], row["a"], row["b"],
             None if row["difference"] is None else f"{row['difference']:+g}")
            for row in compared["figures"]]
    return columns, rows
