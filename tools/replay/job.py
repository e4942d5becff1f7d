"""The replay job: load every node's log, run the checks, analyse, and summarise.

`run_replay` is what `kraft replay` (and spark-submit, through `tools/replay/__main__.py`)
calls; tests call it with their shared SparkSession. It raises `InputError` for bad
input (exit 2) and otherwise returns a `ReplayResult` whose `passed` decides exit 0 or 1.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
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


class _PhaseClock:
    """Announces each phase of the job (to `progress`, when there is one) and records how
    long it took in `seconds`, which the result and its report show."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.seconds: dict[str, float] = {}
        self.started = time.monotonic()

    @contextmanager
    def phase(self, key: str, description: str) -> Iterator[None]:
        mark = time.monotonic()
        if self.progress is not None:
            self.progress.phase(description)
        yield
        self.seconds[key] = time.monotonic() - mark

    def record_total(self) -> None:
        self.seconds.setdefault("total", time.monotonic() - self.started)


@dataclass(slots=True, kw_only=True)
class _FirstPass:
    """Every node's batch index, the root's full scan and the per-node summaries."""

    root: int
    indexes: dict[int, NodeIndex]
    scans: dict[int, ScanResult]
    summaries: dict[int, dict[str, Any]]

    @property
    def record_copies(self) -> int:
        return sum(s["records"] for s in self.summaries.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class _Comparison:
    """Which nodes hold a prefix of the root's log (node -> batches), the batch versions
    across nodes, and where the committed prefix ends."""

    prefixes: dict[int, int]
    versions: Comparison
    end: int


def _index_every_node(spark: Any, replay_input: ReplayInput,
                      with_analysis: bool) -> _FirstPass:
    """The first Spark job: index every node's batches and scan the root's in full."""
    root = _root(replay_input)
    plans: dict[int, dict[str, Any]] = {root: {"index": True, "scan": True,
                                               "analysis": with_analysis}}
    plans.update({n.node_id: {"index": True} for n in replay_input.nodes
                  if n.segments and n.node_id != root})
    first = _run(spark, replay_input, plans)
    indexes: dict[int, NodeIndex] = {n: r["index"] for n, r in first.items()}
    return _FirstPass(root=root, indexes=indexes, scans={root: first[root]["scan"]},
                      summaries=_summaries(indexes))


def _summaries(indexes: dict[int, NodeIndex]) -> dict[int, dict[str, Any]]:
    """`_summary` of every node; identical copies (and files) share one summary."""
    summaries: dict[int, dict[str, Any]] = {}
    for node, index in indexes.items():
        twin = next((n for n in summaries if indexes[n].digests == index.digests
                     and indexes[n].file_ids == index.file_ids), None)
        summaries[node] = _summary(index) if twin is None else {
            **summaries[twin], "node": node, "epochs": [list(r) for r in summaries[twin]["epochs"]]}
    return summaries


def _compare_copies(spark: Any, replay_input: ReplayInput, first: _FirstPass,
                    with_analysis: bool) -> _Comparison:
    """Line the nodes' batches up against the root's, scan the nodes that diverge from
    it (adding their scans to `first.scans`) and find the committed end."""
    indexes, root = first.indexes, first.root
    prefixes = {n: len(index) for n, index in indexes.items()
                if index.is_prefix_of(indexes[root])}
    high_watermarks = {n.node_id: n.high_watermark for n in replay_input.nodes
                       if n.high_watermark is not None}
    versions = batch_versions(indexes, root, prefixes, replay_input.voters, high_watermarks)
    divergent = sorted(set(indexes) - set(prefixes))
    more, decoded = _second_pass(spark, replay_input, indexes, divergent, versions,
                                 with_analysis)
    first.scans.update(more)
    add_records(versions, decoded)
    return _Comparison(prefixes=prefixes, versions=versions, end=committed_end(versions))


def _check_nodes(replay_input: ReplayInput, first: _FirstPass,
                 compared: _Comparison) -> list[CheckResult]:
    """The per-node checks over each node's view of its log, then log matching and the
    committed prefix across nodes. Adds each node's violation counts to its summary."""
    rows: list[tuple[Any, ...]] = []
    counts: dict[int, dict[str, int]] = {}
    for node, summary in first.summaries.items():
        scan, batches = (first.scans[first.root], compared.prefixes[node]) \
            if node in compared.prefixes else (first.scans[node], len(first.indexes[node]))
        last = None if summary["end_offset"] is None else summary["end_offset"] - 1
        mine, counts[node] = node_views(scan, batches, node, (last, summary["last_epoch"]))
        rows += mine
        summary["violation_counts"] = counts[node]
    results = node_checks(rows, counts, replay_input.voters,
                          voters_known=replay_input.voters_source != "all nodes")
    results.insert(3, log_matching(compared.versions,
                                   {n: s["epochs"] for n, s in first.summaries.items()}))
    results.insert(4, committed_prefix(compared.versions, compared.end))
    return results


def _analyse_reference(spark: Any, replay_input: ReplayInput, first: _FirstPass,
                       compared: _Comparison, with_analysis: bool
                       ) -> tuple[int | None, Analysis]:
    """The reference node (the one holding the committed log) and the analysis of its
    log, scanning it once more when no earlier scan kept its aggregates."""
    end, scans, indexes, root = compared.end, first.scans, first.indexes, first.root
    nodes = node_summary(divergence(compared.versions, end), end, replay_input.voters,
                         first.summaries)
    reference = reference_node(nodes, end)
    aggregates, claims = None, []
    if with_analysis and reference is not None:
        prefixes = compared.prefixes
        owner = root if reference in prefixes and prefixes[reference] == len(indexes[root]) \
            else reference
        if owner not in scans or scans[owner].aggregates is None:
            plan = {reference: {"scan": True, "analysis": True}}
            owner, scans[reference] = reference, _run(spark, replay_input, plan)[reference]["scan"]
        aggregates = scans[owner].aggregates
        claims = scans[owner].view(len(indexes[owner]))[2]
    return reference, analyse(nodes, end, reference, aggregates, claims)


def _with_report(result: ReplayResult, out_dir: Path, spark: Any,
                 clock: _PhaseClock) -> ReplayResult:
    """Write the HTML report and report.json to `out_dir`; the result names the page."""
    from tools.replay.report import write_report

    replay_input = result.replay_input
    with clock.phase("report", f"writing the report to {out_dir}"):
        page = write_report(out_dir, result.to_json(), spark, replay_input)
    clock.record_total()
    result = ReplayResult(checks=result.checks, analysis=result.analysis,
                          record_copies=result.record_copies, replay_input=replay_input,
                          seconds=clock.seconds, report_path=page)
    # report.json was written before the report timing existed: rewrite it whole
    (out_dir / "report.json").write_text(json.dumps(
        result.to_json(), indent=2, default=str), encoding="utf-8")
    return result


def run_replay(spark: Any, replay_input: ReplayInput, *, out_dir: Path | None = None,
               progress: Progress | None = None, with_analysis: bool = True) -> ReplayResult:
    clock = _PhaseClock(progress)
    checkpoints = [c for c in (read_checkpoint(n) for n in replay_input.nodes) if c]
    with clock.phase("load", f"reading {replay_input.segment_count} segment(s) of "
                             f"{len(replay_input.nodes)} node(s)"):
        first = _index_every_node(spark, replay_input, with_analysis)
    with clock.phase("checks", "comparing the nodes' batches"):
        compared = _compare_copies(spark, replay_input, first, with_analysis)
        results = _check_nodes(replay_input, first, compared)
    with clock.phase("analysis", "analysis"):
        reference, analysis = _analyse_reference(spark, replay_input, first, compared,
                                                 with_analysis)
    with clock.phase("checkpoints",
                     f"check broker_checkpoints ({len(checkpoints)} checkpoint(s))"):
        reference_input = None if reference is None else replay_input.node(reference)
        results.append(check_checkpoints(spark, checkpoints, reference_input, compared.end))
    result = ReplayResult(checks=tuple(results), analysis=analysis,
                          record_copies=first.record_copies, replay_input=replay_input,
                          seconds=clock.seconds)
    if out_dir is not None:
        result = _with_report(result, out_dir, spark, clock)
    clock.record_total()
    log.info("replay done", extra={"passed": result.passed, "failed": result.failed})
    return result
