"""Wire framing: a 4-byte big-endian length, then one msgpack map.

Every frame is `{api, version, correlation_id, cluster_id, body}`. Anything wrong with a
frame (truncated, oversized, undecodable, not a map) raises `FrameError`; the caller
closes that one connection and logs the reason, and keeps serving everyone else.
"""

from __future__ import annotations

import struct
from collections import deque
from typing import TYPE_CHECKING, Any

import msgpack

from raft.common.uuid import pack

if TYPE_CHECKING:
    import trio

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
_LENGTH = struct.Struct(">I")
_RECEIVE_CHUNK = 64 * 1024
REQUIRED_KEYS = ("api", "version", "correlation_id", "cluster_id", "body")
_REQUIRED = frozenset(REQUIRED_KEYS)


class FrameError(Exception):
    """The peer sent something that is not a valid frame: close the connection."""


def encode_frame(message: dict[str, Any], max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
                 ) -> bytes:
    payload = pack(message)
    if len(payload) > max_frame_bytes:
        raise FrameError(f"frame of {len(payload)} bytes exceeds the {max_frame_bytes} limit")
    return _LENGTH.pack(len(payload)) + payload


def decode_payload(payload: bytes | bytearray) -> dict[str, Any]:
    try:
        message = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types on bad input
        raise FrameError(f"undecodable frame: {type(exc).__name__}: {exc}") from None
    if not isinstance(message, dict):
        raise FrameError(f"frame is a {type(message).__name__}, not a map")
    if not message.keys() >= _REQUIRED:  # one set check; which keys only when it fails
        missing = [key for key in REQUIRED_KEYS if key not in message]
        raise FrameError(f"frame lacks {', '.join(missing)}")
    if not isinstance(message["correlation_id"], int) or not isinstance(message["api"], str):
        raise FrameError("frame has a non-integer correlation_id or a non-string api")
    return message


class FrameDecoder:
    """Sans-I/O: feed received bytes, take out whole frames."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()

    def feed(self, data: bytes | bytearray) -> list[dict[str, Any]]:
        buffer = self._buffer
        buffer += data
        frames = []
        start, size = 0, len(buffer)
        try:
            # Frames are decoded from where they lie (a slice is one copy, where a bytes()
            # of it was two) and the consumed bytes are dropped once, not after each frame.
            while size - start >= _LENGTH.size:
                (length,) = _LENGTH.unpack_from(buffer, start)
                if length > self._max_frame_bytes:
                    raise FrameError(
                        f"frame of {length} bytes exceeds the {self._max_frame_bytes} limit")
                end = start + _LENGTH.size + length
                if size < end:
                    break
                frames.append(decode_payload(buffer[start + _LENGTH.size:end]))
                start = end
        finally:
            del buffer[:start]  # also on an error: the frames before it were whole
        return frames

    @property
    def has_partial_frame(self) -> bool:
        return bool(self._buffer)


class FramedStream:
    """Frames over a Trio stream. `receive()` returns None on a clean close between frames."""

    def __init__(self, stream: trio.abc.Stream,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.stream = stream
        self._max_frame_bytes = max_frame_bytes
        self._decoder = FrameDecoder(max_frame_bytes)
        self._pending: deque[dict[str, Any]] = deque()
        import trio  # here, not above: the command line's blocking client needs no Trio
        self._send_lock = trio.Lock()

    async def receive(self) -> dict[str, Any] | None:
        while not self._pending:
            data = await self.stream.receive_some(_RECEIVE_CHUNK)
            if not data:
                if self._decoder.has_partial_frame:
                    raise FrameError("connection closed in the middle of a frame")
                return None
            self._pending.extend(self._decoder.feed(data))
        return self._pending.popleft()

    async def send(self, message: dict[str, Any]) -> None:
        frame = encode_frame(message, self._max_frame_bytes)
        async with self._send_lock:
            await self.stream.send_all(frame)

    async def aclose(self) -> None:
        await self.stream.aclose()
