"""A tiny blocking Kafka wire client on `kio`: one request, one response. Tests use it to
send exactly the request they mean (e.g. a Fetch v13 with a stale topic ID).

The APIs of `broker.kafka.ordered_schemas` (keys 2530, 2531) decode like Kafka's. kio
cannot read error codes Kafka lacks (INVALID_PARTITION_METADATA): with `tolerant=True`
every error code decodes as a plain int instead of an ErrorCode."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from broker.kafka.codec import response_class
from broker.kafka.ordered_schemas import tolerant_response_class


def encode_request(body: Any, correlation_id: int = 1, client_id: str = "test") -> bytes:
    header_cls = body.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_cls)(buffer, header_cls(
        request_api_key=body.__api_key__, request_api_version=body.__version__,
        correlation_id=correlation_id, client_id=client_id))
    entity_writer(type(body))(buffer, body)
    data = buffer.getvalue()
    return struct.pack(">i", len(data)) + data


def read_frame(sock: socket.socket) -> bytes:
    """One size-prefixed frame, without its size."""
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return out
    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def decode_response(frame: bytes, api_key: int, version: int, *,
                    tolerant: bool = False) -> tuple[int, Any]:
    schema = response_class(api_key, version)
    if tolerant:
        schema = tolerant_response_class(schema)
    header, offset = entity_reader(schema.__header_schema__)(frame, 0)
    body, _ = entity_reader(schema)(frame, offset)
    return int(header.correlation_id), body


def call(address: str, body: Any, timeout_s: float = 10.0, *, tolerant: bool = False
         ) -> Any:
    """Send `body` (a kio request entity) to HOST:PORT on a new connection; the decoded
    response (`tolerant`: error codes as plain ints, see the module docstring)."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(encode_request(body, correlation_id=7))
        correlation_id, response = decode_response(read_frame(sock), body.__api_key__,
                                                   body.__version__, tolerant=tolerant)
    if correlation_id != 7:
        raise ConnectionError(f"response to correlation id {correlation_id}, not 7")
    return response
