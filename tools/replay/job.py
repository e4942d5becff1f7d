"""The replay job: load every node's log, run the checks, analyse, and summarise.

`run_replay` is what `kraft replay` (and spark-submit, through `tools/replay/__main__.py`)
calls; tests call it with their shared SparkSession. It raises `InputError` for bad
input (exit 2) and otherwise returns a `ReplayResult` whose `passed` decides exit 0 or 1.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from raft.common.gc_pause import gc_paused
from tools.replay.acknowledged import AckedWrite, check_acknowledged
from tools.replay.analysis import Analysis, analyse, node_summary, reference_node
from tools.replay.availability import availability
from tools.replay.axis_html import time_axis_html
from tools.replay.batch_index import NodeIndex
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
from tools.replay.images import ReplayBase
from tools.replay.inputs import InputError, ReplayInput
from tools.replay.load import run_tasks
from tools.replay.partition_checks import (
    check_epochs_match,
    check_offsets_contiguous,
    check_replicas_agree,
)
from tools.replay.partition_history import PartitionHistory, partition_history
from tools.replay.partition_logs import read_replicas
from tools.replay.progress import Progress
from tools.replay.sequential import ScanResult
from tools.replay.snapshots import (
    Snapshots,
    check_files,
    check_images_agree,
    check_log_starts,
    check_matches,
    plan_replays,
    read_all,
    replay_bases,
    run_replays,
    spans,
)
from tools.replay.time_axis import axis, figures
from tools.replay.timeline import Timeline, node_timeline
from tools.replay.views import register_views

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResult:
    checks: tuple[CheckResult, ...]
    analysis: Analysis
    record_copies: int
    replay_input: ReplayInput
    seconds: dict[str, float]
    report_path: Path | None = None
    run: dict[str, Any] | None = None  # `run_info`: what the report's header names
    # the time axis's figures (`tools.replay.time_axis.figures`; None: no tables derived)
    figures: dict[str, Any] | None = None

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
                "report": None if self.report_path is None else str(self.report_path),
                "run": self.run, "figures": self.figures}


def package_version() -> str:
    try:
        return metadata.version("kraft-py")
    except metadata.PackageNotFoundError:
        return "unknown"


def run_info(spark: Any, replay_input: ReplayInput) -> dict[str, Any]:
    """The replay's provenance: the cluster id (the nodes' meta.properties), when it
    ran (UTC), the kraft-py version and the Spark master it ran on."""
    return {"cluster_id": replay_input.cluster_id,
            "time": datetime.now(UTC).isoformat(timespec="seconds"),
            "version": package_version(), "spark_master": str(spark.sparkContext.master),
            "spark_version": str(spark.version)}


def _root(replay_input: ReplayInput, bases: dict[int, ReplayBase]) -> int:
    """The node scanned in full in the first pass, while the others are only indexed:
    the voter with the most segment bytes (ties: the lowest id, as `reference_node`
    breaks them), the likeliest reference log and the one the most nodes are prefixes of.
    A node that can be replayed (`bases`: from 0, or from a snapshot at its log start)
    first."""
    with_segments = [n for n in replay_input.nodes if n.segments]
    replayed = [n for n in with_segments if n.node_id in bases] or with_segments
    voters = [n for n in replayed if n.node_id in replay_input.voters] or replayed

    def size(node: Any) -> int:
        try:
            return sum(path.stat().st_size for path in node.segments)
        except OSError:
            return 0

    return max(voters, key=lambda n: (size(n), -n.node_id)).node_id


def _run(spark: Any, replay_input: ReplayInput, plans: dict[int, dict[str, Any]],
         busy: int = 0) -> dict[int, dict[str, Any]]:
    """`load.run_tasks`, with a damaged or unreadable segment as InputError."""
    results = run_tasks(spark, replay_input, plans, busy)
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


def _scan_plan(node: int, bases: dict[int, ReplayBase], analysis: bool) -> dict[str, Any]:
    """A node's scan: from its replay base (offset 0, or its snapshot)."""
    return {"scan": True, "analysis": analysis, "base": bases[node]}


