"""Topic auto-creation (`auto.create.topics.enable`, true by default as in Kafka).

A Metadata request that names a topic the broker's image does not hold, and allows
auto-creation (its `allow_auto_topic_creation` from v4; always before), creates it with
`num.partitions` and `default.replication.factor` when the caller may CREATE it (on the
cluster or on the topic), as Kafka's AutoTopicCreationManager does:
- the answer does not wait for the topic: LEADER_NOT_AVAILABLE, which clients retry;
- an illegal name is answered INVALID_TOPIC_EXCEPTION (a producer fails the record at
  once instead of queueing it until its timeout);
- a caller without CREATE, or a request that does not allow it, gets
  UNKNOWN_TOPIC_OR_PARTITION; internal topics are created by their owners
  (`__consumer_offsets` by the group coordinator), never here.
The creation is a CreateTopics sent to the active controller in the background, at most
one in flight per name; a failed one (too few brokers for the replication factor, no
controller) is tried again by the client's next Metadata request.

`unknown_topic_answer` is the rule (pure); `TopicCreator` the background sender.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import trio

from broker.kafka.admin.admin_api import forward_to_controller
from broker.kafka.context import BrokerContext
from broker.settings import AutoCreateSettings
from metadata.admin import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from metadata.topic_names import invalid_topic_name_reason, is_internal_topic
from raft.common.errors import ErrorCode

log = logging.getLogger(__name__)


def allows_auto_creation(request: object, version: int) -> bool:
    """Metadata v0-v3 have no flag: they always allow it (Kafka's reading)."""
    return version < 4 or bool(getattr(request, "allow_auto_topic_creation", False))


def unknown_topic_answer(name: str, *, settings: AutoCreateSettings, requested: bool,
                         may_create: bool) -> ErrorCode:
    """What Metadata answers for a topic named `name` that the image does not hold;
    LEADER_NOT_AVAILABLE means: create it."""
    if not (settings.enabled and requested and may_create) or is_internal_topic(name):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if invalid_topic_name_reason(name) is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    return ErrorCode.LEADER_NOT_AVAILABLE


class TopicCreator:
    """Sends the CreateTopics of auto-created topics to the controller, one request per
    batch of names wanted meanwhile, never a name twice at once."""

    def __init__(self, context: BrokerContext, settings: AutoCreateSettings) -> None:
        self._context = context
        self.settings = settings
        self._wanted: list[str] = []
        self._in_flight: set[str] = set()
        self._wake = trio.Event()

    def want(self, names: Iterable[str]) -> None:
        for name in names:
            if name not in self._in_flight:
                self._in_flight.add(name)
                self._wanted.append(name)
        if self._wanted:
            self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            names, self._wanted = self._wanted, []
            try:
                await self._create(names)
            finally:
                self._in_flight.difference_update(names)

    async def _create(self, names: list[str]) -> None:
        context, settings = self._context, self.settings
        request = CreateTopicsRequest(topics=tuple(
            CreatableTopic(name=name, num_partitions=settings.num_partitions,
                           replication_factor=settings.replication_factor)
            for name in names))
        timeout_s = context.request_timeout_ms / 1000
        response, error, message = await forward_to_controller(context, request, timeout_s)
        if not isinstance(response, CreateTopicsResponse):
            log.info("could not auto-create topics", extra={
                "topics": names, "error": error, "reason": message})
            return
        created = {r.name for r in response.topics if r.error_code == 0}
        log.info("auto-created topics", extra={
            "topics": sorted(created), "partitions": settings.num_partitions,
            "replication_factor": settings.replication_factor,
            "refused": {r.name: r.error_message for r in response.topics
                        if r.error_code != 0}})
        # the names stay in flight until this broker's image shows them: a Metadata
        # request in between must not send a second create
        await context.wait_image(
            lambda image: all(image.topic_by_name(n) is not None for n in created),
            timeout_s)
