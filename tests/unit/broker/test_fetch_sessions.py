"""broker.kafka.partitions.fetch_sessions: KIP-227's session ids and epochs on the
leader's side (pure), which partitions an incremental answer carries, and what the
follower's next fetch carries."""

from __future__ import annotations

import itertools
import uuid
from types import SimpleNamespace
from typing import Any

from broker.kafka.partitions.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSession,
    FetchSessionCache,
    FollowerSession,
    SessionPartition,
    is_news,
    next_epoch,
)
from raft.common.errors import ErrorCode

TOPIC = uuid.UUID(int=7)
OTHER = uuid.UUID(int=8)


def cache() -> FetchSessionCache:
    ids = itertools.count(100)
    return FetchSessionCache(lambda: next(ids))


def opened(sessions: FetchSessionCache, replica_id: int = 5) -> FetchSession:
    """A new session of `replica_id` (its full fetch at epoch 0)."""
    _, session, _ = sessions.begin(0, INITIAL_EPOCH, replica_id=replica_id, may_open=True)
    assert session is not None
    return session


def topic(topic_id: uuid.UUID, *partitions: int, offset: int = 0) -> Any:
    return SimpleNamespace(topic_id=topic_id, partitions=[
        SimpleNamespace(partition=p, fetch_offset=offset) for p in partitions])


def test_a_follower_full_fetch_at_epoch_zero_opens_a_session_expecting_epoch_one() -> None:
    sessions = cache()
    error, session, full = sessions.begin(0, INITIAL_EPOCH, replica_id=5, may_open=True)
    assert (error, full) == (ErrorCode.NONE, True)
    assert session is not None
    assert (session.session_id, session.epoch) == (100, 1)
    error, again, full = sessions.begin(100, 1, replica_id=5, may_open=True)
    assert (error, again, full) == (ErrorCode.NONE, session, False)
    assert session.epoch == 2


def test_no_session_when_the_fetcher_may_not_open_one() -> None:
    """A consumer asking for a session gets none: a full fetch, session id 0."""
    sessions = cache()
    assert sessions.begin(0, INITIAL_EPOCH, replica_id=-1, may_open=False) == \
        (ErrorCode.NONE, None, True)
    assert len(sessions) == 0


def test_unknown_session_id_answers_fetch_session_id_not_found() -> None:
    sessions = cache()
    assert sessions.begin(42, 1, replica_id=5, may_open=True) == \
        (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, None, False)


def test_another_followers_session_id_is_not_found() -> None:
    sessions = cache()
    session = opened(sessions)
    assert sessions.begin(session.session_id, 1, replica_id=6, may_open=True)[0] == \
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_wrong_epoch_answers_invalid_fetch_session_epoch_and_keeps_the_session() -> None:
    sessions = cache()
    session = opened(sessions)
    assert sessions.begin(session.session_id, 2, replica_id=5, may_open=True)[0] == \
        ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert sessions.begin(session.session_id, 1, replica_id=5, may_open=True)[0] == \
        ErrorCode.NONE


def test_final_epoch_closes_the_named_session_and_fetches_without_one() -> None:
    sessions = cache()
    session = opened(sessions)
    assert sessions.begin(session.session_id, FINAL_EPOCH, replica_id=5, may_open=True) == \
        (ErrorCode.NONE, None, True)
    assert len(sessions) == 0
    assert sessions.begin(session.session_id, 1, replica_id=5, may_open=True)[0] == \
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_epoch_zero_with_an_id_replaces_that_session() -> None:
    sessions = cache()
    first = opened(sessions)
    _, second, full = sessions.begin(first.session_id, INITIAL_EPOCH, replica_id=5,
                                     may_open=True)
    assert second is not None
    assert full
    assert second.session_id != first.session_id
    assert sessions.begin(first.session_id, 1, replica_id=5, may_open=True)[0] == \
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_followers_new_session_replaces_its_older_one() -> None:
    """One fetcher per leader: the cache holds one session per follower, however often
    it reconnects."""
    sessions = cache()
    for _ in range(5):
        sessions.begin(0, INITIAL_EPOCH, replica_id=5, may_open=True)
    sessions.begin(0, INITIAL_EPOCH, replica_id=6, may_open=True)
    assert len(sessions) == 2


