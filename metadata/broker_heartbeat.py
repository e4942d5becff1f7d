"""A broker node's registration and heartbeats to the active controller (Trio).

The broker registers once per process start (a new incarnation ID), then heartbeats
every `broker.heartbeat.interval.ms` with the last metadata offset it has applied (from
its commit listener: it fetches the metadata log as a raft observer). It finds the
active controller by asking any voter and following NOT_CONTROLLER's leader address. On
STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED it registers again; DUPLICATE_BROKER_
REGISTRATION (its previous incarnation's session has not expired) is retried.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import trio

from metadata.admin import (
    AdminDecodeError,
    AdminErrorResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
    api_of,
    decode_response,
    encode_body,
)
from metadata.uuid import Uuid
from raft.errors import ErrorCode
from raft.framing import FrameError, FramedStream
from raft.node import RaftNode
from raft.types import Batch

log = logging.getLogger(__name__)

Address = tuple[str, int]


class BrokerHeartbeat:
    def __init__(self, node: RaftNode, *, endpoints: tuple[str, ...],
                 heartbeat_interval_ms: int, request_timeout_ms: int = 2000) -> None:
        self._node = node
        self._endpoints = endpoints
        self._interval_s = heartbeat_interval_ms / 1000
        self._timeout_s = request_timeout_ms / 1000
        self.incarnation_id = Uuid.random()
        self.broker_epoch: int | None = None
        self.is_fenced = True
        self.applied_offset = -1
        self._preferred: Address | None = None
        self._correlation = itertools.count(1)

    def install(self) -> BrokerHeartbeat:
        self._node.add_commit_listener(self._on_commit)
        self._node.add_background_task(self.run)
        return self

    def _on_commit(self, batch: Batch) -> None:
        self.applied_offset = batch.next_offset - 1

    async def run(self) -> None:
        broker_id = self._node.node_id
        while True:
            try:
                if self.broker_epoch is None:
                    await self._register(broker_id)
                else:
                    await self._heartbeat(broker_id)
            except (OSError, FrameError, trio.TooSlowError, trio.BrokenResourceError,
                    AdminDecodeError) as exc:
                log.info("controller unreachable", extra={"broker": broker_id,
                                                          "reason": str(exc)})
                self._preferred = None
            await trio.sleep(self._interval_s)

    async def _register(self, broker_id: int) -> None:
        response = await self._call(RegisterBrokerRequest(
            broker_id=broker_id, incarnation_id=self.incarnation_id, endpoints=self._endpoints))
        if isinstance(response, RegisterBrokerResponse):
            if response.error_code == ErrorCode.NONE:
                self.broker_epoch = response.broker_epoch
                log.info("broker registered", extra={"broker": broker_id,
                                                     "broker_epoch": response.broker_epoch})
            else:
                log.info("broker registration refused",
                         extra={"broker": broker_id, "error": response.error_message})

    async def _heartbeat(self, broker_id: int) -> None:
        assert self.broker_epoch is not None
        response = await self._call(BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=self.broker_epoch,
            current_metadata_offset=self.applied_offset))
        if not isinstance(response, BrokerHeartbeatResponse):
            return
        if response.error_code in (ErrorCode.STALE_BROKER_EPOCH,
                                   ErrorCode.BROKER_ID_NOT_REGISTERED):
            self.broker_epoch = None
        elif response.error_code == ErrorCode.NONE:
            if response.is_fenced != self.is_fenced:
                log.info("broker fenced" if response.is_fenced else "broker unfenced",
                         extra={"broker": broker_id})
            self.is_fenced = response.is_fenced

    async def _call(self, request: Any) -> Any:
        """One request to the preferred controller or, failing that, to each voter in turn;
        a NOT_CONTROLLER answer names the leader to prefer next time."""
        api = api_of(request)
        targets = ([self._preferred] if self._preferred else []) + sorted(
            self._node.voters.values())
        last_error: Exception | None = None
        for address in dict.fromkeys(targets):
            try:
                reply = await self._send(address, api, encode_body(request))
            except (OSError, FrameError, trio.TooSlowError, trio.BrokenResourceError) as exc:
                last_error = exc
                continue
            response = decode_response(api, reply)
            if isinstance(response, AdminErrorResponse):
                if response.top_level_error == ErrorCode.NOT_CONTROLLER and \
                        response.leader_address:
                    host, _, port = response.leader_address.rpartition(":")
                    self._preferred = (host, int(port))
                continue
            self._preferred = address
            return response
        if last_error is not None:
            raise last_error
        return None

    async def _send(self, address: Address, api: str, body: dict[str, Any]) -> Any:
        with trio.fail_after(self._timeout_s):
            stream = await trio.open_tcp_stream(*address)
            framed = FramedStream(stream)
            try:
                correlation_id = next(self._correlation)
                await framed.send({"api": api, "version": 0, "correlation_id": correlation_id,
                                   "cluster_id": self._node.cluster_id, "body": body})
                while True:
                    reply = await framed.receive()
                    if reply is None:
                        raise FrameError("the controller closed the connection")
                    if reply["correlation_id"] == correlation_id:
                        return reply["body"]
            finally:
                await framed.aclose()


def install_broker_heartbeat(node: RaftNode, *, client_address: Address | None,
                             heartbeat_interval_ms: int, request_timeout_ms: int
                             ) -> BrokerHeartbeat:
    endpoints = (f"PLAINTEXT://{client_address[0]}:{client_address[1]}",) if client_address \
        else ()
    return BrokerHeartbeat(node, endpoints=endpoints, heartbeat_interval_ms=heartbeat_interval_ms,
                           request_timeout_ms=request_timeout_ms).install()
