"""Fetch sessions (KIP-227) on the leader's Fetch handler, through the dispatcher: a
follower's idle incremental fetch carries and gets no partition yet keeps the follower
caught up; news (records, a moved high watermark) still reaches it; session errors;
consumers keep full fetches."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.fetch.v13.request import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ForgottenTopic,
)

from broker import partition_dir
from broker.kafka.listener import Dispatcher
from raft.common.errors import ErrorCode
from tests.support.kafka_support import BROKER, TOPIC_ID, image_with_topic
from tests.unit.broker.test_kafka_listener import make_dispatcher, produce_request, roundtrip

FOLLOWER = 5
WIRE_ID = uuid.UUID(bytes=TOPIC_ID.to_bytes())


def follower_dispatcher(tmp_path: Path) -> Dispatcher:
    """Broker 4 leads A-0 and A-1 (epoch 2), broker 5 follows both."""
    (tmp_path / "A-1").mkdir()
    partition_dir.write_partition_metadata(tmp_path / "A-1", TOPIC_ID)
    return make_dispatcher(tmp_path, image_with_topic(replicas=(BROKER, FOLLOWER),
                                                      leader_epoch=2, partitions=2))


def fetch(offsets: dict[int, int], *, session_id: int = 0, epoch: int = 0,
          replica_id: int = FOLLOWER, forgotten: tuple[Any, ...] = (),
          max_wait_ms: int = 0) -> FetchRequest:
    partitions = tuple(FetchPartition(partition=p, fetch_offset=o, last_fetched_epoch=2 if o
                                      else -1, current_leader_epoch=2,
                                      partition_max_bytes=1 << 20)
                       for p, o in sorted(offsets.items()))
    return FetchRequest(replica_id=replica_id,
                        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
                        min_bytes=0 if max_wait_ms == 0 else 1,
                        session_id=session_id, session_epoch=epoch,
                        topics=(FetchTopic(topic_id=WIRE_ID, partitions=partitions),)
                        if partitions else (),
                        forgotten_topics_data=forgotten)


def answered(response: Any) -> dict[int, Any]:
    return {int(p.partition_index): p for t in response.responses for p in t.partitions}


async def test_idle_incremental_fetch_gets_no_partition_and_keeps_the_follower_caught_up(
        tmp_path: Path) -> None:
    dispatcher = follower_dispatcher(tmp_path)
    full = await roundtrip(dispatcher, fetch({0: 0, 1: 0}))
    assert full.error_code == ErrorCode.NONE
    assert full.session_id != 0
    assert sorted(answered(full)) == [0, 1]  # a full fetch answers every partition
    states = {s.partition: s for s in dispatcher.context.replicas.open_states()}
    before = states[0].follower_caught_up_times[FOLLOWER]
    await trio.sleep(0.01)  # the leader's clock moves on (trio's, not a synchronisation)
    idle = await roundtrip(dispatcher, fetch({}, session_id=full.session_id, epoch=1))
    assert (idle.error_code, idle.session_id) == (ErrorCode.NONE, full.session_id)
    assert idle.responses == ()
    assert states[0].follower_caught_up_times[FOLLOWER] > before
    assert states[1].follower_fetch_times[FOLLOWER] > before


async def test_an_idle_long_poll_reads_once_at_its_arrival_not_again_at_its_end(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    """A parked fetch that nothing woke answers with what it read when it came (the
    follower recorded as fetched then), not with a second read after max_wait."""
    dispatcher = follower_dispatcher(tmp_path)
    session_id = (await roundtrip(dispatcher, fetch({0: 0, 1: 0}))).session_id
    states = {s.partition: s for s in dispatcher.context.replicas.open_states()}
    arrived = trio.current_time()
    idle = await roundtrip(dispatcher, fetch({}, session_id=session_id, epoch=1,
                                             max_wait_ms=500))
    assert trio.current_time() - arrived == pytest.approx(0.5)  # it waited the long poll
    assert idle.responses == ()
    assert states[0].follower_fetch_times[FOLLOWER] == arrived


async def test_records_and_a_moved_high_watermark_reach_the_follower_in_its_session(
        tmp_path: Path) -> None:
    dispatcher = follower_dispatcher(tmp_path)
    session_id = (await roundtrip(dispatcher, fetch({0: 0, 1: 0}))).session_id
    await roundtrip(dispatcher, produce_request([b"one"]))  # to A-0
    got = answered(await roundtrip(dispatcher, fetch({}, session_id=session_id, epoch=1)))
    assert sorted(got) == [0]  # A-1 has nothing new
    assert b"one" in got[0].records
    assert got[0].high_watermark == 0  # the follower has not stored it yet
    # it stored the record: its new offset moves the high watermark, which it is told
    got = answered(await roundtrip(dispatcher, fetch({0: 1}, session_id=session_id,
                                                     epoch=2)))
    assert (sorted(got), got[0].high_watermark, got[0].records or None) == ([0], 1, None)
    got = answered(await roundtrip(dispatcher, fetch({}, session_id=session_id, epoch=3)))
    assert got == {}


async def test_forgotten_partitions_leave_the_session(tmp_path: Path) -> None:
    dispatcher = follower_dispatcher(tmp_path)
    session_id = (await roundtrip(dispatcher, fetch({0: 0, 1: 0}))).session_id
    await roundtrip(dispatcher, fetch({}, session_id=session_id, epoch=1, forgotten=(
        ForgottenTopic(topic_id=WIRE_ID, partitions=(1,)),)))
    await roundtrip(dispatcher, produce_request([b"one"]))
    states = {s.partition: s for s in dispatcher.context.replicas.open_states()}
    fetched_at = states[1].follower_fetch_times[FOLLOWER]
    await trio.sleep(0.01)
    got = answered(await roundtrip(dispatcher, fetch({}, session_id=session_id, epoch=2)))
    assert sorted(got) == [0]
    assert states[1].follower_fetch_times[FOLLOWER] == fetched_at  # no longer fetched


async def test_session_errors_then_a_full_fetch_opens_a_new_session(tmp_path: Path) -> None:
    dispatcher = follower_dispatcher(tmp_path)
    session_id = (await roundtrip(dispatcher, fetch({0: 0, 1: 0}))).session_id
    stale = await roundtrip(dispatcher, fetch({}, session_id=session_id, epoch=5))
    assert (stale.error_code, stale.session_id, stale.responses) == \
        (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, ())
    unknown = await roundtrip(dispatcher, fetch({}, session_id=session_id + 1, epoch=1))
    assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    again = await roundtrip(dispatcher, fetch({0: 0, 1: 0}, session_id=session_id))
    assert again.error_code == ErrorCode.NONE
    assert again.session_id not in (0, session_id)
    assert sorted(answered(again)) == [0, 1]


async def test_a_diverged_follower_is_told_again_not_taken_as_caught_up(
        tmp_path: Path) -> None:
    """The same fetch fields after a divergence answer get the divergence again: only a
    fetch the leader served is repeated without being read."""
    dispatcher = follower_dispatcher(tmp_path)
    await roundtrip(dispatcher, produce_request([b"epoch two"]))
    diverged = FetchPartition(partition=0, fetch_offset=1, last_fetched_epoch=1,
                              current_leader_epoch=2, partition_max_bytes=1 << 20)
    request = FetchRequest(replica_id=FOLLOWER, max_wait=datetime.timedelta(0), min_bytes=0,
                           session_id=0, session_epoch=0,
                           topics=(FetchTopic(topic_id=WIRE_ID, partitions=(diverged,)),),
                           forgotten_topics_data=())
    first = await roundtrip(dispatcher, request)
    assert answered(first)[0].diverging_epoch.end_offset == 0
    again = answered(await roundtrip(dispatcher, fetch({}, session_id=first.session_id,
                                                        epoch=1)))
    assert again[0].diverging_epoch.end_offset == 0
    [state] = dispatcher.context.replicas.open_states()
    assert FOLLOWER not in state.follower_offsets


async def test_a_consumer_asking_for_a_session_gets_full_fetches(tmp_path: Path) -> None:
    dispatcher = follower_dispatcher(tmp_path)
    await roundtrip(dispatcher, produce_request([b"one"]))
    for _ in range(2):
        response = await roundtrip(dispatcher, fetch({0: 0, 1: 0}, replica_id=-1))
        assert (response.error_code, response.session_id) == (ErrorCode.NONE, 0)
        assert sorted(answered(response)) == [0, 1]
    assert len(dispatcher.context.fetch_sessions) == 0
