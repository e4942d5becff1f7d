"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): both sides of the exchange, pure.

What the metadata log stores for a user and mechanism is a `ScramCredential`: the salt,
the iteration count, `StoredKey = H(HMAC(SaltedPassword, "Client Key"))` and
`ServerKey = HMAC(SaltedPassword, "Server Key")`, as Kafka stores them; never the
password, and never `SaltedPassword` (a client that knows it could log in).
`credential_from_salted_password` makes one from what a client's
AlterUserScramCredentials carries (KIP-554: the client salts and hashes, the password
never leaves it).

`ScramServer` checks a client: `first(client_first)` -> server-first (our nonce appended
to the client's), then `final(client_final)` -> server-final (`v=` the server signature),
or `ScramAuthenticationError`. Every failure after the client-first message (wrong
proof, a nonce that is not this exchange's, an unknown user) looks the same to the
client. The first answer does not say whether the user exists either: an unknown user
gets the mechanism's default iteration count (4096) and a salt made up from its name,
`unknown_user_salt`, as Kafka's ScramSaslServer does. That salt is an HMAC of the name
under a key every broker of the cluster holds (`unknown_user_key`), so asking twice, or
asking another broker, or asking after a restart gets the same salt, as a real user's
would; without the key it cannot be told from a random one. A server without the key
refuses every client-first message alike, known user or not. Proofs are compared with
`hmac.compare_digest`.

`ScramClient` is the other side, for a broker's own connections to another broker's SASL
listener (`broker.kafka.sasl.sasl_client`) and for tests. Nonces come from the `random.Random`
passed in (`secrets.SystemRandom()` in production), so tests can fix them.

Kafka's extensions (`tokenauth=true` for delegation tokens) are not supported: a
client-first message carrying any is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MECHANISMS", "SCRAM_SHA_256", "SCRAM_SHA_512", "ScramAuthenticationError",
           "ScramClient", "ScramCredential", "ScramMechanism", "ScramServer",
           "credential_from_password", "credential_from_salted_password", "make_nonce",
           "salted_password", "unknown_user_key", "unknown_user_salt"]

_NONCE_ALPHABET = ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                   "+/!#$%&()*-.:;<>?@[]^_{|}~")  # printable, no ','  (RFC 5802 "printable")
NONCE_LENGTH = 32
SALT_BYTES = 32  # what `make_salt` gives a new credential, and an unknown user's salt
_UNKNOWN_USER_KEY_LABEL = b"kraft-py SCRAM unknown-user salt key"


class ScramAuthenticationError(Exception):
    """The exchange failed; the message is what the client is told."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramMechanism:
    """One SCRAM mechanism: its SASL name, its hash, and Kafka's numbers for it."""

    name: str  # the SASL mechanism name, e.g. SCRAM-SHA-256
    hash_name: str  # hashlib's name
    kafka_type: int  # Kafka's ScramMechanism type byte (AlterUserScramCredentials)
    min_iterations: int = 4096  # RFC 7677's minimum, Kafka's too
    max_iterations: int = 16384  # Kafka refuses more (AlterUserScramCredentials)

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()


