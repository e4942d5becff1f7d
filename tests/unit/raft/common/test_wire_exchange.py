"""raft.common.kafka.wire_client.exchange, the one request-and-answer of every async Kafka
client: the answer to this correlation id, decoded, bytes past it kept for the next; a
peer that closes first or answers another request is NoAnswer."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from kio.index import load_request_schema

from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build, encode_response, parse_request, response_class
from raft.common.kafka.framing import receive_frame
from raft.common.kafka.wire_client import CLOSED_BY_PEER, NoAnswer, exchange

HEARTBEAT = 12


def heartbeat() -> object:
    return build(load_request_schema(HEARTBEAT, 4),
                 {"group_id": "g", "generation_id": 1, "member_id": "m"})


def answer(correlation_id: int, error: ErrorCode) -> bytes:
    return encode_response(correlation_id, build(response_class(HEARTBEAT, 4),
                                                 {"throttle_time": 0, "error_code": error}))


async def serve(stream: trio.abc.Stream, replies: list[bytes]) -> None:
    """Read one request (correlation id 5), send `replies` in one write, close."""
    request = await receive_frame(stream, bytearray())
    assert request is not None
    assert parse_request(request, {HEARTBEAT: (4, 4)}).header.correlation_id == 5
    await stream.send_all(b"".join(replies))
    await stream.aclose()


async def test_the_answer_is_decoded_and_what_follows_it_stays_in_the_buffer() -> None:
    client, server = trio.testing.memory_stream_pair()
    buffer = bytearray()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve, server, [answer(5, ErrorCode.NONE),
                                           answer(6, ErrorCode.REBALANCE_IN_PROGRESS)])
        first = await exchange(client, heartbeat(), 5, client_id="t", buffer=buffer)
    assert first.error_code == ErrorCode.NONE
    assert bytes(buffer) == answer(6, ErrorCode.REBALANCE_IN_PROGRESS)


@pytest.mark.parametrize(("replies", "reason"), [
    ([], CLOSED_BY_PEER),
    ([answer(4, ErrorCode.NONE)], "answer to correlation id 4, not 5")])
async def test_no_answer_when_the_peer_closes_first_or_answers_another_request(
        replies: list[bytes], reason: str) -> None:
    client, server = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve, server, replies)
        with pytest.raises(NoAnswer, match=reason):
            await exchange(client, heartbeat(), 5, client_id="t", buffer=bytearray())
