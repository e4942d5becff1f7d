"""The replay job: load every node's log, run the checks, analyse, and summarise.

`run_replay` is what `kraft replay` (and spark-submit, through `tools/replay/__main__.py`)
calls; tests call it with their shared SparkSession. It raises `InputError` for bad
input (exit 2) and otherwise returns a `ReplayResult` whose `passed` decides exit 0 or 1.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F  # noqa: N812

from tools.replay import checks as checks_module
from tools.replay.analysis import Analysis, analyse
from tools.replay.checkpoint import check_checkpoints, read_checkpoint
from tools.replay.checks import CheckResult, Context
from tools.replay.crossnode import (
    committed_end,
    committed_prefix,
    divergence,
    log_matching,
    versions_of,
)
from tools.replay.inputs import InputError, ReplayInput
from tools.replay.load import CORRUPT, NODE_PASS, load_records
from tools.replay.progress import Progress

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResult:
    checks: tuple[CheckResult, ...]
    analysis: Analysis
    record_copies: int
    replay_input: ReplayInput
    seconds: dict[str, float]
    report_path: Path | None = None

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> list[str]:
        return [c.name for c in self.checks if not c.passed]

    def check(self, name: str) -> CheckResult:
        return next(c for c in self.checks if c.name == name)

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "failed": self.failed, "records": self.record_copies,
                "voters": list(self.replay_input.voters),
                "voters_source": self.replay_input.voters_source,
                "nodes": {str(n.node_id): str(n.log_dir) for n in self.replay_input.nodes},
                "checks": [c.to_json() for c in self.checks],
                "analysis": self.analysis.to_json(), "seconds": self.seconds,
                "report": None if self.report_path is None else str(self.report_path)}


def _side_rows(loaded: Any) -> list[Any]:
    """The NODE_PASS rows (decoded from JSON); InputError naming file and byte position
    if a segment is damaged. This first job also fills the cache."""
    side = loaded.filter(F.col("record_type").isin(CORRUPT, NODE_PASS)) \
        .select("record_type", "detail").collect()
    corrupt = [r.detail for r in side if r.record_type == CORRUPT]
    if corrupt:
        raise InputError("corrupt segment: " + "; ".join(corrupt[:5]))
    return [json.loads(r.detail) for r in side]


def run_replay(spark: Any, replay_input: ReplayInput, *, out_dir: Path | None = None,
               progress: Progress | None = None, with_analysis: bool = True) -> ReplayResult:
    def phase(name: str) -> None:
        if progress is not None:
            progress.phase(name)

    seconds: dict[str, float] = {}
    started = time.monotonic()
    checkpoints = [c for c in (read_checkpoint(n) for n in replay_input.nodes) if c]
    phase(f"reading {replay_input.segment_count} segment(s) of "
          f"{len(replay_input.nodes)} node(s)")
    try:
        loaded = load_records(spark, replay_input).cache()
    except ValueError as exc:
        raise InputError(str(exc)) from None
    scan_rows = _side_rows(loaded)
    records = loaded.filter(~F.col("record_type").isin(CORRUPT, NODE_PASS))
    copies = sum(r[2]["records"] for r in scan_rows if r[0] == "summary")
    seconds["load"] = time.monotonic() - started

    mark = time.monotonic()
    phase("finding the committed prefix")
    voters, majority = replay_input.voters, replay_input.majority
    versions = versions_of(records, voters).cache()
    end = committed_end(versions, majority)
    ctx = Context(spark=spark, records=records, voters=voters,
                  voters_known=replay_input.voters_source != "all nodes", committed_end=end)
    results, summaries = checks_module.node_checks(ctx, scan_rows)
    phase("check log_matching")
    runs = {node: s["epochs"] for node, s in summaries.items()}
    results.insert(3, log_matching(versions, runs))
    phase("check committed_prefix")
    results.insert(4, committed_prefix(versions, end, majority, voters))
    seconds["checks"] = time.monotonic() - mark

    mark = time.monotonic()
    phase("analysis")
    analysis = analyse(records, divergence(versions, end, majority), end, voters, summaries,
                       full=with_analysis)
    seconds["analysis"] = time.monotonic() - mark

    mark = time.monotonic()
    phase(f"check broker_checkpoints ({len(checkpoints)} checkpoint(s))")
    reference = (None if analysis.reference_node is None
                 else replay_input.node(analysis.reference_node))
    results.append(check_checkpoints(spark, checkpoints, reference, end))
    seconds["checkpoints"] = time.monotonic() - mark

    result = ReplayResult(checks=tuple(results), analysis=analysis, record_copies=copies,
                          replay_input=replay_input, seconds=seconds)
    if out_dir is not None:
        from tools.replay.report import write_report

        mark = time.monotonic()
        phase(f"writing the report to {out_dir}")
        page = write_report(out_dir, result.to_json(), records, spark)
        seconds["report"] = time.monotonic() - mark
        seconds["total"] = time.monotonic() - started
        result = ReplayResult(checks=result.checks, analysis=analysis, record_copies=copies,
                              replay_input=replay_input, seconds=seconds, report_path=page)
        # report.json was written before the report timing existed: rewrite it whole
        (out_dir / "report.json").write_text(json.dumps(
            result.to_json(), indent=2, default=str), encoding="utf-8")
    versions.unpersist()
    loaded.unpersist()
    seconds.setdefault("total", time.monotonic() - started)
    log.info("replay done", extra={"passed": result.passed, "failed": result.failed})
    return result
