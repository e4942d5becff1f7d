"""Snapshots in the replay: where each node's replay starts, and four checks of the
snapshot checkpoints (`raft.snapshot`, `<end offset>-<epoch>.checkpoint` beside the
segments) against the logs.

A node's replay input is its log from offset 0 when its first segment starts at 0.
Once a node deletes the segments below its newest snapshot, its log starts above 0:
its input is then the valid snapshot of its own that ends nearest at or above that
start (`replay_bases`), and the records of its log from the snapshot's end offset on.
The log may start inside its first segment, below the snapshot's end: the records
before the end offset are still compared with the other nodes' copies (log matching,
committed prefix), but not replayed.

The checks:
* snapshot_valid: every snapshot file reads whole (its name, every CRC, header and
  footer: `raft.snapshot.read_snapshot`) and its records make an image
  (`metadata.image_snapshot.image_from_records`). A damaged file is one violation
  naming it and the byte offset; its node falls back to its other snapshots, as a
  starting node does.
* snapshot_at_log_start: a log that starts above offset 0 has a valid snapshot of its
  node at or above its start; without one the node's records are only compared with the
  other nodes' copies, not replayed.
* snapshot_matches_log: every valid snapshot ends at or below the committed end (a
  snapshot is only ever of committed records), and its image equals the image a log
  replay gives at its end offset: the replay from offset 0, or else from the oldest
  other snapshot below it, through some node's log that holds the committed records in
  between (not past its log end or where it departs from the committed log). The record
  before its end offset has the snapshot's epoch. Where no log holds those records any
  more, the snapshot is checked for validity only; the note counts both.
* images_agree: the nodes whose replay (snapshot + log, or the log from 0) holds the
  whole committed prefix have the same image at the committed end. Nodes replaying from
  the same base agree exactly when their logs do (the cross-node checks), so only one
  replay per distinct base is run, and only when there are several. A base already found
  wrong by snapshot_matches_log is not reported again.

Snapshot files are read in one Spark job, one task per node (`read_all`); the log
replays the last two checks need are another, one task per (base, log) pair
(`tools.replay.images.replayed_images`). Without snapshot files neither job runs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from raft.snapshot import SnapshotError, parse_snapshot_name
from tools.replay.checks import MAX_EXAMPLES, CheckResult
from tools.replay.images import ReplayBase, load_snapshot_image, replayed_images
from tools.replay.inputs import ReplayInput, segments_from
from tools.replay.load import read_segments

log = logging.getLogger(__name__)

VALID = "snapshot_valid"
AT_LOG_START = "snapshot_at_log_start"
MATCHES_LOG = "snapshot_matches_log"
IMAGES_AGREE = "images_agree"
DESCRIPTIONS = {
    VALID: "every snapshot checkpoint reads whole and its records make a metadata image",
    AT_LOG_START: "a log that starts above offset 0 starts at or inside a valid snapshot "
                  "of its node",
    MATCHES_LOG: "every snapshot ends at a committed offset, and its image and epoch equal "
                 "those of the committed log replayed up to its end offset",
    IMAGES_AGREE: "the nodes' images at the committed end (snapshot + log) are the same",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotInfo:
    """One snapshot file, read and checked in an executor."""

    node: int
    path: str
    end_offset: int | None = None  # None: the file name is not a snapshot's
    epoch: int | None = None
    image_hash: str | None = None
    error: str | None = None  # why it is not a valid snapshot

    @property
    def valid(self) -> bool:
        return self.error is None

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def base(self) -> ReplayBase:
        assert self.end_offset is not None
        return ReplayBase(self.end_offset, self.path, self.image_hash)


Snapshots = dict[int, list[SnapshotInfo]]  # node -> its snapshot files, by name


# --- reading (one Spark job) ----------------------------------------------------------------

def read_snapshot_files(node: int, paths: Sequence[str]) -> Iterator[SnapshotInfo]:
    """Each file's id and image hash, or why it is not a valid snapshot."""
    for path in paths:
        try:
            snapshot_id = parse_snapshot_name(path)
        except SnapshotError as exc:
            yield SnapshotInfo(node=node, path=path, error=str(exc))
            continue
        found = SnapshotInfo(node=node, path=path, end_offset=snapshot_id.end_offset,
                             epoch=snapshot_id.epoch)
        try:
            image = load_snapshot_image(path)[1]
        except SnapshotError as exc:
            yield SnapshotInfo(node=node, path=path, end_offset=found.end_offset,
                               epoch=found.epoch, error=str(exc))
            continue
        yield SnapshotInfo(node=node, path=path, end_offset=found.end_offset,
                           epoch=found.epoch, image_hash=image.content_hash())


