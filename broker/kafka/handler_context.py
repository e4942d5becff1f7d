"""The context every Kafka API handler gets: the broker's (`broker.kafka.context`), the
creator of auto-created topics, and the group coordinator built on it. The coordinator
needs the broker's context and the group handlers need the coordinator, so it is made
from this context, once, on first use (the listener starts it as a background task as
soon as the context exists)."""

from __future__ import annotations

from contextvars import ContextVar
from functools import cached_property
from typing import Any

from broker.kafka.admin.auto_create import TopicCreator
from broker.kafka.context import BrokerContext
from broker.kafka.groups.coordinator import GroupCoordinator
from broker.settings import AutoCreateSettings

# the client.id of the request being handled (its header's), set by the dispatcher
REQUEST_CLIENT_ID: ContextVar[str] = ContextVar("kafka_request_client_id", default="")


class HandlerContext(BrokerContext):
    def __init__(self, *, auto_create: AutoCreateSettings | None = None,
                 **context: Any) -> None:
        super().__init__(**context)
        # creates the topics Metadata requests name (the listener runs it)
        self.topic_creator = TopicCreator(self, auto_create or AutoCreateSettings())

    @cached_property
    def groups(self) -> GroupCoordinator:
        """Leads the `__consumer_offsets` partitions this broker leads."""
        return GroupCoordinator(self)
