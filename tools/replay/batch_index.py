"""One node's batch index (`NodeIndex`), and how a task builds it: entry by entry as it
walks a segment file (`IndexEntries`), or, for a file byte-identical to one it indexed
before, from that file's entries (`KnownFiles`). Made in the executors
(`tools.replay.load`), compared on the driver (`tools.replay.crossnode`)."""

from __future__ import annotations

import hashlib
import os
from array import array
from dataclasses import dataclass
from pathlib import Path

from raft.segment import CheckedHeader

DIGEST_BYTES = 16


@dataclass(frozen=True, slots=True)
class NodeIndex:
    """One node's batches in file order (parallel arrays, one entry per batch)."""

    node: int
    files: tuple[str, ...]
    file_ids: array[int]
    positions: array[int]
    offsets: array[int]
    epochs: array[int]
    counts: array[int]
    digests: bytes  # DIGEST_BYTES per batch

    def __len__(self) -> int:
        return len(self.offsets)

    def digest(self, seq: int) -> bytes:
        return self.digests[seq * DIGEST_BYTES:(seq + 1) * DIGEST_BYTES]

    def digest_list(self) -> list[bytes]:
        return [self.digests[i:i + DIGEST_BYTES]
                for i in range(0, len(self.digests), DIGEST_BYTES)]

    def is_prefix_of(self, other: NodeIndex) -> bool:
        """Byte-identical to the first len(self) batches of `other`."""
        return len(self) <= len(other) and \
            other.digests[:len(self.digests)] == self.digests



class IndexEntries:
    """A NodeIndex being built: its parallel arrays, one entry per batch."""

    __slots__ = ("file_ids", "positions", "offsets", "epochs", "counts", "digests")

    def __init__(self) -> None:
        self.file_ids, self.positions = array("l"), array("q")
        self.offsets, self.epochs, self.counts = array("q"), array("l"), array("l")
        self.digests = bytearray()

    def add(self, file_id: int, view: memoryview, position: int, header: CheckedHeader
            ) -> None:
        self.file_ids.append(file_id)
        self.positions.append(position)
        self.offsets.append(header[0])
        self.epochs.append(header[1])
        self.counts.append(header[2])
        self.digests += hashlib.blake2b(view[position:header[6]],
                                        digest_size=DIGEST_BYTES).digest()

    def since(self, start: int) -> IndexEntries:
        """The entries from the `start`th on (their file ids as they are)."""
        piece = IndexEntries()
        for name in ("file_ids", "positions", "offsets", "epochs", "counts"):
            setattr(piece, name, getattr(self, name)[start:])
        piece.digests = self.digests[start * DIGEST_BYTES:]
        return piece

    def extend(self, file_id: int, piece: IndexEntries) -> None:
        """`piece`'s entries, as those of file `file_id`."""
        self.file_ids += array("l", [file_id]) * len(piece.offsets)
        for name in ("positions", "offsets", "epochs", "counts", "digests"):
            getattr(self, name).extend(getattr(piece, name))

    def index(self, node: int, files: tuple[str, ...]) -> NodeIndex:
        return NodeIndex(node=node, files=files, file_ids=self.file_ids,
                         positions=self.positions, offsets=self.offsets, epochs=self.epochs,
                         counts=self.counts, digests=bytes(self.digests))


class KnownFiles:
    """Segment files indexed whole earlier in a task, by size: their path, what `os.stat`
    said of them then, and their entries. A file's entries are a function of its bytes
    alone, and a follower's segment files are most often byte-identical copies of the
    leader's: a file of a known size is compared with the known file, read again (one
    file held at a time, not a node's whole log; a known file changed since, as a live
    node's may be, is walked), not walked."""

    def __init__(self) -> None:
        self.by_size: dict[int, list[tuple[str, tuple[int, ...], IndexEntries]]] = {}

    def entries(self, data: bytes) -> IndexEntries | None:
        for path, seen, entries in self.by_size.get(len(data), ()):
            try:
                if _signature(path) == seen and Path(path).read_bytes() == data:
                    return entries
            except OSError:  # gone since: the file at hand is walked
                continue
        return None

    def add(self, path: str, data: bytes, entries: IndexEntries) -> None:
        try:
            seen = _signature(path)
        except OSError:
            return
        if seen[0] == len(data):  # not appended to since it was read
            self.by_size.setdefault(len(data), []).append((path, seen, entries))


def _signature(path: str) -> tuple[int, ...]:
    status = os.stat(path)
    return status.st_size, status.st_mtime_ns, status.st_ino, status.st_dev
