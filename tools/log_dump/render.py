"""One batch and its records as `kraft dump-log` shows them: a batch header line (base
offset, last offset, count, epoch, position, size, CRC) and one line per record as text,
or one JSON object per record.

Records are decoded as metadata records (`metadata/records.py`, which also names raft's
`LeaderChange` and `MetadataTopic` and a checkpoint's `SnapshotHeader` and
`SnapshotFooter`); a record that does not decode is shown as hex with the reason, and
the dump goes on. Secrets are redacted unless `print_sensitive` (`--print-sensitive`):
the fields `metadata/records.py` marks sensitive show as `(redacted)`, and a record of
such a type that does not decode shows neither its bytes nor the reason, which may
quote a value. Every JSON object names the file it came from: `"segment"` for a log
segment; `"checkpoint"` and `"snapshot_end_offset"` for a checkpoint, whose offsets
count the file's records from 0 and so are not log offsets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metadata import records as metadata_records
from raft.segment import StoredBatch


@dataclass(frozen=True, slots=True)
class DumpedFile:
    """The file a batch was read from; a checkpoint also has its snapshot's end offset."""

    path: Path
    snapshot_end_offset: int | None = None  # None: a log segment

    def json_fields(self) -> dict[str, Any]:
        if self.snapshot_end_offset is None:
            return {"segment": self.path.name}
        return {"checkpoint": self.path.name, "snapshot_end_offset": self.snapshot_end_offset}


def decode_record(data: bytes, *, print_sensitive: bool = False
                  ) -> tuple[str | None, dict[str, Any] | None, str | None]:
    """(type name, fields with Uuids as text, error): never raises on bad bytes."""
    try:
        fields = metadata_records.to_json(metadata_records.decode(data),
                                          print_sensitive=print_sensitive)
    except metadata_records.RecordError as exc:
        return None, None, str(exc)
    return str(fields.pop("type")), fields, None


def undecodable_shown(data: bytes, error: str, *, print_sensitive: bool) -> tuple[str, str]:
    """(reason, raw hex) of a record that does not decode, as shown."""
    secret_type = None if print_sensitive else metadata_records.sensitive_record_type(data)
    if secret_type is None:
        return error, data.hex()
    return (f"a {secret_type} record that does not decode; its reason and bytes may hold "
            "secrets (--print-sensitive shows them)"), metadata_records.REDACTED


def batch_header_line(stored: StoredBatch) -> str:
    batch = stored.batch
    # crcOk is always true: a batch whose CRC fails is never shown, the dump stops there
    append_time = "unknown" if batch.append_time_ms is None else batch.append_time_ms
    return (f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
            f"count: {len(batch.records)} epoch: {batch.epoch} "
            f"appendTime: {append_time} position: {stored.position} size: {stored.size} "
            f"crc: {stored.crc:#010x} crcOk: true")


def record_objects(stored: StoredBatch, source: DumpedFile, *, print_sensitive: bool = False
                   ) -> Iterator[dict[str, Any]]:
    batch = stored.batch
    for index, data in enumerate(batch.records):
        type_name, fields, error = decode_record(data, print_sensitive=print_sensitive)
        obj: dict[str, Any] = {"offset": batch.base_offset + index, "epoch": batch.epoch,
                               "type": type_name, "record": fields,
                               "batch_base_offset": batch.base_offset,
                               "append_time_ms": batch.append_time_ms, "crc_ok": True,
                               **source.json_fields(), "position": stored.position}
        if error is not None:
            obj["error"], obj["raw"] = undecodable_shown(data, error,
                                                         print_sensitive=print_sensitive)
        yield obj


def record_text(obj: dict[str, Any]) -> str:
    prefix = f"| offset: {obj['offset']} epoch: {obj['epoch']}"
    if "error" in obj:
        return f"{prefix} ERROR undecodable record ({obj['error']}) raw: {obj['raw']}"
    return f"{prefix} {obj['type']} {json.dumps(obj['record'], default=str)}"


def batch_lines(stored: StoredBatch, source: DumpedFile, *, as_json: bool,
                print_sensitive: bool = False) -> Iterator[str]:
    """The batch header line (text only), then one line per record."""
    if not as_json:
        yield batch_header_line(stored)
    for obj in record_objects(stored, source, print_sensitive=print_sensitive):
        yield json.dumps(obj, default=str) if as_json else record_text(obj)
