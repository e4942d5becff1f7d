"""raft.common.kafka.framing: Kafka's 4-byte size prefix, the one reader and writer of it.
A size outside 0..limit is refused before any of the body is read; a peer closing
between frames is a clean end (None), in the middle of one an error."""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

from raft.common.kafka.framing import (
    SIZE,
    KafkaFrameError,
    framed,
    read_frame,
    receive_frame,
    take_frame,
)


def test_framed_prefixes_the_size_and_take_frame_removes_whole_frames_only() -> None:
    buffer = bytearray(framed(b"abc") + framed(b"") + framed(b"hello")[:6])
    assert bytes(buffer[:SIZE.size]) == b"\0\0\0\3"
    assert take_frame(buffer, 100) == b"abc"
    assert take_frame(buffer, 100) == b""
    assert take_frame(buffer, 100) is None  # 2 of "hello"'s 5 bytes: kept for later
    assert bytes(buffer) == framed(b"hello")[:6]


@pytest.mark.parametrize("size", [-1, 1025])
def test_a_size_outside_the_limit_is_refused_from_the_header_alone(size: int) -> None:
    with pytest.raises(KafkaFrameError, match=f"frame size {size} outside 0..1024"):
        take_frame(bytearray(SIZE.pack(size)), 1024)


async def test_receive_frame_reads_across_chunks_and_ends_cleanly_between_frames() -> None:
    send, receive = trio.testing.memory_stream_pair()
    buffer = bytearray()
    with trio.fail_after(5):
        data = framed(b"first") + framed(b"second")
        for start in range(0, len(data), 3):  # frames split across receives
            await send.send_all(data[start:start + 3])
        assert await receive_frame(receive, buffer, 100) == b"first"
        assert await receive_frame(receive, buffer, 100) == b"second"
        await send.aclose()
        assert await receive_frame(receive, buffer, 100) is None


async def test_receive_frame_refuses_before_the_body_and_on_a_close_mid_frame() -> None:
    send, receive = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        await send.send_all(SIZE.pack(1 << 30))  # announced, never sent
        with pytest.raises(KafkaFrameError, match="outside 0..1024"):
            await receive_frame(receive, bytearray(), 1024)
        await send.send_all(framed(b"cut short")[:7])
        await send.aclose()
        with pytest.raises(KafkaFrameError, match="middle of a frame"):
            await receive_frame(receive, bytearray(), 1024)


def test_read_frame_on_a_blocking_socket_reads_one_frame_at_a_time() -> None:
    left, right = socket.socketpair()
    with left, right:
        left.sendall(framed(b"one") + framed(b"two") + SIZE.pack(-5))
        assert read_frame(right) == b"one"
        assert read_frame(right) == b"two"
        with pytest.raises(KafkaFrameError, match="frame size -5"):
            read_frame(right)
        left.close()
        with pytest.raises(ConnectionError, match="closed by the broker"):
            read_frame(right)
