"""The context every Kafka API handler gets: the broker's (`broker.kafka.context`) and the
group coordinator built on it. The coordinator needs the broker's context and the group
handlers need the coordinator, so it is made from this context, once, on first use (the
listener starts it as a background task as soon as the context exists)."""

from __future__ import annotations

from functools import cached_property

from broker.kafka.context import BrokerContext
from broker.kafka.groups.coordinator import GroupCoordinator


class HandlerContext(BrokerContext):
    @cached_property
    def groups(self) -> GroupCoordinator:
        """Leads the `__consumer_offsets` partitions this broker leads."""
        return GroupCoordinator(self)
