"""Who is on the other end of a connection: Kafka's `KafkaPrincipal` and the session a
listener keeps per connection.

Every listener (the raft transport's controller listener, the broker's Kafka listener)
serves each connection in its own Trio task. It binds a `Session` for that task with
`bind_session` once it knows who connected (the TLS peer certificate, a SASL exchange);
request handlers read it with `current_session()`. A context variable rather than a
parameter on every handler: Trio copies the context into each task, so the binding is
private to its connection, and the dozens of handlers keep their signatures. A handler
that hands work to another task reads the session first and passes the principal on.

Without TLS or SASL a connection's principal is `User:ANONYMOUS`, as in Kafka.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

__all__ = ["ANONYMOUS", "KafkaPrincipal", "Session", "bind_session", "current_session"]


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """`type:name`, e.g. `User:alice`; compared by both parts, as Kafka's ACLs are."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice` -> KafkaPrincipal("User", "alice"); ValueError without a type."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"principal {text!r} is not TYPE:NAME (e.g. User:alice)")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")


@dataclass(slots=True)
class Session:
    """One connection's identity. `principal` changes at most once, when TLS or SASL
    authenticates the peer; the other fields say how."""

    principal: KafkaPrincipal = ANONYMOUS
    client_host: str = ""
    security_protocol: str = "PLAINTEXT"
    tls_peer_subject: str | None = None  # the peer certificate's subject DN (mutual TLS)
    sasl_mechanism: str | None = None  # e.g. SCRAM-SHA-256 once authenticated
    attributes: dict[str, object] = field(default_factory=dict)


_SESSION: contextvars.ContextVar[Session] = contextvars.ContextVar("kraft_session")


def bind_session(session: Session) -> None:
    """Make `session` this task's (and its future child tasks') current session."""
    _SESSION.set(session)


def current_session() -> Session:
    """The session bound by this connection's listener; an anonymous one where no
    listener bound any (in-process calls, tests)."""
    try:
        return _SESSION.get()
    except LookupError:
        return Session()
