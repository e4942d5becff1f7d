"""An async client for the admin RPCs of the active controller (Trio): used by brokers to
register and heartbeat, and by the Kafka listener to forward admin writes.

Over TLS when given the controller listener's client context (`ssl_context`, from
`raft.common.tls`; the node's transport holds it: `Transport.client_ssl_context`). With
`bind_identity` (mutual TLS between the nodes, as the transport's own), the certificate a
voter's address presents must bind that voter's id (`raft.common.tls.open_node_stream`),
so nothing is sent to a process posing as a controller with another certificate of the
CA (a client's, another node's).

The msgpack admin RPCs of `metadata.admin`, sent to a voter; NOT_CONTROLLER names the
leader, which is tried next; while no controller is active the request is sent again
after a short pause, until the deadline. The controller answers after the records have
committed.
"""

from __future__ import annotations

import itertools
import logging
import ssl
from collections.abc import Mapping
from typing import Any

import trio

from metadata.admin import (
    AdminDecodeError,
    AdminErrorResponse,
    AdminRequest,
    AdminResponse,
    api_of,
    decode_response,
    encode_body,
)
from raft.common import tls
from raft.common.errors import ErrorCode
from raft.common.framing import FramedStream, FrameError

log = logging.getLogger(__name__)

Address = tuple[str, int]
RETRY_PAUSE_S = 0.05


def node_at(voters: Mapping[int, Address], address: Address) -> int | None:
    """The id of the voter at `address` (None: no known voter is there)."""
    return next((n for n, a in voters.items() if a == address), None)


def leader_named(voters: Mapping[int, Address], leader_id: object, address: Address
                 ) -> int | None:
    """The node id to expect at a redirect's `address`: the `leader_id` it names when
    it names one, else the voter known at that address."""
    if isinstance(leader_id, int) and leader_id >= 0:
        return leader_id
    return node_at(voters, address)


class ControllerUnavailable(Exception):
    """No active controller answered before the deadline."""


class ControllerClient:
    def __init__(self, *, voters: Mapping[int, Address], cluster_id: str,
                 ssl_context: ssl.SSLContext | None = None,
                 bind_identity: bool = False) -> None:
        self._voters = voters  # may be the node's own map, which learns new voters
        self._cluster_id = cluster_id
        self._ssl_context = ssl_context
        self._bind_identity = bind_identity
        self._preferred: tuple[int | None, Address] | None = None  # (node id, address)
        self._correlation = itertools.count(1)

    async def call(self, request: AdminRequest, timeout_s: float) -> AdminResponse:
        api = api_of(request)
        body = encode_body(request)
        problems: list[str] = []
        with trio.move_on_after(timeout_s):
            while True:
                targets: list[tuple[int | None, Address]] = \
                    [self._preferred] if self._preferred else []
                targets += sorted(self._voters.items(), key=lambda voter: voter[1])
                tried: set[Address] = set()
                for node_id, address in targets:
                    if address in tried:
                        continue
                    tried.add(address)
                    try:
                        with trio.fail_after(max(0.5, timeout_s / 2)):
                            reply = await self._send(node_id, address, api, body)
                        response = decode_response(api, reply)
                    except (OSError, FrameError, trio.TooSlowError, trio.BrokenResourceError,
                            AdminDecodeError) as exc:
                        problems.append(f"{address[0]}:{address[1]}: {exc}")
                        if self._preferred is not None and self._preferred[1] == address:
                            self._preferred = None
                        continue
                    if isinstance(response, AdminErrorResponse) and \
                            response.top_level_error == ErrorCode.NOT_CONTROLLER:
                        if response.leader_address:
                            host, _, port = response.leader_address.rpartition(":")
                            leader = (host, int(port))
                            self._preferred = (
                                leader_named(self._voters, response.leader_id, leader), leader)
                        continue
                    self._preferred = (node_id, address)
                    return response
                await trio.sleep(RETRY_PAUSE_S)  # an election is under way
        log.warning("no active controller answered", extra={
            "api": api, "problems": problems[-3:]})
        raise ControllerUnavailable("; ".join(problems[-3:]) or "no controller answered")

    async def _send(self, node_id: int | None, address: Address, api: str,
                    body: dict[str, Any]) -> Any:
        return await request_once(address, api, next(self._correlation), self._cluster_id,
                                  body, ssl_context=self._ssl_context, node_id=node_id,
                                  bind_identity=self._bind_identity)


async def request_once(address: Address, api: str, correlation_id: int, cluster_id: str,
                       body: dict[str, Any], *, ssl_context: ssl.SSLContext | None = None,
                       node_id: int | None = None, bind_identity: bool = False) -> Any:
    """One request to a controller on a connection of its own (over TLS with
    `ssl_context`; with `bind_identity`, only to a certificate binding `node_id`, see
    `raft.common.tls.open_node_stream`); the response's body."""
    stream = await tls.open_node_stream(address[0], address[1], ssl_context,
                                        node_id=node_id, bind_identity=bind_identity)
    framed = FramedStream(stream)
    try:
        await framed.send({"api": api, "version": 0, "correlation_id": correlation_id,
                           "cluster_id": cluster_id, "body": body})
        while True:
            reply = await framed.receive()
            if reply is None:
                raise FrameError("the controller closed the connection")
            if reply["correlation_id"] == correlation_id:
                return reply["body"]
    finally:
        await framed.aclose()