def read_all(spark: Any, replay_input: ReplayInput) -> Snapshots:
    """Every node's snapshot files, read whole in the executors; {} when there are none."""
    tasks = [(n.node_id, [str(p.resolve()) for p in n.snapshots])
             for n in replay_input.nodes if n.snapshots]
    if not tasks:
        return {}
    rdd = spark.sparkContext.parallelize(tasks, len(tasks))
    out: Snapshots = {}
    for info in rdd.flatMap(lambda task: read_snapshot_files(*task)).collect():
        out.setdefault(info.node, []).append(info)
    return out


def replay_bases(replay_input: ReplayInput, snapshots: Snapshots) -> dict[int, ReplayBase]:
    """node -> where its replay starts: offset 0 for a log starting at 0, else its own
    valid snapshot ending nearest at or above its log start. A node missing here starts
    above 0 with no such snapshot: its log is not replayed."""
    bases: dict[int, ReplayBase] = {}
    for node in replay_input.nodes:
        start = node.log_start
        if start == 0:
            bases[node.node_id] = ReplayBase(0)
            continue
        usable = [s for s in snapshots.get(node.node_id, ())
                  if s.valid and s.end_offset is not None and s.end_offset >= start]
        if usable:
            bases[node.node_id] = min(usable, key=lambda s: (s.end_offset, s.epoch)).base()
    return bases


# --- snapshot_valid, snapshot_at_log_start (no more Spark) ------------------------------------

def check_files(snapshots: Snapshots) -> CheckResult:
    infos = [info for found in snapshots.values() for info in found]
    if not infos:
        return CheckResult(name=VALID, description=DESCRIPTIONS[VALID], violations=0,
                           skipped=True, note="no snapshot checkpoint files")
    examples = [{"nodes": [info.node], "offset": info.end_offset, "file": info.name,
                 "reason": f"not a valid snapshot: {info.error}"}
                for info in infos if not info.valid]
    return CheckResult(name=VALID, description=DESCRIPTIONS[VALID], violations=len(examples),
                       examples=tuple(examples[:MAX_EXAMPLES]),
                       note=f"{len(infos) - len(examples)} of {len(infos)} snapshot "
                            "file(s) valid")


def check_log_starts(replay_input: ReplayInput, snapshots: Snapshots,
                     bases: dict[int, ReplayBase]) -> CheckResult:
    cut = [n for n in replay_input.nodes if n.segments and n.log_start > 0]
    if not cut:
        return CheckResult(name=AT_LOG_START, description=DESCRIPTIONS[AT_LOG_START],
                           violations=0, skipped=True, note="every log starts at offset 0")
    examples = []
    for node in cut:
        if node.node_id in bases:
            continue
        ends = sorted(s.end_offset for s in snapshots.get(node.node_id, ())
                      if s.valid and s.end_offset is not None)
        examples.append({"nodes": [node.node_id], "offset": node.log_start,
                         "reason": f"the log starts at offset {node.log_start} and no valid "
                                   f"snapshot of this node ends at or above it (valid "
                                   f"snapshots end at {ends}): its records are not replayed"})
    note = "; ".join(f"node {n.node_id}: log from offset {n.log_start}, replayed "
                     f"{bases[n.node_id].describe()}" for n in cut if n.node_id in bases)
    return CheckResult(name=AT_LOG_START, description=DESCRIPTIONS[AT_LOG_START],
                       violations=len(examples), examples=tuple(examples[:MAX_EXAMPLES]),
                       note=note)


