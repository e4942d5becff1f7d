"""A node's metadata log in a local cluster directory, replayed into a MetadataImage.

The directory is the launcher's layout (`tools/cluster.py`): `cluster.json` names the
nodes, their roles and their log directories. The log is read as `kraft dump-log` reads
it (`raft.log.scan_log_dir`: checked, never repaired, so the log of a running node can be
read): a corrupt segment is one error naming the file and byte offset (exit 2), a torn
tail a warning. Records are replayed up to the node's high-watermark checkpoint
(`raft/storage.py`: the records below it are committed) when it has one, else to the end
of its log, and the header says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from raft.log import METADATA_PARTITION_DIR, LogCorruptionError, scan_log_dir
from raft.storage import read_high_watermark_checkpoint
from tools.cluster import Cluster, ClusterError, NodeInfo
from tools.errors import CommandError, usage_error
from tools.metadata_shell.tree import NO_EPOCH, Provenance


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedImage:
    image: MetadataImage
    provenance: Provenance
    header: str  # one line: what was read, and up to where
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Replay:
    image: MetadataImage
    epoch: int  # of the last record replayed
    log_end: int  # the offset after the log's last whole batch
    torn_tail: str | None  # where the last segment's torn tail begins, and why


def load_node_image(cluster_dir: Path, node_id: int | None) -> LoadedImage:
    """Node `node_id`'s image (default: the first voter's); CommandError (exit 2) when the
    cluster, the node or its log cannot be read."""
    cluster = _load_cluster(cluster_dir)
    node = _choose_node(cluster, node_id)
    partition_dir = _log_dir(cluster, node) / METADATA_PARTITION_DIR
    committed_end = read_high_watermark_checkpoint(partition_dir)
    replay = _replay(partition_dir, committed_end)
    provenance = Provenance(offset=replay.image.last_applied_offset, epoch=replay.epoch)
    warnings = []
    if replay.torn_tail is not None:
        warnings.append(f"warning: {replay.torn_tail} (left out, as recovery would cut it)")
    if replay.image.anomaly_count:
        warnings.append(f"warning: replay skipped {replay.image.anomaly_count} record(s) that "
                        "contradict the image (see `kraft dump-log`)")
    role = "voter" if node.is_voter else "observer"
    header = (f"node {node.id} ({role}): {_extent(committed_end, replay.log_end)}; "
              f"image at offset {provenance.offset}, epoch {provenance.epoch}")
    return LoadedImage(image=replay.image, provenance=provenance, header=header,
                       warnings=tuple(warnings))


def _extent(committed_end: int | None, log_end: int) -> str:
    if committed_end is None:
        return (f"replayed the whole log, offsets below {log_end} (no high-watermark "
                "checkpoint, so some records may not be committed)")
    if committed_end > log_end:  # the node lost an unflushed tail the checkpoint covered
        return (f"replayed the whole log, offsets below {log_end} (its high-watermark "
                f"checkpoint {committed_end} is past the log end)")
    return (f"replayed the committed records, offsets below the high-watermark "
            f"checkpoint {committed_end} (log end {log_end})")


def _load_cluster(cluster_dir: Path) -> Cluster:
    if not cluster_dir.is_dir():
        raise usage_error(f"{cluster_dir}: no such cluster directory")
    try:
        return Cluster.load(cluster_dir)
    except ClusterError as exc:
        raise usage_error(str(exc)) from None
    except (KeyError, TypeError, ValueError) as exc:  # cluster.json of another shape
        raise usage_error(f"{cluster_dir}/cluster.json: not a cluster description "
                          f"({type(exc).__name__}: {exc})") from None


def _choose_node(cluster: Cluster, node_id: int | None) -> NodeInfo:
    if node_id is None:
        if not cluster.voter_ids:
            raise usage_error(f"no voter in {cluster.directory}: name a node with --node")
        node_id = cluster.voter_ids[0]
    try:
        return cluster.node(node_id)
    except ClusterError as exc:
        raise usage_error(str(exc)) from None


def _log_dir(cluster: Cluster, node: NodeInfo) -> Path:
    """The log directory cluster.json records; failing that the same place under the
    cluster directory (cluster.json records absolute paths, stale after a move)."""
    for candidate in (Path(node.data_dir), cluster.directory / Path(node.dir).name / "data"):
        if candidate.is_dir():
            return candidate
    raise usage_error(f"node {node.id}: no log directory at {node.data_dir}")


def _replay(partition_dir: Path, committed_end: int | None) -> _Replay:
    """Every record below `committed_end` (None: all of them) applied in one pass. A
    missing directory is an empty log: the node never ran."""
    delta = MetadataDelta(MetadataImage.empty())
    epoch, log_end, torn_tail = NO_EPOCH, 0, None
    try:
        for path, scan in scan_log_dir(partition_dir):
            for stored in scan.batches:
                batch = stored.batch
                log_end = batch.next_offset
                for index, data in enumerate(batch.records):
                    if committed_end is not None and batch.base_offset + index >= committed_end:
                        break
                    delta.apply_bytes(data, batch.base_offset + index)
                    epoch = batch.epoch
            if scan.torn_reason is not None:  # only the last segment may have one
                torn_tail = (f"{path}: torn tail at byte offset {scan.valid_bytes}: "
                             f"{scan.torn_reason}")
    except LogCorruptionError as exc:
        raise CommandError(str(exc), exit_code=2) from None
    except OSError as exc:  # unreadable, or a segment removed while a running node truncated
        raise usage_error(f"{partition_dir}: cannot read the log: {exc}") from None
    return _Replay(image=delta.build(), epoch=epoch, log_end=log_end, torn_tail=torn_tail)
