"""A response frame as parts, encoded bytes and file regions, and their writer.

The rule: the parts, concatenated with each region's bytes in its place, are byte for
byte the frame `raft.common.kafka.codec.encode_response` makes of the same response
(tests/unit/broker/test_framed_response.py). `encode_parts` writes the same header and
the same entity with kio's writers; a `FileRegion` in a bytes field (a Fetch response's
records: `broker.kafka.partitions.fetch`) is framed by its length, as bytes are, but
not copied in: the encoded bytes so far become one part, the region the next. The size
prefix is computed from the parts' lengths.

`send_parts` writes them in order. On a plaintext socket a region goes from the file to
the socket with os.sendfile: non-blocking, waiting for the socket to become writable
when its buffer is full, looping on partial writes; the records never enter the
process. On TLS (the bytes must pass through the SSL object) or any other stream a
region is read and sent: one copy. A file cut under a region (`RegionCutError`) or a
peer gone mid-send raises (an OSError, which closes that connection only). Every region
is closed once the parts are written or abandoned.
"""

from __future__ import annotations

import os
import typing
from typing import Any

import trio
from kio.serial import entity_writer

from broker.kafka.partitions.file_region import FileRegion, RegionCutError
from raft.common.kafka.framing import SIZE

Part = bytearray | FileRegion


class _PartsWriter:
    """What kio's writers write to (they call only `write`): bytes are appended to the
    open part; a region closes it and is a part of its own."""

    __slots__ = ("first", "open_part", "parts")

    def __init__(self) -> None:
        self.first = self.open_part = bytearray(SIZE.size)  # the size prefix, packed last
        self.parts: list[Part] = [self.first]

    def write(self, data: bytes | FileRegion) -> int:
        if isinstance(data, FileRegion):
            self.open_part = bytearray()
            self.parts += (data, self.open_part)
        else:
            self.open_part += data
        return len(data)


def encode_parts(correlation_id: int, response: Any) -> list[Part]:
    """The response frame (size prefix included) as parts; no empty bytes part."""
    header_cls = response.__header_schema__
    out = _PartsWriter()
    writable = typing.cast(typing.IO[bytes], out)
    entity_writer(header_cls)(writable, header_cls(correlation_id=correlation_id))
    entity_writer(type(response))(writable, response)
    SIZE.pack_into(out.first, 0, sum(len(part) for part in out.parts) - SIZE.size)
    return [part for part in out.parts if len(part)]


async def send_parts(stream: trio.abc.Stream, parts: list[Part]) -> None:
    """Write the parts to `stream` (see the module docstring); the regions are closed."""
    try:
        for part in parts:
            if not isinstance(part, FileRegion):
                await stream.send_all(part)
            elif isinstance(stream, trio.SocketStream):
                await _sendfile(stream.socket, part)
            else:
                await stream.send_all(part.read())
    finally:
        close_regions(parts)


def close_regions(parts: list[Part]) -> None:
    for part in parts:
        if isinstance(part, FileRegion):
            part.close()


async def _sendfile(sock: trio.socket.SocketType, region: FileRegion) -> None:
    """The region's bytes into the non-blocking socket, all of them."""
    await trio.lowlevel.checkpoint_if_cancelled()
    position, end = region.position, region.position + region.size
    while position < end:
        try:
            sent = os.sendfile(sock.fileno(), region.fd, position, end - position)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        if sent == 0:  # the file ends before the region does
            raise RegionCutError(f"the file ends at {position}, inside a region of "
                                 f"{region.size} bytes at {region.position}")
        position += sent