# --- the log replays (one Spark job) -----------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Span:
    """The committed records a node's log holds: offsets [start, reach)."""

    start: int
    reach: int


@dataclass(slots=True)
class ReplayPlan:
    """Which log replays to run: (base, node whose log is read) -> end offsets where the
    image is wanted; `chosen[end]`: the replay a snapshot ending there is compared with."""

    order: list[int]  # nodes in the order a log is picked to replay
    spans: dict[int, Span]
    replays: dict[tuple[ReplayBase, int], set[int]] = field(default_factory=dict)
    chosen: dict[int, tuple[ReplayBase, int]] = field(default_factory=dict)

    def holder(self, base: ReplayBase, end: int) -> int | None:
        """A node whose log holds the committed records [base end offset, end)."""
        return next((n for n in self.order if self.spans[n].start <= base.end_offset
                     and self.spans[n].reach >= end), None)

    def want(self, base: ReplayBase, end: int) -> tuple[ReplayBase, int] | None:
        node = self.holder(base, end)
        if node is None:
            return None
        self.replays.setdefault((base, node), set()).add(end)
        return base, node


def spans(replay_input: ReplayInput, ends: dict[int, int | None], committed_end: int,
          diverges: dict[int, int]) -> dict[int, Span]:
    """node -> the committed records its log holds, from its segments' start to the
    first of: its log end (`ends`), the committed end, where it departs from the
    committed log (`diverges`)."""
    out = {}
    for node in replay_input.nodes:
        if not node.segments:
            continue
        start = node.log_start
        end = ends.get(node.node_id)
        reach = min(start if end is None else max(end, start), committed_end,
                    diverges.get(node.node_id, committed_end))
        out[node.node_id] = Span(start, reach)
    return out


def _replay_task(key: int, paths: list[str], base: ReplayBase,
                 ends: list[int]) -> Iterator[tuple[int, int, str, int | None]]:
    """(replay, end offset, image hash there, epoch of the record before it)."""
    targets = [end - 1 for end in ends]
    for offset, digest, epoch in replayed_images(read_segments(paths), targets, base):
        yield key, offset + 1, digest, epoch


def run_replays(spark: Any, replay_input: ReplayInput, plan: ReplayPlan) -> dict[
        tuple[ReplayBase, int], dict[int, tuple[str, int | None]]]:
    """(base, node) -> {end offset: (image hash, epoch of the record before it)}."""
    keys = list(plan.replays)
    if not keys:
        return {}
    tasks = [(i, [str(p.resolve()) for p in
                  segments_from(replay_input.node(node).segments, base.end_offset)], base,
              sorted(plan.replays[(base, node)])) for i, (base, node) in enumerate(keys)]
    rdd = spark.sparkContext.parallelize(tasks, len(tasks))
    out: dict[tuple[ReplayBase, int], dict[int, tuple[str, int | None]]] = {k: {} for k in keys}
    for index, end, digest, epoch in rdd.flatMap(lambda task: _replay_task(*task)).collect():
        out[keys[index]][end] = (digest, epoch)
    return out


# --- snapshot_matches_log, images_agree -------------------------------------------------------

SnapshotKey = tuple[int, int, str]  # (end offset, epoch, image hash): the same snapshot


def _versions(snapshots: Snapshots) -> dict[SnapshotKey, list[SnapshotInfo]]:
    """The valid snapshots, the same one on several nodes (or files) once."""
    out: dict[SnapshotKey, list[SnapshotInfo]] = {}
    for info in (i for found in snapshots.values() for i in found if i.valid):
        assert info.end_offset is not None
        assert info.epoch is not None
        assert info.image_hash is not None
        out.setdefault((info.end_offset, info.epoch, info.image_hash), []).append(info)
    return dict(sorted(out.items()))


