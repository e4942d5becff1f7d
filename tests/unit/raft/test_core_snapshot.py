"""Snapshots in the core (KIP-630): a leader whose log starts at a snapshot sends a
fetcher below its start to that snapshot; the follower fetches it in chunks
(FetchSnapshot), resumes after a lost chunk from the bytes it holds, starts over when the
whole does not check, loads it in place of its log (`Ready.loaded_snapshot`) and fetches
records from its end on; errors send it back to Fetch; a stale epoch is fenced."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from raft.common.errors import ErrorCode
from raft.core import RaftConfig, RaftCore, Role
from raft.log import MemoryLog
from raft.messages import (
    BeginQuorumEpochRequest,
    CurrentLeader,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from raft.snapshot import encode_snapshot
from raft.snapshot_store import MemorySnapshotStore
from raft.types import ElectionState, Envelope, Ready, SnapshotId
from tests.support.core_harness import CLUSTER_ID, deliver, drain, make_leader, reply, sent

NOW = 10_000
CHUNK = 64  # fetch_snapshot_max_bytes: the snapshot below takes several chunks
RECORDS = [b"record %02d" % i for i in range(10)]  # offsets 0-4 epoch 1, 5-9 epoch 2
SNAPSHOT = SnapshotId(8, 2)  # the leader's log starts here


def store_of(*snapshots: tuple[SnapshotId, list[bytes]]) -> MemorySnapshotStore:
    store = MemorySnapshotStore()
    for snapshot_id, records in snapshots:
        store.add(snapshot_id, encode_snapshot(snapshot_id, records))
    return store


def with_store(store: MemorySnapshotStore) -> Callable[..., RaftCore]:
    """A core class for the harness's `make_core` that serves and fetches from `store`."""
    def build(**kwargs: Any) -> RaftCore:
        return RaftCore(snapshots=store, **kwargs)
    return build


def snapshot_leader() -> RaftCore:
    """Leader of epoch 3 over records 0-9 whose log starts at 8 (snapshot 8-2 held); its
    LeaderChange is at offset 10."""
    log = MemoryLog()
    log.append(1, RECORDS[:5])
    log.append(2, RECORDS[5:])
    log.flush()
    log.advance_start(SNAPSHOT.end_offset)
    store = store_of((SNAPSHOT, RECORDS[:8]))
    leader = make_leader(log=log, epoch=2, core_class=with_store(store),
                         fetch_snapshot_max_bytes=CHUNK)
    assert (leader.epoch, leader.log.start_offset, leader.log.end_offset) == (3, 8, 11)
    return leader


def follower(*, store: MemorySnapshotStore | None = None, **config: Any) -> RaftCore:
    """Voter 2, following 1 in epoch 3, with an empty log."""
    return RaftCore(node_id=2, config=RaftConfig(voters=(1, 2, 3), **config),
                    log=MemoryLog(), election=ElectionState(epoch=3, leader_id=1,
                                                            voters=(1, 2, 3)),
                    cluster_id=CLUSTER_ID, rng=random.Random(2), now_ms=NOW,
                    snapshots=store if store is not None else MemorySnapshotStore())


def request_of(ready: Ready) -> Envelope:
    """The one Fetch or FetchSnapshot the follower sent."""
    [request] = sent(ready, FetchRequest) + sent(ready, FetchSnapshotRequest)
    return request


def answer(leader: RaftCore, request: Envelope, now_ms: int = NOW) -> Any:
    [response] = deliver(leader, request.src, request.message, now_ms,
                         correlation_id=request.correlation_id)
    return response


def fetch(offset: int, last_epoch: int, epoch: int = 3) -> FetchRequest:
    return FetchRequest(cluster_id=CLUSTER_ID, replica_id=2, current_leader_epoch=epoch,
                        fetch_offset=offset, last_fetched_epoch=last_epoch)


def snapshot_request(position: int = 0, epoch: int = 3,
                     snapshot_id: SnapshotId = SNAPSHOT) -> FetchSnapshotRequest:
    return FetchSnapshotRequest(cluster_id=CLUSTER_ID, replica_id=2, max_bytes=CHUNK,
                                current_leader_epoch=epoch, snapshot_id=snapshot_id,
                                position=position)


