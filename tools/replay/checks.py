"""The replay's consistency checks, each a named `CheckResult` built with Spark SQL.

Every check reads `Context.records` (one row per record copy, see `load.SCHEMA`) and
returns its violation count and up to `MAX_EXAMPLES` examples. A violation seen on
several nodes (the same record, replicated faithfully) counts once; its example lists
the nodes.

Committed prefix without high-watermark files: a record is taken as committed when a
majority of the voters hold it identically (same offset, epoch and bytes) at that
offset; the committed log is the longest prefix of such offsets, `[start, committed_end)`.
A node may still hold, below `committed_end`, a stale tail from an older epoch that its
leader has not yet truncated (a lagging follower); that is legal. What Raft forbids, and
what the check flags, is a different record at a committed offset with an epoch equal to
or later than the committed record's: a later leader that lost a committed entry.

Known limit: majority-held is not quite committed. Raft §5.4.2 (Figure 8): a record of
an older epoch re-replicated to a majority by a later leader is not committed until that
leader commits one of its own; if the run stopped in exactly that window while another
node, leader of a newer epoch, holds a different record there, this check reports a
violation that Raft allows. Persisted high watermarks would make the check exact; nodes
do not write them yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812


MAX_EXAMPLES = 20
_COUNT_LIMIT = 1000
RECORD_COLUMNS = ("record_type", "topic_id", "name", "partition", "leader_id")


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    name: str
    description: str
    violations: int
    examples: tuple[dict[str, Any], ...] = ()
    note: str = ""
    skipped: bool = False

    @property
    def passed(self) -> bool:
        return self.violations == 0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "passed": self.passed,
                "skipped": self.skipped, "violations": self.violations,
                "examples": list(self.examples), "note": self.note}


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """What every check sees: the cached records (CORRUPT rows removed) and the quorum."""

    spark: Any
    records: DataFrame
    voters: tuple[int, ...]
    voters_known: bool  # from cluster.json or quorum-state, not guessed
    committed_end: int = 0

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1


def _example(row: Any) -> dict[str, Any]:
    data = row.asDict(recursive=True)
    record = {k: data.pop(k) for k in RECORD_COLUMNS if k in data}
    out = {k: v for k, v in data.items() if v is not None}
    if record:
        out["record"] = {k: v for k, v in record.items() if v is not None}
    return out


def _collapse(violations: DataFrame) -> DataFrame:
    """One row per distinct violation, with the sorted list of nodes that hold it."""
    keys = [c for c in violations.columns if c != "node"]
    return (violations.groupBy(*keys).agg(F.sort_array(F.collect_set("node")).alias("nodes"))
            .orderBy("offset"))


def _result(name: str, description: str, violations: DataFrame, *, note: str = "",
            collapse: bool = True) -> CheckResult:
    table = _collapse(violations) if collapse else violations
    first = table.limit(_COUNT_LIMIT).collect()  # one job when there are few (the usual)
    count = len(first) if len(first) < _COUNT_LIMIT else table.count()
    return CheckResult(name=name, description=description, violations=count,
                       examples=tuple(_example(r) for r in first[:MAX_EXAMPLES]), note=note)


def _show(records: DataFrame, reason: Any) -> DataFrame:
    return records.select("node", "offset", "epoch", *RECORD_COLUMNS, reason.alias("reason"))


# --- per node (one sequential scan each, see tools.replay.sequential) ----------------------

NODE_CHECKS = {
    "records_decodable": "every record with a good CRC decodes as a known metadata record",
    "offsets_contiguous": "each node's offsets run without gaps or repeats",
    "epochs_monotonic": "epochs never decrease along a node's log",
    "one_leader_per_epoch": "at most one leader per epoch (LeaderChange records and the "
                            "epochs of their batches)",
    "topic_ids_valid": "topic IDs unique, never reused after RemoveTopic, never ZERO_UUID "
                       "or the sentinel",
    "metadata_topic_once": "the metadata topic's ID is assigned exactly once",
    "name_one_live_id": "at every offset a topic name maps to at most one live topic ID",
    "records_name_live_topic": "every Partition, PartitionChange and RemoveTopic names a "
                               "topic live at its offset",
}


def _merge(check: str, rows: list[tuple[Any, ...]], capped: bool) -> CheckResult:
    """Violations of one check from every node: the same (offset, record, reason) on
    several nodes is one violation."""
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for _, _, node, offset, epoch, record_hash, reason, record in rows:
        key = (offset, record_hash, reason)
        entry = merged.setdefault(key, {"nodes": [], "offset": offset, "epoch": epoch,
                                        "reason": reason, "record": record})
        entry["nodes"].append(node)
    for entry in merged.values():
        entry["nodes"].sort()
    examples = sorted(merged.values(), key=lambda e: (e["offset"] is None, e["offset"] or 0))
    note = "over 10,000 on one node: the count is a lower bound" if capped else ""
    return CheckResult(name=check, description=NODE_CHECKS[check], violations=len(merged),
                       examples=tuple(examples[:MAX_EXAMPLES]), note=note)


def _leader_rows(claims: list[tuple[Any, ...]], voters: Sequence[int],
                 voters_known: bool) -> list[tuple[Any, ...]]:
    by_epoch: dict[int, set[int]] = {}
    for _, epoch, leader, *_ in claims:
        by_epoch.setdefault(epoch, set()).add(leader)
    rows = []
    for _, epoch, leader, node, offset, record_hash in claims:
        record = {"record_type": "LEADER_CHANGE", "leader_id": leader}
        if len(by_epoch[epoch]) > 1:
            rows.append(("violation", "one_leader_per_epoch", node, offset, epoch, record_hash,
                         f"{len(by_epoch[epoch])} different leaders claim epoch {epoch}",
                         record))
        if voters_known and leader not in voters:
            rows.append(("violation", "one_leader_per_epoch", node, offset, epoch, record_hash,
                         f"leader {leader} is not a voter", record))
    return rows


def node_checks(ctx: Context, scan_rows: Sequence[Sequence[Any]]) -> tuple[
        list[CheckResult], dict[int, dict[str, Any]]]:
    """Merge the nodes' sequential scans (`sequential.NodeScan` output, one list per
    item); (check results, summary per node)."""
    from tools.replay.sequential import MAX_KEPT

    rows = [tuple(r) for r in scan_rows]
    summaries = {r[1]: r[2] for r in rows if r[0] == "summary"}
    claims = [r for r in rows if r[0] == "leader"]
    violations = [r for r in rows if r[0] == "violation"]
    violations += _leader_rows(claims, ctx.voters, ctx.voters_known)
    results = []
    for check in NODE_CHECKS:
        mine = [r for r in violations if r[1] == check]
        capped = any(s["violation_counts"].get(check, 0) > MAX_KEPT for s in summaries.values())
        results.append(_merge(check, mine, capped))
    return results, summaries
