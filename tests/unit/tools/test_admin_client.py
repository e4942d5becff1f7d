"""The blocking leader client (tools/admin_client.py) over real TCP on 127.0.0.1, against
small stand-in nodes in threads: a refused connection is `Unsent` (a write that reached
nobody fails), a node that reads the request and never answers makes a write's outcome
unknown (a read's a failure), and NOT_LEADER_OR_FOLLOWER's hint is followed."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from raft.common.errors import ErrorCode
from raft.common.framing import FrameDecoder, encode_frame
from raft.common.leader_redirect import Done, Failed, Unknown
from tools.admin_client import LeaderClient, raft_outcome
from tools.cluster import ClusterError
from tools.quorum_client import append_records

BOUND_S = 10.0
Answer = Callable[[dict[str, Any]], Any]  # a request frame -> the body to answer, or None


class Node:
    """Accepts connections until closed; answers each frame with `answer(frame)` (None:
    reads the request and stays silent). Counts the requests it read."""

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
                    conn.sendall(encode_frame({**frame, "body": body}))

    def close(self) -> None:
        self._closed.set()
        self._thread.join(BOUND_S)
        self.listener.close()


@pytest.fixture
def nodes() -> Iterator[Callable[[Answer], Node]]:
    started: list[Node] = []

    def start(answer: Answer) -> Node:
        started.append(Node(answer))
        return started[-1]

    yield start
    for node in started:
        node.close()


def refused_address() -> str:
    """A port nothing listens on (bound, then closed: connecting is refused)."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_redirect_is_followed_to_the_hinted_leader(nodes: Callable[[Answer], Node]
                                                     ) -> None:
    leader = nodes(lambda frame: {"error_code": 0, "answered_by": "leader"})
    follower = nodes(lambda frame: {"error_code": int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                    "leader_address": leader.address})
    client = LeaderClient([follower.address], attempt_timeout_s=2.0, max_rounds=1)
    result = client.call("Append", {}, classify=raft_outcome, is_write=True)
    assert isinstance(result, Done)
    assert result.value["answered_by"] == "leader"
    assert result.maybe_applied_before  # the follower might have been a deposed leader
    assert client.preferred == leader.address


def test_a_write_nobody_received_fails_and_one_a_node_read_is_unknown(
        nodes: Callable[[Answer], Node]) -> None:
    refused = LeaderClient([refused_address()], attempt_timeout_s=1.0, backoff_s=0.05)
    result = refused.call("Append", {}, classify=raft_outcome, is_write=True,
                          deadline=time.monotonic() + 0.5)
    assert isinstance(result, Failed)

    silent = nodes(lambda frame: None)
    client = LeaderClient([silent.address], attempt_timeout_s=0.3, backoff_s=0.05)
    started = time.monotonic()
    result = client.call("Append", {}, classify=raft_outcome, is_write=True,
                         deadline=started + 0.6)
    assert isinstance(result, Unknown)
    assert silent.received  # it read the write: its outcome is not known
    read = client.call("DescribeQuorumRequest", {}, classify=raft_outcome, is_write=False,
                       deadline=time.monotonic() + 0.4)
    assert isinstance(read, Failed)


def test_append_records_says_when_the_outcome_is_unknown(nodes: Callable[[Answer], Node]
                                                         ) -> None:
    silent = nodes(lambda frame: None)
    with pytest.raises(ClusterError, match="append outcome unknown"):
        append_records([silent.address], 1, timeout_s=0.5)
    with pytest.raises(ClusterError, match="append failed"):
        append_records([refused_address()], 1, timeout_s=0.3)
