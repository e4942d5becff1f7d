"""Admin RPC codec: every message round-trips through msgpack with the bytes tools and
brokers send; malformed bodies raise AdminDecodeError naming the field and nothing else
(peer input never crashes the controller)."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections import Counter
from typing import Any, Union

import msgpack
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from metadata import admin
from metadata.admin import (
    API_NAMES,
    AdminDecodeError,
    AdminErrorResponse,
    AlterPartitionData,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
    AlterPartitionTopicResult,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
    DescribeTopicsRequest,
    DescribeTopicsResponse,
    PartitionDescription,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
    RenameTopicRequest,
    RenameTopicResponse,
    TopicDescription,
    decode_request,
    decode_response,
    encode,
    encode_body,
    is_node_error,
)
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid, pack
from tests.support.codec_mutations import (
    assert_names_path,
    field_default,
    mutations,
    parent_of,
    value_paths,
)

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
    if hint is bytes:  # SCRAM salts and keys
        return st.binary(max_size=20)
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


@st.composite
def peer_bodies(draw: st.DrawFn) -> tuple[str, Any, bool]:
    """(api, body, as a request?) as a peer could send them: a well-formed body (as
    msgpack delivers it), the same with one value (at any depth) replaced by junk, or
    junk for a body; a third each."""
    api = draw(st.sampled_from(sorted(API_NAMES)))
    as_request = draw(st.booleans())
    how = draw(st.sampled_from(["well-formed", "one value junk", "junk"]))
    event(f"body: {how}")
    if how == "junk":
        return api, draw(JUNK), as_request
    message = draw(strategy_for(API_NAMES[api][0 if as_request else 1]))
    body = msgpack.unpackb(pack(encode_body(message)), raw=False)
    if how == "one value junk" and (places := value_paths(body)):
        path = draw(st.sampled_from(places))
        parent_of(body, path)[path[-1]] = draw(JUNK)
    return api, body, as_request


def check_peer_body(api: str, body: Any, as_request: bool) -> str:
    """Decoding gives the api's message (or a whole-request error) that round-trips, or
    the codec's one error saying what is wrong; returns which ("decoded", "error
    response" or "rejected")."""
    decode = decode_request if as_request else decode_response
    try:
        message = decode(api, body)
    except AdminDecodeError as exc:
        error = str(exc)
    else:
        error = ""
    if error:
        names = {c.__name__ for c in (*API_NAMES[api], AdminErrorResponse)}
        assert error.startswith((*names, "body is a", "undecodable body")), error
        return "rejected"
    assert type(message) in (*API_NAMES[api], AdminErrorResponse)
    assert decode(api, encode(message)) == message
    return "error response" if type(message) is AdminErrorResponse else "decoded"


@given(peer_bodies())
def test_decode_raises_only_admin_decode_error_when_given_junk(
        peer_body: tuple[str, Any, bool]) -> None:
    """Peer input never raises anything but the codec's own error, which names the
    message; what does decode is a message that round-trips."""
    event(check_peer_body(*peer_body))


def test_peer_bodies_reach_decoded_and_rejected_messages() -> None:
    """The strategy above is worth its examples: over 300 of them at least a quarter
    decode into the api's own message and a quarter are rejected (junk alone decoded
    in one case out of eight, mostly as empty requests and error answers)."""
    outcomes: Counter[str] = Counter()

    @settings(max_examples=300, derandomize=True, database=None)
    @given(peer_bodies())
    def sample(peer_body: tuple[str, Any, bool]) -> None:
        outcomes[check_peer_body(*peer_body)] += 1

    sample()
    total = sum(outcomes.values())
    assert outcomes["decoded"] >= total // 4, outcomes
    assert outcomes["rejected"] >= total // 4, outcomes


