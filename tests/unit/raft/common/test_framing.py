"""raft.common.framing: 4-byte length + msgpack map frames; every bad frame is one FrameError."""

from __future__ import annotations

import concurrent.futures
import struct

import msgpack
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from raft.common.framing import FrameDecoder, FramedStream, FrameError, encode_frame
from raft.common.uuid import METADATA_TOPIC_ID, Uuid

MESSAGE = {"api": "Fetch", "version": 0, "correlation_id": 7, "cluster_id": "c",
           "body": {"topic_id": METADATA_TOPIC_ID, "fetch_offset": 3}}


def _frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def _pair(max_frame_bytes: int = 1 << 20) -> tuple[FramedStream, FramedStream]:
    left, right = trio.testing.memory_stream_pair()
    return FramedStream(left, max_frame_bytes), FramedStream(right, max_frame_bytes)


async def test_frames_round_trip_when_sent_over_stream() -> None:
    """DESIGN wire format: a frame carries one map; Uuids arrive as 16-byte bin."""
    a, b = _pair()
    with trio.fail_after(5):
        await a.send(MESSAGE)
        await a.send({**MESSAGE, "correlation_id": 8})
        first, second = await b.receive(), await b.receive()
    assert first is not None
    assert second is not None
    assert first["body"]["topic_id"] == METADATA_TOPIC_ID.to_bytes()
    assert Uuid.from_bytes(first["body"]["topic_id"]) == METADATA_TOPIC_ID
    assert (first["correlation_id"], second["correlation_id"]) == (7, 8)


async def test_receive_returns_none_when_peer_closes_between_frames() -> None:
    """A clean close between frames is end of stream, not an error."""
    a, b = _pair()
    with trio.fail_after(5):
        await a.send(MESSAGE)
        await a.aclose()
        assert await b.receive() is not None
        assert await b.receive() is None


async def test_truncated_frame_raises_when_peer_closes_mid_frame() -> None:
    """A frame cut short by a closed connection is a FrameError."""
    send, receive = trio.testing.memory_stream_one_way_pair()
    framed = FramedStream(trio.StapledStream(send, receive))
    whole = encode_frame(MESSAGE)
    with trio.fail_after(5):
        await send.send_all(whole[: len(whole) - 3])
        await send.aclose()
        with pytest.raises(FrameError, match="middle of a frame"):
            await framed.receive()


async def test_oversized_frame_raises_before_body_arrives_when_length_exceeds_max() -> None:
    """socket.request.max.bytes: the declared length alone refuses the frame."""
    send, receive = trio.testing.memory_stream_one_way_pair()
    framed = FramedStream(trio.StapledStream(send, receive), max_frame_bytes=100)
    with trio.fail_after(5):
        await send.send_all(struct.pack(">I", 101))
        with pytest.raises(FrameError, match="exceeds the 100 limit"):
            await framed.receive()


async def test_send_refuses_when_frame_exceeds_max() -> None:
    """The sender enforces the same limit, so it never emits a frame the peer must refuse."""
    a, _ = _pair(max_frame_bytes=64)
    with pytest.raises(FrameError, match="exceeds"):
        await a.send({**MESSAGE, "body": "x" * 100})


@pytest.mark.parametrize(("payload", "error"), [
    (b"\xc1", "undecodable"),
    (msgpack.packb([1, 2, 3]), "not a map"),
    (msgpack.packb({"api": "Fetch"}), "lacks version, correlation_id, cluster_id, body"),
    (msgpack.packb({**{k: v for k, v in MESSAGE.items() if k != "body"}, "body": 1,
                    "correlation_id": "x"}), "non-integer correlation_id"),
    (msgpack.packb({"api": "Fetch", "version": 0}) + b"\x00", "undecodable"),
])
async def test_undecodable_frame_raises_when_payload_is_bad(payload: bytes, error: str) -> None:
    """Bad msgpack, a non-map or missing keys are a FrameError naming the problem."""
    send, receive = trio.testing.memory_stream_one_way_pair()
    framed = FramedStream(trio.StapledStream(send, receive))
    with trio.fail_after(5):
        await send.send_all(_frame(payload))
        with pytest.raises(FrameError, match=error):
            await framed.receive()


def test_decoder_yields_frames_when_bytes_arrive_one_at_a_time() -> None:
    """Sans-I/O decoder: frames split across any reads come out whole and in order."""
    decoder = FrameDecoder()
    data = encode_frame(MESSAGE) + encode_frame({**MESSAGE, "correlation_id": 9})
    frames = []
    for i in range(len(data)):
        frames += decoder.feed(data[i:i + 1])
    assert [f["correlation_id"] for f in frames] == [7, 9]
    assert not decoder.has_partial_frame


@given(st.lists(st.integers(0, 1 << 40), min_size=1, max_size=6), st.data())
def test_decoder_yields_frames_in_order_when_chunks_split_them_anywhere(
        ids: list[int], data: st.DataObject) -> None:
    """Several frames in one chunk, or cut anywhere between chunks: each once, in order."""
    stream = b"".join(encode_frame({**MESSAGE, "correlation_id": i}) for i in ids)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    decoder = FrameDecoder()
    frames = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        frames += decoder.feed(stream[start:end])
    assert [f["correlation_id"] for f in frames] == ids
    assert frames[0]["body"]["topic_id"] == METADATA_TOPIC_ID.to_bytes()
    assert not decoder.has_partial_frame


def test_encode_frame_is_the_same_in_every_thread_when_packing_concurrently() -> None:
    """`pack` keeps one msgpack Packer per thread: concurrent packing never mixes frames,
    and a failed pack leaves nothing behind for the next one."""
    expected = {i: encode_frame({**MESSAGE, "correlation_id": i}) for i in range(8)}
    with pytest.raises(TypeError):
        encode_frame({**MESSAGE, "body": object()})
    assert encode_frame({**MESSAGE, "correlation_id": 0}) == expected[0]

    def work(i: int) -> bool:
        return all(encode_frame({**MESSAGE, "correlation_id": i}) == expected[i]
                   for _ in range(2000))

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        assert all(pool.map(work, range(8)))
