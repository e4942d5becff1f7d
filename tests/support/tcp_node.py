"""A RaftNode composed as `tools.server.build` composes it, minus the roles: over a TCP
transport on the test's listeners, with its RPC host and its durability observers."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import trio

from raft.node import RaftNode
from raft.rpc_host import RpcHost
from raft.transport import TcpTransport
from raft.transport_protocol import Address
from tools.server.durability import install_durability


class HostedNode(NamedTuple):
    node: RaftNode
    rpc: RpcHost
    checkpoint_high_watermark: Callable[[], Awaitable[None]]


def tcp_node(*, node_id: int, voters: dict[int, Address], listeners: list[trio.SocketListener],
             rng: random.Random | None = None, **options: Any) -> HostedNode:
    """`options`: RaftNode's other keyword arguments."""
    transport = TcpTransport(node_id=node_id, peers=voters, listeners=listeners, rng=rng)
    node = RaftNode(node_id=node_id, voters=voters, transport=transport, rng=rng, **options)
    return HostedNode(node, RpcHost(node), install_durability(node))