def plan_replays(snapshots: Snapshots, bases: dict[int, ReplayBase], node_spans: dict[int, Span],
                 committed_end: int, order: list[int]) -> ReplayPlan:
    """The replays both checks need. A committed snapshot ending at E is compared with the
    lowest base below E (offset 0 first, then the oldest snapshot) that some log continues
    to E. The agreement at the committed end needs one replay per distinct base of the
    nodes that hold the whole committed prefix, when there are several."""
    plan = ReplayPlan(order=[n for n in order if n in node_spans], spans=node_spans)
    candidates = sorted({ReplayBase(0), *(info.base() for infos in _versions(snapshots).values()
                                          for info in infos[:1])},
                        key=lambda b: (b.end_offset, b.path is not None, b.image_hash or ""))
    for end in sorted({key[0] for key in _versions(snapshots)}):
        if end > committed_end:
            continue
        for base in (b for b in candidates if b.end_offset < end):
            chosen = plan.want(base, end)
            if chosen is not None:
                plan.chosen[end] = chosen
                break
    groups = _base_groups(bases, node_spans, committed_end, plan.chosen)
    if len(groups) > 1:
        for group in groups.values():
            start = group.replayable(plan, committed_end)
            if start is not None and start.end_offset < committed_end:
                plan.want(start, committed_end)
    return plan


@dataclass(slots=True)
class _Group:
    """Nodes whose bases are one image as far as the replay can tell: the base itself,
    or snapshots compared (by snapshot_matches_log) with a replay from `root`, the lowest
    base of that chain of comparisons."""

    root: ReplayBase
    nodes: list[int] = field(default_factory=list)
    bases: list[ReplayBase] = field(default_factory=list)

    def replayable(self, plan: ReplayPlan, committed_end: int) -> ReplayBase | None:
        """A base of the group that some log continues to the committed end (a snapshot
        at the committed end is its own image there)."""
        return next((b for b in (self.root, *self.bases) if b.end_offset == committed_end
                     or plan.holder(b, committed_end) is not None), None)


def _root(base: ReplayBase, chosen: dict[int, tuple[ReplayBase, int]],
          matched: set[tuple[int, str]] | None) -> ReplayBase:
    """The lowest base of the comparisons that make `base` one image with it: through
    the snapshots that matched (None: before the comparisons, every one compared)."""
    while base.path is not None and base.end_offset in chosen and (
            matched is None or base.key in matched):
        base = chosen[base.end_offset][0]
    return base


def _base_groups(bases: dict[int, ReplayBase], node_spans: dict[int, Span], committed_end: int,
                 chosen: dict[int, tuple[ReplayBase, int]],
                 matched: set[tuple[int, str]] | None = None
                 ) -> dict[tuple[int, str | None], _Group]:
    """The replayed nodes that hold the whole committed prefix from their base, grouped
    by the root of their base (`_Group`)."""
    groups: dict[tuple[int, str | None], _Group] = {}
    for node in sorted(node_spans):
        base = bases.get(node)
        if base is None or not node_spans[node].reach >= committed_end >= base.end_offset:
            continue
        root = _root(base, chosen, matched)
        group = groups.setdefault(root.key, _Group(root))
        group.nodes.append(node)
        group.bases.append(base)
    return groups


Replayed = dict[tuple[ReplayBase, int], dict[int, tuple[str, int | None]]]


@dataclass(slots=True)
class Verdicts:
    """The snapshots (end offset, image hash) snapshot_matches_log found equal to a log
    replay, and those it found wrong (another image, or past the committed end)."""

    matched: set[tuple[int, str]] = field(default_factory=set)
    wrong: set[tuple[int, str]] = field(default_factory=set)


