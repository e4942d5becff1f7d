"""broker.kafka.sasl.scram: the RFC 7677 SCRAM-SHA-256 test vector on both sides, SHA-512
round trips, and the refusals (a wrong proof, a nonce that is not this exchange's, a
replayed client-final, an unknown user that looks like a known one)."""

from __future__ import annotations

import base64
import random

import pytest

from broker.kafka.sasl import scram

# RFC 7677 section 3: user "user", password "pencil"
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = "W22ZaJ0SNY7soEsUEjb6gQ=="
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
KEY = scram.unknown_user_key(b"test cluster secret")


class ScriptedNonces(random.Random):
    """A Random whose choice() spells out `text`, one character per call."""

    def __init__(self, text: str) -> None:
        super().__init__(0)
        self._chars = iter(text)

    def choice(self, seq: object) -> str:  # type: ignore[override]
        return next(self._chars)


def rfc_credential() -> scram.ScramCredential:
    return scram.credential_from_password(scram.SCRAM_SHA_256, "pencil",
                                          salt=base64.b64decode(RFC_SALT), iterations=4096)


def rfc_server() -> scram.ScramServer:
    credential = rfc_credential()
    return scram.ScramServer(scram.SCRAM_SHA_256,
                             lambda name: credential if name == "user" else None,
                             unknown_user_key=KEY, rng=ScriptedNonces(RFC_SERVER_NONCE),
                             nonce_length=len(RFC_SERVER_NONCE))