def test_epochs_wrap_to_one_never_to_the_reserved_zero_or_minus_one() -> None:
    assert next_epoch(0x7FFFFFFF) == 1
    assert next_epoch(1) == 2


def test_update_adds_replaces_and_forgets_partitions() -> None:
    session = opened(cache())
    session.update([topic(TOPIC, 0, 1), topic(OTHER, 0)], [])
    entry = session.partitions[(TOPIC, 1)]
    entry.opened = (object(), "resolved")
    session.update([topic(TOPIC, 1, offset=9)], [SimpleNamespace(topic_id=OTHER,
                                                                 partitions=[0])])
    assert sorted(session.partitions) == [(TOPIC, 0), (TOPIC, 1)]
    assert session.partitions[(TOPIC, 1)] is entry
    assert entry.fetch.fetch_offset == 9
    assert entry.opened is None  # resolved for the old fields: not reused
    assert [len(ps) for ps in session.by_topic().values()] == [2]


def answer(**fields: Any) -> dict[str, Any]:
    return {"error_code": 0, "high_watermark": 5, "log_start_offset": 0, "records": None,
            **fields}


def test_news_is_records_errors_divergence_or_a_moved_high_watermark_or_log_start() -> None:
    entry = SessionPartition(fetch=None, answered=(5, 0))
    assert not is_news(entry, answer())
    assert is_news(entry, answer(records=b"x"))
    assert is_news(entry, answer(error_code=int(ErrorCode.NOT_LEADER_OR_FOLLOWER)))
    assert is_news(entry, answer(diverging_epoch={"epoch": 1, "end_offset": 3}))
    assert is_news(entry, answer(high_watermark=6))
    assert is_news(entry, answer(log_start_offset=2))
    assert is_news(SessionPartition(fetch=None), answer())  # never answered yet


def test_follower_sends_everything_until_a_session_then_only_changes_and_forgotten() -> None:
    follower = FollowerSession()
    fields = {(TOPIC, 0): (3, 1, 0, 2), (TOPIC, 1): (7, 1, 0, 2)}
    carried, forgotten = follower.to_send(fields)
    assert (carried, forgotten) == (fields, [])
    follower.sent_fetch(carried, forgotten)
    follower.answered(ErrorCode.NONE, 100)
    assert (follower.session_id, follower.epoch) == (100, 1)
    assert follower.to_send(fields) == ({}, [])  # idle: nothing carried
    moved = {(TOPIC, 0): (4, 1, 0, 2)}
    carried, forgotten = follower.to_send(moved)
    assert (carried, forgotten) == (moved, [(TOPIC, 1)])
    follower.sent_fetch(carried, forgotten)
    follower.answered(ErrorCode.NONE, 100)
    assert follower.epoch == 2
    assert follower.to_send(moved) == ({}, [])


def test_follower_falls_back_to_a_full_fetch_on_a_session_error_or_no_session() -> None:
    follower = FollowerSession()
    fields = {(TOPIC, 0): (3, 1, 0, 2)}
    follower.sent_fetch(*follower.to_send(fields))
    follower.answered(ErrorCode.NONE, 100)
    follower.answered(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
    assert (follower.session_id, follower.epoch) == (0, INITIAL_EPOCH)
    assert follower.to_send(fields) == (fields, [])
    follower.sent_fetch(*follower.to_send(fields))
    follower.answered(ErrorCode.NONE, 0)  # the leader gave none: ask again, full
    assert (follower.session_id, follower.epoch) == (0, INITIAL_EPOCH)
    assert follower.to_send(fields) == (fields, [])
