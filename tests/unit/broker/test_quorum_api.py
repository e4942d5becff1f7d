"""broker.kafka.admin.quorum_api: Kafka's DescribeQuorum on the broker's listener, forwarded to
the raft leader among fake controllers (msgpack frames on 127.0.0.1), and the checks
Kafka makes of the request."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
from kio.index import load_request_schema

from broker.kafka.admin import quorum_api
from broker.kafka.api_versions import DESCRIBE_QUORUM, SUPPORTED
from broker.kafka.listener import Dispatcher
from raft import messages
from raft.common.errors import ErrorCode
from raft.common.framing import FramedStream
from raft.common.kafka.codec import build
from tests.unit.broker.test_kafka_listener import make_dispatcher, roundtrip

Address = tuple[str, int]


def leader_body() -> dict[str, Any]:
    _, body = messages.encode_message(messages.DescribeQuorumResponse(
        leader_id=2, leader_epoch=3, high_watermark=10,
        current_voters=(messages.ReplicaState(replica_id=2, log_end_offset=11),
                        messages.ReplicaState(replica_id=1, log_end_offset=9,
                                              last_fetch_timestamp=5,
                                              last_caught_up_timestamp=4)),
        observers=(messages.ReplicaState(replica_id=7, log_end_offset=10),)))
    return body


def request(version: int = 2, topic: str = "__cluster_metadata",
            partitions: tuple[int, ...] = (0,)) -> Any:
    return build(load_request_schema(DESCRIBE_QUORUM, version), {"topics": [
        {"topic_name": topic, "partitions": [{"partition_index": p} for p in partitions]}]})


async def serve_controller(nursery: trio.Nursery,
                           answer: Callable[[], dict[str, Any]]) -> Address:
    """A fake controller answering every DescribeQuorumRequest frame with `answer()`."""
    async def handle(stream: trio.SocketStream) -> None:
        framed = FramedStream(stream)
        while (frame := await framed.receive()) is not None:
            assert frame["api"] == "DescribeQuorumRequest"  # raft.node's api name
            await framed.send({"api": frame["api"], "version": 0, "cluster_id": "c",
                               "correlation_id": frame["correlation_id"], "body": answer()})
    listeners = await nursery.start(trio.serve_tcp, handle, 0)
    return "127.0.0.1", listeners[0].socket.getsockname()[1]


def test_describe_quorum_is_advertised_up_to_v2() -> None:
    assert SUPPORTED[DESCRIBE_QUORUM] == (0, 2)


async def test_the_forwarder_follows_a_follower_to_the_leader(tmp_path: Path) -> None:
    """Asked first, a follower names the leader's address; the broker's answer is the
    leader's, and v2 lists every voter's CONTROLLER endpoint."""
    async with trio.open_nursery() as nursery:
        leader = await serve_controller(nursery, leader_body)
        follower = await serve_controller(nursery, lambda: {
            "error_code": int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
            "leader_address": f"{leader[0]}:{leader[1]}"})
        forwarder = quorum_api.QuorumForwarder(voters={1: follower, 2: leader},
                                               cluster_id="c", leader_hint=lambda: follower)
        base = make_dispatcher(tmp_path)
        dispatcher = Dispatcher(base.context, quorum=forwarder)
        response = await roundtrip(dispatcher, request())
        nursery.cancel_scope.cancel()
    assert response.error_code == ErrorCode.NONE
    (topic,) = response.topics
    (partition,) = topic.partitions
    assert (partition.error_code, partition.leader_id, partition.leader_epoch,
            partition.high_watermark) == (ErrorCode.NONE, 2, 3, 10)
    assert [(v.replica_id, v.log_end_offset, v.last_fetch_timestamp,
             v.last_caught_up_timestamp) for v in partition.current_voters] == \
        [(2, 11, -1, -1), (1, 9, 5, 4)]
    assert [o.replica_id for o in partition.observers] == [7]
    assert [(n.node_id, [(li.name, li.host, li.port) for li in n.listeners])
            for n in response.nodes] == [(1, [("CONTROLLER", *follower)]),
                                         (2, [("CONTROLLER", *leader)])]


async def test_old_versions_are_served_without_the_fields_they_lack(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        leader = await serve_controller(nursery, leader_body)
        forwarder = quorum_api.QuorumForwarder(voters={2: leader}, cluster_id="c")
        dispatcher = Dispatcher(make_dispatcher(tmp_path).context, quorum=forwarder)
        v0 = await roundtrip(dispatcher, request(0))
        v1 = await roundtrip(dispatcher, request(1))
        nursery.cancel_scope.cancel()
    assert [v.log_end_offset for v in v0.topics[0].partitions[0].current_voters] == [11, 9]
    assert [v.last_fetch_timestamp for v in v1.topics[0].partitions[0].current_voters] == \
        [-1, 5]


async def test_kafka_checks_of_the_request_need_no_controller(tmp_path: Path) -> None:
    """Two partitions: INVALID_REQUEST; another topic: UNKNOWN_TOPIC_OR_PARTITION on its
    partition (as Kafka); no controller is asked (none listens on these voters)."""
    forwarder = quorum_api.QuorumForwarder(voters={1: ("127.0.0.1", 9)}, cluster_id="c")
    dispatcher = Dispatcher(make_dispatcher(tmp_path).context, quorum=forwarder)
    invalid = await roundtrip(dispatcher, request(partitions=(0, 1)))
    assert (invalid.error_code, invalid.topics) == (ErrorCode.INVALID_REQUEST, ())
    other = await roundtrip(dispatcher, request(topic="orders"))
    assert other.error_code == ErrorCode.NONE
    assert other.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_no_controller_answering_is_request_timed_out(tmp_path: Path) -> None:
    forwarder = quorum_api.QuorumForwarder(voters={1: ("127.0.0.1", 9)}, cluster_id="c")
    context = make_dispatcher(tmp_path).context
    context.request_timeout_ms = 300  # the forwarder gives up after this long
    with trio.fail_after(5):
        response = await forwarder.handle(context, request(), 2)
    assert response["error_code"] == ErrorCode.REQUEST_TIMED_OUT
    assert "127.0.0.1:9" in (response.get("error_message") or "")


def test_a_controller_error_body_becomes_a_top_level_error() -> None:
    response = quorum_api.describe_quorum_response(
        {"error_code": int(ErrorCode.INCONSISTENT_CLUSTER_ID), "error_message": "bad id"},
        voters={})
    assert (response["error_code"], response.get("error_message")) == \
        (ErrorCode.INCONSISTENT_CLUSTER_ID, "bad id")


async def test_a_dispatcher_without_a_forwarder_answers_an_error(tmp_path: Path) -> None:
    response = await roundtrip(make_dispatcher(tmp_path), request())
    assert response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
