"""A tiny blocking Kafka wire client on `kio`: one request, one response. Tests use it to
send exactly the request they mean (e.g. a Fetch v13 with a stale topic ID). `exchange`
is the same request and answer over an open trio stream, for every async client (the
command line's, the replica fetcher, the SASL login).

The APIs of `raft.common.kafka.ordered_schemas` (keys 2530, 2531) decode like Kafka's. kio
cannot read error codes Kafka lacks (INVALID_PARTITION_METADATA): with `tolerant=True`
every error code decodes as a plain int instead of an ErrorCode.

`connect` dials over TLS when given a context, else in plaintext."""

from __future__ import annotations

import io
import socket
import ssl
from typing import Any

import trio
from kio.serial import entity_reader, entity_writer

from raft.common.kafka.codec import response_class
from raft.common.kafka.framing import framed, read_frame, receive_frame
from raft.common.kafka.ordered_schemas import tolerant_response_class

CLOSED_BY_PEER = "closed by the broker"


class NoAnswer(ConnectionError):
    """The peer closed before answering, or answered another request."""


def encode_request(body: Any, correlation_id: int = 1, client_id: str = "test") -> bytes:
    header_cls = body.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_cls)(buffer, header_cls(
        request_api_key=body.__api_key__, request_api_version=body.__version__,
        correlation_id=correlation_id, client_id=client_id))
    entity_writer(type(body))(buffer, body)
    return framed(buffer.getvalue())


def decode_response(frame: bytes, api_key: int, version: int, *,
                    tolerant: bool = False) -> tuple[int, Any]:
    schema = response_class(api_key, version)
    if tolerant:
        schema = tolerant_response_class(schema)
    header, offset = entity_reader(schema.__header_schema__)(frame, 0)
    body, _ = entity_reader(schema)(frame, offset)
    return int(header.correlation_id), body


async def exchange(stream: trio.abc.Stream, body: Any, correlation_id: int, *,
                   client_id: str, buffer: bytearray, tolerant: bool = False) -> Any:
    """Send `body` on `stream` and return the decoded answer (`buffer` keeps the bytes
    read past it; `tolerant` as `decode_response`); NoAnswer when none comes."""
    await stream.send_all(encode_request(body, correlation_id, client_id))
    frame = await receive_frame(stream, buffer)
    if frame is None:
        raise NoAnswer(CLOSED_BY_PEER)
    answered, response = decode_response(frame, int(body.__api_key__), int(body.__version__),
                                         tolerant=tolerant)
    if answered != correlation_id:
        raise NoAnswer(f"answer to correlation id {answered}, not {correlation_id}")
    return response


def connect(address: str, timeout_s: float = 10.0,
            ssl_context: ssl.SSLContext | None = None) -> socket.socket:
    """A connection to HOST:PORT, over TLS with `ssl_context` (the server's certificate
    checked against HOST); OSError when it fails."""
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    if ssl_context is None:
        return sock
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # see tools/cluster.py
    try:
        return ssl_context.wrap_socket(sock, server_hostname=host)
    except BaseException:
        sock.close()
        raise


def call(address: str, body: Any, timeout_s: float = 10.0, *, tolerant: bool = False,
         ssl_context: ssl.SSLContext | None = None) -> Any:
    """Send `body` (a kio request entity) to HOST:PORT on a new connection; the decoded
    response (`tolerant`: error codes as plain ints, see the module docstring)."""
    with connect(address, timeout_s, ssl_context) as sock:
        sock.sendall(encode_request(body, correlation_id=7))
        correlation_id, response = decode_response(read_frame(sock), body.__api_key__,
                                                   body.__version__, tolerant=tolerant)
    if correlation_id != 7:
        raise ConnectionError(f"response to correlation id {correlation_id}, not 7")
    return response
