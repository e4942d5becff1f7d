"""metadata.controller_client against stand-in controllers (msgpack frames on 127.0.0.1):
NOT_CONTROLLER's leader is asked next and first on the next call; a write a controller
read and never answered is an unknown outcome, a read or a write nobody received is
not."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest
import trio

from metadata.admin import CreatableTopic, CreateTopicsRequest, DescribeTopicsRequest
from metadata.controller_client import ControllerClient, ControllerUnavailable
from raft.common.errors import ErrorCode
from raft.common.framing import FramedStream

Address = tuple[str, int]
BOUND_S = 10.0
CREATE = CreateTopicsRequest(topics=(CreatableTopic(name="t", num_partitions=1,
                                                    replication_factor=1),))


async def serve(nursery: trio.Nursery, answer: Callable[[dict[str, Any]], Any],
                received: list[str]) -> Address:
    """A stand-in controller: each frame's api goes to `received`; `answer(frame)` is
    the body (None: it stays silent)."""
    async def handle(stream: trio.SocketStream) -> None:
        framed = FramedStream(stream)
        while (frame := await framed.receive()) is not None:
            received.append(frame["api"])
            body = answer(frame)
            if body is None:
                await trio.sleep_forever()  # cancelled with the nursery
            await framed.send({**frame, "body": body})
    listeners = await nursery.start(trio.serve_tcp, handle, 0)
    return "127.0.0.1", listeners[0].socket.getsockname()[1]


def refused_address() -> Address:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return "127.0.0.1", sock.getsockname()[1]


async def test_not_controller_is_followed_to_the_leader_it_names_and_remembered() -> None:
    """Two stand-ins; the one whose address sorts last leads, so the other, asked first,
    redirects the first call, and the second call goes to the leader alone."""
    received: dict[int, list[str]] = {0: [], 1: []}
    leader: list[Address] = []

    def as_node(index: int) -> Callable[[dict[str, Any]], Any]:
        def answer(frame: dict[str, Any]) -> Any:
            if addresses[index] == leader[0]:
                return {"topics": []}
            return {"top_level_error": int(ErrorCode.NOT_CONTROLLER), "leader_id": 2,
                    "leader_address": f"{leader[0][0]}:{leader[0][1]}"}
        return answer

    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            addresses = [await serve(nursery, as_node(i), received[i]) for i in (0, 1)]
            leader.append(max(addresses))
            follower = addresses.index(min(addresses))
            client = ControllerClient(voters={1: min(addresses), 2: max(addresses)},
                                      cluster_id="c")
            first = await client.call(DescribeTopicsRequest(), timeout_s=2.0)
            second = await client.call(DescribeTopicsRequest(), timeout_s=2.0)
            nursery.cancel_scope.cancel()
    assert first == second
    assert received[follower] == ["DescribeTopics"]
    assert received[1 - follower] == ["DescribeTopics", "DescribeTopics"]


@pytest.mark.parametrize(("request_message", "unknown"), [(CREATE, True),
                                                          (DescribeTopicsRequest(), False)])
async def test_a_request_a_controller_read_and_left_unanswered(
        request_message: Any, unknown: bool) -> None:
    received: list[str] = []
    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            silent = await serve(nursery, lambda frame: None, received)
            client = ControllerClient(voters={1: silent}, cluster_id="c")
            with pytest.raises(ControllerUnavailable) as gave_up:
                await client.call(request_message, timeout_s=0.6)
            nursery.cancel_scope.cancel()
    assert received
    assert gave_up.value.outcome_unknown is unknown


async def test_a_write_no_controller_received_is_not_unknown() -> None:
    client = ControllerClient(voters={1: refused_address()}, cluster_id="c")
    with trio.fail_after(BOUND_S), pytest.raises(ControllerUnavailable) as gave_up:
        await client.call(CREATE, timeout_s=0.3)
    assert not gave_up.value.outcome_unknown
    assert "127.0.0.1" in str(gave_up.value)
