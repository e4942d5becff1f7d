"""Raft messages on a `Transport` (`raft.transport_protocol`): envelopes to frames and
back, for `raft.node.RaftNode`.

A request goes to its peer on our outbound connection; an answer to a request goes back
on the connection the request came on (`raft.routes`). A frame that does not decode, a
request on our outbound connection or an answer on an inbound one is a `ProtocolError`
(the transport closes that one connection). The logger `raft.node.messages` at DEBUG
traces every message in and out.
"""

from __future__ import annotations

import logging
from typing import Any

from raft import messages
from raft.routes import RouteTable
from raft.transport_protocol import Frame, Link, ProtocolError, Transport
from raft.types import Envelope

trace = logging.getLogger("raft.node.messages")


class MessageWire:
    def __init__(self, transport: Transport, node_id: int, cluster_id: str) -> None:
        self.transport = transport
        self._node_id = node_id
        self._cluster_id = cluster_id
        self._routes = RouteTable()

    def frame(self, api: str, correlation_id: int, body: Any) -> Frame:
        """A frame from this node."""
        return {"api": api, "version": 0, "correlation_id": correlation_id,
                "cluster_id": self._cluster_id, "body": body, "src": self._node_id}

    def send(self, envelope: Envelope) -> None:
        """Never blocks; an answer whose connection closed is dropped."""
        api, body = messages.encode_message(envelope.message)
        if trace.isEnabledFor(logging.DEBUG):
            trace.debug("send", extra={"dst": envelope.dst, "cid": envelope.correlation_id,
                                       "detail": repr(envelope.message)[:500]})
        frame = self.frame(api, envelope.correlation_id, body)
        if messages.is_response(envelope.message):
            conn_id = self._routes.take((envelope.dst, envelope.correlation_id))
            if conn_id is not None:
                self.transport.send_on(conn_id, frame)
        else:
            self.transport.send_to_peer(envelope.dst, frame)

    def envelope(self, conn: Link, frame: Frame) -> Envelope:
        """The Raft message `frame` carries, from the peer of our outbound connection,
        or from the node id a request claims (else `-conn_id`); ProtocolError if none."""
        api, correlation_id = frame["api"], frame["correlation_id"]
        try:
            message = messages.decode_message(api, frame["body"])
        except messages.MessageError as exc:
            raise ProtocolError(f"malformed {api!r:.60}: {exc}") from None
        if conn.node_id is not None:  # our outbound connection: a response to our request
            if not messages.is_response(message):
                raise ProtocolError(f"{api} received where only responses are expected")
            src = conn.node_id
        else:
            if not messages.is_request(message):
                raise ProtocolError(f"unsolicited {api}")
            claimed = frame.get("src")
            src = claimed if type(claimed) is int and claimed >= 0 else -conn.conn_id
            self._routes.remember((src, correlation_id), conn.conn_id)
        return Envelope(src=src, dst=self._node_id, correlation_id=correlation_id,
                        message=message)

    def forget(self, conn: Link) -> None:
        """The transport closed `conn`: answers to its requests have nowhere to go."""
        self._routes.forget_connection(conn.conn_id)
