"""A controller, the log it proposes to, and a commit that follows on demand (shared by
the controller unit tests)."""

from __future__ import annotations

import random

from metadata import records as rec
from metadata.admin import (
    BrokerHeartbeatRequest,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DeleteTopicState,
    DescribeTopicsRequest,
    RegisterBrokerRequest,
)
from metadata.controller import Controller, ControllerConfig, Decision
from metadata.image import MetadataImage
from metadata.topic_configs import ORDERED_DELIVERY
from raft.common.uuid import ZERO_UUID, Uuid

TIMEOUT_MS = 9000


class Harness:
    """A controller, the log it proposes to, and a commit that follows on demand."""

    def __init__(self, brokers: int = 3, seed: int = 0, **config: int) -> None:
        self.rng = random.Random(seed)
        self.now_ms = 0
        self.controller = Controller(MetadataImage.empty(), now_ms=0,
                                     config=ControllerConfig(**config))
        self.log: list[tuple[int, rec.Record]] = []
        self.committed = 0
        self.epochs: dict[int, int] = {}
        for broker_id in range(1, brokers + 1):
            self.start_broker(broker_id)

    def run(self, request: object, commit: bool = True) -> Decision:
        decision = self.controller.handle(request, now_ms=self.now_ms,  # type: ignore[arg-type]
                                          rng=self.rng, next_offset=len(self.log))
        self.log.extend(enumerate(decision.records, start=decision.base_offset))
        if commit:
            self.commit()
        return decision

    def commit(self) -> None:
        self.controller.on_committed(self.log[self.committed:])
        self.committed = len(self.log)

    def start_broker(self, broker_id: int) -> int:
        response = self.run(RegisterBrokerRequest(
            broker_id=broker_id, incarnation_id=Uuid.random(self.rng),
            endpoints=(f"PLAINTEXT://127.0.0.1:{9091 + broker_id}",))).response
        assert response.error_code == 0  # type: ignore[union-attr]
        self.epochs[broker_id] = response.broker_epoch  # type: ignore[union-attr]
        self.heartbeat(broker_id)
        return self.epochs[broker_id]

    def heartbeat(self, broker_id: int, offset: int | None = None) -> Decision:
        return self.run(BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=self.epochs[broker_id],
            current_metadata_offset=len(self.log) - 1 if offset is None else offset))

    def tick(self, now_ms: int) -> Decision | None:
        self.now_ms = now_ms
        decision = self.controller.tick(now_ms, next_offset=len(self.log))
        if decision is not None:
            self.log.extend(enumerate(decision.records, start=decision.base_offset))
            self.commit()
        return decision

    def create(self, name: str, partitions: int = 1, factor: int = 1,
               commit: bool = True, ordered: bool = False) -> object:
        """A topic; `ordered` asks for enable.ordered.delivery (KIP-253's resizes)."""
        configs = (CreatableTopicConfig(name=ORDERED_DELIVERY, value="true"),) \
            if ordered else None
        return self.run(CreateTopicsRequest(topics=(CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=factor,
            configs=configs),)), commit=commit).response.topics[0]  # type: ignore[union-attr]

    def delete(self, name: str | None = None, topic_id: Uuid = ZERO_UUID) -> object:
        return self.run(DeleteTopicsRequest(topics=(DeleteTopicState(
            name=name, topic_id=topic_id),))).response.responses[0]  # type: ignore[union-attr]

    def describe(self, **kwargs: object) -> object:
        return self.run(DescribeTopicsRequest(**kwargs)).response  # type: ignore[arg-type]
