"""broker.kafka.sasl.sasl_api: the per-connection SASL state machine (only ApiVersions,
SaslHandshake and SaslAuthenticate before authenticating; UNSUPPORTED_SASL_MECHANISM and
SASL_AUTHENTICATION_FAILED then a close; Kafka's v0 raw-token mode; the session's
principal once authenticated), and a real listener on 127.0.0.1 against the client side
(broker.kafka.sasl.sasl_client)."""

from __future__ import annotations

import base64
import random
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.index import load_request_schema

from broker.kafka.listener import KafkaListener
from broker.kafka.sasl import sasl_api, sasl_client
from broker.kafka.sasl.sasl_settings import SaslClientSettings, SaslSettings
from broker.kafka.sasl.scram import (
    SALT_BYTES,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    credential_from_password,
    unknown_user_key,
)
from metadata.delta import replay
from metadata.image import MetadataImage
from metadata.records import MetadataTopic, UserScramCredential
from metadata.scram_credentials import ScramCredentialImage
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import ConnectionClosed, build
from raft.common.kafka.wire_client import decode_response, encode_request
from raft.common.session import ANONYMOUS, KafkaPrincipal, Session, current_session
from raft.common.uuid import Uuid
from tests.support.kafka_support import joined
from tests.unit.broker.test_kafka_listener import make_dispatcher

SETTINGS = SaslSettings(enabled_mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
                        plain_users={"bob": "bob-pw"})


def credentials() -> dict[tuple[str, str], ScramCredentialImage]:
    found = {}
    for mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
        c = credential_from_password(mechanism, "alice-secret", salt=b"NaCl" * 4,
                                     iterations=4096)
        # a salt as long as `kraft users` makes them (scram.make_salt)
        c = credential_from_password(mechanism, "alice-secret", salt=b"NaCl" * 8,
                                     iterations=4096)
        found[("alice", mechanism.name)] = ScramCredentialImage(
            name="alice", mechanism=mechanism.name, salt=c.salt, stored_key=c.stored_key,
            server_key=c.server_key, iterations=c.iterations)
    return found


UNKNOWN_USER_KEY = unknown_user_key(b"test cluster secret")


def authenticator(session: Session | None = None, *, rng_seed: int = 3,
                  key: bytes | None = UNKNOWN_USER_KEY) -> sasl_api.SaslAuthenticator:
    return sasl_api.SaslAuthenticator(SETTINGS, session or Session(),
                                      credentials=credentials, unknown_user_key=lambda: key,
                                      rng=random.Random(rng_seed))


def frame(api_key: int, version: int, values: dict[str, Any], correlation_id: int = 5
          ) -> bytes:
    return encode_request(build(load_request_schema(api_key, version), values),
                          correlation_id=correlation_id)[4:]


def answer(reply: bytes | None, api_key: int, version: int) -> Any:
    assert reply is not None
    _, body = decode_response(reply[4:], api_key, version)
    return body


def handshake(version: int, mechanism: str) -> bytes:
    return frame(17, version, {"mechanism": mechanism})


def authenticate(token: bytes, version: int = 2) -> bytes:
    return frame(36, version, {"auth_bytes": token})


def test_only_api_versions_passes_to_the_dispatcher_when_not_authenticated() -> None:
    sasl = authenticator()
    assert sasl.passes(frame(18, 3, {"client_software_name": "x",
                                     "client_software_version": "1"}))
    metadata = frame(3, 12, {"topics": None, "allow_auto_topic_creation": False})
    assert not sasl.passes(metadata)
    with pytest.raises(ConnectionClosed, match="api key 3 during SASL handshake"):
        sasl.handle(metadata)


def test_other_requests_close_the_connection_when_between_handshake_and_authenticate() -> None:
    sasl = authenticator()
    sasl.handle(handshake(1, "PLAIN"))
    assert not sasl.passes(frame(18, 3, {"client_software_name": "x",
                                         "client_software_version": "1"}))
    with pytest.raises(ConnectionClosed, match="during SASL authentication"):
        sasl.handle(frame(3, 12, {"topics": None, "allow_auto_topic_creation": False}))


