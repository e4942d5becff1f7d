"""The Trio shell of the metadata controller: serves the admin APIs on a `RaftNode`.

- A commit listener replays every committed record into the node's MetadataImage,
  from the image the node started from (empty, or a snapshot's: `initial_image`).
- The node is the *active* controller once it leads and its committed image holds the
  LeaderChange record of its own epoch: then every record of earlier epochs has
  committed too (Raft commits earlier entries with the first one of the new epoch), so
  a fresh `Controller` built on that image sees everything. Until then, and on every
  other node, admin requests get NOT_CONTROLLER (41) with the leader's id and address.
- A write is decided and proposed in one step of the core task (`decide_and_propose`),
  so log order is decision order, and answered only once its records have committed.
  A decision that writes nothing but rests on pending records waits for those.
- A background task fences brokers whose session expired (`Controller.tick`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from metadata import records as rec
from metadata.admin import (
    WRITE_APIS,
    AdminDecodeError,
    AdminErrorResponse,
    AdminRequest,
    DescribeTopicsRequest,
    decode_request,
    encode_body,
)
from metadata.controller import Controller, ControllerConfig, Decision, describe_topics
from metadata.delta import MetadataDelta
from metadata.image import NO_OFFSET, MetadataImage
from raft.common.errors import ErrorCode
from raft.node import NotLeaderError, RaftNode
from raft.types import Batch

log = logging.getLogger(__name__)

ADMIN_APIS = ("CreateTopics", "DeleteTopics", "DescribeTopics", "CreatePartitions",
              "RenameTopic", "RegisterBroker", "BrokerHeartbeat", "AlterPartition",
              "IncrementalAlterConfigs")
TICK_INTERVAL_S = 0.25


class _NotActive(Exception):
    """This node is not the active controller (now)."""


class ControllerShell:
    def __init__(self, node: RaftNode, *, config: ControllerConfig | None = None,
                 rng: random.Random | None = None,
                 initial_image: MetadataImage | None = None) -> None:
        self._node = node
        self._config = config or ControllerConfig()
        # topic IDs from the OS's entropy, as Kafka's Uuid.randomUuid(); tests pass a seed
        self._rng = rng or random.SystemRandom()
        # every committed record, on every node (the node publishes from its end)
        self._image = MetadataImage.empty() if initial_image is None else initial_image
        self._controller: Controller | None = None
        self._controller_epoch = -1
        self._waiters: list[tuple[int, trio.Event]] = []  # (offset, set once applied)

    def install(self) -> ControllerShell:
        for api in ADMIN_APIS:
            self._node.add_api_handler(api, self._handler_for(api))
        self._node.add_commit_listener(self._on_commit)
        self._node.add_background_task(self._tick_forever)
        return self

    @property
    def image(self) -> MetadataImage:
        """The committed image on this node."""
        return self._image

    @property
    def is_active(self) -> bool:
        return self._active() is not None

    # --- the committed log (runs in the node's core task) -----------------------------

    def reset_image(self, image: MetadataImage) -> None:
        """A snapshot fetched from the leader replaced the log; the leader, the only node
        with an active controller, never loads one."""
        if self._controller is not None:
            raise AssertionError("the active controller's node loaded a fetched snapshot")
        self._image = image

    def _on_commit(self, batch: Batch) -> None:
        entries: list[tuple[int, rec.Record | bytes]] = []
        for index, data in enumerate(batch.records):
            try:
                record: rec.Record | bytes = rec.decode(data)
            except rec.RecordError:
                record = data  # replay notes it as an anomaly
            entries.append((batch.base_offset + index, record))
            if self._is_own_leader_change(record, batch.epoch):
                self._apply(entries)
                entries = []
                self._activate(batch.epoch)
        self._apply(entries)
        applied = self._image.last_applied_offset
        still = []
        for offset, event in self._waiters:
            if offset <= applied:
                event.set()
            else:
                still.append((offset, event))
        self._waiters = still

    def _is_own_leader_change(self, record: object, epoch: int) -> bool:
        return (isinstance(record, rec.LeaderChange) and record.leader_id == self._node.node_id
                and epoch == self._node.epoch and self._node.is_leader)

    def _apply(self, entries: list[tuple[int, rec.Record | bytes]]) -> None:
        if not entries:
            return
        if self._controller is not None:
            self._controller.on_committed(entries)
            self._image = self._controller.committed
        else:
            delta = MetadataDelta(self._image)
            for offset, record in entries:
                if isinstance(record, bytes):
                    delta.apply_bytes(record, offset)
                else:
                    delta.apply(record, offset)
            self._image = delta.build()
        if self._image.anomaly_count and self._image.anomalies:
            last = self._image.anomalies[-1]
            if last.offset >= entries[0][0]:
                log.warning("skipped an invalid metadata record",
                            extra={"offset": last.offset, "type": last.record_type,
                                   "reason": last.reason})

    def _activate(self, epoch: int) -> None:
        self._controller = Controller(self._image, now_ms=self._node.now_ms(),
                                      config=self._config)
        self._controller_epoch = epoch
        log.info("active controller", extra={"node": self._node.node_id, "epoch": epoch,
                                             "offset": self._image.last_applied_offset})

    def _active(self) -> Controller | None:
        node = self._node
        if self._controller is not None and not (node.is_leader
                                                 and node.epoch == self._controller_epoch):
            log.info("controller inactive", extra={"node": node.node_id,
                                                   "epoch": self._controller_epoch})
            self._controller = None
            for _, event in self._waiters:  # they will answer NOT_CONTROLLER
                event.set()
            self._waiters = []
        return self._controller

    # --- admin requests (in each connection's reader task) --------------------------

    def _handler_for(self, api: str) -> Callable[[Any, str], Awaitable[dict[str, Any]]]:
        async def handle(body: Any, cluster_id: str) -> dict[str, Any]:
            return await self.handle_api(api, body)
        return handle

    async def handle_api(self, api: str, body: Any) -> dict[str, Any]:
        try:
            request = decode_request(api, body)
        except AdminDecodeError as exc:
            return encode_body(AdminErrorResponse(
                top_level_error=ErrorCode.INVALID_REQUEST, error_message=str(exc)))
        try:
            if api in WRITE_APIS:
                return encode_body(await self._write(request))
            assert isinstance(request, DescribeTopicsRequest)
            controller = self._active()
            if controller is None:
                raise _NotActive()
            return encode_body(describe_topics(controller.committed, request))
        except (_NotActive, NotLeaderError):
            return self._not_controller()

    async def _write(self, request: AdminRequest) -> Any:
        decisions: list[Decision] = []

        def decide(now_ms: int, next_offset: int) -> list[bytes]:
            controller = self._active()
            if controller is None:
                raise _NotActive()
            decision = controller.handle(request, now_ms=now_ms, rng=self._rng,
                                         next_offset=next_offset)
            decisions.append(decision)
            return [record.encode() for record in decision.records]

        await self._node.decide_and_propose(decide)
        decision = decisions[0]
        if not decision.records and decision.wait_offset != NO_OFFSET:
            await self._wait_applied(decision.wait_offset)
        return decision.response

    async def _wait_applied(self, offset: int) -> None:
        if self._image.last_applied_offset >= offset:
            return
        event = trio.Event()
        self._waiters.append((offset, event))
        await event.wait()
        if self._image.last_applied_offset < offset:
            raise _NotActive()

    def _not_controller(self) -> dict[str, Any]:
        node = self._node
        leader, address = node.leader_id, node.leader_address
        return encode_body(AdminErrorResponse(
            top_level_error=ErrorCode.NOT_CONTROLLER,
            error_message=(f"node {node.node_id} is not the active controller"
                           + ("" if leader is None else f"; the leader is {leader}")),
            leader_id=-1 if leader is None else leader,
            leader_address=None if address is None else f"{address[0]}:{address[1]}"))

    # --- broker sessions --------------------------------------------------------------

    async def _tick_forever(self) -> None:
        while True:
            await trio.sleep(TICK_INTERVAL_S)
            if self._active() is None:
                continue

            def decide(now_ms: int, next_offset: int) -> list[bytes]:
                controller = self._active()
                decision = None if controller is None else controller.tick(
                    now_ms, next_offset=next_offset)
                if decision is None:
                    return []
                log.info("fencing brokers", extra={"records": len(decision.records)})
                return [record.encode() for record in decision.records]

            try:
                await self._node.decide_and_propose(decide)
            except NotLeaderError:
                pass


def install_controller(node: RaftNode, *, broker_session_timeout_ms: int,
                       initial_image: MetadataImage | None = None) -> ControllerShell:
    """Serve the admin APIs on `node` (a voter); call before `node.run()`. With
    `initial_image` (a snapshot's), `node` must publish from just after its offset."""
    config = ControllerConfig(broker_session_timeout_ms=broker_session_timeout_ms)
    return ControllerShell(node, config=config, initial_image=initial_image).install()
