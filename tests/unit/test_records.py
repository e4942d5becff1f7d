"""metadata.records: every record type survives encode/decode, and bad bytes are RecordError."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metadata.records import (
    RECORD_CLASSES,
    Record,
    RecordError,
    RemoveTopic,
    Topic,
    decode,
    from_dict,
    to_json,
)
from metadata.uuid import Uuid

INTS = st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)
UUIDS = st.integers(min_value=0, max_value=(1 << 128) - 1).map(Uuid)


def _strategy(hint: Any) -> st.SearchStrategy[Any]:
    """A strategy for one field, from its type hint (the types records use)."""
    if isinstance(hint, types.UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return st.none() | _strategy(inner)
    if typing.get_origin(hint) is tuple:
        return st.lists(_strategy(typing.get_args(hint)[0]), max_size=5).map(tuple)
    return {int: INTS, str: st.text(max_size=20), Uuid: UUIDS}[hint]


def _record_strategy(cls: type[Record]) -> st.SearchStrategy[Record]:
    hints = typing.get_type_hints(cls)
    fields = {f.name: _strategy(hints[f.name]) for f in dataclasses.fields(cls)}
    return st.builds(cls, **fields)


ANY_RECORD = st.one_of([_record_strategy(cls) for cls in RECORD_CLASSES.values()])


@given(ANY_RECORD)
def test_record_round_trips_when_encoded_and_decoded(record: Record) -> None:
    """The codec is lossless for every record type and every field value."""
    assert decode(record.encode()) == record
    assert type(decode(record.encode())) is type(record)


@given(ANY_RECORD)
def test_encoding_is_deterministic_when_encoded_twice(record: Record) -> None:
    """Replay compares record bytes across nodes: equal records encode to equal bytes."""
    assert record.encode() == dataclasses.replace(record).encode()


@given(ANY_RECORD)
def test_encoded_map_carries_type_and_version_when_encoded(record: Record) -> None:
    """Every record carries its type and version in its map."""
    fields = msgpack.unpackb(record.encode(), raw=False)
    assert (fields["type"], fields["version"]) == (int(record.TYPE), record.VERSION)
    assert RECORD_CLASSES[fields["type"]] is type(record)


def test_decode_ignores_unknown_fields_when_record_comes_from_newer_writer() -> None:
    """Forward compatibility: unknown keys are ignored, known ones still decode."""
    topic_id = Uuid.random()
    data = msgpack.packb({"type": 9, "version": 1, "topic_id": topic_id.to_bytes(),
                          "future_field": [1, 2]}, use_bin_type=True)
    assert decode(data) == RemoveTopic(topic_id=topic_id)


@pytest.mark.parametrize(("data", "error"), [
    (b"\xc1", "undecodable"),
    (msgpack.packb([1]), "not a map"),
    (msgpack.packb({"type": 999}), "unknown record type"),
    (msgpack.packb({"version": 0}), "unknown record type"),
    (msgpack.packb({"type": 6, "name": "t"}), "bad Topic record"),
    (msgpack.packb({"type": 9, "topic_id": b"short"}, use_bin_type=True), "bad RemoveTopic"),
    (msgpack.packb({"type": 9, "topic_id": 5}), "bad RemoveTopic"),
    (msgpack.packb({"type": 1, "leader_id": 1, "voters": 3}), "bad LeaderChange"),
])
def test_decode_raises_record_error_when_bytes_are_bad(data: bytes, error: str) -> None:
    """Undecodable or incomplete records are one typed error with the reason."""
    with pytest.raises(RecordError, match=error):
        decode(data)


def test_to_json_shows_uuids_as_base64_text_when_dumped() -> None:
    """dump-log and replay show topic IDs as their KIP-516 text."""
    topic_id = Uuid.random()
    view = to_json(Topic(name="orders", topic_id=topic_id))
    assert view == {"type": "Topic", "version": 0, "name": "orders", "topic_id": str(topic_id)}
    assert from_dict({"type": 6, "name": "orders", "topic_id": topic_id.to_bytes()}) == \
        Topic(name="orders", topic_id=topic_id)