SCRAM_SHA_256 = ScramMechanism(name="SCRAM-SHA-256", hash_name="sha256", kafka_type=1)
SCRAM_SHA_512 = ScramMechanism(name="SCRAM-SHA-512", hash_name="sha512", kafka_type=2)
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MECHANISMS_BY_TYPE: dict[int, ScramMechanism] = {m.kafka_type: m for m in MECHANISMS.values()}


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredential:
    """What the server keeps for a user and mechanism (RFC 5802 section 3)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes,
                    iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i): PBKDF2 with the mechanism's HMAC. The password
    is taken as UTF-8 without SASLprep, as Kafka's ScramFormatter does."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def credential_from_salted_password(mechanism: ScramMechanism, *, salt: bytes,
                                    salted: bytes, iterations: int) -> ScramCredential:
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredential(salt=salt, stored_key=mechanism.hash(client_key),
                           server_key=mechanism.hmac(salted, b"Server Key"),
                           iterations=iterations)


def credential_from_password(mechanism: ScramMechanism, password: str, *, salt: bytes,
                             iterations: int) -> ScramCredential:
    return credential_from_salted_password(
        mechanism, salt=salt, salted=salted_password(mechanism, password, salt, iterations),
        iterations=iterations)


def make_nonce(rng: random.Random, length: int = NONCE_LENGTH) -> str:
    return "".join(rng.choice(_NONCE_ALPHABET) for _ in range(length))


def make_salt(rng: random.Random, size: int = SALT_BYTES) -> bytes:
    return rng.getrandbits(size * 8).to_bytes(size, "big")


def unknown_user_key(cluster_secret: bytes) -> bytes:
    """The key unknown users' salts are made with, from a secret every broker of the
    cluster holds and no client can read (`broker.kafka.sasl.sasl_api.unknown_user_key_of`
    says which); labelled, so the secret itself is never an HMAC key elsewhere."""
    return hmac.new(cluster_secret, _UNKNOWN_USER_KEY_LABEL, "sha256").digest()


def unknown_user_salt(key: bytes, mechanism: ScramMechanism, username: str) -> bytes:
    """The salt an unknown user is answered with: fixed for a name and a mechanism,
    different for another name, SALT_BYTES long like a new credential's."""
    message = mechanism.name.encode() + b"\0" + username.encode()
    return hmac.new(key, message, "sha256").digest()[:SALT_BYTES]


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ScramAuthenticationError(f"invalid SCRAM message: {what} is not base64") from None


def escape_username(name: str) -> str:
    """RFC 5802 saslname: ',' and '=' as =2C and =3D."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(text: str) -> str:
    if "=" in text.replace("=2C", "").replace("=3D", ""):
        raise ScramAuthenticationError("invalid SCRAM message: bad '=' escape in the user name")
    return text.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    pairs = []
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramAuthenticationError(f"invalid SCRAM {what}: {part!r} is not a=value")
        pairs.append((key, value))
    return pairs


def _decode(message: bytes, what: str) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramAuthenticationError(f"invalid SCRAM {what}: not UTF-8") from None


CredentialLookup = Callable[[str], "ScramCredential | None"]


class ScramServer:
    """One server side of one exchange (see the module docstring)."""

    def __init__(self, mechanism: ScramMechanism, lookup: CredentialLookup, *,
                 unknown_user_key: bytes | None, rng: random.Random,
                 nonce_length: int = NONCE_LENGTH) -> None:
        self.mechanism = mechanism
        self._unknown_user_key = unknown_user_key  # None: every client-first is refused
        self._nonce_length = nonce_length
        self._lookup = lookup
        self._rng = rng
        self.username: str | None = None  # known after the client-first message
        self._credential: ScramCredential | None = None
        self._known_user = False
        self._nonce = ""
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self.complete = False

    def first(self, client_first: bytes) -> bytes:
        """The client's first message (gs2 header, n=user, r=nonce): our server-first."""
        if self._server_first:
            raise ScramAuthenticationError("SCRAM client-first message received twice")
        text = _decode(client_first, "client-first message")
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or (
                parts[1] and not parts[1].startswith("a=")):
            # "p=..." asks for channel binding, which Kafka does not offer either
            raise ScramAuthenticationError(
                "invalid SCRAM client-first message: expected 'n,[a=authzid],n=user,r=nonce'")
        self._gs2_header = f"{parts[0]},{parts[1]},"
        self._client_first_bare = parts[2]
        attributes = _attributes(parts[2], "client-first message")
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise ScramAuthenticationError(
                "invalid SCRAM client-first message: expected n=user,r=nonce")
        if len(attributes) > 2:
            raise ScramAuthenticationError("SCRAM extensions are not supported")
        username = unescape_username(attributes[0][1])
        authzid = parts[1][2:]
        if authzid and unescape_username(authzid) != username:
            raise ScramAuthenticationError(
                f"authorization id {authzid!r} is not the user name {username!r}")
        client_nonce = attributes[1][1]
        if not client_nonce:
            raise ScramAuthenticationError("invalid SCRAM client-first message: empty nonce")
        if self._unknown_user_key is None:  # before the lookup: the same for every user
            raise ScramAuthenticationError(
                f"{self.mechanism.name} is not served yet: this broker has not loaded the "
                "cluster's metadata")
        self.username = username
        credential = self._lookup(username)
        self._known_user = credential is not None
        if credential is None:  # a made-up one: the answer looks like a real user's
            credential = ScramCredential(
                salt=unknown_user_salt(self._unknown_user_key, self.mechanism, username),
                stored_key=make_salt(self._rng), server_key=make_salt(self._rng),
                iterations=self.mechanism.min_iterations)
        self._credential = credential
        self._nonce = client_nonce + make_nonce(self._rng, self._nonce_length)
        self._server_first = (f"r={self._nonce},s={_b64(credential.salt)},"
                              f"i={credential.iterations}")
        return self._server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        """The client's proof: the server-final message (`v=` our signature), or
        ScramAuthenticationError."""
        credential = self._credential
        if credential is None or self.complete:
            raise ScramAuthenticationError("SCRAM client-final message out of order")
        text = _decode(client_final, "client-final message")
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramAuthenticationError("invalid SCRAM client-final message: no proof")
        attributes = dict(_attributes(without_proof, "client-final message"))
        if attributes.get("c") != _b64(self._gs2_header.encode()):
            raise ScramAuthenticationError("invalid SCRAM client-final message: channel "
                                           "binding differs from the client-first header")
        if not hmac.compare_digest(attributes.get("r", "").encode(), self._nonce.encode()):
            raise ScramAuthenticationError("invalid SCRAM client-final message: the nonce "
                                           "is not this exchange's")
        proof = _unb64(proof_part, "the proof")
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 without_proof)).encode()
        client_signature = self.mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise ScramAuthenticationError(self._invalid_credentials())
        client_key = _xor(proof, client_signature)
        if not (hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key)
                and self._known_user):
            raise ScramAuthenticationError(self._invalid_credentials())
        self.complete = True
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        return f"v={_b64(server_signature)}".encode()

    def _invalid_credentials(self) -> str:
        return ("Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self.mechanism.name}")


