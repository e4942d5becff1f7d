"""Find what to replay: each node's id, metadata segment files, log start offset
(`raft.storage`'s `log-start-offset` beside the segments: the log below it was cut off,
a snapshot stands in for it), snapshot checkpoints (`<end offset>-<epoch>.checkpoint`
beside the segments, `raft.snapshot`; only listed here, Spark reads them),
high-watermark checkpoint (`raft.storage`, beside the segments: the records below it
are committed) and broker checkpoint. Segments wholly below the log start (a crash
while the node dropped them) are left out, as the node's own recovery deletes them.

Layouts understood:

* `--cluster DIR`: the local launcher's layout, `DIR/cluster.json` (optional) and one
  `DIR/<name>/data/` log dir per node (`node-1`, `node-2`, ...).
* `--logs PATH ...`: each PATH is a log dir (holding `__cluster_metadata-0/`) or the
  `__cluster_metadata-0` directory itself.

A node's id comes from `meta.properties` (`node.id=`), else from the digits of its
directory name (`node-3` -> 3), else its position on the command line. The voters come
from `cluster.json`, else from the `quorum-state` files, else every node with a log is
taken for a voter. Everything here runs on the driver and touches only directory
listings and small files; the segments themselves are read by Spark.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from raft.segment import list_segments, segment_base_offset
from raft.snapshot import SNAPSHOT_SUFFIX
from raft.storage import StorageError, read_high_watermark_checkpoint, read_log_start
from tools.replay import CHECKPOINT_FILE, METADATA_DIR

log = logging.getLogger(__name__)
T = TypeVar("T")


class InputError(Exception):
    """The input is unusable (missing directory, unreadable or corrupt file): exit 2."""


def read_json_lines(path: Path, option: str, parse: Callable[[int, Any], T]) -> list[T]:
    """`parse(line number, JSON value)` of each non-blank line of a file given as
    `option`; InputError naming the option, the file and the line when the file is
    unreadable, a line not JSON, or `parse` raises ValueError."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{option} {path}: unreadable: {exc}") from None
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(parse(number, json.loads(line)))
        except ValueError as exc:
            raise InputError(f"{option} {path}, line {number}: {exc}") from None
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeInput:
    node_id: int
    log_dir: Path
    segments: tuple[Path, ...]  # in offset order
    checkpoint: Path | None  # the broker's metadata-image.checkpoint
    high_watermark: int | None = None  # from its high-watermark checkpoint; None: none
    snapshots: tuple[Path, ...] = ()  # every *.checkpoint beside the segments, by name
    start_offset: int = 0  # from its log-start-offset file; 0: none
    cluster_id: str | None = None  # from its meta.properties

    @property
    def log_start(self) -> int:
        """Where its log starts: the log start offset, or the first segment's base offset
        when that is above it (0 for a log never cut below a snapshot)."""
        first = segment_base_offset(self.segments[0]) if self.segments else 0
        return max(first, self.start_offset)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayInput:
    nodes: tuple[NodeInput, ...]
    voters: tuple[int, ...]
    voters_source: str  # "cluster.json", "quorum-state" or "all nodes"

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def segment_count(self) -> int:
        return sum(len(n.segments) for n in self.nodes)

    @property
    def snapshot_count(self) -> int:
        return sum(len(n.snapshots) for n in self.nodes)

    def node(self, node_id: int) -> NodeInput:
        return next(n for n in self.nodes if n.node_id == node_id)

    @property
    def cluster_id(self) -> str | None:
        """The nodes' cluster id (meta.properties); several, comma-separated, if they
        disagree; None when none names one."""
        ids = sorted({n.cluster_id for n in self.nodes if n.cluster_id})
        return ",".join(ids) or None


def _digits(name: str) -> int | None:
    match = re.search(r"(\d+)$", name)
    return int(match.group(1)) if match else None