@pytest.mark.parametrize(("api", "cls"), MESSAGES, ids=[c.__name__ for _, c in MESSAGES])
@settings(max_examples=40)
@given(data=st.data())
def test_one_broken_field_is_an_admin_decode_error_naming_it_when_decoded(
        api: str, cls: type, data: Any) -> None:
    """A valid body with one value of a wrong type is an error naming the field; a removed
    key takes the field's default or is "missing"; an unknown key is an error naming it."""
    message = data.draw(strategy_for(cls))
    is_request = cls is API_NAMES[api][0]
    decode = decode_request if is_request else decode_response
    kind, path, broken = data.draw(mutations(encode_body(message)))
    event(f"{kind} at depth {len(path)}")
    if kind == "remove":
        required, with_default = field_default(message, path)
        if not required:
            event("decoded")
            assert decode(api, broken) == with_default
            return
        if not is_request and is_node_error(broken):
            # an answer for the whole request (e.g. INCONSISTENT_CLUSTER_ID)
            event("decoded")
            assert type(decode(api, broken)) is AdminErrorResponse
            return
    event("rejected")
    with pytest.raises(AdminDecodeError) as caught:
        decode(api, broken)
    reason = {"remove": "missing required field", "add": "unknown field"}.get(kind, "expected")
    assert_names_path(caught.value, cls.__name__, path, reason)


def test_a_node_error_decodes_as_an_admin_error_when_required_fields_are_absent() -> None:
    """raft/rpc_host.py answers for the whole request with error_code (and, for NOT_LEADER,
    where the leader is) rather than with the api's response."""
    assert decode_response("CreateTopics", {"error_code": 104, "error_message": "other"}) == \
        AdminErrorResponse(top_level_error=104, error_message="other")
    not_leader = {"error_code": 6, "error_message": "not leader", "leader_id": 2,
                  "leader_address": "127.0.0.1:9093"}
    assert decode_response("AlterPartition", not_leader) == AdminErrorResponse(
        top_level_error=6, error_message="not leader", leader_id=2,
        leader_address="127.0.0.1:9093")


def test_every_admin_message_type_is_covered_by_the_round_trip() -> None:
    """A new message added to API_NAMES is round-tripped without touching this file."""
    covered = {cls for _, cls in MESSAGES} | {AdminErrorResponse}
    defined = {obj for obj in vars(admin).values() if isinstance(obj, type)
               and dataclasses.is_dataclass(obj) and obj.__module__ == admin.__name__
               and obj.__name__.endswith(("Request", "Response"))}
    assert defined <= covered


# --- the wire format of running tools and brokers -------------------------------------
# WIRE_BYTES are the bodies (msgpack) the hand-written codec this module had before
# raft.common.codec produced for WIRE_SAMPLES, captured from that code: the shared codec
# must send exactly these bytes and read them back.

