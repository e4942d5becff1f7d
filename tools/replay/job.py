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

from tools.replay.analysis import Analysis, analyse, node_summary, reference_node
from tools.replay.checkpoint import check_checkpoints, read_checkpoint
from tools.replay.checks import CheckResult, node_checks, node_views
from tools.replay.crossnode import (
    Comparison,
    add_records,
    batch_versions,
    committed_end,
    committed_prefix,
    divergence,
    log_matching,
)
from tools.replay.inputs import InputError, ReplayInput
from tools.replay.load import NodeIndex, run_tasks
from tools.replay.progress import Progress
from tools.replay.sequential import ScanResult

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


def _root(replay_input: ReplayInput) -> int:
    """The node scanned in full in the first pass, while the others are only indexed:
    the voter with the most segment bytes (ties: the lowest id, as `reference_node`
    breaks them), the likeliest reference log and the one the most nodes are prefixes of."""
    with_segments = [n for n in replay_input.nodes if n.segments]
    voters = [n for n in with_segments if n.node_id in replay_input.voters] or with_segments

    def size(node: Any) -> int:
        try:
            return sum(path.stat().st_size for path in node.segments)
        except OSError:
            return 0

    return max(voters, key=lambda n: (size(n), -n.node_id)).node_id


def _run(spark: Any, replay_input: ReplayInput,
         plans: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """`load.run_tasks`, with a damaged or unreadable segment as InputError."""
    results = run_tasks(spark, replay_input, plans)
    corrupt = [message for r in results.values() for message in r["corrupt"]]
    if corrupt:
        raise InputError("corrupt segment: " + "; ".join(corrupt[:5]))
    return results


def _summary(index: NodeIndex) -> dict[str, Any]:
    """What the node table shows, from the batch index: records, first and end offset,
    highest epoch, segments holding records, and the epoch runs [epoch, first, last]."""
    records, start, last, last_epoch = 0, None, None, None
    files: set[int] = set()
    runs: list[list[int]] = []
    for base, epoch, count, file_id in zip(index.offsets, index.epochs, index.counts,
                                           index.file_ids, strict=True):
        if not count:
            continue
        records += count
        files.add(file_id)
        if start is None:
            start = base
        if runs and runs[-1][0] == epoch and runs[-1][2] + 1 == base:
            runs[-1][2] = base + count - 1
        else:
            runs.append([epoch, base, base + count - 1])
        last = base + count - 1
        last_epoch = epoch if last_epoch is None else max(epoch, last_epoch)
    return {"node": index.node, "records": records, "start_offset": start,
            "end_offset": None if last is None else last + 1, "last_epoch": last_epoch,
            "segments": len(files), "epochs": runs}


def _second_pass(spark: Any, replay_input: ReplayInput, indexes: dict[int, NodeIndex],
                 divergent: list[int], comparison: Comparison,
                 with_analysis: bool) -> tuple[dict[int, ScanResult], dict[Any, Any]]:
    """Scan the nodes that are not a prefix of the root's log, and decode the batches
    that overlap another version; one Spark job (none when every copy agrees)."""
    plans: dict[int, dict[str, Any]] = {
        n: {"scan": True, "analysis": with_analysis} for n in divergent}
    wanted: dict[tuple[str, int], tuple[int, int]] = {}
    for version in comparison.contested:
        node, seq = version.locator
        index = indexes[node]
        path = index.files[index.file_ids[seq]]
        plans.setdefault(node, {}).setdefault("decode", {}).setdefault(path, []).append(
            index.positions[seq])
        wanted[(path, index.positions[seq])] = version.locator
    for plan in plans.values():
        if not plan.get("scan"):
            plan["files"] = sorted(plan["decode"])
    if not plans:
        return {}, {}
    results = _run(spark, replay_input, plans)
    scans = {n: r["scan"] for n, r in results.items() if r["scan"] is not None}
    decoded = {wanted[key]: rows for r in results.values() for key, rows in r["decoded"].items()}
    return scans, decoded


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
    root = _root(replay_input)
    plans: dict[int, dict[str, Any]] = {root: {"index": True, "scan": True,
                                               "analysis": with_analysis}}
    plans.update({n.node_id: {"index": True} for n in replay_input.nodes
                  if n.segments and n.node_id != root})
    first = _run(spark, replay_input, plans)
    indexes: dict[int, NodeIndex] = {n: r["index"] for n, r in first.items()}
    scans: dict[int, ScanResult] = {root: first[root]["scan"]}
    summaries: dict[int, dict[str, Any]] = {}
    for node, index in indexes.items():  # identical copies (and files) share one summary
        twin = next((n for n in summaries if indexes[n].digests == index.digests
                     and indexes[n].file_ids == index.file_ids), None)
        summaries[node] = _summary(index) if twin is None else {
            **summaries[twin], "node": node, "epochs": [list(r) for r in summaries[twin]["epochs"]]}
    copies = sum(s["records"] for s in summaries.values())
    seconds["load"] = time.monotonic() - started

    mark = time.monotonic()
    phase("comparing the nodes' batches")
    voters = replay_input.voters
    prefixes = {n: len(index) for n, index in indexes.items()
                if index.is_prefix_of(indexes[root])}
    high_watermarks = {n.node_id: n.high_watermark for n in replay_input.nodes
                       if n.high_watermark is not None}
    comparison = batch_versions(indexes, root, prefixes, voters, high_watermarks)
    divergent = sorted(set(indexes) - set(prefixes))
    more, decoded = _second_pass(spark, replay_input, indexes, divergent, comparison,
                                 with_analysis)
    scans.update(more)
    add_records(comparison, decoded)
    end = committed_end(comparison)
    rows: list[tuple[Any, ...]] = []
    counts: dict[int, dict[str, int]] = {}
    for node, summary in summaries.items():
        scan, batches = (scans[root], prefixes[node]) if node in prefixes else \
            (scans[node], len(indexes[node]))
        last = None if summary["end_offset"] is None else summary["end_offset"] - 1
        mine, counts[node] = node_views(scan, batches, node, (last, summary["last_epoch"]))
        rows += mine
        summary["violation_counts"] = counts[node]
    results = node_checks(rows, counts, voters,
                          voters_known=replay_input.voters_source != "all nodes")
    results.insert(3, log_matching(comparison, {n: s["epochs"] for n, s in summaries.items()}))
    results.insert(4, committed_prefix(comparison, end))
    seconds["checks"] = time.monotonic() - mark

    mark = time.monotonic()
    phase("analysis")
    nodes = node_summary(divergence(comparison, end), end, voters, summaries)
    reference = reference_node(nodes, end)
    aggregates, claims = None, []
    if with_analysis and reference is not None:
        owner = root if reference in prefixes and prefixes[reference] == len(indexes[root]) \
            else reference
        if owner not in scans or scans[owner].aggregates is None:
            plan = {reference: {"scan": True, "analysis": True}}
            owner, scans[reference] = reference, _run(spark, replay_input, plan)[reference]["scan"]
        aggregates = scans[owner].aggregates
        claims = scans[owner].view(len(indexes[owner]))[2]
    analysis = analyse(nodes, end, reference, aggregates, claims)
    seconds["analysis"] = time.monotonic() - mark

    mark = time.monotonic()
    phase(f"check broker_checkpoints ({len(checkpoints)} checkpoint(s))")
    reference_input = None if reference is None else replay_input.node(reference)
    results.append(check_checkpoints(spark, checkpoints, reference_input, end))
    seconds["checkpoints"] = time.monotonic() - mark

    result = ReplayResult(checks=tuple(results), analysis=analysis, record_copies=copies,
                          replay_input=replay_input, seconds=seconds)
    if out_dir is not None:
        from tools.replay.report import write_report

        mark = time.monotonic()
        phase(f"writing the report to {out_dir}")
        page = write_report(out_dir, result.to_json(), spark, replay_input)
        seconds["report"] = time.monotonic() - mark
        seconds["total"] = time.monotonic() - started
        result = ReplayResult(checks=result.checks, analysis=analysis, record_copies=copies,
                              replay_input=replay_input, seconds=seconds, report_path=page)
        # report.json was written before the report timing existed: rewrite it whole
        (out_dir / "report.json").write_text(json.dumps(
            result.to_json(), indent=2, default=str), encoding="utf-8")
    seconds.setdefault("total", time.monotonic() - started)
    log.info("replay done", extra={"passed": result.passed, "failed": result.failed})
    return result
