"""Broker image checkpoints versus the image replayed from the controllers' log.

The file format is documented in `tools.replay` (package docstring):
`<log.dir>/metadata-image.checkpoint` = `{"applied_offset": int, "image_hash": str}`.

The reference log is a voter's copy that holds the whole committed prefix; one Spark
task reads its segments in order and replays them with `metadata.delta` from the node's
replay base (the empty image, or the snapshot its log starts at: `tools.replay.images`),
taking `content_hash()` at every offset some broker checkpointed. A checkpoint below that
snapshot cannot be rebuilt from this log; the note lists it as not compared.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.replay.checks import CheckResult
from tools.replay.images import ReplayBase, replayed_images
from tools.replay.inputs import InputError, NodeInput
from tools.replay.load import read_segments

log = logging.getLogger(__name__)

NAME = "broker_checkpoints"
DESCRIPTION = ("each broker's checkpointed image hash equals the image replayed from the "
               "controller's log at the same offset")


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    node_id: int
    applied_offset: int  # last record applied, inclusive; -1 for an empty image
    image_hash: str

    def to_json(self) -> dict[str, Any]:
        return {"applied_offset": self.applied_offset, "image_hash": self.image_hash}


def write_checkpoint(log_dir: Path, applied_offset: int, image_hash: str) -> Path:
    """The format brokers write (used by the tests; brokers write it atomically)."""
    path = log_dir / "metadata-image.checkpoint"
    path.write_text(json.dumps({"applied_offset": applied_offset, "image_hash": image_hash}),
                    encoding="utf-8")
    return path


def read_checkpoint(node: NodeInput) -> Checkpoint | None:
    if node.checkpoint is None:
        return None
    try:
        data = json.loads(node.checkpoint.read_text(encoding="utf-8"))
        offset, digest = data["applied_offset"], data["image_hash"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{node.checkpoint}: unreadable image checkpoint: {exc!r}") from None
    if not isinstance(offset, int) or isinstance(offset, bool) or not isinstance(digest, str):
        raise InputError(f"{node.checkpoint}: applied_offset must be an int and "
                         "image_hash a string")
    return Checkpoint(node_id=node.node_id, applied_offset=offset, image_hash=digest)


def image_hashes(files: Iterable[tuple[str, bytes]], targets: frozenset[int],
                 base: ReplayBase | None = None) -> Iterator[tuple[int, str]]:
    """(offset, content hash of the image through that offset) for each target offset
    the log reaches from `base` (None: from offset 0). Runs in one executor over one
    node's segments."""
    for offset, digest, _ in replayed_images(files, targets, base):
        yield offset, digest


def check_checkpoints(spark: Any, checkpoints: list[Checkpoint], reference: NodeInput | None,
                      committed_end: int, base: ReplayBase | None = None) -> CheckResult:
    """`base`: where the reference node's replay starts (None: offset 0)."""
    if not checkpoints:
        return CheckResult(name=NAME, description=DESCRIPTION, violations=0, skipped=True,
                           note="no broker wrote metadata-image.checkpoint: nothing to compare")
    if reference is None:
        return CheckResult(name=NAME, description=DESCRIPTION, violations=0, skipped=True,
                           note="no voter holds the whole committed log")
    try:
        import metadata.delta  # noqa: F401
    except ImportError as exc:
        return CheckResult(name=NAME, description=DESCRIPTION, violations=0, skipped=True,
                           note=f"image replay unavailable: {exc}")
    first = -1 if base is None else base.end_offset - 1  # the lowest offset rebuilt
    below = sorted(c.node_id for c in checkpoints if c.applied_offset < first)
    compared = [c for c in checkpoints if c.applied_offset >= first]
    targets = frozenset(c.applied_offset for c in compared)
    paths = [str(p.resolve()) for p in reference.segments]
    one = spark.sparkContext.parallelize([paths], 1)  # one task reads them in order
    found = dict(one.flatMap(lambda ps: image_hashes(read_segments(ps), targets, base))
                 .collect()) if targets else {}
    examples = []
    for checkpoint in compared:
        expected = found.get(checkpoint.applied_offset)
        if expected == checkpoint.image_hash:
            continue
        reason = (f"log of node {reference.node_id} ends before offset "
                  f"{checkpoint.applied_offset}" if expected is None else
                  f"checkpoint hash {checkpoint.image_hash[:16]}... but the replayed image "
                  f"has {expected[:16]}...")
        examples.append({"nodes": [checkpoint.node_id], "offset": checkpoint.applied_offset,
                         "reason": reason, "record": {"checkpoint": checkpoint.to_json()}})
    beyond = [c.node_id for c in checkpoints if c.applied_offset >= committed_end]
    note = (f"replayed from node {reference.node_id}'s log"
            + ("" if base is None or base.path is None else f" (replayed {base.describe()})")
            + (f"; brokers {beyond} checkpointed past the committed prefix "
               f"(offset {committed_end})" if beyond else "")
            + (f"; brokers {below} checkpointed below offset {first}, where that log's "
               "replay starts: not compared" if below else ""))
    return CheckResult(name=NAME, description=DESCRIPTION, violations=len(examples),
                       examples=tuple(examples[:20]), note=note)
