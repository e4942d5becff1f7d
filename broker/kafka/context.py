"""What the Kafka API handlers share: the broker's identity, its image (and a way to wait
for the image to change), its partitions and the controller client."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import trio

from broker.kafka.replication.replica import ReplicaManager
from metadata.authorizer import OFF, AuthorizerSettings
from metadata.controller_client import ControllerClient
from metadata.image import MetadataImage


class BrokerContext:
    def __init__(self, *, broker_id: int, cluster_id: str,
                 image: Callable[[], MetadataImage], replicas: ReplicaManager,
                 controller: ControllerClient | None, request_timeout_ms: int = 30_000,
                 replica_routes: Mapping[int, tuple[str, int]] | None = None) -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self._image = image
        self.replicas = replicas
        self.controller = controller
        self.request_timeout_ms = request_timeout_ms
        # test-only (`fault.injection.replica.routes`): broker id -> the address the
        # replica fetcher dials instead of that broker's advertised endpoint
        self.replica_routes: Mapping[int, tuple[str, int]] = dict(replica_routes or {})
        self._image_changed = trio.Event()
        # this incarnation's broker epoch once registered (None before): the producer-ID
        # block of broker.kafka.partitions.produce; and (broker epoch, IDs handed out from
        # its block)
        self.broker_epoch: Callable[[], int | None] = lambda: None
        # the cluster's kraft.version as this broker's raft core reads it from the log
        self.kraft_version: Callable[[], int] = lambda: 0
        self.producer_ids_issued: tuple[int, int] = (-1, 0)
        # broker.kafka.groups.coordinator.GroupCoordinator (set by the listener; typed Any here
        # because that module imports this one)
        self.group_coordinator: Any = None
        # authorizer.class.name and friends (broker.kafka.authz): OFF allows everything
        self.authorizer: AuthorizerSettings = OFF

    @property
    def image(self) -> MetadataImage:
        return self._image()

    def on_image_changed(self) -> None:
        """Called after committed metadata records were applied (from the commit
        listener: quick, never blocks)."""
        self._image_changed.set()
        self._image_changed = trio.Event()

    async def wait_image(self, predicate: Callable[[MetadataImage], bool],
                         timeout_s: float) -> bool:
        """Until `predicate(image)` holds (True) or `timeout_s` passes (False)."""
        with trio.move_on_after(timeout_s):
            while not predicate(self.image):
                await self._image_changed.wait()
            return True
        return False
