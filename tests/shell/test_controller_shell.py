"""The controller shell in process: 3 RaftNodes (MemoryLog, loopback sockets) each with a
ControllerShell; pytest-trio, fail_after per test."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from metadata import records as rec
from metadata.admin import (
    AdminErrorResponse,
    BrokerHeartbeatRequest,
    CreatableTopic,
    CreateAclsRequest,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
    DescribeTopicsRequest,
    DescribeTopicsResponse,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
    api_of,
    decode_response,
    encode_body,
)
from metadata.authorizer import (
    OFF,
    AclBinding,
    AclOperation,
    AclPermissionType,
    AuthorizerSettings,
    PatternType,
    ResourceType,
)
from metadata.controller import ControllerConfig
from metadata.controller_shell import ControllerShell
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from raft.core import RaftConfig
from raft.log import MemoryLog
from tests.support.polling import eventually
from tests.support.tcp_node import tcp_node

FAST = {"election_timeout_ms": 150, "fetch_timeout_ms": 300, "election_backoff_max_ms": 100,
        "request_timeout_ms": 200, "fetch_max_wait_ms": 50}


@asynccontextmanager
async def controllers(count: int = 3, session_timeout_ms: int = 60_000,
                      authorizer: AuthorizerSettings = OFF
                      ) -> AsyncIterator[list[ControllerShell]]:
    listeners = [await trio.open_tcp_listeners(0, host="127.0.0.1") for _ in range(count)]
    voters = {i + 1: ("127.0.0.1", ls[0].socket.getsockname()[1])
              for i, ls in enumerate(listeners)}
    shells = []
    for index in range(count):
        node, rpc, _ = tcp_node(
            node_id=index + 1, cluster_id="cluster-c", voters=voters,
            config=RaftConfig(voters=tuple(voters), **FAST), log=MemoryLog(), election=None,
            write_election=lambda state: None, listeners=listeners[index],
            rng=random.Random(index))
        shells.append(ControllerShell(
            node, config=ControllerConfig(broker_session_timeout_ms=session_timeout_ms),
            rng=random.Random(100 + index), authorizer=authorizer).install(rpc))
    async with trio.open_nursery() as nursery:
        for shell in shells:
            await nursery.start(shell._node.run)
        yield shells
        nursery.cancel_scope.cancel()


async def call(shell: ControllerShell, request: Any) -> Any:
    api = api_of(request)
    return decode_response(api, await shell.handle_api(api, encode_body(request)))


async def register(shell: ControllerShell, broker_id: int) -> None:
    registered = await call(shell, RegisterBrokerRequest(broker_id=broker_id,
                                                         incarnation_id=Uuid.random()))
    assert isinstance(registered, RegisterBrokerResponse)
    assert registered.error_code == 0
    beat = await call(shell, BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=registered.broker_epoch,
        current_metadata_offset=shell.image.last_applied_offset))
    assert (beat.error_code, beat.is_fenced) == (0, False)


async def test_only_the_leader_answers_and_followers_name_it_when_three_controllers_run(
) -> None:
    """KIP-631 style: the active controller is the raft leader; others answer
    NOT_CONTROLLER (41) with the leader's id and address."""
    with trio.fail_after(10):
        async with controllers() as shells:
            active = await eventually(lambda: next((s for s in shells if s.is_active), None))
            leader = active._node.node_id
            for shell in shells:
                if shell is active:
                    continue
                # a follower names the leader once it has heard from it (BeginQuorumEpoch
                # or a Fetch answer); before that its answer rightly names none
                await eventually(lambda s=shell: s._node.leader_id == leader)
                response = await call(shell, DescribeTopicsRequest())
                assert isinstance(response, AdminErrorResponse)
                assert response.top_level_error == ErrorCode.NOT_CONTROLLER
                assert response.leader_id == leader
                host, port = active._node.voters[leader]
                assert response.leader_address == f"{host}:{port}"


async def test_followers_answer_not_controller_before_judging_the_caller_when_acls_are_on(
) -> None:
    """A follower's image may lag the ACLs: it must send the client to the leader
    (NOT_CONTROLLER), never refuse it on that image; the leader judges the caller."""
    with trio.fail_after(10):
        async with controllers(authorizer=AuthorizerSettings(enabled=True)) as shells:
            active = await eventually(lambda: next((s for s in shells if s.is_active), None))
            for shell in shells:
                response = await call(shell, DescribeTopicsRequest(names=("t",)))
                assert isinstance(response, AdminErrorResponse)
                expected = (ErrorCode.TOPIC_AUTHORIZATION_FAILED if shell is active
                            else ErrorCode.NOT_CONTROLLER)
                assert response.top_level_error == expected


