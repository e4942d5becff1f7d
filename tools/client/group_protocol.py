"""The "consumer" group protocol's member metadata and assignment bytes (Kafka's
ConsumerProtocol, version 0; later versions' extra fields are read past). The ordered
group leader's assignment rule is `broker.kafka.ordered.assignment`."""

from __future__ import annotations

import struct
from collections.abc import Sequence

PROTOCOL_TYPE = "consumer"
ASSIGNOR = "roundrobin"  # the name kafka-python's and Kafka's round-robin assignors use
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")


class ProtocolError(ValueError):
    """Member metadata or an assignment that is not ConsumerProtocol bytes."""


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def encode_subscription(topics: Sequence[str], user_data: bytes | None = None) -> bytes:
    out = _I16.pack(0) + _I32.pack(len(topics)) + b"".join(_string(t) for t in topics)
    return out + _bytes(user_data)


def encode_assignment(assigned: dict[str, Sequence[int]],
                      user_data: bytes | None = None) -> bytes:
    out = bytearray(_I16.pack(0) + _I32.pack(len(assigned)))
    for topic, partitions in sorted(assigned.items()):
        out += _string(topic) + _I32.pack(len(partitions))
        out += b"".join(_I32.pack(p) for p in partitions)
    return bytes(out) + _bytes(user_data)


def _bytes(data: bytes | None) -> bytes:
    return _I32.pack(-1) if data is None else _I32.pack(len(data)) + data


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.position = data, 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.position + size > len(self.data):
            raise ProtocolError(f"truncated at byte {self.position}")
        out = self.data[self.position:self.position + size]
        self.position += size
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def string(self) -> str:
        try:
            return self.take(self.i16()).decode()
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"bad string: {exc}") from None

    def nullable_bytes(self) -> bytes | None:
        size = self.i32()
        return None if size < 0 else self.take(size)


def decode_subscription(data: bytes) -> tuple[list[str], bytes | None]:
    """(topics, user data) of a member's metadata."""
    reader = _Reader(data)
    reader.i16()  # version: later versions only append fields
    topics = [reader.string() for _ in range(max(0, reader.i32()))]
    user_data = reader.nullable_bytes() if reader.position < len(data) else None
    return topics, user_data


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """topic -> partitions of a SyncGroup assignment (empty bytes: nothing assigned)."""
    if not data:
        return {}
    reader = _Reader(data)
    reader.i16()
    out: dict[str, list[int]] = {}
    for _ in range(max(0, reader.i32())):
        topic = reader.string()
        out[topic] = [reader.i32() for _ in range(max(0, reader.i32()))]
    return out
