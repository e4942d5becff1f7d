"""broker.kafka.admin.admin_api: admin writes forwarded to the controller, answered once the
broker's own image shows them."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path
from typing import Any

import trio
import trio.testing
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

from broker.kafka.admin.admin_api import handle_create_topics_request
from broker.kafka.context import BrokerContext
from broker.kafka.replication.replica import ReplicaManager
from metadata import admin
from metadata.image import MetadataImage
from raft.common.errors import ErrorCode
from tests.support.kafka_support import BROKER, TOPIC_ID, image_with_topic


class FakeController:
    """Answers CreateTopics like the controller would, recording the request."""

    def __init__(self, response: Any) -> None:
        self.response = response
        self.requests: list[Any] = []

    async def call(self, request: Any, timeout_s: float) -> Any:
        self.requests.append(request)
        return self.response


def context_with(images: list[MetadataImage], controller: Any, tmp_path: Path
                 ) -> BrokerContext:
    replicas = ReplicaManager(log_dir=tmp_path, broker_id=BROKER, image=lambda: images[-1])
    return BrokerContext(broker_id=BROKER, cluster_id="c", image=lambda: images[-1],
                         replicas=replicas, controller=controller)


def create_request(name: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=(CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=30))


async def test_create_answered_with_topic_id_once_image_has_it_when_controller_commits(
        tmp_path: Path) -> None:
    """CreateTopics v7 returns the controller's topic ID, and only after this broker's
    image holds the topic (so the client's next Metadata here sees it)."""
    images = [MetadataImage.empty()]
    controller = FakeController(admin.CreateTopicsResponse(topics=(
        admin.CreatableTopicResult(name="A", topic_id=TOPIC_ID, num_partitions=1,
                                   replication_factor=1),)))
    context = context_with(images, controller, tmp_path)
    results: list[Any] = []

    async def create() -> None:
        results.append(await handle_create_topics_request(context, create_request("A"), 7))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(create)
            await trio.testing.wait_all_tasks_blocked()
            assert results == []  # held until the image shows the topic
            images.append(image_with_topic())
            context.on_image_changed()
    (topic,) = results[0]["topics"]
    assert (topic["name"], topic["error_code"]) == ("A", ErrorCode.NONE)
    assert topic.get("topic_id") == uuid.UUID(bytes=TOPIC_ID.to_bytes())
    assert controller.requests[0].topics[0].name == "A"


async def test_controller_error_passed_through_when_topic_exists(tmp_path: Path) -> None:
    """The controller's refusal (TOPIC_ALREADY_EXISTS, 36) reaches the client as is."""
    controller = FakeController(admin.CreateTopicsResponse(topics=(
        admin.CreatableTopicResult(name="A", error_code=36, error_message="exists"),)))
    context = context_with([image_with_topic()], controller, tmp_path)
    with trio.fail_after(10):
        response = await handle_create_topics_request(context, create_request("A"), 7)
    (topic,) = response["topics"]
    assert topic["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
    assert topic["error_message"] == "exists"


async def test_not_controller_when_no_controller_client(tmp_path: Path) -> None:
    """Without a way to reach the controller, admin writes fail per topic, not silently."""
    context = context_with([MetadataImage.empty()], None, tmp_path)
    response = await handle_create_topics_request(context, create_request("A"), 7)
    assert response["topics"][0]["error_code"] == ErrorCode.NOT_CONTROLLER
