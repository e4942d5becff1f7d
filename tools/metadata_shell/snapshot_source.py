"""A snapshot checkpoint file (`raft/snapshot.py`) loaded into a MetadataImage.

The whole file is checked before anything is shown (`raft.snapshot.read_snapshot`: every
CRC, the offsets, the epochs, the header and the footer), then its records are decoded
and replayed by the log's rules (`metadata.image_snapshot.image_from_records`). A
damaged file, a record that does not decode or records that contradict each other are
one error naming the file (exit 2). The image stands at the snapshot's end offset - 1,
the last offset it covers, in the snapshot's epoch.
"""

from __future__ import annotations

from pathlib import Path

from metadata import records as metadata_records
from metadata.image_snapshot import ImageSnapshotError, image_from_records
from raft.snapshot import Snapshot, SnapshotError, read_snapshot
from tools.errors import CommandError, usage_error
from tools.metadata_shell.source import LoadedImage
from tools.metadata_shell.tree import Provenance

# `kraft dump-log` counts a checkpoint's records from its SnapshotHeader at offset 0, so
# the snapshot's record i (the header not counted) is shown there at offset i + 1
_DUMP_OFFSET_OF_FIRST_RECORD = 1


def load_snapshot_image(path: Path) -> LoadedImage:
    """The image `path` holds; CommandError (exit 2) when it cannot be loaded whole."""
    if not path.is_file():
        raise usage_error(f"{path}: no such snapshot file")
    try:
        snapshot = read_snapshot(path)
    except SnapshotError as exc:
        raise CommandError(str(exc), exit_code=2) from None
    provenance = Provenance(offset=snapshot.snapshot_id.end_offset - 1,
                            epoch=snapshot.snapshot_id.epoch)
    try:
        image = image_from_records(_decoded_records(snapshot), provenance.offset)
    except ImageSnapshotError as exc:
        raise CommandError(f"{path}: {exc} (`kraft dump-log` shows snapshot record N at "
                           f"offset N + {_DUMP_OFFSET_OF_FIRST_RECORD})", exit_code=2) from None
    warnings: tuple[str, ...] = ()
    if image.anomaly_count:  # carried over from the log by its ReplayAnomalies record
        warnings = (f"warning: the snapshot says replay of its log skipped "
                    f"{image.anomaly_count} record(s) that contradict the image",)
    header = (f"snapshot {path}: the state of the log below offset "
              f"{snapshot.snapshot_id.end_offset}, in {len(snapshot.records)} records; "
              f"image at offset {provenance.offset}, epoch {provenance.epoch}")
    return LoadedImage(image=image, provenance=provenance, header=header, warnings=warnings)


def _decoded_records(snapshot: Snapshot) -> list[metadata_records.Record]:
    decoded = []
    for index, data in enumerate(snapshot.records):
        try:
            decoded.append(metadata_records.decode(data))
        except metadata_records.RecordError as exc:
            offset = index + _DUMP_OFFSET_OF_FIRST_RECORD
            raise CommandError(f"{snapshot.path}: the record at offset {offset} of the "
                               f"checkpoint does not decode: {exc}", exit_code=2) from None
    return decoded