WIRE_SAMPLES: dict[str, Any] = {
    "create": CreateTopicsRequest(
        topics=(CreatableTopic(name="orders", num_partitions=3, replication_factor=2),
                CreatableTopic(name="logs")), validate_only=True),
    "create-answer": CreateTopicsResponse(topics=(
        CreatableTopicResult(name="orders", topic_id=Uuid(12345678901234567890),
                             num_partitions=3, replication_factor=2,
                             assignment=((1, 2), (2, 3), (3, 1))),
        CreatableTopicResult(name="bad", error_code=ErrorCode.TOPIC_ALREADY_EXISTS,
                             error_message="exists"))),
    "delete": DeleteTopicsRequest(topics=(DeleteTopicState(name="orders"),
                                          DeleteTopicState(topic_id=Uuid(5)))),
    "delete-answer": DeleteTopicsResponse(responses=(
        DeletableTopicResult(name="orders", topic_id=Uuid(7)),
        DeletableTopicResult(topic_id=Uuid(9), error_code=100, error_message="unknown"))),
    "describe-all": DescribeTopicsRequest(),
    "describe-names": DescribeTopicsRequest(names=("a", "b")),
    "describe-ids": DescribeTopicsRequest(topic_ids=(Uuid(3),)),
    "describe-no-names": DescribeTopicsRequest(names=()),
    "describe-answer": DescribeTopicsResponse(topics=(
        TopicDescription(name="orders", topic_id=Uuid(7), partitions=(
            PartitionDescription(partition=0, leader=1, leader_epoch=2, replicas=(1, 2),
                                 isr=(1,)),)),
        TopicDescription(name="gone", error_code=3, error_message="x"))),
    "grow": CreatePartitionsRequest(topics=(CreatePartitionsTopic(name="orders", count=6),)),
    "grow-answer": CreatePartitionsResponse(results=(
        CreatePartitionsTopicResult(name="orders", topic_id=Uuid(7), assignment=((1, 2),)),)),
    "rename": RenameTopicRequest(topic_id=Uuid(7), new_name="new"),
    "rename-answer": RenameTopicResponse(topic_id=Uuid(7), new_name="new", old_name="old"),
    "register": RegisterBrokerRequest(broker_id=4, incarnation_id=Uuid((1 << 127) + 3),
                                      endpoints=("PLAINTEXT://127.0.0.1:9092",), rack="r1"),
    "register-answer": RegisterBrokerResponse(broker_epoch=12),
    "heartbeat": BrokerHeartbeatRequest(broker_id=4, broker_epoch=12,
                                        current_metadata_offset=345),
    "heartbeat-answer": BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False),
    "alter": AlterPartitionRequest(broker_id=1, broker_epoch=5, topics=(
        AlterPartitionTopic(topic_id=Uuid(7), partitions=(
            AlterPartitionData(partition=0, leader_epoch=2, partition_epoch=3,
                               new_isr=(1, 2)),)),)),
    "alter-answer": AlterPartitionResponse(topics=(
        AlterPartitionTopicResult(topic_id=Uuid(7), partitions=(
            AlterPartitionPartitionResult(partition=0, leader_id=1, leader_epoch=2,
                                          partition_epoch=4, isr=(1, 2)),)),)),
    "not-controller": AdminErrorResponse(top_level_error=41, error_message="not the controller",
                                         leader_id=2, leader_address="127.0.0.1:9093"),
    "invalid": AdminErrorResponse(top_level_error=42),
}
WIRE_BYTES = {
    "create": (
        "82a6746f706963739283a46e616d65a66f7264657273ae6e756d5f706172746974696f6e7303b2726570"
        "6c69636174696f6e5f666163746f720283a46e616d65a46c6f6773ae6e756d5f706172746974696f6e73"
        "ffb27265706c69636174696f6e5f666163746f72ffad76616c69646174655f6f6e6c79c3"),
    "create-answer": (
        "81a6746f706963739286a46e616d65a66f7264657273a8746f7069635f6964c4100000000000000000ab"
        "54a98ceb1f0ad2aa6572726f725f636f646500ae6e756d5f706172746974696f6e7303b27265706c6963"
        "6174696f6e5f666163746f7202aa61737369676e6d656e749392010292020392030187a46e616d65a362"
        "6164a8746f7069635f6964c41000000000000000000000000000000000aa6572726f725f636f646524ad"
        "6572726f725f6d657373616765a6657869737473ae6e756d5f706172746974696f6e73ffb27265706c69"
        "636174696f6e5f666163746f72ffaa61737369676e6d656e7490"),
    "delete": (
        "81a6746f706963739282a46e616d65a66f7264657273a8746f7069635f6964c410000000000000000000"
        "0000000000000081a8746f7069635f6964c41000000000000000000000000000000005"),
    "delete-answer": (
        "81a9726573706f6e7365739283a46e616d65a66f7264657273a8746f7069635f6964c410000000000000"
        "00000000000000000007aa6572726f725f636f64650083a8746f7069635f6964c4100000000000000000"
        "0000000000000009aa6572726f725f636f646564ad6572726f725f6d657373616765a7756e6b6e6f776e"),
    "describe-all": (
        "80"),
    "describe-names": (
        "81a56e616d657392a161a162"),
    "describe-ids": (
        "81a9746f7069635f69647391c41000000000000000000000000000000003"),
    "describe-no-names": (
        "81a56e616d657390"),
    "describe-answer": (
        "82a6746f706963739284a46e616d65a66f7264657273a8746f7069635f6964c410000000000000000000"
        "00000000000007aa6572726f725f636f646500aa706172746974696f6e739185a9706172746974696f6e"
        "00a66c656164657201ac6c65616465725f65706f636802a87265706c69636173920102a3697372910185"
        "a46e616d65a4676f6e65a8746f7069635f6964c41000000000000000000000000000000000aa6572726f"
        "725f636f646503ad6572726f725f6d657373616765a178aa706172746974696f6e7390aa6572726f725f"
        "636f646500"),
    "grow": (
        "82a6746f706963739182a46e616d65a66f7264657273a5636f756e7406ad76616c69646174655f6f6e6c"
        "79c2"),
    "grow-answer": (
        "81a7726573756c74739184a46e616d65a66f7264657273a8746f7069635f6964c4100000000000000000"
        "0000000000000007aa6572726f725f636f646500aa61737369676e6d656e7491920102"),
    "rename": (
        "82a8746f7069635f6964c41000000000000000000000000000000007a86e65775f6e616d65a36e6577"),
    "rename-answer": (
        "84a8746f7069635f6964c41000000000000000000000000000000007a86e65775f6e616d65a36e6577a8"
        "6f6c645f6e616d65a36f6c64aa6572726f725f636f646500"),
    "register": (
        "84a962726f6b65725f696404ae696e6361726e6174696f6e5f6964c41080000000000000000000000000"
        "000003a9656e64706f696e747391ba504c41494e544558543a2f2f3132372e302e302e313a39303932a4"
        "7261636ba27231"),
    "register-answer": (
        "82aa6572726f725f636f646500ac62726f6b65725f65706f63680c"),
    "heartbeat": (
        "83a962726f6b65725f696404ac62726f6b65725f65706f63680cb763757272656e745f6d657461646174"
        "615f6f6666736574cd0159"),
    "heartbeat-answer": (
        "83aa6572726f725f636f646500ac69735f6361756768745f7570c3a969735f66656e636564c2"),
    "alter": (
        "83a962726f6b65725f696401ac62726f6b65725f65706f636805a6746f706963739182a8746f7069635f"
        "6964c41000000000000000000000000000000007aa706172746974696f6e739184a9706172746974696f"
        "6e00ac6c65616465725f65706f636802af706172746974696f6e5f65706f636803a76e65775f69737292"
        "0102"),
    "alter-answer": (
        "82a6746f706963739182a8746f7069635f6964c41000000000000000000000000000000007aa70617274"
        "6974696f6e739186a9706172746974696f6e00aa6572726f725f636f646500a96c65616465725f696401"
        "ac6c65616465725f65706f636802af706172746974696f6e5f65706f636804a3697372920102aa657272"
        "6f725f636f646500"),
    "not-controller": (
        "84af746f705f6c6576656c5f6572726f7229ad6572726f725f6d657373616765b26e6f74207468652063"
        "6f6e74726f6c6c6572a96c65616465725f696402ae6c65616465725f61646472657373ae3132372e302e"
        "302e313a39303933"),
    "invalid": (
        "81af746f705f6c6576656c5f6572726f722a"),
}


@pytest.mark.parametrize("name", list(WIRE_SAMPLES))
def test_wire_bytes_are_unchanged_when_a_sample_is_encoded(name: str) -> None:
    """Tools, brokers and controllers send and expect exactly these bytes."""
    message, wire = WIRE_SAMPLES[name], bytes.fromhex(WIRE_BYTES[name])
    assert encode(message) == wire
    assert pack(encode_body(message)) == wire
    api = next((api for api, pair in API_NAMES.items() if type(message) in pair),
               "CreateTopics")
    decode = decode_request if type(message) is API_NAMES[api][0] else decode_response
    assert decode(api, wire) == message
