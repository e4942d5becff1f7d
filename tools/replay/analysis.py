"""What happened in the log: leaders per epoch, record types, topic churn, recreated
names, and each node's log end and lag, as small plain-Python tables (lists of dicts) for
the JSON and HTML report.

The log-wide tables describe the *reference log*: the longest voter log that holds the
whole committed prefix (the same copy the broker-checkpoint check replays). They are built
from the aggregates its scan kept (`sequential.Aggregates`, one entry per (epoch, record
type), Topic/RemoveTopic offsets and the recreated names), not from a table of its records. The
per-node table covers every node, with its lag and where it departs from the committed
log.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from tools.replay.sequential import TYPE_NAMES, Aggregates

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


def epochs_and_types(aggregates: Aggregates, claims: list[tuple[Any, ...]]) -> tuple[
        list[dict[str, Any]], list[dict[str, Any]]]:
    """(leader timeline, record-type counts). An epoch's leader is the one its first
    LeaderChange names; `claimants` counts the distinct leaders its LeaderChanges name.
    `claims`: (batch, epoch, leader_id, offset, record_hash) of the reference log."""
    epochs = {epoch: {"epoch": epoch, "leader_id": None, "claimants": 0, "first_offset": first,
                      "last_offset": last, "records": count}
              for epoch, (first, last, count) in aggregates.epochs.items()}
    types: dict[str, int] = {}
    for kind, count in aggregates.kind_counts.items():
        types[TYPE_NAMES[kind]] = types.get(TYPE_NAMES[kind], 0) + count
    first_claim: dict[int, tuple[int, Any]] = {}
    leaders: dict[int, set[int]] = {}
    for _, epoch, leader, offset, _ in claims:
        if epoch not in first_claim or offset < first_claim[epoch][0]:
            first_claim[epoch] = (offset, leader)
        if leader is not None:
            leaders.setdefault(epoch, set()).add(leader)
    for epoch, (_, leader) in first_claim.items():
        if epoch in epochs:
            epochs[epoch]["leader_id"] = leader
            epochs[epoch]["claimants"] = len(leaders.get(epoch, ()))
    counts = [{"record_type": t, "count": n} for t, n in
              sorted(types.items(), key=lambda item: (-item[1], item[0]))]
    return [epochs[e] for e in sorted(epochs)], counts


def topic_churn(aggregates: Aggregates, end_offset: int) -> list[dict[str, Any]]:
    """Topics created and removed per bin, CHURN_BINS bins over the offsets from the
    first Topic or RemoveTopic record to the last (a log of mostly no-ops would put all
    its churn in one bin of the whole log), and the live topics after each bin."""
    churn = [*aggregates.topic_offsets, *aggregates.remove_offsets]
    first = min(churn, default=0)
    last = max(churn, default=end_offset - 1)
    width = max(1, -(-(last + 1 - first) // CHURN_BINS))
    # Counter over map() of int methods: the binning runs in C, a Python loop (or a
    # Python function) per offset does not
    created_in = Counter(map(width.__rfloordiv__, map((-first).__add__,
                                                      aggregates.topic_offsets)))
    removed_in = Counter(map(width.__rfloordiv__, map((-first).__add__,
                                                      aggregates.remove_offsets)))
    out, live = [], 0
    for index in range(max(1, -(-(last + 1 - first) // width))):
        created, removed = created_in[index], removed_in[index]
        live += created - removed
        start = first + index * width
        out.append({"bin_start": start, "bin_end": start + width, "created": created,
                    "removed": removed, "live_after": live})
    return out


def node_summary(diverges: dict[int, int], committed_end: int, voters: tuple[int, ...],
                 summaries: dict[int, dict[str, Any]],
                 replay_from: dict[int, int] | None = None) -> list[dict[str, Any]]:
    """Per node: records, start and end offset, last epoch, segments (from its batch
    index), lag behind the longest log, where the node departs from the committed log,
    and where its replay starts (`replay_from`: 0, or the end offset of the snapshot its
    log starts at; None for a log that starts above 0 without one, which then holds no
    committed prefix the replay can use past its start). Without `replay_from` every
    node replays from 0."""
    log_end = max((s["end_offset"] or 0 for s in summaries.values()), default=0)
    out = []
    for node in sorted(summaries):
        entry = {k: v for k, v in summaries[node].items()
                 if k not in ("violation_counts", "epochs")}
        end = entry["end_offset"] or 0
        entry["role"] = "voter" if node in voters else "observer"
        entry["lag"] = log_end - end
        entry["diverges_at"] = diverges.get(node)
        entry["replay_from"] = 0 if replay_from is None else replay_from.get(node)
        held = min(end, committed_end)
        if entry["diverges_at"] is not None:
            held = min(held, entry["diverges_at"])
        if entry["replay_from"] is None:
            held = min(held, entry["start_offset"] or 0)
        entry["committed_held"] = held
        out.append(entry)
    return out


def reference_node(nodes: list[dict[str, Any]], committed_end: int) -> int | None:
    """The longest voter log that holds the whole committed prefix."""
    holders = [n for n in nodes if n["role"] == "voter" and n["committed_held"] >= committed_end]
    if not holders:
        return None
    return int(max(holders, key=lambda n: (n["end_offset"] or 0, -n["node"]))["node"])


def analyse(nodes: list[dict[str, Any]], committed_end: int, reference: int | None,
            aggregates: Aggregates | None, claims: list[tuple[Any, ...]]) -> Analysis:
    """Everything above; without `aggregates` (quick runs such as the planted-fault
    tests) only the per-node table (what the checkpoint check needs)."""
    if aggregates is None or reference is None:
        return Analysis(leader_timeline=[], record_types=[], topic_churn=[],
                        recreated_names=[], nodes=nodes, committed_end=committed_end,
                        reference_node=reference)
    end = max((n["end_offset"] or 0 for n in nodes), default=0)
    timeline, types = epochs_and_types(aggregates, claims)
    return Analysis(leader_timeline=timeline, record_types=types,
                    topic_churn=topic_churn(aggregates, end),
                    recreated_names=aggregates.recreated_names,
                    nodes=nodes, committed_end=committed_end, reference_node=reference)
