"""The ordered client's broker connection (tools/client/connection.py) over real TCP on
127.0.0.1, against a stand-in broker in the same Trio run: a request cut short after it
was sent (its task cancelled, as the consumer cancels one task when the other ends a
generation) must not leave its answer on the connection for the next request to read."""

from __future__ import annotations

import functools
from typing import Any

import trio
from kio.index import load_request_schema

from raft.common.kafka.codec import build, encode_response, peek_header, response_class
from raft.common.kafka.framing import receive_frame
from tools.client.connection import BrokerConnection

FIND_COORDINATOR, HEARTBEAT = 10, 12
BOUND_S = 10.0  # the whole exchange, so a hang fails instead of waiting forever


def answer(frame: bytes) -> bytes:
    header = peek_header(frame)
    body = build(response_class(header.api_key, header.api_version),
                 {"error_code": 0, "host": "127.0.0.1", "port": 1})
    return encode_response(header.correlation_id, body)


def test_a_request_cancelled_before_its_answer_leaves_no_answer_for_the_next() -> None:
    received = trio.Event()  # the broker read the request that is then cut short
    late_answer_due = trio.Event()
    late_answer_sent = trio.Event()

    async def broker(stream: trio.SocketStream) -> None:
        buffer = bytearray()
        try:
            while (frame := await receive_frame(stream, buffer)) is not None:
                if peek_header(frame).api_key == FIND_COORDINATOR:
                    received.set()
                    await late_answer_due.wait()
                    try:
                        await stream.send_all(answer(frame))
                    finally:
                        late_answer_sent.set()
                else:
                    await stream.send_all(answer(frame))
        except trio.BrokenResourceError:
            pass  # the client closed the connection it gave up on

    async def client(port: int, nursery: trio.Nursery) -> Any:
        connection = BrokerConnection(f"127.0.0.1:{port}", "test", BOUND_S,
                                      ssl_context=None, sasl=None)

        async def cut_short_once_received() -> None:
            await received.wait()
            cut_short.cancel()

        with trio.CancelScope() as cut_short:
            nursery.start_soon(cut_short_once_received)
            await connection.request(build(load_request_schema(FIND_COORDINATOR, 3),
                                           {"key": "g", "key_type": 0}))
        assert cut_short.cancelled_caught
        late_answer_due.set()
        await late_answer_sent.wait()  # the old answer is on its way before the next ask
        try:
            return await connection.request(build(load_request_schema(HEARTBEAT, 4), {
                "group_id": "g", "generation_id": 1, "member_id": "m",
                "group_instance_id": None}))
        finally:
            await connection.close()

    async def main() -> Any:
        with trio.fail_after(BOUND_S):
            async with trio.open_nursery() as nursery:
                listeners = await nursery.start(
                    functools.partial(trio.serve_tcp, broker, 0, host="127.0.0.1"))
                response = await client(listeners[0].socket.getsockname()[1], nursery)
                nursery.cancel_scope.cancel()
        return response

    response = trio.run(main)
    assert type(response).__name__ == "HeartbeatResponse"
    assert int(response.error_code) == 0
