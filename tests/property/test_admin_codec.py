"""Admin RPC codec: every message round-trips through msgpack; malformed bodies raise
AdminDecodeError and nothing else (peer input never crashes the controller)."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Union

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata import admin
from metadata.admin import (
    API_NAMES,
    AdminDecodeError,
    AdminErrorResponse,
    DescribeTopicsRequest,
    decode_request,
    decode_response,
    encode,
    encode_body,
)
from metadata.uuid import Uuid, pack

INT64 = st.integers(-(2**63), 2**63 - 1)
UUIDS = st.builds(Uuid, st.integers(0, 2**128 - 1))


def strategy_for(hint: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return st.one_of(*(strategy_for(a) for a in typing.get_args(hint)))
    if origin is tuple:
        return st.lists(strategy_for(typing.get_args(hint)[0]), max_size=4).map(tuple)
    if hint is type(None):
        return st.none()
    if hint is Uuid:
        return UUIDS
    if hint is bool:
        return st.booleans()
    if hint is int:
        return INT64
    if hint is str:
        return st.text(max_size=20)
    assert dataclasses.is_dataclass(hint), hint
    hints = typing.get_type_hints(hint)
    fields = {f.name: strategy_for(hints[f.name]) for f in dataclasses.fields(hint)}
    built = st.fixed_dictionaries(fields)
    if hint is DescribeTopicsRequest:
        built = built.filter(lambda d: d["names"] is None or d["topic_ids"] is None)
    return built.map(lambda kwargs: hint(**kwargs))  # type: ignore[operator]


MESSAGES = [(api, cls) for api, pair in API_NAMES.items() for cls in pair]


@pytest.mark.parametrize(("api", "cls"), MESSAGES, ids=[c.__name__ for _, c in MESSAGES])
@settings(max_examples=40)
@given(data=st.data())
def test_message_round_trips_when_encoded_and_decoded(api: str, cls: type, data: Any) -> None:
    """Every field survives msgpack (Uuids as 16-byte bin, tuples as arrays)."""
    message = data.draw(strategy_for(cls))
    decode = decode_request if cls is API_NAMES[api][0] else decode_response
    assert decode(api, encode(message)) == message
    assert decode(api, msgpack.unpackb(pack(encode_body(message)), raw=False)) == message


@given(error=strategy_for(AdminErrorResponse), api=st.sampled_from(sorted(API_NAMES)))
def test_any_api_response_decodes_as_an_error_when_it_carries_top_level_error(
        error: AdminErrorResponse, api: str) -> None:
    """NOT_CONTROLLER and friends: one shape for every api."""
    assert decode_response(api, encode(error)) == error


def test_describe_fails_to_decode_when_it_mixes_names_and_ids() -> None:
    """KIP-516 TopicCollection: names or IDs, never both."""
    with pytest.raises(AdminDecodeError, match="never both"):
        decode_request("DescribeTopics", {"names": ["a"], "topic_ids": [b"\x00" * 16]})


@pytest.mark.parametrize(("api", "body", "reason"), [
    ("CreateTopics", {}, "missing"),
    ("CreateTopics", {"topics": [{"name": 7}]}, "expected a string"),
    ("CreateTopics", {"topics": [{"name": "a", "num_partitions": True}]}, "64-bit integer"),
    ("CreateTopics", {"topics": [{"name": "a", "num_partitions": 2**64}]}, "64-bit integer"),
    ("DeleteTopics", {"topics": [{"topic_id": b"short"}]}, "16-byte Uuid"),
    ("DeleteTopics", {"topics": "a"}, "expected an array"),
    ("DeleteTopics", {"topics": [["a"]]}, "expected a map"),
    ("RenameTopic", [1, 2], "not a map"),
    ("RenameTopic", b"\xc1", "undecodable"),
    ("NoSuchApi", {}, "unknown admin api"),
])
def test_decode_raises_admin_decode_error_when_the_body_is_malformed(
        api: str, body: Any, reason: str) -> None:
    """One typed error, with the reason and the field's path."""
    with pytest.raises(AdminDecodeError, match=reason):
        decode_request(api, body)


JUNK = st.recursive(
    st.none() | st.booleans() | INT64 | st.text(max_size=5) | st.binary(max_size=17),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["topics", "name", "topic_id", "names", "topic_ids", "count",
                         "broker_id", "new_name", "incarnation_id", "x"]), inner, max_size=4),
    max_leaves=12)


@given(api=st.sampled_from(sorted(API_NAMES)), body=JUNK)
def test_decode_raises_only_admin_decode_error_when_given_junk(api: str, body: Any) -> None:
    """Peer input never raises anything but the codec's own error."""
    try:
        decode_request(api, body)
        decode_response(api, body)
    except AdminDecodeError:
        pass


def test_every_admin_message_type_is_covered_by_the_round_trip() -> None:
    """A new message added to API_NAMES is round-tripped without touching this file."""
    covered = {cls for _, cls in MESSAGES} | {AdminErrorResponse}
    defined = {obj for obj in vars(admin).values() if isinstance(obj, type)
               and dataclasses.is_dataclass(obj) and obj.__module__ == admin.__name__
               and obj.__name__.endswith(("Request", "Response"))}
    assert defined <= covered
