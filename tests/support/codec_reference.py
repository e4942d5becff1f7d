"""A reference for the compiled decoders of `raft.common.codec` and `raft.common.record`:
the same semantics written as a plain loop over the fields, with the codec's own
per-field converters and a call to the class. Slow and obviously equivalent to the
documented rules; the tests check that the fast paths agree with it on random and on
broken input (the same object, or the same error message)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any

import msgpack

from raft.common.codec import Codec, CodecError
from raft.common.record import CODEC, RecordError, RecordSet


def reference_decode(codec: Codec, cls: type, data: Any) -> Any:
    """`codec.decode(cls, data)` as a plain loop over the fields."""
    try:
        if not isinstance(data, dict):
            raise CodecError(f"expected a map, got {type(data).__name__} {data!r:.40}")
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)} | codec.envelope
        unknown = sorted((k for k in data if k not in names), key=repr)
        if unknown:
            raise CodecError("unknown field").within(f".{unknown[0]}")
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name in data:
                try:
                    kwargs[f.name] = codec._decoder(hints[f.name])(data[f.name])
                except CodecError as exc:
                    raise exc.within(f".{f.name}") from None
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise CodecError("missing required field").within(f".{f.name}")
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise CodecError(str(exc)) from None
    except CodecError as exc:
        raise exc.within(cls.__name__) from None


def reference_record(records: RecordSet, data: bytes) -> Any:
    """`records.decode(data)`, step by step: msgpack, a map, a known type, its version,
    then `reference_decode` with the records' codec."""
    try:
        obj = msgpack.unpackb(data, raw=False)
    except Exception as exc:
        raise RecordError(f"undecodable record: {exc}") from None
    if not isinstance(obj, dict):
        raise RecordError(f"record is not a map: {type(obj).__name__}")
    type_id = obj.get("type")
    cls = records.classes.get(type_id) if type(type_id) is int else None
    if cls is None:
        raise RecordError(f"unknown record type {type_id!r}")
    version = obj.get("version")
    if version != cls.VERSION or type(version) is not int:
        raise RecordError(f"unsupported {cls.__name__} record version {version!r} "
                          f"(this build reads version {cls.VERSION})")
    try:
        return reference_decode(CODEC, cls, obj)
    except CodecError as exc:
        raise RecordError(f"bad {cls.__name__} record: {exc}") from exc


def outcome(decode: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", the value) or ("error", the message) of a CodecError or RecordError."""
    try:
        return "ok", decode()
    except (CodecError, RecordError) as exc:
        return "error", str(exc)
