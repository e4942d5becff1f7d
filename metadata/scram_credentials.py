"""SCRAM credentials in the metadata image: what a `UserScramCredential` record holds once
replayed, and the rules replay and the controller check it against.

A credential is Kafka's: the salt, the iteration count and the two keys a SCRAM server
needs (`StoredKey`, `ServerKey`, RFC 5802), per user name and mechanism. The password,
and the salted password a client could log in with, are never in the log: the client
(`kraft users`, Kafka's admin client) salts and hashes, and the broker that forwards
an AlterUserScramCredentials turns the salted password into the two keys before it
reaches the controller (`broker.kafka.sasl.scram`).

The image keys them by (user, mechanism); `content_hash` and the snapshot records list
them sorted by that key.
"""

from __future__ import annotations

from dataclasses import dataclass

from metadata import records as rec

# mechanism name -> (Kafka's type byte, digest size in bytes): the keys are one digest long
SCRAM_MECHANISMS: dict[str, tuple[int, int]] = {
    "SCRAM-SHA-256": (1, 32),
    "SCRAM-SHA-512": (2, 64),
}
MECHANISM_BY_TYPE: dict[int, str] = {t: name for name, (t, _) in SCRAM_MECHANISMS.items()}
MIN_ITERATIONS = 4096  # RFC 7677, Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # Kafka refuses more in AlterUserScramCredentials


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredentialImage:
    name: str  # the user name (the principal is User:<name>)
    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @property
    def key(self) -> tuple[str, str]:
        return (self.name, self.mechanism)

    def canonical(self) -> list[object]:
        return [self.name, self.mechanism, self.salt, self.stored_key, self.server_key,
                self.iterations]

    def to_record(self) -> rec.UserScramCredential:
        return rec.UserScramCredential(
            name=self.name, mechanism=self.mechanism, salt=self.salt,
            stored_key=self.stored_key, server_key=self.server_key,
            iterations=self.iterations)


def invalid_credential_reason(record: rec.UserScramCredential) -> str | None:
    """Why replay skips `record` (an unknown mechanism, an empty name or salt, keys of
    the wrong length, iterations out of range), or None."""
    spec = SCRAM_MECHANISMS.get(record.mechanism)
    if spec is None:
        return f"unknown SCRAM mechanism {record.mechanism!r}"
    if not record.name:
        return "empty user name"
    if not record.salt:
        return "empty salt"
    digest_bytes = spec[1]
    if len(record.stored_key) != digest_bytes or len(record.server_key) != digest_bytes:
        return (f"{record.mechanism} keys must be {digest_bytes} bytes, got "
                f"{len(record.stored_key)} and {len(record.server_key)}")
    if not MIN_ITERATIONS <= record.iterations <= MAX_ITERATIONS:
        return (f"iterations {record.iterations} outside {MIN_ITERATIONS}.."
                f"{MAX_ITERATIONS}")
    return None


def from_record(record: rec.UserScramCredential) -> ScramCredentialImage:
    return ScramCredentialImage(
        name=record.name, mechanism=record.mechanism, salt=record.salt,
        stored_key=record.stored_key, server_key=record.server_key,
        iterations=record.iterations)