def download(leader: RaftCore, core: RaftCore, first: Envelope,
             tamper: Callable[[FetchSnapshotResponse], FetchSnapshotResponse] | None = None
             ) -> tuple[list[int], Ready]:
    """Serve FetchSnapshot requests from `first` on until the follower asks something
    else: the positions asked for, and the Ready of the last answer."""
    request, positions = first, []
    while True:
        message = request.message
        assert isinstance(message, FetchSnapshotRequest)
        positions.append(message.position)
        response = answer(leader, request)
        ready = reply(core, request, tamper(response) if tamper else response, NOW)
        request = request_of(ready)
        if not isinstance(request.message, FetchSnapshotRequest):
            return positions, ready


# ---- the leader ------------------------------------------------------------------------


def test_leader_answers_snapshot_id_when_fetch_is_below_its_log_start() -> None:
    """A Fetch from offset 0 gets the newest snapshot's id and no records."""
    leader = snapshot_leader()
    response = answer(leader, Envelope(src=2, dst=1, correlation_id=7, message=fetch(0, 0)))
    assert response.error_code is ErrorCode.NONE
    assert response.snapshot_id == SNAPSHOT
    assert (response.records, response.log_start_offset) == ((), 8)


def test_leader_answers_snapshot_id_when_last_fetched_epoch_precedes_the_start() -> None:
    """A fetcher above the start whose last epoch is older than the snapshot's cannot be
    checked against the log: snapshot first. At the start with the snapshot's epoch, it
    gets records."""
    leader = snapshot_leader()
    stale = answer(leader, Envelope(src=2, dst=1, correlation_id=7, message=fetch(9, 1)))
    assert stale.snapshot_id == SNAPSHOT
    at_start = answer(leader, Envelope(src=2, dst=1, correlation_id=8, message=fetch(8, 2)))
    assert at_start.snapshot_id is None
    assert at_start.records[0].base_offset <= 8


def test_leader_fences_fetch_snapshot_when_epoch_is_stale() -> None:
    """KIP-630: FetchSnapshot carries the fetcher's leader epoch; an older one is fenced,
    a newer one unknown; neither gets bytes."""
    leader = snapshot_leader()
    for epoch, error in ((2, ErrorCode.FENCED_LEADER_EPOCH),
                         (4, ErrorCode.UNKNOWN_LEADER_EPOCH)):
        response = answer(leader, Envelope(src=2, dst=1, correlation_id=7,
                                           message=snapshot_request(epoch=epoch)))
        assert response.error_code is error
        assert response.unaligned_records == b""
        assert response.current_leader == CurrentLeader(leader_id=1, leader_epoch=3)


def test_leader_answers_errors_when_snapshot_or_position_unknown() -> None:
    leader = snapshot_leader()
    size = leader.snapshots.size(SNAPSHOT)
    assert size is not None
    for request, error in ((snapshot_request(snapshot_id=SnapshotId(5, 1)),
                            ErrorCode.SNAPSHOT_NOT_FOUND),
                           (snapshot_request(position=size + 1),
                            ErrorCode.POSITION_OUT_OF_RANGE)):
        response = answer(leader, Envelope(src=2, dst=1, correlation_id=7, message=request))
        assert response.error_code is error


def test_leader_refuses_log_start_above_high_watermark() -> None:
    """advance_log_start: only to a held snapshot of committed records within the log
    (KIP-630); the leader's high watermark is still its log start right after winning."""
    leader = snapshot_leader()
    ahead = SnapshotId(10, 2)
    leader.snapshots.add(ahead, encode_snapshot(ahead, RECORDS))  # type: ignore[attr-defined]
    assert leader.high_watermark == 8
    assert not leader.advance_log_start(ahead)
    assert not leader.advance_log_start(SnapshotId(9, 2))  # not held
    assert leader.log.start_offset == 8


# ---- the follower ------------------------------------------------------------------------