def _second_pass(spark: Any, replay_input: ReplayInput, indexes: dict[int, NodeIndex],
                 divergent: list[int], comparison: Comparison, with_analysis: bool,
                 bases: dict[int, ReplayBase]) -> tuple[dict[int, ScanResult], dict[Any, Any]]:
    """Scan the nodes that do not share the root's scan, and decode the batches that
    overlap another version; one Spark job (none when every copy agrees)."""
    plans: dict[int, dict[str, Any]] = {n: _scan_plan(n, bases, with_analysis)
                                        for n in divergent}
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
    """Which nodes hold a prefix of the root's log (node -> batches), those of them that
    share the root's scan (replayed from the same base), the batch versions across nodes,
    and where the committed prefix ends."""

    prefixes: dict[int, int]
    shares: dict[int, int]
    versions: Comparison
    end: int


def _first_pass(spark: Any, replay_input: ReplayInput, with_analysis: bool,
                bases: dict[int, ReplayBase]) -> tuple[_FirstPass, _Comparison]:
    """Every node's batches indexed and the root's log scanned in full (unless no log
    can be replayed), as two Spark jobs at once: the scan, the longest task, from a
    thread, the indexes on the cores it leaves; with the indexes back, the driver lines
    the copies up (`_compare_copies`) while the scan still runs."""
    root = _root(replay_input, bases)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay-scan") as pool:
        scanning = None if root not in bases else pool.submit(
            _run, spark, replay_input, {root: _scan_plan(root, bases, with_analysis)})
        plans = {n.node_id: {"index": True} for n in replay_input.nodes if n.segments}
        first = _run(spark, replay_input, plans, busy=int(scanning is not None))
        indexes: dict[int, NodeIndex] = {n: r["index"] for n, r in first.items()}
        first_pass = _FirstPass(root=root, indexes=indexes, scans={},
                                summaries=_summaries(indexes))
        compared = _compare_copies(spark, replay_input, first_pass, with_analysis, bases)
        if scanning is not None:
            first_pass.scans[root] = scanning.result()[root]["scan"]
    return first_pass, compared


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
                    with_analysis: bool, bases: dict[int, ReplayBase]) -> _Comparison:
    """Line the nodes' batches up against the root's, scan the nodes that diverge from
    it or replay from another base (adding their scans to `first.scans`) and find the
    committed end. A node that cannot be replayed (no snapshot at its log start) is
    compared, not scanned; the root is scanned when it can be (`_first_pass`)."""
    indexes, root = first.indexes, first.root
    prefixes = {n: len(index) for n, index in indexes.items()
                if index.is_prefix_of(indexes[root])}
    shares = {n: count for n, count in prefixes.items() if root in bases
              and n in bases and bases[n].key == bases[root].key}
    high_watermarks = {n.node_id: n.high_watermark for n in replay_input.nodes
                       if n.high_watermark is not None}
    cut = {n.node_id: n.log_start for n in replay_input.nodes if n.node_id in bases}
    versions = batch_versions(indexes, root, prefixes, replay_input.voters, high_watermarks,
                              cut)
    divergent = sorted(n for n in indexes if n in bases and n not in shares)
    more, decoded = _second_pass(spark, replay_input, indexes, divergent, versions,
                                 with_analysis, bases)
    first.scans.update(more)
    add_records(versions, decoded)
    return _Comparison(prefixes=prefixes, shares=shares, versions=versions,
                       end=committed_end(versions))