async def test_every_node_replays_the_same_image_when_a_create_is_answered(
) -> None:
    """Writes reply only once committed: the leader's committed image already holds the
    topic when the reply arrives, and every node's replay reaches the same content hash."""
    with trio.fail_after(10):
        async with controllers() as shells:
            active = await eventually(lambda: next((s for s in shells if s.is_active), None))
            for broker_id in (101, 102):
                await register(active, broker_id)
            response = await call(active, CreateTopicsRequest(topics=(CreatableTopic(
                name="orders", num_partitions=2, replication_factor=2),)))
            assert isinstance(response, CreateTopicsResponse)
            topic_id = response.topics[0].topic_id
            assert active.image.topic_by_name("orders").topic_id == topic_id  # type: ignore[union-attr]
            described = await call(active, DescribeTopicsRequest(topic_ids=(topic_id,)))
            assert isinstance(described, DescribeTopicsResponse)
            assert described.topics[0].name == "orders"
            offset = active.image.last_applied_offset
            await eventually(lambda: all(s.image.last_applied_offset == offset for s in shells))
            assert len({s.image.content_hash() for s in shells}) == 1


async def test_writes_that_arrive_together_share_one_raft_batch_and_each_gets_its_answer(
) -> None:
    """Twenty creates handed to the shell in one go are decided and appended as one batch
    (no timer: they were all queued before the core task ran the decide step), and each
    is answered with its own topic, committed by the time it is answered."""
    with trio.fail_after(10):
        async with controllers() as shells:
            active = await eventually(lambda: next((s for s in shells if s.is_active), None))
            await register(active, 101)
            responses: dict[str, Any] = {}

            async def create(name: str) -> None:
                responses[name] = await call(active, CreateTopicsRequest(topics=(
                    CreatableTopic(name=name, num_partitions=1, replication_factor=1),)))
                topic = active.image.topic_by_name(name)  # committed when answered
                assert topic is not None
                assert topic.topic_id == responses[name].topics[0].topic_id

            names = [f"t{i}" for i in range(20)]
            async with trio.open_nursery() as nursery:
                for name in names:
                    nursery.start_soon(create, name)
            assert all(responses[n].topics[0].error_code == 0 for n in names)
            holding = [b for b in active._node.log.read(0, 1 << 30)
                       if _topic_names(b.records) & set(names)]
            assert len(holding) == 1
            assert _topic_names(holding[0].records) == set(names)


def _topic_names(records: tuple[bytes, ...]) -> set[str]:
    return {record.name for record in map(rec.decode, records) if isinstance(record, rec.Topic)}


async def test_a_forwarded_delete_is_decided_per_topic_for_the_client_it_names() -> None:
    """A broker (here the anonymous caller, a super user) forwards a DeleteTopics by ID
    for User:alice: the controller judges alice against its committed image, topic by
    topic, deletes what she may delete and keeps the request's order."""
    settings = AuthorizerSettings(enabled=True, super_users=frozenset({"User:ANONYMOUS"}))
    with trio.fail_after(10):
        async with controllers(count=1, authorizer=settings) as (shell,):
            await eventually(lambda: shell.is_active or None)
            await register(shell, 101)
            created = await call(shell, CreateTopicsRequest(topics=tuple(
                CreatableTopic(name=n, num_partitions=1, replication_factor=1)
                for n in ("secret-payroll", "mine"))))
            assert isinstance(created, CreateTopicsResponse)
            payroll_id, mine_id = (t.topic_id for t in created.topics)
            granted = await call(shell, CreateAclsRequest(creations=(AclBinding(
                resource_type=int(ResourceType.TOPIC), resource_name="mine",
                pattern_type=int(PatternType.LITERAL), principal="User:alice", host="*",
                operation=int(AclOperation.DELETE),
                permission_type=int(AclPermissionType.ALLOW)),)))
            assert granted.results[0].error_code == 0
            unknown = Uuid.random()
            response = await call(shell, DeleteTopicsRequest(
                topics=tuple(DeleteTopicState(topic_id=t)
                             for t in (payroll_id, mine_id, unknown)),
                forwarded_principal="User:alice", forwarded_host="127.0.0.1"))
            assert isinstance(response, DeleteTopicsResponse)
            assert [(r.name, r.topic_id, r.error_code) for r in response.responses] == [
                (None, payroll_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                ("mine", mine_id, 0),
                (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID)]
            assert "secret-payroll" not in (response.responses[0].error_message or "")
            assert shell.image.topic(payroll_id) is not None
            assert shell.image.topic(mine_id) is None
