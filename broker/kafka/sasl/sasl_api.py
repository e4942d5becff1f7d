"""SASL on the broker's Kafka listener, as Kafka does it: SaslHandshake (API 17, v0-v1)
and SaslAuthenticate (API 36, v0-v2), with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.

On a listener mapped to SASL_PLAINTEXT or SASL_SSL each connection gets a
`SaslAuthenticator` (frames in, frames out, no I/O) before any other request is served:

- before it authenticates, a connection may send ApiVersions (served as usual),
  SaslHandshake and SaslAuthenticate; any other request closes it (Kafka's
  "Unexpected Kafka request ... during SASL handshake");
- SaslHandshake names a mechanism among `sasl.enabled.mechanisms`, or is answered
  UNSUPPORTED_SASL_MECHANISM (33) with the enabled list and the connection closes;
- after a v1 handshake the exchange travels in SaslAuthenticate requests; a failed one
  is answered SASL_AUTHENTICATION_FAILED (58) with a message, then the connection closes;
- after a v0 handshake the exchange travels as raw size-prefixed tokens, no Kafka header
  (Kafka's v0 mode, which older clients use); a failure there closes the connection,
  as Kafka does, since the raw mode has no room for an error;
- once the mechanism completes, the connection's `Session` (`raft.common.session`)
  gets `principal = User:<username>` and `sasl_mechanism`, and every API is served.

There is no re-authentication (KIP-368): the session lifetime is 0, and a SaslHandshake
or SaslAuthenticate after authentication, or on a listener without SASL, is answered
ILLEGAL_SASL_STATE (34), as Kafka's KafkaApis does.

SCRAM credentials come from the metadata image (UserScramCredential records,
`metadata.scram_credentials`). An unknown SCRAM user is answered with a salt made from its
name under a key derived from the metadata topic's ID (`unknown_user_key_of`): a random
Uuid the first leader wrote into the metadata log, the same on every broker and after
every restart, and readable only by whoever can read that log, who can read every
credential anyway. A key file in each log directory would differ from broker to broker,
so asking two brokers would tell an unknown user from a known one. PLAIN users come from
`sasl.plain.users` (kraft-py's key, for tests only: the passwords sit in the
configuration file). Passwords are never logged.
"""

from __future__ import annotations

import functools
import hmac
import logging
import random
from collections.abc import Callable, Mapping
from typing import Any

from broker.kafka.context import BrokerContext
from broker.kafka.response_shapes import SaslAuthenticateResponse, SaslHandshakeResponse
from broker.kafka.sasl.sasl_settings import PLAIN, SaslSettings
from broker.kafka.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from broker.kafka.sasl.scram import (
    ScramAuthenticationError,
    ScramCredential,
    ScramServer,
    unknown_user_key,
)
from metadata.image import MetadataImage
from metadata.scram_credentials import ScramCredentialImage
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import (
    ConnectionClosed,
    KafkaCodecError,
    build,
    encode_response,
    parse_request,
    peek_header,
    response_class,
)
from raft.common.kafka.framing import framed
from raft.common.session import KafkaPrincipal, Session

__all__ = ["SaslAuthenticator", "SaslFailed", "SaslSettings",
           "handle_sasl_authenticate_request", "handle_sasl_handshake_request",
           "unknown_user_key_of"]

log = logging.getLogger(__name__)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
HANDSHAKE_VERSIONS = (0, 1)
AUTHENTICATE_VERSIONS = (0, 2)
_SASL_APIS = {SASL_HANDSHAKE: HANDSHAKE_VERSIONS, SASL_AUTHENTICATE: AUTHENTICATE_VERSIONS}


class SaslFailed(Exception):
    """The client's credentials were refused; the message is what it is told."""


