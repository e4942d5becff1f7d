"""Async (trio) Kafka connections for the ordered client: one connection per broker
address, requests answered in order and matched by correlation id, and a topic's
metadata from Metadata v12 (leaders, broker addresses, topic ID) plus
PartitionLeaderEpochs (partition counts and the resize leader-epoch maps). Over TLS when
given a context and with a SASL login when given one: the command line's, from
`--command-config` or a TLS cluster's `client.properties` (`tools/cli.py`)."""

from __future__ import annotations

import itertools
import secrets
import ssl
from collections.abc import Sequence
from typing import Any

import trio
from kio.index import load_request_schema

from broker.kafka.sasl.sasl_client import SaslClientError
from broker.kafka.sasl.sasl_client import authenticate as sasl_authenticate
from broker.kafka.sasl.sasl_settings import SaslClientSettings
from raft.common.kafka.codec import build
from raft.common.kafka.ordered_schemas import PartitionLeaderEpochsRequest
from raft.common.kafka.wire_client import encode_request, exchange
from raft.common.tls import open_stream
from tools.client.metadata import TopicMetadata, topic_metadata

METADATA = 3
_SASL_RNG = secrets.SystemRandom()  # SCRAM client nonces


class ClientError(Exception):
    """A request failed for good; the message says why."""


class ConnectionLost(ClientError):
    """The broker could not be reached or closed the connection (retriable); `refused`:
    it refused the connection, nothing listens at its address."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


def _refused(exc: BaseException) -> bool:
    """Whether a connect failed on a refusal, for every address tried (trio groups the
    attempts' errors as the cause)."""
    cause = exc.__cause__
    if isinstance(cause, BaseExceptionGroup):
        return all(isinstance(e, ConnectionRefusedError) for e in cause.exceptions)
    return isinstance(exc, ConnectionRefusedError)


class BrokerConnection:
    """One TCP connection; requests are serialised (one in flight), so a response always
    answers the request just sent. A request that ends before its answer is read
    (cancelled: the consumer ends a generation by cancelling the task that waits) closes
    the connection, else that answer would be read as the next request's."""

    def __init__(self, address: str, client_id: str, timeout_s: float, *,
                 ssl_context: ssl.SSLContext | None,
                 sasl: SaslClientSettings | None) -> None:
        self.address, self.client_id, self.timeout_s = address, client_id, timeout_s
        self.ssl_context, self.sasl = ssl_context, sasl
        self._stream: trio.abc.Stream | None = None
        self._lock = trio.Lock()
        self._correlation = itertools.count(1)
        self._buffer = bytearray()

    async def request(self, body: Any, timeout_s: float | None = None, *,
                      answered: bool = True) -> Any:
        """The answer to `body`; with `answered=False` (a Produce with acks=0) `body` is
        only sent, and None returned: no answer comes."""
        async with self._lock:
            try:
                with trio.fail_after(timeout_s or self.timeout_s):
                    stream = await self._logged_in()
                    if not answered:
                        await stream.send_all(encode_request(
                            body, next(self._correlation), self.client_id))
                        return None
                    # error codes as plain ints: kio's reader refuses INVALID_PARTITION_METADATA
                    return await exchange(stream, body, next(self._correlation),
                                          client_id=self.client_id, buffer=self._buffer,
                                          tolerant=True)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                    trio.TooSlowError) as exc:
                await self.close()
                raise ConnectionLost(f"{self.address}: {type(exc).__name__}: {exc}",
                                     refused=_refused(exc)) from None
            except BaseException:
                await self.close()
                raise

    async def _logged_in(self) -> trio.abc.Stream:
        """The connection's stream, opened (and logged in) first if need be."""
        if self._stream is None:
            host, _, port = self.address.rpartition(":")
            self._stream = await open_stream(host, int(port), self.ssl_context)
            self._buffer.clear()
            if self.sasl is not None:  # SASL_PLAINTEXT / SASL_SSL (--command-config)
                try:
                    await sasl_authenticate(self._stream, self.sasl, rng=_SASL_RNG)
                except SaslClientError as exc:  # wrong credentials: no use retrying
                    await self.close()
                    raise ClientError(f"{self.address}: {exc}") from None
        return self._stream

    async def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:  # at once, also in a cancelled task
            await trio.aclose_forcefully(stream)


def metadata_request(topic: str) -> Any:
    """Metadata v12 for one topic, by name."""
    return build(load_request_schema(METADATA, 12), {
        "topics": [{"name": topic, "topic_id": None}],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})


class KafkaClient:
    """Connections by address, bootstrapped from HOST:PORT strings; each over TLS with
    `ssl_context` (None: plaintext) and logged in with `sasl` (None: no SASL)."""

    def __init__(self, bootstrap: Sequence[str], *, ssl_context: ssl.SSLContext | None,
                 sasl: SaslClientSettings | None, client_id: str = "kraft-ordered",
                 timeout_s: float = 10.0) -> None:
        if not bootstrap:
            raise ClientError("no bootstrap broker address")
        self.bootstrap = list(bootstrap)
        self.client_id, self.timeout_s = client_id, timeout_s
        self.ssl_context, self.sasl = ssl_context, sasl
        self._connections: dict[str, BrokerConnection] = {}
        self.known: list[str] = list(bootstrap)  # bootstrap + brokers metadata named

    async def call(self, address: str, body: Any, timeout_s: float | None = None) -> Any:
        """The response to `body` from `address` (ConnectionLost when it does not come
        within `timeout_s`, default the client's)."""
        return await self._connection(address).request(body, timeout_s)

    async def send(self, address: str, body: Any) -> None:
        """Send `body` (a Produce with acks=0) to `address`, expecting no answer."""
        await self._connection(address).request(body, answered=False)

    def _connection(self, address: str) -> BrokerConnection:
        connection = self._connections.get(address)
        if connection is None:
            connection = self._connections[address] = BrokerConnection(
                address, self.client_id, self.timeout_s, ssl_context=self.ssl_context,
                sasl=self.sasl)
        return connection

    async def call_any(self, body: Any) -> tuple[str, Any]:
        """(address, response) from the first known broker that answers."""
        failures = []
        for address in list(dict.fromkeys(self.known)):
            try:
                return address, await self.call(address, body)
            except ConnectionLost as exc:
                failures.append(str(exc))
        raise ConnectionLost("no broker answered: " + "; ".join(failures))

    async def topic_metadata(self, topic: str) -> TopicMetadata:
        """Leaders and topic ID (Metadata v12), then counts and epoch maps from the same
        broker (PartitionLeaderEpochs), so both describe one image when they can."""
        address, metadata = await self.call_any(metadata_request(topic))
        brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in metadata.brokers}
        self.known = list(dict.fromkeys([*brokers.values(), *self.bootstrap]))
        (found,) = metadata.topics
        epochs = None
        if int(found.error_code) == 0:
            epochs = await self.call(address, build(PartitionLeaderEpochsRequest, {
                "topics": [{"topic_id": found.topic_id, "partitions": []}]}))
        return topic_metadata(topic, found, brokers, epochs)

    async def aclose(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()

