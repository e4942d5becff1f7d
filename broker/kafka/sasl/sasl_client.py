"""The client side of SASL on a Kafka connection (Trio): SaslHandshake v1, then the
mechanism's tokens in SaslAuthenticate v2 requests, as kafka-python and librdkafka do.

Used by the broker's replica fetcher on its connections to other brokers' Kafka
listeners when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL, and by kraft's
tools (`tools.client`). PLAIN sends `NUL username NUL password`; SCRAM runs
`broker.kafka.sasl.scram.ScramClient` and checks the server's signature, so a broker that
does not hold the credential cannot pass for one that does. Any refusal is
`SaslClientError` with the broker's message; the caller closes the connection.
"""

from __future__ import annotations

import random
from typing import Any

import trio
from kio.index import load_request_schema

from broker.kafka.sasl.sasl_settings import PLAIN, SaslClientSettings
from broker.kafka.sasl.scram import MECHANISMS, ScramAuthenticationError, ScramClient
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from raft.common.kafka.wire_client import NoAnswer, exchange

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
HANDSHAKE_VERSION, AUTHENTICATE_VERSION = 1, 2


class SaslClientError(ConnectionError):
    """The broker refused the login (or answered out of protocol); the message says why."""


async def _exchange(stream: trio.abc.Stream, body: Any, correlation_id: int) -> Any:
    try:  # nothing is read past an answer before login: a fresh buffer each time
        return await exchange(stream, body, correlation_id, client_id="kraft-sasl",
                              buffer=bytearray())
    except NoAnswer as exc:
        raise SaslClientError(f"during SASL authentication: {exc}") from None


async def authenticate(stream: trio.abc.Stream, settings: SaslClientSettings, *,
                       rng: random.Random, correlation_id: int = 0x5A51) -> None:
    """Log in on a fresh connection (no request sent on it yet); raises SaslClientError.
    Uses correlation ids from `correlation_id` up."""
    handshake = await _exchange(stream, build(
        load_request_schema(SASL_HANDSHAKE, HANDSHAKE_VERSION),
        {"mechanism": settings.mechanism}), correlation_id)
    if handshake.error_code != ErrorCode.NONE:
        raise SaslClientError(f"SaslHandshake: {handshake.error_code.name.upper()} (the broker "
                              f"enables {', '.join(handshake.mechanisms) or 'nothing'})")

    async def step(token: bytes, offset: int) -> bytes:
        answer = await _exchange(stream, build(
            load_request_schema(SASL_AUTHENTICATE, AUTHENTICATE_VERSION),
            {"auth_bytes": token}), correlation_id + offset)
        if answer.error_code != ErrorCode.NONE:
            raise SaslClientError(f"SaslAuthenticate: {answer.error_code.name.upper()}: "
                                  f"{answer.error_message}")
        return bytes(answer.auth_bytes)

    if settings.mechanism == PLAIN:
        await step(b"\0" + settings.username.encode() + b"\0" + settings.password.encode(), 1)
        return
    client = ScramClient(MECHANISMS[settings.mechanism], settings.username,
                         settings.password, rng=rng)
    try:
        server_first = await step(client.first(), 1)
        client.verify(await step(client.final(server_first), 2))
    except ScramAuthenticationError as exc:
        raise SaslClientError(f"{settings.mechanism}: {exc}") from None
