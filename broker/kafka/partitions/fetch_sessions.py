"""KIP-227 incremental fetch sessions between replicas, both sides (pure: the leader's
session ids come from an injected source).

A follower's first Fetch is full (every partition it follows from that leader) with
`session_epoch` 0 (INITIAL): the leader opens a session, remembers each partition's
fetch fields and answers with the session's id. Each later Fetch carries that id and the
next epoch (1, 2, ..., wrapping to 1) and only the partitions whose fetch fields changed,
plus the ones to forget; the leader answers only the partitions with something new:
records, an error, a divergence, or a high watermark or log start other than the one it
last answered (`is_news`). An idle follower's Fetch carries no partition either way, so
its cost does not grow with the partitions it follows.

Kafka's rules (its FetchManager): epoch -1 (FINAL) is a full fetch without a session and
closes the session it names; epoch 0 with an id closes that session and opens a new one;
an unknown id answers FETCH_SESSION_ID_NOT_FOUND, a known id with another epoch
INVALID_FETCH_SESSION_EPOCH, and on either the follower forgets its session and sends a
full fetch. A session answers only its own follower's fetches: a follower has one
fetcher per leader, so its new session replaces its older one and the cache holds at
most one session per follower. Only followers (`replica_id >= 0`, Fetch v13, by topic
ID) get a session; a consumer asking for one is answered with session id 0, a full fetch
without a session (as Kafka answers when its cache has no room), so clients fetch as
before.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from raft.common.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 0x7FFFFFFF

# (topic ID as the wire carries it, partition)
PartitionKey = tuple[uuid.UUID, int]
# what a follower's fetch of a partition says: (fetch offset, last fetched epoch, log
# start, current leader epoch)
FetchFields = tuple[int, int, int, int]


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`: 1, 2, ... wrapping to 1 (0 and -1 are reserved)."""
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass(slots=True, eq=False)
class SessionPartition:
    """A partition in a leader's session: the follower's last fetch of it (the request's
    partition entry), the (high watermark, log start) last answered, and what the shell
    resolved it to under which image (`opened`, the shell's to reuse while the image is
    the same)."""

    fetch: Any
    answered: tuple[int, int] | None = None
    opened: tuple[object, Any] | None = None


@dataclass(slots=True, eq=False)
class FetchSession:
    session_id: int
    replica_id: int
    epoch: int  # the epoch the follower's next fetch must carry
    partitions: dict[PartitionKey, SessionPartition] = field(default_factory=dict)

    def update(self, topics: Iterable[Any], forgotten: Iterable[Any]) -> None:
        """Apply a fetch's partitions (added or updated) and its forgotten ones."""
        for topic in forgotten:
            for partition in topic.partitions:
                self.partitions.pop((topic.topic_id, int(partition)), None)
        for topic in topics:
            for part in topic.partitions:
                key = (topic.topic_id, int(part.partition))
                entry = self.partitions.get(key)
                if entry is None:
                    self.partitions[key] = SessionPartition(fetch=part)
                else:  # what it resolved to served the old fields, not these
                    entry.fetch, entry.opened = part, None

    def by_topic(self) -> dict[uuid.UUID, list[SessionPartition]]:
        topics: dict[uuid.UUID, list[SessionPartition]] = {}
        for (topic_id, _), entry in self.partitions.items():
            topics.setdefault(topic_id, []).append(entry)
        return topics


def is_news(entry: SessionPartition, answer: Mapping[str, Any]) -> bool:
    """Whether a partition's answer goes into an incremental response: records, an
    error, a divergence, or a moved high watermark or log start."""
    return (bool(answer.get("records")) or answer["error_code"] != 0
            or "diverging_epoch" in answer
            or entry.answered != (answer["high_watermark"], answer["log_start_offset"]))


class FetchSessionCache:
    """The leader's sessions, at most one per follower."""

    def __init__(self, new_id: Callable[[], int]) -> None:
        self._new_id = new_id  # a random positive int32 in production
        self._sessions: dict[int, FetchSession] = {}
        self._by_replica: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def begin(self, session_id: int, epoch: int, *, replica_id: int, may_open: bool
              ) -> tuple[ErrorCode, FetchSession | None, bool]:
        """(error, the session the fetch uses or None, whether the fetch is full). A new
        session's partitions are the full fetch's; an incremental fetch moves its
        session's epoch on."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self._close(session_id)
            if epoch == FINAL_EPOCH or not may_open:
                return ErrorCode.NONE, None, True
            return ErrorCode.NONE, self._open(replica_id), True
        session = self._sessions.get(session_id)
        if session is None or session.replica_id != replica_id:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND, None, False
        if session.epoch != epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, None, False
        session.epoch = next_epoch(epoch)
        return ErrorCode.NONE, session, False

    def _open(self, replica_id: int) -> FetchSession:
        previous = self._by_replica.get(replica_id)
        if previous is not None:
            self._close(previous)
        session_id = self._new_id()
        while session_id == INVALID_SESSION_ID or session_id in self._sessions:
            session_id = self._new_id()
        session = FetchSession(session_id=session_id, replica_id=replica_id,
                               epoch=next_epoch(INITIAL_EPOCH))
        self._sessions[session_id] = session
        self._by_replica[replica_id] = session_id
        return session

    def _close(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None and self._by_replica.get(session.replica_id) == session_id:
            del self._by_replica[session.replica_id]


@dataclass(slots=True)
class FollowerSession:
    """The follower's side of its session with one leader: the id and epoch its next
    fetch carries and the fields it last sent for each partition."""

    session_id: int = INVALID_SESSION_ID
    epoch: int = INITIAL_EPOCH
    sent: dict[PartitionKey, FetchFields] = field(default_factory=dict)

    def to_send(self, fields: Mapping[PartitionKey, FetchFields]
                ) -> tuple[dict[PartitionKey, FetchFields], list[PartitionKey]]:
        """(the partitions the next fetch carries, the ones it forgets): every one in a
        full fetch; in an incremental one those whose fields changed, and the ones no
        longer followed."""
        if self.session_id == INVALID_SESSION_ID:
            return dict(fields), []
        changed = {key: value for key, value in fields.items()
                   if self.sent.get(key) != value}
        return changed, [key for key in self.sent if key not in fields]

    def sent_fetch(self, carried: Mapping[PartitionKey, FetchFields],
                   forgotten: Iterable[PartitionKey]) -> None:
        """What the fetch just sent carried (the leader's session holds it now)."""
        if self.session_id == INVALID_SESSION_ID:
            self.sent.clear()
        self.sent.update(carried)
        for key in forgotten:
            self.sent.pop(key, None)

    def answered(self, error: ErrorCode, session_id: int) -> None:
        """The leader's answer: a session error (or none given) means a full fetch next;
        otherwise the session's next epoch."""
        if error != ErrorCode.NONE or session_id == INVALID_SESSION_ID:
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            self.sent.clear()
            return
        self.session_id, self.epoch = session_id, next_epoch(self.epoch)