class ScramClient:
    """One client side of one exchange: `first()`, `final(server_first)`,
    `verify(server_final)`."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, *,
                 rng: random.Random, nonce_length: int = NONCE_LENGTH) -> None:
        self.mechanism = mechanism
        self._password = password
        self._nonce = make_nonce(rng, nonce_length)
        self._client_first_bare = f"n={escape_username(username)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = _decode(server_first, "server-first message")
        attributes = dict(_attributes(text, "server-first message"))
        nonce, salt_text, iterations_text = (attributes.get("r", ""), attributes.get("s"),
                                             attributes.get("i", ""))
        if "e" in attributes:
            raise ScramAuthenticationError(f"server error: {attributes['e']}")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ScramAuthenticationError("the server's nonce does not extend ours")
        if salt_text is None or not iterations_text.isdigit():
            raise ScramAuthenticationError("invalid SCRAM server-first message")
        iterations = int(iterations_text)
        if iterations < self.mechanism.min_iterations:
            raise ScramAuthenticationError(f"the server asks for {iterations} iterations, "
                                           f"below {self.mechanism.min_iterations}")
        salted = salted_password(self.mechanism, self._password, _unb64(salt_text, "the salt"),
                                 iterations)
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = ",".join((self._client_first_bare, text, without_proof)).encode()
        client_key = self.mechanism.hmac(salted, b"Client Key")
        signature = self.mechanism.hmac(self.mechanism.hash(client_key), auth_message)
        self._server_signature = self.mechanism.hmac(
            self.mechanism.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(_xor(client_key, signature))}".encode()

    def verify(self, server_final: bytes) -> None:
        """Raises ScramAuthenticationError unless the server proved it knows the key."""
        text = _decode(server_final, "server-final message")
        attributes = dict(_attributes(text, "server-final message"))
        if "e" in attributes:
            raise ScramAuthenticationError(f"server error: {attributes['e']}")
        expected = self._server_signature
        if expected is None or not hmac.compare_digest(
                _unb64(attributes.get("v", ""), "the server signature"), expected):
            raise ScramAuthenticationError("the server's signature does not verify")
