"""One in-process RaftNode on a DiskLog in a temp dir, for the shell tests of storage
behaviour (disk errors, the high-watermark checkpoint)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import trio

from raft.core import RaftConfig
from raft.log import DiskLog
from raft.node import RaftNode
from raft.storage import read_quorum_state, write_quorum_state
from raft.types import ElectionState
from tests.support.polling import eventually as eventually  # re-exported (in-flight users)
from tests.support.tcp_node import tcp_node

FAST = RaftConfig(voters=(1,), election_timeout_ms=150, fetch_timeout_ms=300,
                  election_backoff_max_ms=100, request_timeout_ms=200, fetch_max_wait_ms=100)


async def make_node(data: Path, write_election: Callable[[ElectionState], None] | None = None
                    ) -> tuple[RaftNode, DiskLog]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    voters = {1: ("127.0.0.1", listeners[0].socket.getsockname()[1])}
    disk_log = DiskLog.open_metadata_log(data)
    node = tcp_node(node_id=1, cluster_id="cluster-a", voters=voters,
                       config=FAST, log=disk_log,
                       election=read_quorum_state(data),
                       write_election=write_election or (lambda s: write_quorum_state(data, s)),
                       listeners=listeners, rng=random.Random(1)).node
    return node, disk_log

