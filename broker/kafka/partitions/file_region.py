"""A range of a segment file, held open: a Fetch response's records, sent from the file.

The region owns a file descriptor opened when the range was found (`PartitionLog.read_region`),
so the bytes it names stay those of that file even if the segment is deleted (retention,
DeleteRecords, a log reset) or replaced by its cleaned copy (a rename) before it is sent:
the descriptor keeps the old inode. Only a truncation rewrites a segment in place, and
only above the high watermark (bar an unclean election), which a consumer's read never
passes (`broker.kafka.partitions.fetch`): that rule, not a check, keeps the bytes sent
those found, since sendfile's leave from the page cache as the socket drains. A file
found shorter than the region when it is read or sent raises `RegionCutError` rather
than send other bytes.

`len()` is the region's size, so kio's writers frame it as the bytes it stands for
(`broker.kafka.framed_response` splits the encoded response there). The descriptor is
closed by `close()`, or when the region is dropped unsent (a long poll's earlier
answer, a connection lost before the response was written).
"""

from __future__ import annotations

import os
import weakref


class RegionCutError(OSError):
    """The file holds fewer bytes than the region names: it was cut after the read."""


class FileRegion:
    __slots__ = ("__weakref__", "_closer", "fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = fd
        self.position = position
        self.size = size
        self._closer = weakref.finalize(self, os.close, fd)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.fd}, position={self.position}, size={self.size})"

    def read(self) -> bytes:
        """The region's bytes (one copy: where sendfile is unavailable, and for tests)."""
        data = os.pread(self.fd, self.size, self.position)
        if len(data) != self.size:  # a regular file's pread is short only at its end
            raise RegionCutError(f"a {self.size}-byte region at {self.position} holds only "
                                 f"{len(data)} bytes")
        return data

    def read_and_close(self) -> bytes:
        try:
            return self.read()
        finally:
            self.close()

    def close(self) -> None:
        self._closer()
