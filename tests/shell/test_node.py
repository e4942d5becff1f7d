"""raft.node in process: real RaftCore, MemoryLog, loopback sockets, fail_after per test."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
import trio

from raft.common.errors import ErrorCode
from raft.common.framing import FramedStream
from raft.node import NotLeaderError
from tests.support.node_quorum import FAST, Member, follower_of, leader_of, quorum
from tests.support.polling import eventually


async def test_proposal_commits_on_every_node_when_three_nodes_run() -> None:
    """KIP-595 replication through the shell: a committed proposal reaches the commit
    listeners of all three nodes, in order, with the leader's epoch."""
    with trio.fail_after(10):
        async with quorum() as members:
            leader = await leader_of(members)
            epoch, last_offset = await leader.node.propose_and_wait([b"a", b"b", b"c"])
            assert epoch == leader.node.epoch
            await eventually(lambda: all(m.committed_end > last_offset for m in members))
            for member in members:
                records = [r for b in member.committed for r in b.records]
                assert records[-3:] == [b"a", b"b", b"c"]
                offsets = [b.base_offset for b in member.committed]
                assert offsets == sorted(offsets)
                assert member.committed[0].base_offset == 0


async def test_propose_raises_not_leader_with_address_when_node_is_follower() -> None:
    """propose_and_wait on a follower names the leader and its address."""
    with trio.fail_after(10):
        async with quorum() as members:
            leader = await leader_of(members)
            follower = await follower_of(members, leader)
            with pytest.raises(NotLeaderError) as caught:
                await follower.node.propose_and_wait([b"x"])
            assert caught.value.leader_id == leader.node.node_id
            assert caught.value.leader_address == leader.node.voters[leader.node.node_id]


async def test_appends_share_one_fsync_when_they_arrive_during_a_flush() -> None:
    """Group commit: proposals arriving while an fsync is in flight go into the next one."""
    flushes: list[int] = []

    def slow_flush(member: Member) -> None:
        original = member.log.flush

        def flush() -> None:
            time.sleep(0.02)  # a slow disk, in the worker thread
            flushes.append(member.node.node_id)
            original()
        member.log.flush = flush  # type: ignore[method-assign]

    with trio.fail_after(15):
        async with quorum(setup=slow_flush) as members:
            leader = await leader_of(members)
            flushes.clear()
            async with trio.open_nursery() as nursery:
                for i in range(100):
                    nursery.start_soon(leader.node.propose_and_wait, [b"r%d" % i])
            leader_flushes = flushes.count(leader.node.node_id)
            assert 1 <= leader_flushes <= 25


async def test_state_is_durable_before_any_request_leaves_when_nodes_elect_and_replicate(
) -> None:
    """Durable before send: a Vote or BeginQuorumEpoch leaves only once its epoch is in
    quorum-state, and a follower's Fetch only from a flushed log end."""
    violations: list[str] = []

    def spy(member: Member) -> None:
        original = member.node.transport.send_to_peer

        def send_to_peer(dst: int, frame: dict[str, Any]) -> bool:
            body = frame["body"]["topics"][0]["partitions"][0]
            persisted = max((s.epoch for s in member.persisted), default=0)
            if frame["api"] == "VoteRequest" and not body["pre_vote"] and \
                    body["candidate_epoch"] > persisted:
                violations.append(f"vote for epoch {body['candidate_epoch']} > {persisted}")
            if frame["api"] == "BeginQuorumEpochRequest" and body["leader_epoch"] > persisted:
                violations.append(f"begin epoch {body['leader_epoch']} > {persisted}")
            if frame["api"] == "FetchRequest" and \
                    body["fetch_offset"] > member.log.flushed_end_offset:
                violations.append(f"fetch from unflushed {body['fetch_offset']}")
            return original(dst, frame)
        member.node.transport.send_to_peer = send_to_peer  # type: ignore[method-assign]

    with trio.fail_after(10):
        async with quorum(setup=spy) as members:
            leader = await leader_of(members)
            for i in range(20):
                await leader.node.propose_and_wait([b"x" * i or b"-"])
            _, last = await leader.node.propose_and_wait([b"end"])
            await eventually(lambda: all(m.committed_end > last for m in members))
    assert violations == []


