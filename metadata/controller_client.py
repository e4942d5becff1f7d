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
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from metadata.admin import (
    WRITE_APIS,
    AdminDecodeError,
    AdminErrorResponse,
    AdminRequest,
    AdminResponse,
    api_of,
    decode_response,
    encode_body,
)
from raft.common import leader_redirect, tls
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
    """No active controller answered before the deadline. `outcome_unknown`: the request
    was a write that may have been applied (`raft.common.leader_redirect.Unknown`)."""

    def __init__(self, message: str, *, outcome_unknown: bool = False) -> None:
        super().__init__(message)
        self.outcome_unknown = outcome_unknown


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
        # the identity to expect at each address: a voter's id, or the one a redirect named
        node_ids: dict[Address, int | None] = {
            address: node_id for node_id, address in self._voters.items()}
        if self._preferred is not None:
            node_ids[self._preferred[1]] = self._preferred[0]

        def classify(where: str, reply: Any) -> leader_redirect.Outcome:
            response = decode_response(api, reply)
            if isinstance(response, AdminErrorResponse) and \
                    response.top_level_error == ErrorCode.NOT_CONTROLLER:
                hint = redirect_address(response.leader_address) if response.leader_address \
                    else None
                if hint is not None:
                    node_ids[hint] = leader_named(self._voters, response.leader_id, hint)
                return leader_redirect.Redirected(hint, f"{where}: {response.error_message}")
            return leader_redirect.Answered(response)

        async def attempt(address: Address, attempt_timeout_s: float
                          ) -> leader_redirect.Outcome:
            return await dial_and_exchange(
                address, api, next(self._correlation), self._cluster_id, body,
                classify=classify, timeout_s=attempt_timeout_s, ssl_context=self._ssl_context,
                node_id=node_ids.get(address), bind_identity=self._bind_identity)

        call = leader_redirect.start(
            sorted(self._voters.values()), is_write=api in WRITE_APIS,
            backoff_s=RETRY_PAUSE_S,
            preferred=None if self._preferred is None else self._preferred[1])
        call, decision = await follow_leader(call, attempt, timeout_s=timeout_s,
                                             attempt_timeout_s=max(0.5, timeout_s / 2))
        leader = decision.leader if isinstance(decision, leader_redirect.Done) \
            else call.preferred
        self._preferred = None if leader is None else (node_ids.get(leader), leader)
        if isinstance(decision, leader_redirect.Done):
            return decision.value  # type: ignore[no-any-return]
        problems = decision.problems[-3:]
        log.warning("no active controller answered", extra={"api": api, "problems": problems})
        raise ControllerUnavailable("; ".join(problems) or "no controller answered",
                                    outcome_unknown=isinstance(decision, leader_redirect.Unknown))


Attempt = Callable[[Address, float], Awaitable[leader_redirect.Outcome]]
Classify = Callable[[str, Any], leader_redirect.Outcome]  # ("host:port", reply body)


async def follow_leader(call: leader_redirect.Call[Address], attempt: Attempt, *,
                        timeout_s: float, attempt_timeout_s: float
                        ) -> tuple[leader_redirect.Call[Address],
                                   leader_redirect.Done[Address] | leader_redirect.Unknown
                                   | leader_redirect.Failed]:
    """Drive `call` as `raft.common.leader_redirect` decides, on Trio's clock, until it
    ends: `attempt(address, its timeout)` gives each attempt's outcome."""
    deadline = trio.current_time() + timeout_s
    outcome: leader_redirect.Outcome | None = None
    while True:
        time_left = deadline - trio.current_time()
        call, decision = leader_redirect.decide(call, outcome, time_left)
        if isinstance(decision, leader_redirect.Send):
            outcome = await attempt(decision.address, min(attempt_timeout_s, time_left))
        elif isinstance(decision, leader_redirect.Backoff):
            await trio.sleep(decision.seconds)  # an election is under way
            outcome = None
        else:
            return call, decision


async def dial_and_exchange(address: Address, api: str, correlation_id: int, cluster_id: str,
                            body: dict[str, Any], *, classify: Classify, timeout_s: float,
                            ssl_context: ssl.SSLContext | None = None,
                            node_id: int | None = None, bind_identity: bool = False
                            ) -> leader_redirect.Outcome:
    """One attempt as the policy sees it: `Unsent` while nothing left this client (the
    dial, the TLS handshake and its identity check), `Lost` after (no answer in
    `timeout_s`, a closed connection, an unreadable reply), else `classify`'s verdict."""
    where = f"{address[0]}:{address[1]}"
    sent = False
    try:
        with trio.fail_after(timeout_s):
            stream = await tls.open_node_stream(address[0], address[1], ssl_context,
                                                node_id=node_id, bind_identity=bind_identity)
            sent = True
            reply = await exchange_on(FramedStream(stream), api, correlation_id, cluster_id,
                                      body)
        return classify(where, reply)
    except (OSError, FrameError, trio.TooSlowError, trio.BrokenResourceError,
            AdminDecodeError) as exc:
        problem = f"{where}: {exc}"
        return leader_redirect.Lost(problem) if sent else leader_redirect.Unsent(problem)


def redirect_address(text: str) -> Address | None:
    """A redirect's "host:port" (None: not one)."""
    host, _, port = text.rpartition(":")
    return (host, int(port)) if host and port.isdigit() else None


async def exchange_on(framed: FramedStream, api: str, correlation_id: int, cluster_id: str,
                      body: dict[str, Any]) -> Any:
    """One request on an open stream, which it closes; the response's body."""
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


async def request_once(address: Address, api: str, correlation_id: int, cluster_id: str,
                       body: dict[str, Any], *, ssl_context: ssl.SSLContext | None = None,
                       node_id: int | None = None, bind_identity: bool = False) -> Any:
    """One request to a controller on a connection of its own (over TLS with
    `ssl_context`; with `bind_identity`, only to a certificate binding `node_id`, see
    `raft.common.tls.open_node_stream`); the response's body."""
    stream = await tls.open_node_stream(address[0], address[1], ssl_context,
                                        node_id=node_id, bind_identity=bind_identity)
    return await exchange_on(FramedStream(stream), api, correlation_id, cluster_id, body)
