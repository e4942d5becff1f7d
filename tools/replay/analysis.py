"""What happened in the log: leaders per epoch, record types, topic churn, recreated
names, and each node's log end and lag. Each function aggregates in Spark and returns
small plain-Python tables (lists of dicts) for the JSON and HTML report.

The log-wide tables describe the *reference log*: the longest voter log that holds the
whole committed prefix (the same copy the broker-checkpoint check replays). The per-node
table covers every node, with its lag and where it departs from the committed log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812

CHURN_BINS = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class Analysis:
    leader_timeline: list[dict[str, Any]]
    record_types: list[dict[str, Any]]
    topic_churn: list[dict[str, Any]]
    recreated_names: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    committed_end: int
    reference_node: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"committed_end": self.committed_end, "reference_node": self.reference_node,
                "nodes": self.nodes,
                "leader_timeline": self.leader_timeline, "record_types": self.record_types,
                "topic_churn": self.topic_churn, "recreated_names": self.recreated_names}


def epochs_and_types(log: DataFrame) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(leader timeline, record-type counts) from one aggregation over the log."""
    rows = log.groupBy("epoch", "record_type").agg(
        F.min("offset").alias("first"), F.max("offset").alias("last"),
        F.count("*").alias("n"), F.min_by("leader_id", "offset").alias("leader"),
        F.countDistinct("leader_id").alias("claimants")).collect()
    epochs: dict[int, dict[str, Any]] = {}
    types: dict[str, int] = {}
    for row in rows:
        types[row.record_type] = types.get(row.record_type, 0) + row.n
        entry = epochs.setdefault(row.epoch, {"epoch": row.epoch, "leader_id": None,
                                              "claimants": 0, "first_offset": row.first,
                                              "last_offset": row.last, "records": 0})
        entry["first_offset"] = min(entry["first_offset"], row.first)
        entry["last_offset"] = max(entry["last_offset"], row.last)
        entry["records"] += row.n
        if row.record_type == "LEADER_CHANGE":
            entry["leader_id"], entry["claimants"] = row.leader, row.claimants
    counts = [{"record_type": t, "count": n} for t, n in
              sorted(types.items(), key=lambda item: (-item[1], item[0]))]
    return [epochs[e] for e in sorted(epochs)], counts


def topic_churn(log: DataFrame, end_offset: int) -> list[dict[str, Any]]:
    width = max(1, -(-end_offset // CHURN_BINS))
    events = log.filter(F.col("record_type").isin("TOPIC", "REMOVE_TOPIC")).groupBy(
        (F.floor(F.col("offset") / width) * width).alias("bin_start")).agg(
        F.sum(F.when(F.col("record_type") == "TOPIC", 1).otherwise(0)).alias("created"),
        F.sum(F.when(F.col("record_type") == "REMOVE_TOPIC", 1).otherwise(0)).alias("removed"))
    by_bin = {r.bin_start: (r.created, r.removed) for r in events.collect()}
    out, live = [], 0
    for start in range(0, max(end_offset, 1), width):
        created, removed = by_bin.get(start, (0, 0))
        live += created - removed
        out.append({"bin_start": start, "bin_end": start + width, "created": created,
                    "removed": removed, "live_after": live})
    return out


def recreated_names(log: DataFrame) -> list[dict[str, Any]]:
    topics = log.filter(F.col("record_type") == "TOPIC").select("name", "topic_id", "offset")
    removed = log.filter(F.col("record_type") == "REMOVE_TOPIC").select(
        "topic_id", F.col("offset").alias("removed_at")).dropDuplicates(["topic_id"])
    many = topics.groupBy("name").agg(F.countDistinct("topic_id").alias("ids")) \
        .filter(F.col("ids") > 1).select("name")
    rows = topics.join(many, "name").join(removed, "topic_id", "left") \
        .orderBy("name", "offset").collect()
    table: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = table.setdefault(row.name, {"name": row.name, "old_ids": [],
                                            "current_id": None, "offsets": []})
        entry["offsets"].append(row.offset)
        if row.removed_at is None:
            entry["current_id"] = row.topic_id
        else:
            entry["old_ids"].append(row.topic_id)
    return sorted(table.values(), key=lambda e: (-len(e["offsets"]), e["name"]))


def node_summary(diverges: dict[int, int], committed_end: int, voters: tuple[int, ...],
                 summaries: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per node: records, start and end offset, last epoch, segments (from the node scan),
    lag behind the longest log and where the node departs from the committed log."""
    log_end = max((s["end_offset"] or 0 for s in summaries.values()), default=0)
    out = []
    for node in sorted(summaries):
        entry = {k: v for k, v in summaries[node].items()
                 if k not in ("violation_counts", "epochs")}
        end = entry["end_offset"] or 0
        entry["role"] = "voter" if node in voters else "observer"
        entry["lag"] = log_end - end
        entry["diverges_at"] = diverges.get(node)
        held = min(end, committed_end)
        if entry["diverges_at"] is not None:
            held = min(held, entry["diverges_at"])
        entry["committed_held"] = held
        out.append(entry)
    return out


def reference_node(nodes: list[dict[str, Any]], committed_end: int) -> int | None:
    """The longest voter log that holds the whole committed prefix."""
    holders = [n for n in nodes if n["role"] == "voter" and n["committed_held"] >= committed_end]
    if not holders:
        return None
    return int(max(holders, key=lambda n: (n["end_offset"] or 0, -n["node"]))["node"])


def analyse(records: DataFrame, diverges: dict[int, int], committed_end: int,
            voters: tuple[int, ...], summaries: dict[int, dict[str, Any]], *,
            full: bool = True) -> Analysis:
    """Everything above; `full=False` computes only the per-node table (what the
    checkpoint check needs), for quick runs such as the planted-fault tests."""
    nodes = node_summary(diverges, committed_end, voters, summaries)
    reference = reference_node(nodes, committed_end)
    if not full or reference is None:
        return Analysis(leader_timeline=[], record_types=[], topic_churn=[],
                        recreated_names=[], nodes=nodes, committed_end=committed_end,
                        reference_node=reference)
    log = records.filter(F.col("node") == reference)
    end = max((n["end_offset"] or 0 for n in nodes), default=0)
    timeline, types = epochs_and_types(log)
    return Analysis(leader_timeline=timeline, record_types=types,
                    topic_churn=topic_churn(log, end), recreated_names=recreated_names(log),
                    nodes=nodes, committed_end=committed_end, reference_node=reference)
