"""Stand-in nodes for the blocking clients' tests: real TCP on 127.0.0.1, one thread
each, answering every msgpack request frame with what the test says (or staying silent
after reading it, or closing the connection unanswered). Every wait is bounded by
BOUND_S; `standin_nodes` closes them all."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from raft.common.framing import FrameDecoder, encode_frame

BOUND_S = 10.0
Answer = Callable[[dict[str, Any]], Any]  # a request frame -> the body to answer, or None
HANG_UP = object()  # what an Answer returns to close the connection without answering


class Node:
    """Accepts connections until closed; answers each frame with `answer(frame)` (None:
    reads the request and stays silent; HANG_UP: closes the connection). Counts the
    requests it read."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.received: list[str] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        deadline = time.monotonic() + BOUND_S
        while not self._closed.is_set() and time.monotonic() < deadline:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(BOUND_S)
                decoder = FrameDecoder()
                frames: list[dict[str, Any]] = []
                while not frames:
                    data = conn.recv(65536)
                    if not data:
                        break
                    frames = list(decoder.feed(data))
                for frame in frames:
                    self.received.append(frame["api"])
                    body = self.answer(frame)
                    if body is None:
                        self._closed.wait(BOUND_S)  # silent until the test ends
                        continue
                    if body is HANG_UP:
                        break
                    conn.sendall(encode_frame({**frame, "body": body}))

    def close(self) -> None:
        self._closed.set()
        self._thread.join(BOUND_S)
        self.listener.close()


@contextmanager
def standin_nodes() -> Iterator[Callable[[Answer], Node]]:
    """Yields a function that starts a node answering with `answer`; closes them all."""
    started: list[Node] = []

    def start(answer: Answer) -> Node:
        started.append(Node(answer))
        return started[-1]

    try:
        yield start
    finally:
        for node in started:
            node.close()


def refused_address() -> str:
    """A port nothing listens on (bound, then closed: connecting is refused)."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return f"127.0.0.1:{sock.getsockname()[1]}"
