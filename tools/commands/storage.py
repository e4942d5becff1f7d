"""`kraft storage info (--config FILE | --dir DIR) [--json]`: what a node's log directory
holds, like kafka-storage.sh info: whether it is formatted and for which cluster, node and
directory id (what `kraft quorum remove-controller --directory-id` names), the lock
holder, the election state, and the metadata log (segments, log start, log end,
high-watermark checkpoint, snapshots). Read-only: the lock is not taken, so a running
node's directory can be shown. A missing or unformatted directory is reported, exit 1;
bad usage or a damaged file exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from raft.log import METADATA_PARTITION_DIR, LogCorruptionError, scan_segment
from raft.segment import list_segments, segment_base_offset
from raft.snapshot import SnapshotError, list_snapshots
from raft.storage import (
    LOCK_FILE,
    StorageError,
    read_high_watermark_checkpoint,
    read_log_start,
    read_meta_properties,
    read_quorum_state,
)
from tools.config import ConfigError, load
from tools.errors import CommandError, usage_error


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    actions = parser.add_subparsers(dest="action", required=True, parser_class=type(parser))
    info = actions.add_parser("info", help="show a log directory (like kafka-storage.sh info)")
    source = info.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", help="a node configuration (TOML or .properties): its "
                        "log directory")
    source.add_argument("--dir", help="a node's log directory")
    info.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    if args.config:
        try:
            log_dir = load(args.config).log_dir
        except ConfigError as exc:
            raise usage_error(str(exc)) from None
    else:
        log_dir = Path(args.dir)
    try:
        data = describe_log_dir(log_dir)
    except (StorageError, LogCorruptionError, SnapshotError) as exc:
        raise CommandError(str(exc), exit_code=2) from None
    print(json.dumps(data, indent=2) if args.json else render(data))
    return 0 if data["formatted"] else 1


def _lock_holder(log_dir: Path) -> int | None:
    """The pid in `.lock` when that process is alive (a hint: the flock is not tested)."""
    try:
        text = (log_dir / LOCK_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.isdigit():
        return None
    try:
        os.kill(int(text), 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, someone else's
    return int(text)


def describe_log_dir(log_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = {"dir": str(log_dir), "exists": log_dir.is_dir(), "formatted": False}
    if not log_dir.is_dir():
        return data
    meta = read_meta_properties(log_dir)
    if meta is not None:
        data.update(formatted=True, cluster_id=meta.cluster_id, node_id=meta.node_id,
                    directory_id=meta.directory_id, version=meta.version)
    data["locked_by_pid"] = _lock_holder(log_dir)
    state = read_quorum_state(log_dir)
    data["quorum_state"] = state.to_json() if state else None
    partition = log_dir / METADATA_PARTITION_DIR
    data["metadata_log"] = _describe_partition(partition) if partition.is_dir() else None
    return data


def _describe_partition(partition: Path) -> dict[str, Any]:
    segments = list_segments(partition)
    start, start_epoch = read_log_start(partition)
    end = start
    if segments:  # only the last segment is read: the log ends there
        last = segments[-1]
        scan = scan_segment(last.read_bytes(), last, expected_offset=segment_base_offset(last),
                            is_last=True)
        end = scan.batches[-1].batch.next_offset if scan.batches else segment_base_offset(last)
    snapshots = sorted(list_snapshots(partition))
    return {"dir": str(partition), "segments": len(segments),
            "bytes": sum(p.stat().st_size for p in segments),
            "log_start_offset": start, "log_start_epoch": start_epoch, "log_end_offset": end,
            "high_watermark_checkpoint": read_high_watermark_checkpoint(partition),
            "snapshots": [s.path.name for s in snapshots]}


def render(data: dict[str, Any]) -> str:
    if not data["exists"]:
        return f"No log directory at {data['dir']} (run kraft format)"
    lines = [f"Found log directory:\n  {data['dir']}", ""]
    if not data["formatted"]:
        lines.append("Not formatted: no meta.properties (run kraft format)")
        return "\n".join(lines)
    directory = data["directory_id"]  # what remove-controller names a replica by (KIP-853)
    lines.append(f"Found metadata: {{cluster.id={data['cluster_id']}, "
                 f"node.id={data['node_id']}, "
                 + (f"directory.id={directory}, " if directory else "")
                 + f"version={data['version']}}}")
    pid = data["locked_by_pid"]
    lines.append(f"In use by pid {pid}" if pid else "Not in use (no live lock holder)")
    state = data["quorum_state"]
    lines.append("Quorum state: " + (f"epoch {state['epoch']}, leader {state['leader_id']}, "
                                     f"voted for {state['voted_id']}" if state else "none yet"))
    log = data["metadata_log"]
    if log is None:
        lines.append(f"No metadata log ({METADATA_PARTITION_DIR} is missing)")
        return "\n".join(lines)
    hw = log["high_watermark_checkpoint"]
    lines += [f"Metadata log: {log['dir']}",
              f"  {log['segments']} segment(s), {log['bytes']} bytes; offsets "
              f"{log['log_start_offset']} to {log['log_end_offset']} (log end)",
              f"  high-watermark checkpoint: {hw if hw is not None else 'none'}",
              f"  snapshots: {', '.join(log['snapshots']) or 'none'}"]
    return "\n".join(lines)
