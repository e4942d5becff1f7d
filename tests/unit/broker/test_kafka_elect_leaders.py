"""broker.kafka.admin.elect_api: ElectLeaders forwarded to the controller as the
`metadata.admin` RPC (v0: PREFERRED), the controller's per-partition codes passed
through, and the answer held until this broker's image shows the new leader epoch."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import trio
import trio.testing
from kio.schema.elect_leaders.v0.request import ElectLeadersRequest as ElectLeadersV0
from kio.schema.elect_leaders.v0.request import TopicPartitions as TopicPartitionsV0
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest, TopicPartitions
from kio.static.primitive import i8, i32

from broker.kafka.admin.elect_api import handle_elect_leaders_request
from metadata import admin
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build, response_class
from tests.support.kafka_support import image_with_topic
from tests.unit.broker.test_kafka_admin import FakeController, context_with

TIMEOUT = datetime.timedelta(seconds=30)


def answered(code: int) -> admin.ElectLeadersResponse:
    return admin.ElectLeadersResponse(replica_election_results=(admin.ReplicaElectionResult(
        topic="A", partition_result=(admin.ElectionPartitionResult(
            partition_id=0, error_code=code, error_message=None if code == 0 else "why"),)),))


async def test_an_elected_partition_is_answered_once_this_brokers_image_shows_its_epoch(
        tmp_path: Path) -> None:
    images = [image_with_topic(leader_epoch=3)]
    controller = FakeController(answered(ErrorCode.NONE))
    context = context_with(images, controller, tmp_path)
    results: list[Any] = []
    request = ElectLeadersRequest(election_type=i8(1), timeout=TIMEOUT, topic_partitions=(
        TopicPartitions(topic="A", partitions=(i32(0),)),))

    async def elect() -> None:
        results.append(await handle_elect_leaders_request(context, request, 2))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(elect)
            await trio.testing.wait_all_tasks_blocked()
            assert results == []  # held: the image still shows epoch 3
            images.append(image_with_topic(leader_epoch=4))
            context.on_image_changed()
    assert controller.requests == [admin.ElectLeadersRequest(
        election_type=1, topic_partitions=(admin.ElectionTopic(topic="A", partitions=(0,)),))]
    assert results[0]["replica_election_results"][0]["partition_result"] == [
        {"partition_id": 0, "error_code": 0, "error_message": None}]
    build(response_class(43, 2), results[0])


async def test_v0_is_a_preferred_election_and_refusals_pass_through(tmp_path: Path) -> None:
    controller = FakeController(answered(ErrorCode.ELECTION_NOT_NEEDED))
    context = context_with([image_with_topic()], controller, tmp_path)
    request = ElectLeadersV0(timeout=TIMEOUT, topic_partitions=(
        TopicPartitionsV0(topic="A", partitions=(i32(0),)),))
    with trio.fail_after(10):
        result = await handle_elect_leaders_request(context, request, 0)
    assert controller.requests[0].election_type == 0
    assert result["replica_election_results"][0]["partition_result"][0]["error_code"] == \
        ErrorCode.ELECTION_NOT_NEEDED
    build(response_class(43, 0), result)  # v0 has no top-level error code: dropped


async def test_a_refused_election_type_answers_every_partition_with_the_error(
        tmp_path: Path) -> None:
    controller = FakeController(admin.ElectLeadersResponse(
        error_code=ErrorCode.INVALID_REQUEST, error_message="unknown election type 7"))
    context = context_with([image_with_topic()], controller, tmp_path)
    request = ElectLeadersRequest(election_type=i8(7), timeout=TIMEOUT, topic_partitions=(
        TopicPartitions(topic="A", partitions=(i32(0), i32(1))),))
    with trio.fail_after(10):
        result = await handle_elect_leaders_request(context, request, 2)
    assert result["error_code"] == ErrorCode.INVALID_REQUEST
    assert [p["error_code"] for p in result["replica_election_results"][0]
            ["partition_result"]] == [ErrorCode.INVALID_REQUEST] * 2