def _read_properties(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return out
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def _node_id(log_dir: Path, fallback: int) -> int:
    props = _read_properties(log_dir / "meta.properties")
    if props.get("node.id", "").lstrip("-").isdigit():
        return int(props["node.id"])
    for part in (log_dir.name, log_dir.parent.name):
        number = _digits(part)
        if number is not None:
            return number
    return fallback


def segments_from(segments: Sequence[Path], start: int) -> tuple[Path, ...]:
    """The segments (in offset order) less those followed by one starting at or below
    `start`: those hold no record at `start` or above. Wholly below the log start,
    `raft.log.DiskLog` deletes them when it opens the log. None at all: a crash in
    `DiskLog.reset_to` leaves a directory without segments until the node starts."""
    if not segments:
        return ()
    bases = [segment_base_offset(p) for p in segments]
    return tuple(p for p, following in zip(segments, [*bases[1:], None], strict=True)
                 if following is None or following > start)


def _node_input(log_dir: Path, fallback_id: int) -> NodeInput:
    # absolute: Spark executors of a standalone cluster run in their own work directory
    log_dir = log_dir.resolve()
    segment_dir = log_dir / METADATA_DIR
    try:
        start = read_log_start(segment_dir)[0] if segment_dir.is_dir() else 0
    except StorageError as exc:
        raise InputError(str(exc)) from None
    try:
        segments = segments_from(list_segments(segment_dir), start) \
            if segment_dir.is_dir() else ()
        snapshots = tuple(sorted(p for p in segment_dir.iterdir()
                                 if p.name.endswith(SNAPSHOT_SUFFIX))) \
            if segment_dir.is_dir() else ()
    except OSError as exc:
        raise InputError(f"{segment_dir}: cannot list segments: {exc}") from None
    checkpoint = log_dir / CHECKPOINT_FILE
    return NodeInput(node_id=_node_id(log_dir, fallback_id), log_dir=log_dir,
                     segments=segments, checkpoint=checkpoint if checkpoint.is_file() else None,
                     high_watermark=read_high_watermark_checkpoint(segment_dir),
                     snapshots=snapshots, start_offset=start,
                     cluster_id=_read_properties(log_dir / "meta.properties").get("cluster.id"))


def _voters_from(value: Any) -> tuple[int, ...] | None:
    """Voters as a list of ids, a list of {"id"/"node_id"} maps, or Kafka's
    `1@host:port,2@host:port` string."""
    if isinstance(value, str):
        parsed = [_digits(item.split("@", 1)[0].strip()) for item in value.split(",") if item]
        return tuple(sorted(i for i in parsed if i is not None)) or None
    if isinstance(value, list):
        ids: list[int] = []
        for item in value:
            if isinstance(item, int) and not isinstance(item, bool):
                ids.append(item)
            elif isinstance(item, dict):
                found = item.get("id", item.get("node_id"))
                if isinstance(found, int):
                    ids.append(found)
            elif isinstance(item, str):
                number = _digits(item.split("@", 1)[0])
                if number is not None:
                    ids.append(number)
        return tuple(sorted(set(ids))) or None
    return None


def _cluster_json_voters(cluster_dir: Path) -> tuple[int, ...] | None:
    path = cluster_dir / "cluster.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: unreadable cluster description: {exc}") from None
    if not isinstance(data, dict):
        return None
    for key in ("voters", "controller.quorum.voters", "controller_quorum_voters"):
        if key in data:
            return _voters_from(data[key])
    controllers = [n for n in data.get("nodes", []) if isinstance(n, dict)
                   and "controller" in str(n.get("roles", n.get("process.roles", "")))]
    return _voters_from(controllers) if controllers else None


def _quorum_state_voters(nodes: Sequence[NodeInput]) -> tuple[int, ...] | None:
    found: set[int] = set()
    for node in nodes:
        try:
            data = json.loads((node.log_dir / "quorum-state").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        voters = _voters_from(data.get("voters")) if isinstance(data, dict) else None
        found.update(voters or ())
    return tuple(sorted(found)) or None


def _finish(nodes: list[NodeInput], voters: tuple[int, ...] | None, source: str) -> ReplayInput:
    ids = [n.node_id for n in nodes]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise InputError(f"node id(s) {duplicates} appear in more than one log dir")
    if not any(n.segments for n in nodes):
        raise InputError("no metadata log segments found under "
                         + ", ".join(str(n.log_dir) for n in nodes))
    if voters is None:
        voters, source = _quorum_state_voters(nodes), "quorum-state"
    if voters is None:
        voters, source = tuple(sorted(n.node_id for n in nodes if n.segments)), "all nodes"
    nodes.sort(key=lambda n: n.node_id)
    log.info("replay inputs", extra={"nodes": ids, "voters": voters, "source": source})
    return ReplayInput(nodes=tuple(nodes), voters=voters, voters_source=source)


def from_cluster(cluster_dir: Path) -> ReplayInput:
    """The launcher's layout: every `DIR/<name>/data` is a node's log dir."""
    if not cluster_dir.is_dir():
        raise InputError(f"{cluster_dir}: no such cluster directory")
    children = sorted((p for p in cluster_dir.iterdir() if (p / "data").is_dir()),
                      key=lambda p: (_digits(p.name) is None, _digits(p.name) or 0, p.name))
    if not children:
        raise InputError(f"{cluster_dir}: no node directories (expected <name>/data/)")
    nodes = [_node_input(child / "data", index) for index, child in enumerate(children)]
    voters = _cluster_json_voters(cluster_dir)
    return _finish(nodes, voters, "cluster.json")


def from_logs(paths: Sequence[Path]) -> ReplayInput:
    """Explicit log dirs (or their `__cluster_metadata-0` directories)."""
    nodes = []
    for index, path in enumerate(paths):
        if not path.is_dir():
            raise InputError(f"{path}: no such log directory")
        log_dir = path.parent if path.name == METADATA_DIR else path
        nodes.append(_node_input(log_dir, index))
    return _finish(nodes, None, "")