def test_authenticate_before_handshake_closes_the_connection_when_sent() -> None:
    with pytest.raises(ConnectionClosed, match="api key 36 during SASL handshake"):
        authenticator().handle(authenticate(b"\0bob\0bob-pw"))


def test_unsupported_mechanism_gets_the_enabled_list_then_closes_when_asked() -> None:
    reply, close = authenticator().handle(handshake(1, "GSSAPI"))
    response = answer(reply, 17, 1)
    assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert list(response.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert close is not None
    assert "GSSAPI" in close


def test_plain_sets_the_principal_when_the_password_is_right() -> None:
    session = Session(security_protocol="SASL_PLAINTEXT")
    sasl = authenticator(session)
    reply, close = sasl.handle(handshake(1, "PLAIN"))
    assert answer(reply, 17, 1).error_code == ErrorCode.NONE
    assert close is None
    reply, close = sasl.handle(authenticate(b"\0bob\0bob-pw"))
    assert answer(reply, 36, 2).error_code == ErrorCode.NONE
    assert close is None
    assert sasl.complete
    assert session.principal == KafkaPrincipal("User", "bob")
    assert session.sasl_mechanism == "PLAIN"


@pytest.mark.parametrize("token", [b"\0bob\0wrong", b"\0nobody\0bob-pw", b"bob-pw",
                                   b"carol\0bob\0bob-pw"])
def test_plain_fails_and_closes_when_the_credentials_are_wrong(token: bytes) -> None:
    session = Session()
    sasl = authenticator(session)
    sasl.handle(handshake(1, "PLAIN"))
    reply, close = sasl.handle(authenticate(token, version=1))
    response = answer(reply, 36, 1)
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_message
    assert close is not None
    assert session.principal == ANONYMOUS
    assert not sasl.complete


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_scram_sets_the_principal_when_the_proof_is_right(mechanism: Any) -> None:
    session = Session()
    sasl = authenticator(session)
    sasl.handle(handshake(1, mechanism.name))
    client = ScramClient(mechanism, "alice", "alice-secret", rng=random.Random(4))
    reply, _ = sasl.handle(authenticate(client.first(), version=0))
    server_first = answer(reply, 36, 0).auth_bytes
    assert not sasl.complete
    reply, close = sasl.handle(authenticate(client.final(server_first), version=0))
    client.verify(answer(reply, 36, 0).auth_bytes)
    assert close is None
    assert session.principal == KafkaPrincipal("User", "alice")
    assert session.sasl_mechanism == mechanism.name


def test_scram_fails_with_sasl_authentication_failed_when_the_password_is_wrong() -> None:
    sasl = authenticator()
    sasl.handle(handshake(1, "SCRAM-SHA-256"))
    client = ScramClient(SCRAM_SHA_256, "alice", "not-it", rng=random.Random(4))
    reply, _ = sasl.handle(authenticate(client.first()))
    reply, close = sasl.handle(authenticate(client.final(answer(reply, 36, 2).auth_bytes)))
    response = answer(reply, 36, 2)
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in response.error_message
    assert close is not None


def test_v0_handshake_exchanges_raw_tokens_when_the_client_asks_for_it() -> None:
    """Kafka's v0 mode: after SaslHandshake v0 the tokens travel size-prefixed, with no
    Kafka header, and a failure closes the connection without an answer."""
    session = Session()
    sasl = authenticator(session)
    reply, _ = sasl.handle(handshake(0, "SCRAM-SHA-512"))
    assert answer(reply, 17, 0).error_code == ErrorCode.NONE
    client = ScramClient(SCRAM_SHA_512, "alice", "alice-secret", rng=random.Random(5))
    reply, _ = sasl.handle(client.first())
    assert reply is not None
    assert int.from_bytes(reply[:4], "big") == len(reply) - 4
    reply, _ = sasl.handle(client.final(reply[4:]))
    assert reply is not None
    client.verify(reply[4:])
    assert session.principal == KafkaPrincipal("User", "alice")

    failing = authenticator()
    failing.handle(handshake(0, "PLAIN"))
    with pytest.raises(ConnectionClosed, match="Invalid username or password"):
        failing.handle(b"\0bob\0wrong")


async def test_handshake_after_authentication_gets_illegal_sasl_state_when_sent(
        tmp_path: Path) -> None:
    """No re-authentication: the dispatcher's handlers answer ILLEGAL_SASL_STATE (also on
    a listener without SASL)."""
    dispatcher = make_dispatcher(tmp_path)
    reply = joined(await dispatcher.handle_frame(handshake(1, "PLAIN")))
    assert answer(reply, 17, 1).error_code == ErrorCode.ILLEGAL_SASL_STATE
    reply = joined(await dispatcher.handle_frame(authenticate(b"\0bob\0bob-pw")))
    assert answer(reply, 36, 2).error_code == ErrorCode.ILLEGAL_SASL_STATE


# --- an unknown SCRAM user ------------------------------------------------------------


def server_first_fields(user: str, *, rng_seed: int = 3, key: bytes | None = UNKNOWN_USER_KEY,
                        mechanism: Any = SCRAM_SHA_256) -> dict[str, str]:
    """The server-first message's attributes for `user`, on a new connection."""
    sasl = authenticator(rng_seed=rng_seed, key=key)
    sasl.handle(handshake(1, mechanism.name))
    client = ScramClient(mechanism, user, "guess", rng=random.Random(rng_seed))
    reply, close = sasl.handle(authenticate(client.first()))
    response = answer(reply, 36, 2)
    assert (response.error_code, close) == (0, None)
    return dict(part.split("=", 1) for part in response.auth_bytes.decode().split(","))


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_unknown_user_gets_the_same_salt_and_iterations_when_asked_twice(
        mechanism: Any) -> None:
    first = server_first_fields("mallory", rng_seed=5, mechanism=mechanism)
    again = server_first_fields("mallory", rng_seed=6, mechanism=mechanism)
    assert first["r"] != again["r"]  # two exchanges: only the nonce differs
    assert (first["s"], first["i"]) == (again["s"], again["i"])
    assert first["i"] == "4096"


def test_unknown_users_get_different_salts_when_their_names_differ() -> None:
    assert server_first_fields("mallory")["s"] != server_first_fields("trudy")["s"]
    assert server_first_fields("mallory", mechanism=SCRAM_SHA_256)["s"] != \
        server_first_fields("mallory", mechanism=SCRAM_SHA_512)["s"]


def test_unknown_user_salt_differs_when_another_cluster_asks() -> None:
    other = unknown_user_key(b"another cluster secret")
    assert server_first_fields("mallory")["s"] != server_first_fields("mallory", key=other)["s"]


def test_unknown_user_answer_is_shaped_as_a_known_users_when_asked() -> None:
    known, unknown = server_first_fields("alice"), server_first_fields("mallory")
    assert list(known) == list(unknown) == ["r", "s", "i"]
    assert len(base64.b64decode(known["s"])) == len(base64.b64decode(unknown["s"])) \
        == SALT_BYTES
    assert len(known["r"]) == len(unknown["r"])
    assert known["i"] == unknown["i"] == "4096"


@pytest.mark.parametrize("user", ["alice", "mallory"])
def test_scram_is_refused_alike_for_every_user_when_the_broker_has_no_key(user: str) -> None:
    sasl = authenticator(key=None)
    sasl.handle(handshake(1, "SCRAM-SHA-256"))
    client = ScramClient(SCRAM_SHA_256, user, "alice-secret", rng=random.Random(4))
    reply, close = sasl.handle(authenticate(client.first()))
    response = answer(reply, 36, 2)
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_message == ("SCRAM-SHA-256 is not served yet: this broker has not "
                                      "loaded the cluster's metadata")
    assert close is not None


def test_unknown_user_key_comes_from_the_metadata_topic_id_when_the_image_has_it() -> None:
    topic_id = Uuid.random()
    image = replay(enumerate([MetadataTopic(topic_id=topic_id)]))
    assert sasl_api.unknown_user_key_of(MetadataImage()) is None
    assert sasl_api.unknown_user_key_of(image) == unknown_user_key(topic_id.to_bytes())
    assert sasl_api.unknown_user_key_of(image) != sasl_api.unknown_user_key_of(
        replay(enumerate([MetadataTopic(topic_id=Uuid.random())])))


# --- a real listener on 127.0.0.1 ------------------------------------------------------


def image_with_alice() -> MetadataImage:
    """A log as the first leader starts it (the metadata topic's ID), then alice."""
    return replay(enumerate([MetadataTopic(topic_id=Uuid.random()), *(UserScramCredential(
        name=c.name, mechanism=c.mechanism, salt=c.salt, stored_key=c.stored_key,
        server_key=c.server_key, iterations=c.iterations) for c in credentials().values())]))


async def test_listener_serves_a_client_only_once_it_logs_in_when_sasl_is_on(
        tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path, image_with_alice())
    seen: list[Session] = []

    async def spy(context: Any, body: Any, version: int) -> Any:  # who the handler sees
        seen.append(current_session())
        return await original(context, body, version)

    original = dispatcher.handlers[3]
    dispatcher.handlers[3] = spy
    listener = KafkaListener(dispatcher, ("127.0.0.1", 0))
    listener.sasl = SETTINGS
    metadata = encode_request(build(load_request_schema(3, 12), {
        "topics": None, "allow_auto_topic_creation": False}), correlation_id=77)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(listener.serve)
        # logged in: Metadata is served, and its handler sees User:alice
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await sasl_client.authenticate(stream, SaslClientSettings(
            mechanism="SCRAM-SHA-512", username="alice", password="alice-secret"),
            rng=random.Random(6))
        await stream.send_all(metadata)
        assert await stream.receive_some(4)
        assert [str(s.principal) for s in seen] == ["User:alice"]
        await stream.aclose()
        # a wrong password: refused, and the connection closed
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        with pytest.raises(sasl_client.SaslClientError, match="SASL_AUTHENTICATION_FAILED"):
            await sasl_client.authenticate(stream, SaslClientSettings(
                mechanism="SCRAM-SHA-256", username="alice", password="wrong"),
                rng=random.Random(7))
        assert await stream.receive_some(1) == b""
        await stream.aclose()
        # no SASL at all: the first Metadata closes the connection unanswered
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(metadata)
        assert await stream.receive_some(1) == b""
        await stream.aclose()
        nursery.cancel_scope.cancel()
    assert len(seen) == 1


async def read_frame(stream: trio.abc.Stream) -> bytes:
    data = b""
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk = await stream.receive_some(65536)
        assert chunk, "closed by the broker"
        data += chunk
    return data[4:]


async def test_listener_takes_raw_tokens_after_a_v0_handshake_when_a_client_asks(
        tmp_path: Path) -> None:
    """Kafka's v0 mode over a real connection: SaslHandshake v0, then the SCRAM tokens
    size-prefixed with no Kafka header, then ordinary requests."""
    listener = KafkaListener(make_dispatcher(tmp_path, image_with_alice()), ("127.0.0.1", 0))
    listener.sasl = SETTINGS
    async with trio.open_nursery() as nursery:
        port = await nursery.start(listener.serve)
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(encode_request(build(load_request_schema(17, 0),
                                                   {"mechanism": "SCRAM-SHA-256"})))
        _, handshake_answer = decode_response(await read_frame(stream), 17, 0)
        assert handshake_answer.error_code == ErrorCode.NONE
        client = ScramClient(SCRAM_SHA_256, "alice", "alice-secret", rng=random.Random(8))
        first = client.first()
        await stream.send_all(len(first).to_bytes(4, "big") + first)
        final = client.final(await read_frame(stream))
        await stream.send_all(len(final).to_bytes(4, "big") + final)
        client.verify(await read_frame(stream))
        await stream.send_all(encode_request(build(load_request_schema(3, 12), {
            "topics": None, "allow_auto_topic_creation": False}), correlation_id=9))
        correlation_id, _ = decode_response(await read_frame(stream), 3, 12)
        assert correlation_id == 9
        await stream.aclose()
        nursery.cancel_scope.cancel()