def test_follower_fetches_snapshot_in_chunks_then_records_when_leader_log_starts_above() -> None:
    """The follower asks from offset 0, is sent to snapshot 8-2, fetches it chunk by
    chunk, loads it (the log starts at 8, HW 8, `Ready.loaded_snapshot`), then fetches
    records from 8 on."""
    leader = snapshot_leader()
    core = follower(fetch_snapshot_max_bytes=CHUNK)
    first = request_of(drain(core))
    assert (first.message.fetch_offset, first.message.last_fetched_epoch) == (0, 0)
    ready = reply(core, first, answer(leader, first), NOW)
    positions, ready = download(leader, core, request_of(ready))
    size = leader.snapshots.size(SNAPSHOT)
    assert size is not None
    assert len(positions) == -(-size // CHUNK) >= 3
    assert positions == [CHUNK * i for i in range(len(positions))]
    assert ready.loaded_snapshot == SNAPSHOT
    assert ready.high_watermark == 8
    assert (core.log.start_offset, core.log.start_epoch, core.log.end_offset) == (8, 2, 8)
    assert core.snapshots.size(SNAPSHOT) == size
    assert not ready.needs_flush  # the snapshot replaced the log durably
    request = request_of(ready)
    assert (request.message.fetch_offset, request.message.last_fetched_epoch) == (8, 2)
    ready = reply(core, request, answer(leader, request), NOW)
    assert ready.loaded_snapshot is None
    assert [b.base_offset for b in ready.entries] == [8, 10]
    assert core.log.end_offset == 11


def test_the_loaded_snapshots_records_are_handed_over_until_its_ready_is_advanced() -> None:
    """The shell's state machine loads from the records the fetch checked whole
    (`loaded_snapshot_records`), not from the file again; once the Ready that announced
    the snapshot is advanced they are dropped."""
    leader = snapshot_leader()
    core = follower()
    first = request_of(drain(core))
    request = request_of(reply(core, first, answer(leader, first), NOW))
    while True:  # chunk by chunk, each Ready advanced but the one that loads it
        assert isinstance(request.message, FetchSnapshotRequest)
        assert core.loaded_snapshot_records == ()
        core.step(Envelope(src=request.dst, dst=request.src,
                           correlation_id=request.correlation_id,
                           message=answer(leader, request)), NOW)
        ready = core.ready()
        if ready.loaded_snapshot is not None:
            break
        core.advance(ready)
        request = request_of(ready)
    assert ready.loaded_snapshot == SNAPSHOT
    assert core.loaded_snapshot_records == tuple(RECORDS[:8])
    core.advance(ready)
    assert core.loaded_snapshot_records == ()


def test_follower_resumes_from_held_bytes_when_a_chunk_is_lost() -> None:
    """A FetchSnapshot that times out is asked again from the bytes held, not from 0."""
    leader = snapshot_leader()
    core = follower(fetch_snapshot_max_bytes=CHUNK, request_timeout_ms=500)
    first = request_of(drain(core))
    request = request_of(reply(core, first, answer(leader, first), NOW))
    request = request_of(reply(core, request, answer(leader, request), NOW))
    assert request.message.position == CHUNK  # this one is lost
    core.tick(NOW + 600)
    again = request_of(drain(core))
    assert isinstance(again.message, FetchSnapshotRequest)
    assert again.message.position == CHUNK
    assert again.correlation_id != request.correlation_id
    positions, ready = download(leader, core, again)
    assert positions[0] == CHUNK
    assert ready.loaded_snapshot == SNAPSHOT


def test_follower_asks_for_a_lost_chunk_again_well_before_its_fetch_timeout() -> None:
    """With the request timeout equal to the fetch timeout, a lost chunk would be retried
    only when the follower gives up on its live leader; it is asked again within a quarter
    of the fetch timeout, and the follower stays a follower."""
    leader = snapshot_leader()
    core = follower(fetch_snapshot_max_bytes=CHUNK, request_timeout_ms=2000,
                    fetch_timeout_ms=2000)
    first = request_of(drain(core))
    request = request_of(reply(core, first, answer(leader, first), NOW))
    assert isinstance(request.message, FetchSnapshotRequest)  # this one is lost
    core.tick(NOW + 500)
    again = request_of(drain(core))
    assert (again.message.position, core.role) == (request.message.position, Role.FOLLOWER)
    assert again.correlation_id != request.correlation_id


def test_follower_resumes_from_held_bytes_when_its_leader_changes() -> None:
    """The download survives a new epoch: the next leader names the same snapshot and
    the follower goes on from what it held."""
    leader = snapshot_leader()
    core = follower(fetch_snapshot_max_bytes=CHUNK)
    first = request_of(drain(core))
    request = request_of(reply(core, first, answer(leader, first), NOW))
    request = request_of(reply(core, request, answer(leader, request), NOW))
    held = request.message.position
    assert held > 0
    core.step(Envelope(src=3, dst=2, correlation_id=99, message=BeginQuorumEpochRequest(
        cluster_id=CLUSTER_ID, leader_id=3, leader_epoch=4)), NOW)
    fetched = request_of(drain(core))
    assert isinstance(fetched.message, FetchRequest)
    assert fetched.dst == 3
    ready = reply(core, fetched, FetchResponse(
        high_watermark=8, log_start_offset=8, snapshot_id=SNAPSHOT,
        current_leader=CurrentLeader(leader_id=3, leader_epoch=4)), NOW)
    resumed = request_of(ready)
    assert isinstance(resumed.message, FetchSnapshotRequest)
    assert (resumed.message.position, resumed.message.current_leader_epoch) == (held, 4)


def test_follower_starts_over_when_the_fetched_snapshot_does_not_check() -> None:
    """A corrupt chunk: `finish` rejects the whole, the partial bytes are dropped, and the
    follower fetches again from Fetch on; the second download loads."""
    leader = snapshot_leader()
    core = follower(fetch_snapshot_max_bytes=CHUNK)
    first = request_of(drain(core))
    request = request_of(reply(core, first, answer(leader, first), NOW))

    def corrupt(response: FetchSnapshotResponse) -> FetchSnapshotResponse:
        data = bytearray(response.unaligned_records)
        if response.position == CHUNK:
            data[3] ^= 0xFF
        return FetchSnapshotResponse(
            snapshot_id=response.snapshot_id, current_leader=response.current_leader,
            size=response.size, position=response.position, unaligned_records=bytes(data))
    positions, ready = download(leader, core, request, corrupt)
    assert ready.loaded_snapshot is None
    assert core.snapshots.size(SNAPSHOT) is None
    assert core.log.start_offset == 0
    fetch_again = request_of(ready)
    assert (fetch_again.message.fetch_offset, fetch_again.message.last_fetched_epoch) == (0, 0)
    restart = request_of(reply(core, fetch_again, answer(leader, fetch_again), NOW))
    assert restart.message.position == 0
    positions_again, ready = download(leader, core, restart)
    assert positions_again == positions
    assert ready.loaded_snapshot == SNAPSHOT


def test_follower_goes_back_to_fetch_when_snapshot_not_found() -> None:
    """The leader moved on (the snapshot it named is gone): SNAPSHOT_NOT_FOUND sends the
    follower back to Fetch, which names the newest snapshot."""
    leader = snapshot_leader()
    core = follower(fetch_snapshot_max_bytes=CHUNK)
    first = request_of(drain(core))
    gone = SnapshotId(5, 1)
    request = request_of(reply(core, first, FetchResponse(
        high_watermark=8, log_start_offset=5, snapshot_id=gone,
        current_leader=CurrentLeader(leader_id=1, leader_epoch=3)), NOW))
    assert request.message.snapshot_id == gone
    response = answer(leader, request)
    assert response.error_code is ErrorCode.SNAPSHOT_NOT_FOUND
    back = request_of(reply(core, request, response, NOW))
    assert isinstance(back.message, FetchRequest)
    assert back.message.fetch_offset == 0
    newest = request_of(reply(core, back, answer(leader, back), NOW))
    assert newest.message.snapshot_id == SNAPSHOT
    assert newest.message.position == 0


@pytest.mark.parametrize("error", [ErrorCode.FENCED_LEADER_EPOCH,
                                   ErrorCode.NOT_LEADER_OR_FOLLOWER])
def test_follower_keeps_its_download_when_fetch_snapshot_fails_otherwise(
        error: ErrorCode) -> None:
    """Other errors: retried after the backoff, from the bytes held (a newer leader named
    in the answer is followed first)."""
    leader = snapshot_leader()
    core = follower(fetch_snapshot_max_bytes=CHUNK)
    first = request_of(drain(core))
    request = request_of(reply(core, first, answer(leader, first), NOW))
    request = request_of(reply(core, request, answer(leader, request), NOW))
    ready = reply(core, request, FetchSnapshotResponse(
        error_code=error, current_leader=CurrentLeader(leader_id=1, leader_epoch=3)), NOW)
    assert not ready.messages
    core.tick(NOW + 150)
    again = request_of(drain(core))
    assert isinstance(again.message, FetchSnapshotRequest)
    assert again.message.position == CHUNK