def test_server_answers_the_rfc_7677_vector_when_given_its_messages() -> None:
    server = rfc_server()
    assert server.first(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.username == "user"
    assert server.complete


def test_client_sends_the_rfc_7677_vector_when_given_its_nonce() -> None:
    client = scram.ScramClient(scram.SCRAM_SHA_256, "user", "pencil",
                               rng=ScriptedNonces(RFC_CLIENT_NONCE),
                               nonce_length=len(RFC_CLIENT_NONCE))
    assert client.first() == RFC_CLIENT_FIRST
    assert client.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify(RFC_SERVER_FINAL)  # raises unless the server's signature verifies


def test_client_refuses_the_server_when_its_signature_is_wrong() -> None:
    client = scram.ScramClient(scram.SCRAM_SHA_256, "user", "pencil",
                               rng=ScriptedNonces(RFC_CLIENT_NONCE),
                               nonce_length=len(RFC_CLIENT_NONCE))
    client.first()
    client.final(RFC_SERVER_FIRST)
    with pytest.raises(scram.ScramAuthenticationError, match="does not verify"):
        client.verify(b"v=" + b"A" * 43 + b"=")


@pytest.mark.parametrize("mechanism", [scram.SCRAM_SHA_256, scram.SCRAM_SHA_512])
def test_exchange_succeeds_when_client_and_server_share_the_password(
        mechanism: scram.ScramMechanism) -> None:
    rng = random.Random(7)
    credential = scram.credential_from_password(mechanism, "s3cret, with = signs",
                                                salt=scram.make_salt(rng), iterations=4096)
    server = scram.ScramServer(mechanism, {"al,i=ce": credential}.get, unknown_user_key=KEY,
                               rng=rng)
    client = scram.ScramClient(mechanism, "al,i=ce", "s3cret, with = signs", rng=rng)
    client.verify(server.final(client.final(server.first(client.first()))))
    assert server.username == "al,i=ce"


@pytest.mark.parametrize("mechanism", [scram.SCRAM_SHA_256, scram.SCRAM_SHA_512])
def test_server_refuses_the_proof_when_the_password_is_wrong(
        mechanism: scram.ScramMechanism) -> None:
    rng = random.Random(8)
    credential = scram.credential_from_password(mechanism, "right", salt=b"salt" * 4,
                                                iterations=4096)
    server = scram.ScramServer(mechanism, {"alice": credential}.get, unknown_user_key=KEY, rng=rng)
    client = scram.ScramClient(mechanism, "alice", "wrong", rng=rng)
    final = client.final(server.first(client.first()))
    with pytest.raises(scram.ScramAuthenticationError,
                       match=f"invalid credentials with SASL mechanism {mechanism.name}"):
        server.final(final)
    assert not server.complete


def test_server_refuses_a_client_final_when_it_was_made_for_another_exchange() -> None:
    """A replayed client-final (a valid proof, from an earlier exchange) carries that
    exchange's nonce: a new exchange has a new server nonce, and refuses it."""
    rng = random.Random(9)
    credential = scram.credential_from_password(scram.SCRAM_SHA_256, "pw", salt=b"s" * 16,
                                                iterations=4096)
    first_server = scram.ScramServer(scram.SCRAM_SHA_256, {"bob": credential}.get,
                                     unknown_user_key=KEY, rng=rng)
    client = scram.ScramClient(scram.SCRAM_SHA_256, "bob", "pw", rng=rng)
    client_first = client.first()
    recorded_final = client.final(first_server.first(client_first))
    first_server.final(recorded_final)  # the original exchange succeeds

    replay_server = scram.ScramServer(scram.SCRAM_SHA_256, {"bob": credential}.get,
                                      unknown_user_key=KEY, rng=rng)
    replay_server.first(client_first)  # the same client-first, replayed
    with pytest.raises(scram.ScramAuthenticationError, match="nonce is not this exchange's"):
        replay_server.final(recorded_final)
    with pytest.raises(scram.ScramAuthenticationError, match="out of order"):
        first_server.final(recorded_final)  # nor twice on the one that succeeded


def test_server_answers_an_unknown_user_like_a_known_one_then_refuses_the_proof() -> None:
    rng = random.Random(10)
    server = scram.ScramServer(scram.SCRAM_SHA_512, lambda name: None, unknown_user_key=KEY,
                               rng=rng)
    client = scram.ScramClient(scram.SCRAM_SHA_512, "mallory", "guess", rng=rng)
    server_first = server.first(client.first())
    assert server_first.count(b",") == 2
    assert b",i=4096" in server_first
    salt = base64.b64decode(server_first.split(b",s=")[1].split(b",")[0])
    assert salt == scram.unknown_user_salt(KEY, scram.SCRAM_SHA_512, "mallory")
    with pytest.raises(scram.ScramAuthenticationError, match="invalid credentials"):
        server.final(client.final(server_first))


@pytest.mark.parametrize(("message", "reason"), [
    (b"p=tls-unique,,n=user,r=abc", "expected 'n,"),
    (b"n,,r=abc,n=user", "expected n=user,r=nonce"),
    (b"n,,n=user,r=abc,x=ext", "extensions are not supported"),
    (b"n,,n=us=er,r=abc", "bad '=' escape"),
    (b"n,,n=user,r=", "empty nonce"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_server_refuses_a_client_first_message_when_it_is_malformed(
        message: bytes, reason: str) -> None:
    server = scram.ScramServer(scram.SCRAM_SHA_256, lambda name: None,
                               unknown_user_key=KEY, rng=random.Random(1))
    with pytest.raises(scram.ScramAuthenticationError, match=reason):
        server.first(message)


def test_unknown_user_salt_is_fixed_per_name_mechanism_and_key_when_derived() -> None:
    salt = scram.unknown_user_salt(KEY, scram.SCRAM_SHA_256, "mallory")
    assert len(salt) == scram.SALT_BYTES == len(scram.make_salt(random.Random(1)))
    assert salt == scram.unknown_user_salt(KEY, scram.SCRAM_SHA_256, "mallory")
    assert salt != scram.unknown_user_salt(KEY, scram.SCRAM_SHA_256, "mallory2")
    assert salt != scram.unknown_user_salt(KEY, scram.SCRAM_SHA_512, "mallory")
    assert salt != scram.unknown_user_salt(scram.unknown_user_key(b"other"),
                                           scram.SCRAM_SHA_256, "mallory")


def test_stored_values_hold_no_salted_password_when_a_credential_is_made() -> None:
    """What the log keeps cannot log in by itself: neither StoredKey nor ServerKey is
    the salted password (a client needs ClientKey, which StoredKey only hashes)."""
    salt = b"x" * 16
    salted = scram.salted_password(scram.SCRAM_SHA_256, "pw", salt, 4096)
    credential = scram.credential_from_salted_password(scram.SCRAM_SHA_256, salt=salt,
                                                       salted=salted, iterations=4096)
    assert salted not in (credential.stored_key, credential.server_key)
    assert credential == scram.credential_from_password(scram.SCRAM_SHA_256, "pw", salt=salt,
                                                        iterations=4096)