def _check_nodes(replay_input: ReplayInput, first: _FirstPass,
                 compared: _Comparison) -> list[CheckResult]:
    """The per-node checks over each node's view of its log, then log matching and the
    committed prefix across nodes. Adds each node's violation counts to its summary."""
    rows: list[tuple[Any, ...]] = []
    counts: dict[int, dict[str, int]] = {}
    for node, summary in first.summaries.items():
        if node in compared.shares:
            scan, batches = first.scans[first.root], compared.shares[node]
        elif node in first.scans:
            scan, batches = first.scans[node], len(first.indexes[node])
        else:  # not replayed: snapshot_at_log_start says why
            counts[node] = summary["violation_counts"] = {}
            continue
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
                       compared: _Comparison, with_analysis: bool,
                       bases: dict[int, ReplayBase]) -> tuple[int | None, Analysis]:
    """The reference node (the one holding the committed log) and the analysis of its
    log, scanning it once more when no earlier scan kept its aggregates."""
    end, scans, indexes, root = compared.end, first.scans, first.indexes, first.root
    nodes = node_summary(divergence(compared.versions, end), end, replay_input.voters,
                         first.summaries, {n: b.end_offset for n, b in bases.items()})
    reference = reference_node(nodes, end)
    if reference is not None and reference not in bases:
        reference = None  # its log cannot be replayed (snapshot_at_log_start)
    aggregates, claims = None, []
    if with_analysis and reference is not None:
        shares = compared.shares
        owner = root if reference in shares and shares[reference] == len(indexes[root]) \
            else reference
        if owner not in scans or scans[owner].aggregates is None:
            plan = {reference: _scan_plan(reference, bases, True)}
            owner, scans[reference] = reference, _run(spark, replay_input, plan)[reference]["scan"]
        aggregates = scans[owner].aggregates
        claims = scans[owner].view(len(indexes[owner]))[2]
    return reference, analyse(nodes, end, reference, aggregates, claims)


def _with_report(result: ReplayResult, out_dir: Path, tables: dict[str, Any],
                 clock: _PhaseClock, time_axis: str) -> ReplayResult:
    """Write the HTML report (`time_axis`: its timeline section), report.json and the
    tables' Parquet files to `out_dir`; the result names the page."""
    from tools.replay.report import write_report

    with clock.phase("report", f"writing the report to {out_dir}"):
        page = write_report(out_dir, result.to_json(), tables, time_axis)
    clock.record_total()
    result = dataclasses.replace(result, seconds=clock.seconds, report_path=page)
    # report.json was written before the report timing existed: rewrite it whole
    (out_dir / "report.json").write_text(json.dumps(
        result.to_json(), indent=2, default=str), encoding="utf-8")
    return result


def _check_snapshots(spark: Any, replay_input: ReplayInput, first: _FirstPass,
                     compared: _Comparison, snapshots: Snapshots,
                     bases: dict[int, ReplayBase]) -> list[CheckResult]:
    """snapshot_valid, snapshot_at_log_start, snapshot_matches_log and images_agree
    (`tools.replay.snapshots`); the log replays they need are one Spark job."""
    end = compared.end
    ends = {n: s["end_offset"] for n, s in first.summaries.items()}
    node_spans = spans(replay_input, ends, end, divergence(compared.versions, end))
    order = [first.root, *sorted(n for n in node_spans if n != first.root)]
    plan = plan_replays(snapshots, bases, node_spans, end, order)
    replayed = run_replays(spark, replay_input, plan)
    matches, verdicts = check_matches(snapshots, plan, replayed, end)
    return [check_files(snapshots), check_log_starts(replay_input, snapshots, bases), matches,
            check_images_agree(bases, plan, replayed, end, verdicts)]


def _check_partitions(replay_input: ReplayInput, history_node: int,
                      bases: dict[int, ReplayBase],
                      writes: Sequence[AckedWrite] | None) -> list[CheckResult]:
    """The checks of the brokers' partition logs, read on the driver
    (tools.replay.partition_logs), against the metadata history of `history_node`'s log
    (replayed only when some broker holds a partition)."""
    partitions = read_replicas(replay_input.nodes)
    history = partition_history(replay_input.node(history_node), bases.get(history_node)) \
        if partitions else PartitionHistory()
    return [check_replicas_agree(partitions, history),
            check_offsets_contiguous(partitions, history),
            check_epochs_match(partitions, history),
            check_acknowledged(writes, partitions, history)]


