"""Topic IDs (KIP-516): 128-bit values shown as 22 characters of unpadded base64url.

Behaves like Kafka's `org.apache.kafka.common.Uuid`: `random()` never yields a reserved
ID, nor text starting with '-' (which a command line would take for a flag).
"""

from __future__ import annotations

import base64
import binascii
import random as _random_module
import threading
import uuid as _stdlib_uuid
from dataclasses import dataclass
from typing import Any

import msgpack

_TEXT_LENGTH = 22
_MASK_64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True, eq=False)
class Uuid:
    """An immutable 128-bit identifier, ordered by its unsigned value.

    Equality, hash and order are written out rather than generated (dataclasses compare
    one-field tuples): every topic lookup in an image hashes and compares Uuids, and
    sorting 100,000 topic IDs makes over a million comparisons. Same semantics: equal to
    and ordered against Uuids only."""

    value: int

    def __post_init__(self) -> None:
        if not 0 <= self.value < 1 << 128:
            raise ValueError(f"Uuid value out of 128-bit range: {self.value!r}")

    @classmethod
    def random(cls, rng: _random_module.Random | None = None) -> Uuid:
        """A version-4, variant-2 UUID that is not reserved and whose text is flag-safe.

        `rng` makes the result deterministic (simulator, property tests); without it the
        operating system's entropy is used, as Kafka does.
        """
        while True:
            raw = rng.getrandbits(128).to_bytes(16, "big") if rng else None
            candidate = cls(_stdlib_uuid.UUID(bytes=raw, version=4).int if raw
                            else _stdlib_uuid.uuid4().int)
            if candidate in RESERVED or str(candidate).startswith("-"):
                continue
            return candidate

    @classmethod
    def from_bytes(cls, data: bytes) -> Uuid:
        if len(data) != 16:
            raise ValueError(f"a Uuid is 16 bytes, got {len(data)}: {data!r}")
        # 16 bytes are always in range: the slot is set without __init__'s check (every
        # record with a topic ID decodes one)
        uuid = _new(cls)
        _set_value(uuid, int.from_bytes(data, "big"))
        return uuid

    @classmethod
    def from_string(cls, text: str) -> Uuid:
        """Parse exactly the 22-character unpadded base64url form."""
        if not isinstance(text, str) or len(text) != _TEXT_LENGTH:
            raise ValueError(f"invalid Uuid {text!r}: expected 22 base64url characters")
        try:
            data = base64.b64decode(text + "==", altchars=b"-_", validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"invalid Uuid {text!r}: not base64url") from None
        parsed = cls.from_bytes(data)
        if str(parsed) != text:  # rejects non-canonical trailing bits
            raise ValueError(f"invalid Uuid {text!r}: not in canonical form")
        return parsed

    @classmethod
    def from_bits(cls, most_significant: int, least_significant: int) -> Uuid:
        return cls(((most_significant & _MASK_64) << 64) | (least_significant & _MASK_64))

    @property
    def most_significant_bits(self) -> int:
        """The high 64 bits as a signed long, as Java's accessor returns them."""
        return _signed64(self.value >> 64)

    @property
    def least_significant_bits(self) -> int:
        return _signed64(self.value & _MASK_64)

    def to_bytes(self) -> bytes:
        return self.value.to_bytes(16, "big")

    def __str__(self) -> str:
        return base64.urlsafe_b64encode(self.to_bytes()).decode("ascii").rstrip("=")

    def __repr__(self) -> str:
        return f"Uuid('{self}')"

    def __hash__(self) -> int:
        return hash(self.value)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self.value == other.value
        return NotImplemented

    def __lt__(self, other: Uuid) -> bool:
        if other.__class__ is self.__class__:
            return self.value < other.value
        return NotImplemented

    def __le__(self, other: Uuid) -> bool:
        if other.__class__ is self.__class__:
            return self.value <= other.value
        return NotImplemented

    def __gt__(self, other: Uuid) -> bool:
        if other.__class__ is self.__class__:
            return self.value > other.value
        return NotImplemented

    def __ge__(self, other: Uuid) -> bool:
        if other.__class__ is self.__class__:
            return self.value >= other.value
        return NotImplemented


_new = object.__new__
_set_value = Uuid.__dict__["value"].__set__


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


ZERO_UUID = Uuid(0)
METADATA_TOPIC_ID = Uuid(1)
RESERVED = frozenset({ZERO_UUID, METADATA_TOPIC_ID})


def msgpack_default(obj: Any) -> Any:
    """`msgpack.packb(..., default=msgpack_default)`: Uuids travel as 16-byte bin."""
    if isinstance(obj, Uuid):
        return obj.to_bytes()
    raise TypeError(f"cannot encode {type(obj).__name__} as msgpack")


class _Packers(threading.local):
    """One msgpack Packer per thread: `packb` builds a new Packer (and its buffer) for
    every call, about half the cost of packing a Fetch frame or a small record. A Packer
    is not thread-safe, hence one per thread; it resets itself after an error."""

    def __init__(self) -> None:
        self.packer = msgpack.Packer(default=msgpack_default, use_bin_type=True)


_packers = _Packers()


def pack(obj: Any) -> bytes:
    """`obj` as msgpack, Uuids as 16-byte bin (`msgpack_default`)."""
    packed: bytes = _packers.packer.pack(obj)
    return packed


def pack_array_header(length: int) -> bytes:
    """The msgpack header of an array of `length` items: `pack(items)` is it followed by
    each item's `pack`."""
    header: bytes = _packers.packer.pack_array_header(length)
    return header