async def test_commit_listener_replays_the_committed_log_when_node_restarts() -> None:
    """add_commit_listener: after a restart the committed log is handed over again from
    offset 0, in order, before new commits."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    voters = {1: ("127.0.0.1", listeners[0].socket.getsockname()[1])}
    with trio.fail_after(10):
        first = Member(1, voters, listeners, FAST)
        async with trio.open_nursery() as nursery:
            await nursery.start(first.node.run)
            await eventually(lambda: first.node.is_leader)
            _, last = await first.node.propose_and_wait([b"one", b"two"])
            await first.node.shutdown()
        second = Member(1, voters, await trio.open_tcp_listeners(0, host="127.0.0.1"), FAST,
                        log=first.log, election=first.persisted[-1])
        async with trio.open_nursery() as nursery:
            await nursery.start(second.node.run)
            await eventually(lambda: second.committed_end > last)
            nursery.cancel_scope.cancel()
    replayed = [r for b in second.committed for r in b.records]
    assert second.committed[0].base_offset == 0
    assert replayed[:last + 1] == [r for b in first.committed for r in b.records][:last + 1]
    assert b"one" in replayed
    assert b"two" in replayed


def partitions_body(frame: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = frame["body"]["topics"][0]["partitions"][0]
    return body


async def test_successor_campaigns_at_once_when_the_leader_resigns() -> None:
    """KIP-595 EndQuorumEpoch: a resigning leader names its preferred successors, and the
    first one campaigns at once, with a Vote in the next epoch (no pre-vote first, as a
    follower whose fetch timeout fired would send), and wins that epoch. The followers'
    fetch timeout is far beyond the test's bound, so no follower can have campaigned on a
    timeout. (`make bench` times the hand-over: bench/quorum_bench.py.)"""
    # Timers long next to a message's way through loopback, so none fires meanwhile; the
    # backoff puts the second successor's turn 1 s after the first's.
    timing = {**FAST, "election_timeout_ms": 500, "fetch_timeout_ms": 60_000,
              "election_backoff_max_ms": 2000}
    sent: list[tuple[int, str, dict[str, Any]]] = []

    def spy(member: Member) -> None:
        original = member.node.transport.send_to_peer

        def send_to_peer(dst: int, frame: dict[str, Any]) -> bool:
            sent.append((member.node.node_id, frame["api"], partitions_body(frame)))
            return original(dst, frame)
        member.node.transport.send_to_peer = send_to_peer  # type: ignore[method-assign]

    with trio.fail_after(15):
        async with quorum(timing=timing, setup=spy) as members:
            old = await leader_of(members)
            old_id, old_epoch = old.node.node_id, old.node.epoch
            await eventually(lambda: all(m.node.leader_id == old_id for m in members))
            # Every log holds the new leader's first batch: the successor ranked first
            # (by the leader's view, which can lag a follower) is then as up to date as
            # the other and gets its vote.
            await eventually(lambda: all(m.log.end_offset == old.log.end_offset
                                         for m in members))
            sent.clear()
            await old.node.shutdown()
            others = [m for m in members if m is not old]
            new = await eventually(lambda: next((m for m in others if m.node.is_leader), None))
            new_id, new_epoch = new.node.node_id, new.node.epoch
    ends = [body for src, api, body in sent if src == old_id and api == "EndQuorumEpochRequest"]
    assert ends, "the leader resigned without EndQuorumEpoch"
    assert {frozenset(body["preferred_successors"]) for body in ends} == \
        {frozenset(m.node.node_id for m in others)}
    assert ends[0]["preferred_successors"][0] == new_id
    votes = [body for src, api, body in sent if src == new_id and api == "VoteRequest"]
    assert votes, "the new leader asked for no vote"
    assert [body["pre_vote"] for body in votes] == [False] * len(votes)
    assert {body["candidate_epoch"] for body in votes} == {old_epoch + 1}
    assert new_epoch == old_epoch + 1
    pre_votes = [src for src, api, body in sent if api == "VoteRequest" and body["pre_vote"]]
    assert pre_votes == []  # nobody's timer fired: the successor was elected first


async def test_extra_api_is_served_when_a_handler_is_registered() -> None:
    """RpcHost.add_api_handler: the response echoes api and correlation id; a wrong cluster id is
    answered INCONSISTENT_CLUSTER_ID without reaching the handler."""
    calls: list[Any] = []

    async def echo(body: Any, cluster_id: str) -> Any:
        calls.append(body)
        return {"error_code": 0, "echo": body["text"]}

    with trio.fail_after(10):
        async with quorum(count=1, setup=lambda m: m.rpc.add_api_handler("Echo", echo)) as ms:
            host, port = ms[0].node.voters[1]
            client = FramedStream(await trio.open_tcp_stream(host, port))
            await client.send({"api": "Echo", "version": 0, "correlation_id": 42,
                               "cluster_id": "cluster-a", "body": {"text": "hi"}})
            reply = await client.receive()
            await client.send({"api": "Echo", "version": 0, "correlation_id": 43,
                               "cluster_id": "cluster-b", "body": {"text": "hi"}})
            refused = await client.receive()
    assert reply is not None
    assert (reply["api"], reply["correlation_id"], reply["body"]["echo"]) == ("Echo", 42, "hi")
    assert refused is not None
    assert refused["body"]["error_code"] == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert len(calls) == 1


@pytest.mark.parametrize(("api", "body", "reason"), [
    ("FetchRequest", {"cluster_id": "cluster-a"}, "malformed 'FetchRequest'"),
    ("NoSuchApi", {}, "unknown api"),
    ("VoteResponse", {}, "malformed 'VoteResponse'"),
])
async def test_connection_is_closed_with_reason_when_a_message_body_is_malformed(
        api: str, body: Any, reason: str, caplog: pytest.LogCaptureFixture) -> None:
    """Peer input never reaches the core malformed: the connection is closed with a logged
    reason, and the node keeps serving (a second client still gets answers)."""
    with trio.fail_after(10):
        async with quorum(count=1) as members:
            node = members[0].node
            await eventually(lambda: node.is_leader)
            host, port = node.voters[1]
            bad = FramedStream(await trio.open_tcp_stream(host, port))
            await bad.send({"api": api, "version": 0, "correlation_id": 1,
                            "cluster_id": "cluster-a", "body": body})
            assert await bad.receive() is None  # closed by the node
            _, last = await node.propose_and_wait([b"still serving"])
            assert last >= 0
    closes = [r for r in caplog.records if r.getMessage() == "closed connection"]
    assert len(closes) == 1
    assert reason in closes[0].reason


async def test_every_message_is_traced_when_the_trace_logger_is_at_debug(
        caplog: pytest.LogCaptureFixture) -> None:
    """`--log-level DEBUG` traces each message in and out (raft.node.messages)."""
    caplog.set_level(logging.DEBUG, logger="raft.node.messages")
    with trio.fail_after(10):
        async with quorum() as members:
            leader = await leader_of(members)
            await leader.node.propose_and_wait([b"traced"])
    traced = [r for r in caplog.records if r.name == "raft.node.messages"]
    assert {r.getMessage() for r in traced} == {"send", "receive"}
    assert any("VoteRequest" in r.detail for r in traced)
    assert any("FetchResponse" in r.detail for r in traced)


def spy_votes(sent: list[tuple[int, bool, int]]) -> Callable[[Member], None]:
    """Records each VoteRequest a member sends: (sender, pre_vote, candidate epoch)."""
    def spy(member: Member) -> None:
        original = member.node.transport.send_to_peer

        def send_to_peer(dst: int, frame: dict[str, Any]) -> bool:
            if frame["api"] == "VoteRequest":
                body = partitions_body(frame)
                sent.append((member.node.node_id, body["pre_vote"], body["candidate_epoch"]))
            return original(dst, frame)
        member.node.transport.send_to_peer = send_to_peer  # type: ignore[method-assign]
    return spy


async def test_follower_asks_for_pre_votes_at_once_when_the_leader_process_dies() -> None:
    """Crash detection: a dead leader's connections close and its port refuses, so its
    followers ask for pre-votes (KIP-996) at once and elect a successor. The fetch
    timeout (60 s) is far beyond the test's bound, so no follower can have campaigned on
    it, and a killed leader sends no EndQuorumEpoch: only the refused reconnect can
    have started the election. (`make bench` times the failover: bench/quorum_bench.py.)"""
    timing = {**FAST, "election_timeout_ms": 500, "fetch_timeout_ms": 60_000}
    votes: list[tuple[int, bool, int]] = []
    with trio.fail_after(15):
        async with quorum(timing=timing, setup=spy_votes(votes)) as members:
            old = await leader_of(members)
            old_epoch = old.node.epoch
            await eventually(lambda: all(m.node.leader_id == old.node.node_id
                                         for m in members))
            votes.clear()
            await old.kill()
            others = [m for m in members if m is not old]
            new = await eventually(lambda: next((m for m in others if m.node.is_leader
                                                 and m.node.epoch > old_epoch), None))
            _, last = await new.node.propose_and_wait([b"after the crash"])
            await eventually(lambda: all(m.committed_end > last for m in others))
    pre_votes = [(src, epoch) for src, pre_vote, epoch in votes if pre_vote]
    assert pre_votes, "nobody asked for pre-votes"
    assert {epoch for _, epoch in pre_votes} == {old_epoch + 1}
    assert new.node.node_id in {src for src, _ in pre_votes}


async def test_observer_follows_the_new_leader_when_the_old_one_stops_answering() -> None:
    """An observer whose Fetch stays unanswered past the long-poll wait asks the other
    voters who leads and fetches from the new leader once one is elected. The old
    leader takes its connections but answers nothing (a paused process); the observer's
    fetch timeout (60 s) is far beyond the test's bound, so only asking the voters can
    have moved it, and the voters' own timeouts elect the new leader."""
    listeners = [await trio.open_tcp_listeners(0, host="127.0.0.1") for _ in range(4)]
    voters = {i + 1: ("127.0.0.1", ls[0].socket.getsockname()[1])
              for i, ls in enumerate(listeners[:3])}
    members = [Member(i + 1, voters, listeners[i], FAST) for i in range(3)]
    observer = Member(4, voters, listeners[3], {**FAST, "fetch_timeout_ms": 60_000})

    async def unanswered(conn: Any, frame: dict[str, Any]) -> None:
        await trio.sleep_forever()

    with trio.fail_after(15):
        async with trio.open_nursery() as nursery:
            for member in [*members, observer]:
                await nursery.start(member.run)
            old = await leader_of(members)
            old_epoch = old.node.epoch
            _, first = await old.node.propose_and_wait([b"before"])
            await eventually(lambda: observer.committed_end > first)
            old.node.transport._handler = unanswered  # its inbound connections stall
            new = await eventually(lambda: next((m for m in members if m.node.is_leader
                                                 and m.node.epoch > old_epoch), None))
            _, last = await new.node.propose_and_wait([b"after"])
            await eventually(lambda: observer.committed_end > last)
            assert observer.node.leader_id == new.node.node_id
            nursery.cancel_scope.cancel()
