"""Kafka's size framing: every request and response is a 4-byte big-endian signed size,
then that many bytes. The one reader and writer of it, for the broker's listener and every
client (the replica fetcher, SASL, the command line's clients).

A size header outside 0..limit raises `KafkaFrameError` before any of the body is read,
and a frame's buffer grows only with the bytes that arrive; the caller closes that one
connection. A listener's limit is its `socket.request.max.bytes`; a client reading
responses accepts any size the header can state (`ANY_SIZE`): it asked for them.
"""

from __future__ import annotations

import socket
import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import trio

SIZE = struct.Struct(">i")
ANY_SIZE = 0x7FFFFFFF
RECEIVE_CHUNK = 65536


class KafkaFrameError(ConnectionError):
    """The peer announced a size outside the limit, or closed in the middle of a frame."""


def framed(payload: bytes) -> bytes:
    """`payload` with its size prefix."""
    return SIZE.pack(len(payload)) + payload


def frame_size(header: bytes | bytearray, limit: int) -> int:
    """The size the header at the start of `header` announces; KafkaFrameError when it
    is outside 0..limit."""
    (size,) = SIZE.unpack_from(header)
    if size < 0 or size > limit:
        raise KafkaFrameError(f"frame size {size} outside 0..{limit}")
    return int(size)


def take_frame(buffer: bytearray, limit: int) -> bytes | None:
    """The first whole frame in `buffer` (removed from it, without its size), None while
    it is incomplete; KafkaFrameError when its size is outside 0..limit."""
    if len(buffer) < SIZE.size:
        return None
    size = frame_size(buffer, limit)
    if len(buffer) < SIZE.size + size:
        return None
    payload = bytes(buffer[SIZE.size:SIZE.size + size])
    del buffer[:SIZE.size + size]
    return payload


async def receive_frame(stream: trio.abc.Stream, buffer: bytearray,
                        limit: int = ANY_SIZE) -> bytes | None:
    """The next frame from `stream` (bytes after it stay in `buffer`); None when the peer
    closed cleanly between frames."""
    while (payload := take_frame(buffer, limit)) is None:
        data = await stream.receive_some(RECEIVE_CHUNK)
        if not data:
            if buffer:
                raise KafkaFrameError("closed in the middle of a frame")
            return None
        buffer += data
    return payload


def read_frame(sock: socket.socket, limit: int = ANY_SIZE) -> bytes:
    """The next frame from a blocking socket (one frame at a time: nothing after it is
    read); ConnectionError when the peer closes first."""
    def exactly(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return bytes(out)
    return exactly(frame_size(exactly(SIZE.size), limit))
