"""The node's RPC server: it takes every frame its transport hands in and routes it.

Raft messages (and lost connections and peers) go to the `RaftNode`'s loop; the other
apis to handlers the layers above install; DescribeQuorum is answered from the node.
The composition root (`tools.server.build`) builds it beside the node.

- `add_api_handler(api, handler)`: `async handler(body, cluster_id) -> body` serves an
  extra msgpack api (admin requests, broker registration). The response frame echoes the
  request's api and correlation_id. Raise `ApiError` to answer
  `{"error_code": ..., "error_message": ...}`; `NotLeaderError` answers
  NOT_LEADER_OR_FOLLOWER with the leader's address, `LogDirFailure` KAFKA_STORAGE_ERROR,
  any other exception UNKNOWN_SERVER_ERROR (logged: a handler bug never takes the node
  down).
- `set_request_gate(gate)`: every request arriving on the node's listener (a Raft RPC,
  DescribeQuorum or an api above) passes `gate(api)` first, in the connection's task; a
  refusal is answered with its error code (a Raft request in its response's shape) and
  nothing of the request reaches the node or a handler.
- `await serve_api(api, body, cluster_id)`: the answer the listener gives to one
  request, for another listener of the node (a broker's status port) to serve too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from raft import messages
from raft.common.errors import ErrorCode
from raft.message_wire import trace
from raft.node import LogDirFailure, NotLeaderError, RaftNode
from raft.transport_protocol import Frame, Link

log = logging.getLogger(__name__)

ApiHandler = Callable[[Any, str], Awaitable[Any]]
# api -> None to serve it, or (error code, why) to refuse it; reads the caller from the
# connection's session (`raft.common.session.current_session`)
RequestGate = Callable[[str], "tuple[ErrorCode, str] | None"]
DESCRIBE_QUORUM = "DescribeQuorumRequest"


class ApiError(Exception):
    """Raised by an api handler: answered as `{error_code, error_message}`."""

    def __init__(self, error_code: int, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.error_code = int(error_code)
        self.fields = fields


def not_leader_body(exc: NotLeaderError) -> dict[str, Any]:
    address = exc.leader_address
    return {"error_code": int(ErrorCode.NOT_LEADER_OR_FOLLOWER), "error_message": str(exc),
            "leader_id": -1 if exc.leader_id is None else exc.leader_id,
            "leader_address": f"{address[0]}:{address[1]}" if address else None}


class RpcHost:
    def __init__(self, node: RaftNode) -> None:
        self.node = node
        self._handlers: dict[str, ApiHandler] = {}
        node.transport.attach(handler=self._on_frame, on_close=node.wire.forget,
                              on_peer_down=node.peer_down)

    @property
    def apis(self) -> set[str]:
        """The apis installed (DescribeQuorum and Raft's own aside)."""
        return set(self._handlers)

    def add_api_handler(self, api: str, handler: ApiHandler) -> None:
        if api in messages.CLASS_BY_API or api == DESCRIBE_QUORUM or api in self._handlers:
            raise ValueError(f"api {api!r} is already served")
        self._handlers[api] = handler

    def set_request_gate(self, gate: RequestGate) -> None:
        transport = self.node.transport

        def refused(conn: Link, frame: Frame) -> bool:
            """In the connection's task, before anything else reads the frame: True when
            the gate refused (and this answered) the request."""
            refusal = gate(frame["api"])
            if refusal is not None:
                code, why = refusal
                trace.debug("refused", extra={"api": frame["api"], "peer": conn.peer,
                                              "reason": why})
                response = messages.refusal(frame["api"], code, why)
                api, body = response or (frame["api"], {"error_code": int(code),
                                                        "error_message": why})
                transport.send_on(conn.conn_id,
                                  self.node.wire.frame(api, frame["correlation_id"], body))
            return refusal is not None
        transport.refused = refused

    async def _on_frame(self, conn: Link, frame: Frame) -> None:
        """In the connection's reader task: an api request is served here, anything
        else goes to the node."""
        api = frame["api"]
        if conn.node_id is None and (api in self._handlers or api == DESCRIBE_QUORUM):
            reply = await self._serve(api, frame["body"], frame["cluster_id"])
            self.node.transport.send_on(conn.conn_id,
                                        self.node.wire.frame(api, frame["correlation_id"], reply))
            return
        await self.node.receive_frame(conn, frame)

    def _describe_quorum(self, now: int) -> dict[str, Any]:
        """In the core task; a non-leader also names the leader's address, and every node
        the addresses it dials its voters at (a static quorum's answer names no endpoints)."""
        node = self.node
        _, body = messages.encode_message(node.core.describe_quorum(now))
        address = node.leader_address
        body["leader_address"] = f"{address[0]}:{address[1]}" if address else None
        body["voter_addresses"] = {voter: f"{host}:{port}"
                                   for voter, (host, port) in sorted(node.voters.items())}
        body.update(node_id=node.node_id, cluster_id=node.cluster_id, is_leader=node.is_leader)
        return body

    async def serve_api(self, api: str, body: Any, cluster_id: Any) -> Any:
        """The answer this node's listener gives to `api`; an error body when it serves
        no such api."""
        if api not in self._handlers and api != DESCRIBE_QUORUM:
            return {"error_code": int(ErrorCode.INVALID_REQUEST),
                    "error_message": f"node {self.node.node_id} serves no {api!r:.60} api"}
        return await self._serve(api, body, cluster_id)

    async def _serve(self, api: str, body: Any, cluster_id: Any) -> Any:
        own = self.node.cluster_id
        if cluster_id not in (None, "", own):  # tools may not know it yet
            return {"error_code": int(ErrorCode.INCONSISTENT_CLUSTER_ID),
                    "error_message": f"cluster id {cluster_id!r:.40} is not {own}"}
        try:
            if api == DESCRIBE_QUORUM:
                return await self.node.call(self._describe_quorum)
            return await self._handlers[api](body, cluster_id)
        except ApiError as exc:
            return {"error_code": exc.error_code, "error_message": str(exc), **exc.fields}
        except NotLeaderError as exc:
            return not_leader_body(exc)
        except LogDirFailure as exc:  # logged once where it happened; the caller retries
            return {"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "error_message": str(exc)}
        except Exception as exc:  # a handler bug must not take the quorum member down
            log.exception("api handler failed", extra={"api": api})
            return {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR),
                    "error_message": f"{type(exc).__name__}: {exc}"}
