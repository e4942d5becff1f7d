"""raft.messages codec: every message round-trips through msgpack, and any malformed body
is a MessageError, never another exception (peer input never crashes a node)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metadata.uuid import METADATA_TOPIC_ID, Uuid, pack
from raft.errors import ErrorCode
from raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    CurrentLeader,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DivergingEpoch,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    MessageError,
    ReplicaState,
    VoteRequest,
    VoteResponse,
    decode_message,
    encode_message,
    is_request,
)
from raft.types import Batch

ints = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
small = st.integers(min_value=-1, max_value=1 << 40)
uuids = st.one_of(st.just(METADATA_TOPIC_ID),
                  st.integers(min_value=0, max_value=(1 << 128) - 1).map(Uuid))
errors = st.sampled_from(list(ErrorCode))
cluster_ids = st.text(max_size=30)


@st.composite
def batch_runs(draw: Any) -> tuple[Batch, ...]:
    offset = draw(st.integers(min_value=0, max_value=1 << 40))
    epoch = draw(st.integers(min_value=0, max_value=1000))
    batches = []
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        records = tuple(draw(st.lists(st.binary(max_size=20), min_size=1, max_size=4)))
        batches.append(Batch(base_offset=offset, epoch=epoch, records=records))
        offset += len(records)
        epoch += draw(st.integers(min_value=0, max_value=2))
    return tuple(batches)


replicas = st.builds(ReplicaState, replica_id=small, log_end_offset=small,
                     last_fetch_timestamp=small, last_caught_up_timestamp=small)

messages = st.one_of(
    st.builds(VoteRequest, cluster_id=cluster_ids, topic_id=uuids, partition_index=small,
              candidate_epoch=ints, candidate_id=ints, last_offset_epoch=ints,
              last_offset=ints, pre_vote=st.booleans()),
    st.builds(BeginQuorumEpochRequest, cluster_id=cluster_ids, topic_id=uuids,
              leader_id=ints, leader_epoch=ints),
    st.builds(EndQuorumEpochRequest, cluster_id=cluster_ids, topic_id=uuids, leader_id=ints,
              leader_epoch=ints, preferred_successors=st.lists(ints, max_size=5).map(tuple)),
    st.builds(FetchRequest, cluster_id=cluster_ids, replica_id=ints, max_wait_ms=ints,
              max_bytes=ints, topic_id=uuids, current_leader_epoch=ints, fetch_offset=ints,
              last_fetched_epoch=ints),
    st.builds(DescribeQuorumRequest, cluster_id=cluster_ids, topic_id=uuids),
    st.builds(VoteResponse, error_code=errors, topic_id=uuids, leader_id=ints,
              leader_epoch=ints, vote_granted=st.booleans()),
    st.builds(BeginQuorumEpochResponse, error_code=errors, topic_id=uuids, leader_id=ints,
              leader_epoch=ints),
    st.builds(EndQuorumEpochResponse, error_code=errors, topic_id=uuids, leader_id=ints,
              leader_epoch=ints),
    st.builds(FetchResponse, error_code=errors, topic_id=uuids, high_watermark=ints,
              log_start_offset=ints,
              diverging_epoch=st.none() | st.builds(DivergingEpoch, epoch=ints,
                                                    end_offset=ints),
              current_leader=st.builds(CurrentLeader, leader_id=ints, leader_epoch=ints),
              records=batch_runs()),
    st.builds(DescribeQuorumResponse, error_code=errors, topic_id=uuids, leader_id=ints,
              leader_epoch=ints, high_watermark=ints,
              current_voters=st.lists(replicas, max_size=4).map(tuple),
              observers=st.lists(replicas, max_size=4).map(tuple)),
)


@given(messages)
def test_every_message_round_trips_when_sent_through_msgpack(message: Any) -> None:
    """KIP-595/KIP-516 wire shape: encode -> msgpack bytes -> decode gives it back."""
    api, body = encode_message(message)
    wire = msgpack.unpackb(pack(body), raw=False, strict_map_key=False)
    assert decode_message(api, wire) == message
    assert is_request(message) == api.endswith("Request")


@given(messages)
def test_topic_id_travels_under_topics_partitions_when_encoded(message: Any) -> None:
    """KIP-516: the metadata partition is addressed as topics => [{topic_id, partitions}],
    the topic ID as 16 bytes, on every request and response."""
    _, body = encode_message(message)
    assert body["topics"][0]["topic_id"] == message.topic_id.to_bytes()
    assert body["topics"][0]["partitions"][0]["partition_index"] == message.partition_index
    if is_request(message):
        assert body["cluster_id"] == message.cluster_id


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    | st.binary(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12) | st.integers(), children, max_size=5),
    max_leaves=20)
apis = st.sampled_from(["VoteRequest", "VoteResponse", "BeginQuorumEpochRequest",
                        "BeginQuorumEpochResponse", "EndQuorumEpochRequest",
                        "EndQuorumEpochResponse", "FetchRequest", "FetchResponse",
                        "DescribeQuorumRequest", "DescribeQuorumResponse", "Nope", ""])


@given(apis, json_like)
def test_random_body_raises_only_message_error_when_malformed(api: str, body: Any) -> None:
    """Peer input never raises anything but the one typed error."""
    try:
        decoded = decode_message(api, body)
    except MessageError:
        return
    assert is_request(decoded) or type(decoded).__name__ == api


@st.composite
def mutated_bodies(draw: Any) -> tuple[str, Any]:
    """A valid body with one value somewhere replaced by junk."""
    api, body = encode_message(draw(messages))
    body = msgpack.unpackb(pack(body), raw=False, strict_map_key=False)
    containers = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            containers.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            containers.append(node)
            for value in node:
                walk(value)
    walk(body)
    target = draw(st.sampled_from(containers))
    junk = draw(json_like)
    if isinstance(target, dict) and target:
        key = draw(st.sampled_from(sorted(target, key=repr)))
        if draw(st.booleans()):
            target[key] = junk
        else:
            del target[key]
    elif isinstance(target, list) and target:
        target[draw(st.integers(0, len(target) - 1))] = junk
    return api, body


@given(mutated_bodies())
def test_mutated_body_raises_only_message_error_when_a_field_is_wrong(
        case: tuple[str, Any]) -> None:
    """Almost-valid bodies (one field missing or of the wrong type) are MessageErrors."""
    api, body = case
    try:
        decode_message(api, body)
    except MessageError:
        pass


@pytest.mark.parametrize("body", [
    {"cluster_id": "c", "topics": []},
    {"cluster_id": "c", "topics": [{"topic_id": b"short", "partitions": [{}]}]},
    {"cluster_id": 7, "topics": [{"topic_id": bytes(16), "partitions": [{}]}]},
    [1, 2, 3],
])
def test_describe_request_is_rejected_when_topics_are_malformed(body: Any) -> None:
    """KIP-516: exactly one topic, named by a 16-byte ID."""
    with pytest.raises(MessageError):
        decode_message("DescribeQuorumRequest", body)