def _timeline(replay_input: ReplayInput, reference: int | None,
              bases: dict[int, ReplayBase], end: int) -> Timeline:
    """The time-axis tables of the reference log's committed prefix (none without one)."""
    if reference is None:
        return Timeline()
    return node_timeline(replay_input.node(reference), bases.get(reference), end)


def run_replay(spark: Any, replay_input: ReplayInput, *, out_dir: Path | None = None,
               progress: Progress | None = None, with_analysis: bool = True,
               history: Sequence[AckedWrite] | None = None,
               views: bool = False,
               faults: list[tuple[Any, ...]] | None = None) -> ReplayResult:
    """`history`: the acknowledged writes of `--history` (tools.replay.acknowledged);
    `faults`: a chaos run's fault log (`--faults`, tools.replay.faults).
    With `out_dir` or `views` the tables are registered as temp views of `spark`
    (`tools.replay.views`), for the report and for queries after the replay, and the
    result carries the run's figures (`tools.replay.time_axis`).

    The driver's collector is paused meanwhile (`raft.common.gc_pause`): the batch
    indexes, versions and tables it builds live until the end, and each full collection
    walked them and Spark's objects again: the driver's CPU for the benchmark's log
    went from 0.58-0.81 s to 0.44-0.47 s without them."""
    with gc_paused():
        return _replay(spark, replay_input, out_dir=out_dir, progress=progress,
                       with_analysis=with_analysis, history=history, views=views,
                       faults=faults)


def _replay(spark: Any, replay_input: ReplayInput, *, out_dir: Path | None,
            progress: Progress | None, with_analysis: bool,
            history: Sequence[AckedWrite] | None, views: bool,
            faults: list[tuple[Any, ...]] | None) -> ReplayResult:
    clock = _PhaseClock(progress)
    run = run_info(spark, replay_input)
    checkpoints = [c for c in (read_checkpoint(n) for n in replay_input.nodes) if c]
    snapshots: Snapshots = {}
    if replay_input.snapshot_count:
        with clock.phase("snapshots", f"reading {replay_input.snapshot_count} snapshot "
                                      f"file(s)"):
            snapshots = read_all(spark, replay_input)
    bases = replay_bases(replay_input, snapshots)
    with clock.phase("load", f"reading {replay_input.segment_count} segment(s) of "
                             f"{len(replay_input.nodes)} node(s)"):
        first, compared = _first_pass(spark, replay_input, with_analysis, bases)
    with clock.phase("checks", "checking each node's log and the copies against each other"):
        results = _check_nodes(replay_input, first, compared)
    with clock.phase("snapshot_checks", "checking the snapshots against the logs"):
        results += _check_snapshots(spark, replay_input, first, compared, snapshots, bases)
    with clock.phase("analysis", "analysis"):
        reference, analysis = _analyse_reference(spark, replay_input, first, compared,
                                                 with_analysis, bases)
    with clock.phase("checkpoints",
                     f"check broker_checkpoints ({len(checkpoints)} checkpoint(s))"):
        reference_input = None if reference is None else replay_input.node(reference)
        results.append(check_checkpoints(spark, checkpoints, reference_input, compared.end,
                                         None if reference is None else bases.get(reference)))
    with clock.phase("partitions", "checking the brokers' partition logs"):
        results += _check_partitions(replay_input,
                                     first.root if reference is None else reference, bases,
                                     history)
    result = ReplayResult(checks=tuple(results), analysis=analysis,
                          record_copies=first.record_copies, replay_input=replay_input,
                          seconds=clock.seconds, run=run)
    if out_dir is not None or views:
        with clock.phase("views", "deriving the time-axis tables"):
            timeline = _timeline(replay_input, reference, bases, compared.end)
            lives = availability(timeline)
            tables = register_views(spark, replay_input, analysis.to_json(), timeline, lives,
                                    faults)
            result = dataclasses.replace(result, figures=figures(timeline, lives, faults))
        if out_dir is not None:
            section = time_axis_html(axis(timeline, faults), timeline, lives)
            result = _with_report(result, out_dir, tables, clock, section)
    clock.record_total()
    log.info("replay done", extra={"passed": result.passed, "failed": result.failed})
    return result
