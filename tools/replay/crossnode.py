"""The checks across nodes: log matching and the committed prefix, on batch versions.

A *version* is a distinct batch (same BLAKE2b digest of header and payload) with the sorted
list of nodes holding it, so a log replicated faithfully on N nodes costs one entry per
batch, not N per record. Where two versions overlap the same offsets (a flipped record, a
stale tail, batches cut differently) their records are decoded (`load.node_task`'s
`decode`) and compared one by one, by (offset, epoch, 64-bit record hash): record-level
versions, exactly what the record-by-record comparison gave. Everything else is
uncontested: one version per offset, so its holders are the holders of every record in it.

The committed prefix is defined in `tools.replay.checks` (`Comparison.is_committed`: by the
nodes' high-watermark checkpoints, else by the majority rule). A log cut below a snapshot
(`log_starts`: it starts above 0 at or inside a valid snapshot, `tools.replay.snapshots`)
holds no batch below its start; the snapshot stands for those records, so the majority
rule counts that node as holding them, and its log end is at least its start. Log
matching (Raft §5.3) has two halves:
* the same (offset, epoch) never holds two different records: a version conflict (only
  possible where versions overlap);
* two nodes that hold the same epoch at some offset hold the same epoch at every offset
  before it. Checked on each node's epoch runs (`[epoch, first, last]`, from its batch
  index; a handful per node), since same epoch + same offset => same bytes is the first
  half.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations, pairwise
from operator import attrgetter
from typing import Any

from tools.replay.batch_index import NodeIndex
from tools.replay.checks import MAX_EXAMPLES, CheckResult

Runs = list[list[int]]  # [epoch, first offset, last offset], in offset order

LOG_MATCHING = ("same (offset, epoch) on two nodes => identical bytes there and "
                "identical prefixes")
COMMITTED_BY_CHECKPOINTS = ("every node agrees with the committed log, the records below the "
                            "nodes' high-watermark checkpoints (a stale tail from an older "
                            "epoch is allowed)")
COMMITTED_BY_MAJORITY = ("every node agrees with the committed log, taken as held identically "
                         "by a majority of voters (no high-watermark checkpoints; a stale tail "
                         "from an older epoch is allowed)")


@dataclass(slots=True)
class Version:
    """One distinct batch, or (where batches overlap) one distinct record."""

    offset: int
    epoch: int
    count: int
    nodes: frozenset[int]
    locator: tuple[int, int]  # (node, batch index) of one copy, to decode it
    record_hash: int | None = None
    record: dict[str, Any] | None = None  # reported columns, for record versions


@dataclass(slots=True)
class Comparison:
    versions: list[Version]  # distinct batches, by offset
    contested: list[Version]  # the batches among them that overlap another
    records: list[Version] = field(default_factory=list)  # record versions of those
    voters: frozenset[int] = frozenset()
    majority: int = 1
    high_watermarks: dict[int, int] = field(default_factory=dict)  # node -> checkpointed HW
    # node -> where its log starts, for logs cut below a snapshot (start > 0)
    log_starts: dict[int, int] = field(default_factory=dict)

    def holders(self, version: Version) -> int:
        """The voters holding the version, and those whose log starts above it (their
        snapshot holds it)."""
        held = len(version.nodes & self.voters)
        if not self.log_starts:
            return held
        starts = sorted(s for n, s in self.log_starts.items()
                        if n in self.voters and n not in version.nodes)
        return held + len(starts) - bisect_right(starts, version.offset)

    @property
    def exact(self) -> bool:
        """Committed is known from high-watermark checkpoints, not guessed by majority."""
        return bool(self.high_watermarks)

    def is_committed(self, version: Version) -> bool:
        """Whether the record at `version.offset` is committed: some holder checkpointed a
        high watermark above it; without checkpoints, a majority of voters hold it."""
        if self.exact:
            return any(self.high_watermarks.get(node, 0) > version.offset
                       for node in version.nodes)
        return self.holders(version) >= self.majority


def batch_versions(indexes: dict[int, NodeIndex], root: int, prefixes: dict[int, int],
                   voters: Sequence[int], high_watermarks: dict[int, int] | None = None,
                   log_starts: dict[int, int] | None = None) -> Comparison:
    """Versions of every node's batches. `prefixes` (node -> n) are nodes whose batches are
    the root's first n: they are added by count, without touching their batches.
    `high_watermarks`: node -> its high-watermark checkpoint, for the nodes that have one;
    `log_starts`: node -> its log start, for logs cut below a snapshot."""
    by_digest: dict[bytes, Version] = {}
    versions: list[Version] = []
    root_index = indexes[root]
    holders = frozenset(prefixes)
    cut = 0  # holders of batch i: the prefix nodes longer than i
    thresholds = sorted(set(prefixes.values()))
    for seq, digest in enumerate(root_index.digest_list()):
        while cut < len(thresholds) and seq >= thresholds[cut]:
            cut += 1
            holders = frozenset(node for node, n in prefixes.items() if n > seq)
        if digest in by_digest:  # the same batch twice in one log
            continue
        version = Version(offset=root_index.offsets[seq], epoch=root_index.epochs[seq],
                          count=root_index.counts[seq], nodes=holders, locator=(root, seq))
        by_digest[digest] = version
        versions.append(version)
    for node, index in indexes.items():
        if node in prefixes:
            continue
        for seq, digest in enumerate(index.digest_list()):
            known = by_digest.get(digest)
            if known is None:
                version = Version(offset=index.offsets[seq], epoch=index.epochs[seq],
                                  count=index.counts[seq], nodes=frozenset(),
                                  locator=(node, seq))
                by_digest[digest] = version
                versions.append(version)
            else:
                version = known
            version.nodes = version.nodes | {node}
    versions = sorted((v for v in versions if v.count > 0), key=attrgetter("offset"))
    contested: list[Version] = []
    cluster: list[Version] = []
    cluster_end = None
    for version in versions:  # clusters of versions whose offset ranges chain-overlap
        if cluster_end is not None and version.offset < cluster_end:
            cluster.append(version)
            cluster_end = max(cluster_end, version.offset + version.count)
            continue
        if len(cluster) > 1:
            contested += cluster
        cluster, cluster_end = [version], version.offset + version.count
    if len(cluster) > 1:
        contested += cluster
    return Comparison(versions=versions, contested=contested, voters=frozenset(voters),
                      majority=len(voters) // 2 + 1, high_watermarks=dict(high_watermarks or {}),
                      log_starts={n: s for n, s in (log_starts or {}).items() if s > 0})


def add_records(comparison: Comparison,
                decoded: dict[tuple[int, int], list[tuple[Any, ...]]]) -> None:
    """Record versions of the contested batches; `decoded[(node, batch index)]` holds
    (offset, epoch, record hash, columns) for each record of that copy."""
    merged: dict[tuple[int, int, int], Version] = {}
    for batch in comparison.contested:
        for offset, epoch, digest, record in decoded[batch.locator]:
            version = merged.get((offset, epoch, digest))
            if version is None:
                merged[(offset, epoch, digest)] = Version(
                    offset=offset, epoch=epoch, count=1, nodes=batch.nodes,
                    locator=batch.locator, record_hash=digest, record=record)
            else:
                version.nodes = version.nodes | batch.nodes
    comparison.records = sorted(merged.values(), key=lambda v: (v.offset, v.epoch,
                                                                sorted(v.nodes)))


def committed_end(comparison: Comparison) -> int:
    """With checkpoints, the highest one. Without, the end of the longest prefix, from the
    lowest offset any node holds, whose every offset has a version held by a majority of
    the voters. (A contested batch held by a majority counts as its records do: each
    record version is held by at least the nodes holding a batch it is in.)"""
    if comparison.exact:
        return max(comparison.high_watermarks.values())
    agreed: list[tuple[int, int]] = []
    starts = []
    for version in comparison.versions:
        starts.append(version.offset)
        if comparison.holders(version) >= comparison.majority:
            agreed.append((version.offset, version.offset + version.count))
    for record in comparison.records:
        starts.append(record.offset)
        if comparison.holders(record) >= comparison.majority:
            agreed.append((record.offset, record.offset + 1))
    covered = sorted(s for n, s in comparison.log_starts.items() if n in comparison.voters)
    if len(covered) >= comparison.majority:  # a majority's snapshots hold all below this
        starts.append(0)
        agreed.append((0, covered[-comparison.majority]))
    if not starts:
        return 0
    end = min(starts)
    for first, stop in sorted(agreed):
        if first > end:
            break
        end = max(end, stop)
    return end


def _at_offsets(records: list[Version]) -> dict[int, list[Version]]:
    out: dict[int, list[Version]] = {}
    for record in records:
        out.setdefault(record.offset, []).append(record)
    return out


def _example(version: Version, reason: str) -> dict[str, Any]:
    return {"nodes": sorted(version.nodes), "offset": version.offset, "epoch": version.epoch,
            "reason": reason, "record": dict(version.record or {})}


def _epoch_at(runs: Runs, offset: int) -> int | None:
    for epoch, first, last in runs:
        if first <= offset <= last:
            return epoch
    return None


def _last_same_epoch(a: Runs, b: Runs) -> int | None:
    """The highest offset where both hold the same epoch (runs of a log that repeats
    offsets need not be in offset order)."""
    return max((min(last, other_last)
                for epoch, first, last in a for other_epoch, other_first, other_last in b
                if epoch == other_epoch and max(first, other_first) <= min(last, other_last)),
               default=None)


def prefix_mismatches(a: Runs, b: Runs) -> list[tuple[int, int, int | None, int | None]]:
    """(first offset, length, epoch on a, epoch on b) of each run of offsets, held by
    both nodes below the last offset where they share an epoch, whose epochs differ."""
    limit = _last_same_epoch(a, b)
    if limit is None:
        return []
    # every run's bounds, those past `limit` cut at it (the run ending there gives it)
    cuts = sorted({min(p, limit) for runs in (a, b) for _, first, last in runs
                   for p in (first, last + 1)})
    out: list[tuple[int, int, int | None, int | None]] = []
    for start, stop in pairwise(cuts):
        epoch_a, epoch_b = _epoch_at(a, start), _epoch_at(b, start)
        if epoch_a is not None and epoch_b is not None and epoch_a != epoch_b:
            out.append((start, stop - start, epoch_a, epoch_b))
    return out


def log_matching(comparison: Comparison, runs: dict[int, Runs]) -> CheckResult:
    by_epoch: dict[tuple[int, int], list[Version]] = {}
    for record in comparison.records:
        by_epoch.setdefault((record.offset, record.epoch), []).append(record)
    conflicts = [v for group in by_epoch.values() if len(group) > 1 for v in group]
    examples = [_example(v, "same offset and epoch, different bytes on other nodes")
                for v in conflicts[:MAX_EXAMPLES]]
    mismatched = 0
    for node_a, node_b in combinations(sorted(runs), 2):
        limit = _last_same_epoch(runs[node_a], runs[node_b])
        for start, length, epoch_a, epoch_b in prefix_mismatches(runs[node_a], runs[node_b]):
            mismatched += length
            examples.append({"nodes": [node_a, node_b], "offset": start, "length": length,
                             "reason": f"epochs {epoch_a} vs {epoch_b} below offset {limit}, "
                                       "where both hold the same epoch"})
    return CheckResult(name="log_matching", description=LOG_MATCHING,
                       violations=len(conflicts) + mismatched,
                       examples=tuple(sorted(examples, key=lambda e: e["offset"])[:MAX_EXAMPLES]))


def _log_ends(comparison: Comparison) -> dict[int, int]:
    ends: dict[int, int] = dict(comparison.log_starts)  # a log cut below a snapshot
    for version in comparison.versions:
        stop = version.offset + version.count
        for node in version.nodes:
            ends[node] = max(ends.get(node, stop), stop)
    return ends


def _short_logs(comparison: Comparison) -> list[dict[str, Any]]:
    """Nodes whose log ends below their own checkpoint: they lost records they had
    flushed and seen committed."""
    ends = _log_ends(comparison)
    out = []
    for node, hw in sorted(comparison.high_watermarks.items()):
        end = ends.get(node, 0)  # a node holding no record: its log ends at 0
        if end < hw:
            out.append({"nodes": [node], "offset": end,
                        "reason": f"the log ends at offset {end}, below this node's "
                                  f"high-watermark checkpoint {hw}: committed records lost"})
    return out


def committed_prefix(comparison: Comparison, end: int) -> CheckResult:
    """Below `end`: two different committed records at one offset, or a record that is
    not the committed one with an epoch at least the committed record's (only where
    versions overlap: elsewhere one version per offset). With checkpoints, a node whose
    log ends below its own checkpoint, too."""
    bad: list[tuple[Version, str]] = []
    for group in _at_offsets([r for r in comparison.records if r.offset < end]).values():
        committed = [v for v in group if comparison.is_committed(v)]
        if not committed:
            continue
        if len(committed) > 1:  # impossible by majority: two majorities share a voter
            bad += [(v, f"{len(committed)} different committed records at this offset "
                        "(by the holders' high-watermark checkpoints)") for v in committed]
        top = max(v.epoch for v in committed)
        chosen = {id(v) for v in committed}
        bad += [(v, f"epoch {v.epoch} where the committed record has epoch {top}")
                for v in group if id(v) not in chosen and v.epoch >= top]
    examples = [_example(v, reason) for v, reason in bad]
    if comparison.exact:
        examples += _short_logs(comparison)
        description = COMMITTED_BY_CHECKPOINTS
        note = (f"committed prefix from high-watermark checkpoints: offsets below {end} "
                f"(node -> checkpoint: {dict(sorted(comparison.high_watermarks.items()))})")
    else:
        description = COMMITTED_BY_MAJORITY
        note = (f"committed prefix from majority: no high-watermark checkpoints; offsets "
                f"below {end}, held identically by a majority ({comparison.majority} of "
                f"voters {sorted(comparison.voters)})")
    return CheckResult(name="committed_prefix", description=description,
                       violations=len(examples),
                       examples=tuple(sorted(examples, key=lambda e: e["offset"])[:MAX_EXAMPLES]),
                       note=note)


def divergence(comparison: Comparison, end: int) -> dict[int, int]:
    """Per node, the first committed offset where it holds something else."""
    out: dict[int, int] = {}
    for record in comparison.records:  # in offset order
        if record.offset < end and not comparison.is_committed(record):
            for node in record.nodes:
                out.setdefault(node, record.offset)
    return out
