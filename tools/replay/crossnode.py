"""The checks across nodes: log matching and the committed prefix.

Both work on *versions*: one row per distinct (offset, epoch, record_hash) with the sorted
list of nodes holding it, so a log replicated faithfully on N nodes costs one row per
offset, not N. The committed prefix is defined in `tools.replay.checks`.

Log matching (Raft §5.3) has two halves:
* the same (offset, epoch) never holds two different records: a version conflict;
* two nodes that hold the same epoch at some offset hold the same epoch at every offset
  before it. Checked on each node's epoch runs (`[epoch, first, last]`, from the node
  scan; a handful per node), since same epoch + same offset => same bytes is the first
  half.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812

from tools.replay.checks import MAX_EXAMPLES, RECORD_COLUMNS, CheckResult, _result

Runs = list[list[int]]  # [epoch, first offset, last offset], in offset order


def versions_of(records: DataFrame, voters: Sequence[int]) -> DataFrame:
    voter_array = F.array(*[F.lit(v) for v in voters]) if voters else F.array()
    return (records.groupBy("offset", "epoch", "record_hash")
            .agg(F.sort_array(F.collect_set("node")).alias("nodes"),
                 *[F.first(c).alias(c) for c in RECORD_COLUMNS])
            .withColumn("holders", F.size(F.array_intersect("nodes", voter_array))))


def committed_end(versions: DataFrame, majority: int) -> int:
    """The end of the longest prefix whose every offset has a version held by a majority
    of the voters (one Spark job when there is no hole)."""
    best = versions.groupBy("offset").agg(F.max("holders").alias("best"))
    is_agreed = F.col("best") >= majority
    start, missing, last, count = best.agg(  # type: ignore[misc]
        F.min("offset"), F.min(F.when(~is_agreed, F.col("offset"))),
        F.max(F.when(is_agreed, F.col("offset"))),
        F.sum(F.when(is_agreed, 1).otherwise(0))).first()
    if start is None:
        return 0
    if missing is None:
        missing = start if last is None else last + 1
        if count == missing - start:  # the usual case: no hole
            return int(missing)
    agreed = best.filter(is_agreed & (F.col("offset") < missing))
    numbered = agreed.withColumn("rank", F.row_number().over(Window.orderBy("offset")) - 1
                                 + start)
    shift = numbered.filter(F.col("offset") != F.col("rank")).agg(F.min("rank")).first()
    return int(shift[0]) if shift is not None and shift[0] is not None else int(missing)


def _epoch_at(runs: Runs, offset: int) -> int | None:
    for epoch, first, last in runs:
        if first <= offset <= last:
            return epoch
    return None


def _last_same_epoch(a: Runs, b: Runs) -> int | None:
    best = None
    for epoch, first, last in a:
        for other_epoch, other_first, other_last in b:
            if epoch == other_epoch and max(first, other_first) <= min(last, other_last):
                top = min(last, other_last)
                best = top if best is None else max(best, top)
    return best


def prefix_mismatches(a: Runs, b: Runs) -> list[tuple[int, int, int | None, int | None]]:
    """(first offset, length, epoch on a, epoch on b) of each run of offsets, held by
    both nodes below the last offset where they share an epoch, whose epochs differ."""
    limit = _last_same_epoch(a, b)
    if limit is None:
        return []
    cuts = sorted({p for runs in (a, b) for _, first, last in runs
                   for p in (first, last + 1) if p <= limit} | {limit})
    out: list[tuple[int, int, int | None, int | None]] = []
    for start, stop in zip(cuts, cuts[1:], strict=False):
        epoch_a, epoch_b = _epoch_at(a, start), _epoch_at(b, start)
        if epoch_a is not None and epoch_b is not None and epoch_a != epoch_b:
            out.append((start, stop - start, epoch_a, epoch_b))
    return out


def log_matching(versions: DataFrame, runs: dict[int, Runs]) -> CheckResult:
    description = ("same (offset, epoch) on two nodes => identical bytes there and "
                   "identical prefixes")
    conflicts = versions.groupBy("offset", "epoch").count().filter(F.col("count") > 1) \
        .drop("count")
    shown = versions.join(conflicts, ["offset", "epoch"]).select(
        "nodes", "offset", "epoch", *RECORD_COLUMNS,
        F.lit("same offset and epoch, different bytes on other nodes").alias("reason"))
    same_epoch = _result("log_matching", description, shown, collapse=False)
    examples = list(same_epoch.examples)
    mismatched = 0
    for node_a, node_b in combinations(sorted(runs), 2):
        limit = _last_same_epoch(runs[node_a], runs[node_b])
        for start, length, epoch_a, epoch_b in prefix_mismatches(runs[node_a], runs[node_b]):
            mismatched += length
            examples.append({"nodes": [node_a, node_b], "offset": start, "length": length,
                             "reason": f"epochs {epoch_a} vs {epoch_b} below offset {limit}, "
                                       "where both hold the same epoch"})
    return CheckResult(name="log_matching", description=description,
                       violations=same_epoch.violations + mismatched,
                       examples=tuple(sorted(examples, key=lambda e: e["offset"])[:MAX_EXAMPLES]))


def committed_prefix(versions: DataFrame, end: int, majority: int,
                     voters: Sequence[int]) -> CheckResult:
    at_offset = Window.partitionBy("offset")
    committed = F.col("holders") >= majority
    marked = versions.filter(F.col("offset") < end).withColumn(
        "committed_epoch", F.max(F.when(committed, F.col("epoch"))).over(at_offset))
    bad = marked.filter(~committed & (F.col("epoch") >= F.col("committed_epoch")))
    shown = bad.select("nodes", "offset", "epoch", *RECORD_COLUMNS, F.format_string(
        "epoch %d where the committed record (held by a majority) has epoch %d", "epoch",
        "committed_epoch").alias("reason"))
    note = (f"committed prefix: offsets below {end}, held identically by a majority "
            f"({majority} of voters {list(voters)})")
    result = _result("committed_prefix", "every node agrees with the committed log (a stale "
                     "tail from an older epoch is allowed)", shown, collapse=False)
    return CheckResult(name=result.name, description=result.description,
                       violations=result.violations, examples=result.examples, note=note)


def divergence(versions: DataFrame, end: int, majority: int) -> dict[int, int]:
    """Per node, the first committed offset where it holds something else."""
    rows = versions.filter((F.col("offset") < end) & (F.col("holders") < majority)) \
        .select(F.explode("nodes").alias("node"), "offset").groupBy("node") \
        .agg(F.min("offset").alias("at")).collect()
    return {int(r.node): int(r.at) for r in rows}