def check_matches(snapshots: Snapshots, plan: ReplayPlan, replayed: Replayed,
                  committed_end: int) -> tuple[CheckResult, Verdicts]:
    """snapshot_matches_log, and what it found of each snapshot."""
    versions = _versions(snapshots)
    files = sum(len(found) for found in snapshots.values())
    if not versions:
        result = CheckResult(name=MATCHES_LOG, description=DESCRIPTIONS[MATCHES_LOG],
                             violations=0, skipped=True,
                             note="no valid snapshot" if files else "no snapshot files")
        return result, Verdicts()
    examples: list[dict[str, Any]] = []
    verdicts = Verdicts()
    counts = {"checked": 0, "validity_only": 0, "uncommitted": 0}
    for (end, epoch, digest), infos in versions.items():
        nodes, where = sorted({i.node for i in infos}), {"file": infos[0].name}
        if end > committed_end:
            counts["uncommitted"] += len(infos)
            verdicts.wrong.add((end, digest))
            examples.append({"nodes": nodes, "offset": end, "epoch": epoch, **where,
                             "reason": f"the snapshot ends at offset {end}, above the "
                                       f"committed end {committed_end}: it holds records "
                                       "that are not committed"})
            continue
        chosen = plan.chosen.get(end)
        found = None if chosen is None else replayed.get(chosen, {}).get(end)
        if chosen is None or found is None:
            counts["validity_only"] += len(infos)
            continue
        counts["checked"] += len(infos)
        (base, node), (expected, epoch_there) = chosen, found
        (verdicts.wrong if expected != digest else verdicts.matched).add((end, digest))
        if expected != digest:
            examples.append({"nodes": nodes, "offset": end, "epoch": epoch, **where,
                             "reason": f"its image differs from node {node}'s log replayed "
                                       f"{base.describe()} up to offset {end}"})
        if epoch_there is not None and epoch_there != epoch:
            examples.append({"nodes": nodes, "offset": end, "epoch": epoch, **where,
                             "reason": f"its epoch is {epoch}, but the record at offset "
                                       f"{end - 1} has epoch {epoch_there}"})
    note = (f"{files} snapshot file(s): {counts['checked']} checked against a log replay, "
            f"{counts['validity_only']} for validity only (no log holds the committed "
            f"records below them), {counts['uncommitted']} past the committed end "
            f"{committed_end}")
    return CheckResult(name=MATCHES_LOG, description=DESCRIPTIONS[MATCHES_LOG],
                       violations=len(examples), examples=tuple(examples[:MAX_EXAMPLES]),
                       note=note, counts=counts), verdicts


def check_images_agree(bases: dict[int, ReplayBase], plan: ReplayPlan, replayed: Replayed,
                       committed_end: int, verdicts: Verdicts) -> CheckResult:
    """The image at the committed end per group of nodes (`_Group`: one replay per root
    of a base); a snapshot snapshot_matches_log found wrong is never reported again."""
    groups = _base_groups(bases, plan.spans, committed_end, plan.chosen, verdicts.matched)
    wrong = verdicts.wrong
    if len(groups) < 2:
        return CheckResult(name=IMAGES_AGREE, description=DESCRIPTIONS[IMAGES_AGREE],
                           violations=0, skipped=True,
                           note="the nodes holding the committed prefix replay from one base, "
                                "or from snapshots equal to its replay: their images agree "
                                "when their logs do")
    images: dict[tuple[int, str | None], str] = {}
    for key, group in groups.items():
        base = group.replayable(plan, committed_end)
        node = None if base is None else plan.holder(base, committed_end)
        if base is not None and base.end_offset == committed_end and base.image_hash:
            images[key] = base.image_hash
        elif base is not None and node is not None:
            found = replayed.get((base, node), {}).get(committed_end)
            if found is not None:
                images[key] = found[0]
    trusted = [k for k in images if k not in wrong]
    if not trusted:
        return CheckResult(name=IMAGES_AGREE, description=DESCRIPTIONS[IMAGES_AGREE],
                           violations=0, skipped=True,
                           note="no trusted replay reached the committed end")
    reference = min(trusted, key=lambda k: (k[0], -len(groups[k].nodes), groups[k].nodes[0]))
    examples = []
    for key, digest in images.items():
        if digest == images[reference] or key in wrong:
            continue
        examples.append({"nodes": groups[key].nodes, "offset": committed_end,
                         "reason": f"the image at the committed end, replayed "
                                   f"{groups[key].root.describe()}, differs from the one "
                                   f"replayed {groups[reference].root.describe()} (node(s) "
                                   f"{groups[reference].nodes})"})
    return CheckResult(name=IMAGES_AGREE, description=DESCRIPTIONS[IMAGES_AGREE],
                       violations=len(examples), examples=tuple(examples[:MAX_EXAMPLES]),
                       note=f"{len(images)} distinct base(s) replayed to offset {committed_end}")
