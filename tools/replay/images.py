"""Metadata images in the replay's executors: a snapshot file's image, and the images a
log gives when it is replayed from a base (the empty image at offset 0, or a snapshot).

`load_snapshot_image` reads a snapshot checkpoint whole (`raft.snapshot.read_snapshot`:
every CRC, the header and footer) and rebuilds its image with
`metadata.image_snapshot.image_from_records`; whatever is wrong with the file is one
`SnapshotError` naming it. `replayed_images` walks one node's segments in offset order,
skips the records below the base's end offset (a log may start inside its first
segment, below its snapshot) and applies the rest to the base image with
`metadata.delta`, yielding the image's `content_hash()` at each target offset, with the
epoch of the record there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from metadata import records as rec
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from metadata.image_snapshot import ImageSnapshotError, image_from_records
from raft.segment import iter_batches
from raft.snapshot import SnapshotError, SnapshotId, read_snapshot


@dataclass(frozen=True, slots=True)
class ReplayBase:
    """Where a replay of a log starts: the empty image before offset 0 (`path` None) or
    a valid snapshot ending at `end_offset`, whose image has `image_hash`."""

    end_offset: int
    path: str | None = None
    image_hash: str | None = None

    @property
    def key(self) -> tuple[int, str | None]:
        """Two bases with the same key give the same image."""
        return self.end_offset, self.image_hash

    def describe(self) -> str:
        """Where the replay starts, as "replayed <this>" reads."""
        if self.path is None:
            return "from offset 0"
        return f"from snapshot {self.path.rsplit('/', 1)[-1]}"


def load_snapshot_image(path: str) -> tuple[SnapshotId, MetadataImage]:
    """The snapshot's id and image; SnapshotError naming the file when it does not read
    whole, or its records do not decode or do not make an image."""
    snapshot = read_snapshot(path)
    try:
        records = [rec.decode(data) for data in snapshot.records]
        image = image_from_records(records, snapshot.snapshot_id.end_offset - 1)
    except (rec.RecordError, ImageSnapshotError) as exc:
        raise SnapshotError(path, None, f"its records make no image: {exc}") from None
    return snapshot.snapshot_id, image


def base_image(base: ReplayBase | None) -> MetadataImage:
    if base is None or base.path is None:
        return MetadataImage.empty()
    return load_snapshot_image(base.path)[1]


def replayed_images(files: Iterable[tuple[str, bytes]], targets: Iterable[int],
                    base: ReplayBase | None = None) -> Iterator[tuple[int, str, int | None]]:
    """(target, content hash, epoch of the record at target) for each target offset the
    log reaches: the image after applying every record up to and including that offset,
    from `base`. A target at the base's last offset (end offset - 1) is the base image
    itself (its epoch None); targets below it are not yielded. Runs in one executor over
    one node's segments, in offset order."""
    start = 0 if base is None else base.end_offset
    pending = sorted(t for t in set(targets) if t >= start - 1)
    if not pending:
        return
    delta = MetadataDelta(base_image(base))
    if pending and pending[0] == start - 1:
        yield pending.pop(0), delta.build().content_hash(), None
    for path, data in files:  # in offset order
        for stored in iter_batches(data, path):
            batch = stored.batch
            if batch.base_offset + len(batch.records) <= start:
                continue
            for index, record in enumerate(batch.records):
                offset = batch.base_offset + index
                if not pending:
                    return
                if offset < start:
                    continue
                delta.apply_bytes(record, offset)
                if offset == pending[0]:
                    yield pending.pop(0), delta.build().content_hash(), batch.epoch
