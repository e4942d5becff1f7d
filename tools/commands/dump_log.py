"""`kraft dump-log --dir DIR [--json]`: every batch and every record of a metadata log.

Read-only: the segments are checked as recovery would check them, but nothing is repaired.
A corrupt segment is one error line naming file and byte offset (exit 2); a torn tail is
reported as a warning, since opening the log would truncate it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from metadata import records as metadata_records
from raft.log import METADATA_PARTITION_DIR, LogCorruptionError, scan_log_dir
from raft.segment import StoredBatch, list_segments
from tools.errors import CommandError, usage_error


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--dir", required=True,
                        help=f"a node's log directory, or its {METADATA_PARTITION_DIR} directory")
    parser.add_argument("--json", action="store_true", help="one JSON object per record")


def run(args: argparse.Namespace) -> int:
    directory = resolve_partition_dir(Path(args.dir))
    try:
        for line in dump_lines(directory, as_json=args.json):
            print(line)
    except LogCorruptionError as exc:
        sys.stdout.flush()
        raise CommandError(str(exc), exit_code=2) from None
    return 0


def resolve_partition_dir(path: Path) -> Path:
    if (path / METADATA_PARTITION_DIR).is_dir():
        return path / METADATA_PARTITION_DIR
    if path.is_dir() and (list_segments(path) or path.name == METADATA_PARTITION_DIR):
        return path
    raise usage_error(f"{path}: neither a log directory with {METADATA_PARTITION_DIR} "
                      "nor a partition directory with segments")


def decode_record(data: bytes) -> tuple[str | None, dict[str, Any] | None, str | None]:
    """(type name, fields with Uuids as text, error): never raises on bad bytes."""
    try:
        fields = metadata_records.to_json(metadata_records.decode(data))
    except metadata_records.RecordError as exc:
        return None, None, str(exc)
    return str(fields.pop("type")), fields, None


def record_objects(stored: StoredBatch, segment: Path) -> Iterator[dict[str, Any]]:
    batch = stored.batch
    for index, data in enumerate(batch.records):
        type_name, fields, error = decode_record(data)
        obj: dict[str, Any] = {"offset": batch.base_offset + index, "epoch": batch.epoch,
                               "type": type_name, "record": fields,
                               "batch_base_offset": batch.base_offset, "crc_ok": True,
                               "segment": segment.name, "position": stored.position}
        if error is not None:
            obj["error"] = error
            obj["raw"] = data.hex()
        yield obj


def dump_lines(directory: Path, *, as_json: bool = False) -> Iterator[str]:
    """The dump, line by line; raises LogCorruptionError where the log is damaged."""
    for path, scan in scan_log_dir(directory):
        if not as_json:
            yield f"Dumping {path}"
        for stored in scan.batches:
            batch = stored.batch
            if not as_json:
                yield (f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
                       f"count: {len(batch.records)} epoch: {batch.epoch} "
                       f"position: {stored.position} size: {stored.size} "
                       f"crc: {stored.crc:#010x} crcOk: true")
            for obj in record_objects(stored, path):
                yield json.dumps(obj, sort_keys=False, default=str) if as_json else _text(obj)
        if scan.torn_reason is not None:
            warning = (f"{path}: torn tail at byte offset {scan.valid_bytes}: "
                       f"{scan.torn_reason} (opening the log truncates it)")
            print(json.dumps({"warning": warning}) if as_json else f"warning: {warning}",
                  file=sys.stderr)


def _text(obj: dict[str, Any]) -> str:
    prefix = f"| offset: {obj['offset']} epoch: {obj['epoch']}"
    if "error" in obj:
        return f"{prefix} ERROR undecodable record ({obj['error']}) raw: {obj['raw']}"
    return f"{prefix} {obj['type']} {json.dumps(obj['record'], default=str)}"
