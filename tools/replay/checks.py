"""The replay's consistency checks, each a named `CheckResult`.

`NODE_CHECKS` are the metadata log's per-node checks; `PARTITION_CHECKS` those of the
brokers' partition logs (tools.replay.partition_checks, tools.replay.acknowledged).

The per-node checks come from each distinct log's sequential scan
(`tools.replay.sequential`), merged here; the cross-node checks (log matching, committed
prefix) from `tools.replay.crossnode`. Each returns its violation count and up to
`MAX_EXAMPLES` examples. A violation seen on several nodes (the same record, replicated
faithfully) counts once; its example lists the nodes.

Committed prefix: nodes persist a high-watermark checkpoint (`raft.node`), a high
watermark they published, so node n's checkpoint h_n says its records `[start, h_n)` are
committed (the exact Raft notion, §5.4.2: a leader commits by counting only records of
its own epoch). The committed log ends at `committed_end = max h_n`; a record at offset
o is committed when a node whose checkpoint is above o holds it. The check flags, below
`committed_end`: two nodes with checkpoints above o holding different records at o; a
node holding at o a record other than the committed one with an epoch equal to or later
than the committed record's (a later leader that lost a committed entry); a node whose
log ends below its own checkpoint. A node may still hold, below `committed_end`, a stale
tail from an older epoch that its leader has not yet truncated (a lagging follower);
that is legal. Checkpoints are coalesced (about one a second), so records committed
after a node's last one (a node killed, not stopped) are only checked if some other
node's checkpoint covers them: the check may miss, but never invents, a violation.

Without any checkpoint (old or synthetic logs) the check falls back to the majority rule
and says so ("committed prefix from majority: no high-watermark checkpoints"): a record
is taken as committed when a majority of the voters hold it identically (same offset,
epoch and bytes), and the committed log is the longest prefix of such offsets. That
fallback is not quite Raft's commitment (Figure 8): an older-epoch record re-replicated
to a majority by a later leader is not committed until that leader commits one of its
own, so a run stopped in that window while another node, leader of a newer epoch, holds
a different record there is reported although Raft allows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_EXAMPLES = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    name: str
    description: str
    violations: int
    examples: tuple[dict[str, Any], ...] = ()
    note: str = ""
    skipped: bool = False
    counts: dict[str, int] = field(default_factory=dict)  # what was checked, by kind

    @property
    def passed(self) -> bool:
        return self.violations == 0

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "description": self.description, "passed": self.passed,
               "skipped": self.skipped, "violations": self.violations,
               "examples": list(self.examples), "note": self.note}
        if self.counts:
            out["counts"] = dict(self.counts)
        return out


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
    "records_name_live_topic": "every Partition, PartitionChange, PartitionCount, "
                               "RemovePartition and RemoveTopic names a topic live at its "
                               "offset",
    "partition_counts_consistent": "a topic's undeleted partition count changes only in a "
                                   "batch with a PartitionCount that matches it: growth adds "
                                   "the partitions, each told the epochs before it, and "
                                   "bumps the existing ones; a shrink marks the partitions "
                                   "above with the staying ones' epochs before, and bumps "
                                   "those",
    "partition_removals_valid": "RemovePartition only for a topic's last partition, marked "
                                "for deletion, reported empty (log start == log end)",
    "no_growth_while_marked": "a topic with ordered delivery never grows while it has "
                              "partitions marked for deletion",
}


# --- the brokers' partition logs (tools.replay.partition_checks, acknowledged) ----------

PARTITION_CHECKS = {
    "partition-replicas-agree": "every replica of a partition holds the same batches (base "
                                "and last offset, leader epoch, CRC) below the lowest "
                                "checkpointed high watermark",
    "partition-offsets-contiguous": "each partition log's batches follow each other without "
                                    "gap or overlap from its log start (compacted topics: "
                                    "ascending, no overlap)",
    "partition-epochs-match-metadata": "every batch's leader epoch is one the metadata log "
                                       "gave its partition, and epochs never decrease along "
                                       "a log",
    "acknowledged-writes-present": "every acknowledged write (--history) is in the agreed "
                                   "log exactly once, at its acknowledged offset, unless "
                                   "retention or compaction removed it",
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


def node_views(scan: Any, batches: int, node: int, end: tuple[int | None, int | None]) -> tuple[
        list[tuple[Any, ...]], dict[str, int]]:
    """One node's rows (violations and leader claims, the tuples `_merge` and
    `_leader_rows` take) and violation counts, from the scan of a log whose first
    `batches` batches are this node's whole log. `end`: the node's last offset and
    highest epoch, where a missing metadata topic ID is reported."""
    violations, counts, claims, missing = scan.view(batches)
    rows: list[tuple[Any, ...]] = [
        ("violation", check, node, offset, epoch, digest, reason, record)
        for _, check, offset, epoch, digest, reason, record in violations]
    rows += [("leader", epoch, leader, node, offset, digest)
             for _, epoch, leader, offset, digest in claims]
    if missing:
        # the only metadata_topic_once violation here: this view assigns no metadata
        # topic ID, so none is assigned twice
        counts["metadata_topic_once"] = 1
        rows.append(("violation", "metadata_topic_once", node, end[0], end[1], 0,
                     "the log creates topics but never assigns the metadata topic ID", {}))
    return rows, counts


def node_checks(rows: Sequence[tuple[Any, ...]], counts: dict[int, dict[str, int]],
                voters: Sequence[int], voters_known: bool) -> list[CheckResult]:
    """Merge the nodes' rows (`node_views`); `counts`: per node, violations per check."""
    from tools.replay.sequential import MAX_KEPT

    leaders = _leader_rows([r for r in rows if r[0] == "leader"], voters, voters_known)
    violations = [r for r in (*rows, *leaders) if r[0] == "violation"]
    capped = {check for c in counts.values() for check, n in c.items() if n > MAX_KEPT}
    return [_merge(check, [r for r in violations if r[1] == check], check in capped)
            for check in NODE_CHECKS]