class _PlainServer:
    """RFC 4616: one token `authzid NUL authcid NUL passwd`."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self.complete = False

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslFailed("Invalid SASL/PLAIN message: expected authzid NUL user NUL "
                             "password")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailed("Invalid SASL/PLAIN message: not UTF-8") from None
        if authzid and authzid != user:
            raise SaslFailed("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        expected = self._users.get(user)
        # compared even for an unknown user, so the time taken does not tell
        matches = hmac.compare_digest(password.encode(), (expected or "\0").encode())
        if expected is None or not matches:
            raise SaslFailed("Authentication failed: Invalid username or password")
        self.username, self.complete = user, True
        return b""


class _ScramStep:
    """A ScramServer as a sequence of token steps."""

    def __init__(self, server: ScramServer) -> None:
        self._server = server
        self._steps = 0

    @property
    def username(self) -> str | None:
        return self._server.username

    @property
    def complete(self) -> bool:
        return self._server.complete

    def step(self, token: bytes) -> bytes:
        self._steps += 1
        try:
            if self._steps == 1:
                return self._server.first(token)
            return self._server.final(token)
        except ScramAuthenticationError as exc:
            raise SaslFailed(str(exc)) from None


CredentialsSource = Callable[[], Mapping[tuple[str, str], ScramCredentialImage]]
UnknownUserKeySource = Callable[[], "bytes | None"]


@functools.lru_cache(maxsize=4)
def _key_of_topic_id(topic_id: bytes) -> bytes:
    return unknown_user_key(topic_id)


def unknown_user_key_of(image: MetadataImage) -> bytes | None:
    """The key an unknown SCRAM user's salt is made with (see the module docstring);
    None until the image holds the metadata topic's ID, and then no credential either,
    since the first leader writes that ID before any other record."""
    topic_id = image.metadata_topic_id
    return None if topic_id is None else _key_of_topic_id(topic_id.to_bytes())

_HANDSHAKE, _AUTHENTICATE, _RAW, _DONE = "handshake", "authenticate", "raw", "done"


class SaslAuthenticator:
    """One connection's SASL state, sans I/O (see the module docstring). The listener
    hands it every frame until `complete`: `passes(frame)` says the dispatcher serves it
    (ApiVersions); otherwise `handle(frame)` gives the reply (None: none) and, when the
    connection must close after it, the reason."""

    def __init__(self, settings: SaslSettings, session: Session, *,
                 credentials: CredentialsSource, unknown_user_key: UnknownUserKeySource,
                 rng: random.Random) -> None:
        self._settings = settings
        self._session = session
        self._credentials = credentials
        self._unknown_user_key = unknown_user_key
        self._rng = rng
        self._state = _HANDSHAKE
        self._mechanism_name = ""
        self._mechanism: _PlainServer | _ScramStep | None = None

    @property
    def complete(self) -> bool:
        return self._state == _DONE

    def passes(self, frame: bytes) -> bool:
        """ApiVersions before the handshake: the dispatcher answers it (KIP-511 too)."""
        if self._state != _HANDSHAKE:
            return False
        try:
            return peek_header(frame).api_key == API_VERSIONS
        except KafkaCodecError:
            return False

    def handle(self, frame: bytes) -> tuple[bytes | None, str | None]:
        """(reply frame or None, reason to close after it or None)."""
        if self._state == _RAW:
            return self._raw_token(frame)
        try:
            header = peek_header(frame)
        except KafkaCodecError as exc:
            raise ConnectionClosed(str(exc)) from None
        expected = SASL_HANDSHAKE if self._state == _HANDSHAKE else SASL_AUTHENTICATE
        if header.api_key != expected:
            stage = "handshake" if self._state == _HANDSHAKE else "authentication"
            raise ConnectionClosed(f"unexpected Kafka request of api key {header.api_key} "
                                   f"during SASL {stage}: only ApiVersions, SaslHandshake "
                                   "and SaslAuthenticate before authenticating")
        try:
            request = parse_request(frame, {expected: _SASL_APIS[expected]})
        except KafkaCodecError as exc:
            raise ConnectionClosed(str(exc)) from None
        version, correlation_id = request.header.api_version, request.header.correlation_id
        response: SaslHandshakeResponse | SaslAuthenticateResponse
        if expected == SASL_HANDSHAKE:
            response, close = self._handshake(request.body.mechanism, version)
        else:
            response, close = self._authenticate(request.body.auth_bytes)
        return encode_response(correlation_id,
                               build(response_class(expected, version), response)), close

    # --- the steps --------------------------------------------------------------------

    def _handshake(self, mechanism: str, version: int
                   ) -> tuple[SaslHandshakeResponse, str | None]:
        enabled = list(self._settings.enabled_mechanisms)
        if mechanism not in enabled:
            return ({"error_code": int(ErrorCode.UNSUPPORTED_SASL_MECHANISM),
                     "mechanisms": enabled},
                    f"unsupported SASL mechanism {mechanism!r} (enabled: {', '.join(enabled)})")
        self._mechanism_name = mechanism
        if mechanism == PLAIN:
            self._mechanism = _PlainServer(self._settings.plain_users)
        else:
            self._mechanism = _ScramStep(ScramServer(
                SCRAM_MECHANISMS[mechanism], self._scram_credential,
                unknown_user_key=self._unknown_user_key(), rng=self._rng))
        self._state = _AUTHENTICATE if version >= 1 else _RAW
        return {"error_code": 0, "mechanisms": enabled}, None

    def _scram_credential(self, user: str) -> ScramCredential | None:
        found = self._credentials().get((user, self._mechanism_name))
        if found is None:
            return None
        return ScramCredential(salt=found.salt, stored_key=found.stored_key,
                               server_key=found.server_key, iterations=found.iterations)

    def _step(self, token: bytes) -> bytes:
        assert self._mechanism is not None
        reply = self._mechanism.step(token)
        if self._mechanism.complete:
            username = self._mechanism.username
            assert username is not None
            self._session.principal = KafkaPrincipal("User", username)
            self._session.sasl_mechanism = self._mechanism_name
            self._state = _DONE
            log.info("SASL authenticated", extra={
                "principal": str(self._session.principal), "mechanism": self._mechanism_name,
                "client_host": self._session.client_host})
        return reply

    def _authenticate(self, token: bytes) -> tuple[SaslAuthenticateResponse, str | None]:
        try:
            reply = self._step(token)
        except SaslFailed as exc:
            self._log_failure(str(exc))
            return {"error_code": int(ErrorCode.SASL_AUTHENTICATION_FAILED),
                    "error_message": str(exc), "auth_bytes": b""}, str(exc)
        return {"error_code": 0, "error_message": None, "auth_bytes": reply,
                "session_lifetime": 0}, None

    def _raw_token(self, token: bytes) -> tuple[bytes | None, str | None]:
        try:
            reply = self._step(token)
        except SaslFailed as exc:
            self._log_failure(str(exc))
            raise ConnectionClosed(f"SASL authentication failed: {exc}") from None
        return framed(reply), None

    def _log_failure(self, reason: str) -> None:
        username = None if self._mechanism is None else self._mechanism.username
        log.info("SASL authentication failed", extra={
            "user": username, "mechanism": self._mechanism_name, "reason": reason,
            "client_host": self._session.client_host})


# --- after authentication, or on a listener without SASL ------------------------------


async def handle_sasl_handshake_request(context: BrokerContext, request: Any,
                                        version: int) -> SaslHandshakeResponse:
    return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": []}


async def handle_sasl_authenticate_request(context: BrokerContext, request: Any,
                                           version: int) -> SaslAuthenticateResponse:
    return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE),
            "error_message": "SaslAuthenticate outside a SASL exchange: this connection is "
                             "authenticated already, or its listener has no SASL",
            "auth_bytes": b""}
