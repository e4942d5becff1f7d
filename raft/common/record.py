"""The framing every log record shares: one msgpack map `{"type": int, "version": int,
...fields}` made by the shared codec (Uuid fields as 16-byte bin, tuples as arrays, None
fields left out).

The raft layer defines its control records (`raft.control_records`) and the metadata
layer the rest (`metadata.records`) on this base; a `RecordSet` decodes the types it
knows. Optional fields (default None) leave room to grow a record without a new
version. Decoding is strict: a version this build does not know, a key naming no field,
a missing or mistyped field each raise `RecordError` naming it (a writer that adds a field
bumps the record's VERSION, so an older reader says which version it cannot read).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from msgpack import unpackb

from raft.common.codec import Codec, CodecError
from raft.common.uuid import Uuid, pack


class RecordError(ValueError):
    """A record's bytes cannot be decoded; the message says why."""


CODEC = Codec(omit_none=True, envelope=("type", "version"))
CODEC.register(Uuid, wire=bytes, encode=Uuid.to_bytes, decode=Uuid.from_bytes,
               name="a 16-byte Uuid")


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    TYPE: ClassVar[int]
    VERSION: ClassVar[int] = 0

    def to_dict(self) -> dict[str, Any]:
        """The map `encode` packs: type, version, then the fields (Uuids as 16 bytes)."""
        return {"type": int(self.TYPE), "version": self.VERSION, **CODEC.encode(self)}

    def encode(self) -> bytes:
        return pack(self.to_dict())


class RecordSet:
    """The record types one layer knows, by type id.

    Replay decodes every record of a log or a snapshot (a million at a time), so the
    class, its version and its compiled decoder (`Codec.decoder`) are looked up once per
    record in one table; the checks and the messages are the codec's."""

    def __init__(self, classes: Iterable[type[Record]]) -> None:
        self.classes: dict[int, type[Record]] = {int(cls.TYPE): cls for cls in classes}
        self._decoders: dict[int, tuple[type[Record], int, Callable[[Any], Record]]] = {}

    def from_dict(self, data: Mapping[str, Any]) -> Record:
        """The record a decoded map holds (`decode`, after msgpack)."""
        type_id = data.get("type")
        entry = self._decoders.get(type_id) if type(type_id) is int else None
        if entry is None:
            entry = self._entry(type_id)
        cls, version, decode = entry
        found = data.get("version")
        if found != version or type(found) is not int:
            raise RecordError(f"unsupported {cls.__name__} record version {found!r} "
                              f"(this build reads version {version})")
        try:
            return decode(data)
        except CodecError as exc:
            raise RecordError(f"bad {cls.__name__} record: {exc.within(cls.__name__)}"
                              ) from exc

    def decode(self, data: bytes) -> Record:
        try:
            obj = unpackb(data, raw=False)
        except Exception as exc:  # msgpack raises several unrelated types
            raise RecordError(f"undecodable record: {exc}") from None
        if type(obj) is not dict and not isinstance(obj, dict):
            raise RecordError(f"record is not a map: {type(obj).__name__}")
        # from_dict(obj), inline: one call less per record
        type_id = obj.get("type")
        entry = self._decoders.get(type_id) if type(type_id) is int else None
        if entry is None or obj.get("version") != entry[1] or \
                type(obj.get("version")) is not int:
            return self.from_dict(obj)  # its errors, or the first record of a type
        try:
            return entry[2](obj)
        except CodecError as exc:
            raise RecordError(f"bad {entry[0].__name__} record: "
                              f"{exc.within(entry[0].__name__)}") from exc

    def _entry(self, type_id: object) -> tuple[type[Record], int, Callable[[Any], Record]]:
        """The table's row for `type_id`, made on first use (a codec plan is built
        lazily); RecordError for a type this set does not know."""
        cls = self.classes.get(type_id) if type(type_id) is int else None
        if cls is None:
            raise RecordError(f"unknown record type {type_id!r}")
        entry = self._decoders[int(cls.TYPE)] = (cls, cls.VERSION, CODEC.decoder(cls))
        return entry
