"""The broker role inside `kraft node` (process.roles contains `broker`): the Trio shell
around the pure `broker.hosting` / `broker.reconcile` and the I/O of `broker.partition_dir`.

- The node's raft core is an observer: it fetches the metadata log by topic ID and
  follows leader changes. A commit listener replays each committed batch into this
  broker's own `MetadataImage` (from offset 0 after every start).
- Registration and heartbeats go to the active controller (RegisterBroker,
  BrokerHeartbeat), tried first at the leader the observer knows, following
  NOT_CONTROLLER to the leader it names. A new incarnation ID on every start.
- Reconciliation (KIP-516, in place of LeaderAndIsr/StopReplica) starts once the image
  has caught up to the high watermark seen at start — before that, a partial image would
  make live topics look deleted — and runs again on every image change and whenever a
  staged deletion falls due.
- `<log.dir>/metadata-image.checkpoint` (JSON {"applied_offset", "image_hash"}, written
  durably) follows the image, for the Spark replay.
- `BrokerStatus` (msgpack, same framing): applied offset, image hash, hosted partitions,
  pending deletions. Served through the node's listener when it has one, and on the
  broker's own client listener until the Kafka protocol (issue 7) takes that port.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from broker import partition_dir
from broker.hosting import assignment_for, hosted_partitions
from broker.reconcile import StagedDeletion, reconcile
from metadata import admin
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from metadata.uuid import Uuid
from raft.errors import ErrorCode
from raft.framing import FrameError, FramedStream
from raft.node import RaftNode
from raft.types import Batch

log = logging.getLogger(__name__)

Address = tuple[str, int]
CHECKPOINT_FILE = "metadata-image.checkpoint"  # format: tools.replay's docstring
STATUS_API = "BrokerStatus"
RETRY_BACKOFF_S = 0.2
RECONCILE_ERROR_BACKOFF_S = 1.0
_correlation_ids = iter(range(1, 1 << 62))


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerSettings:
    broker_id: int
    log_dir: Path
    cluster_id: str
    controllers: tuple[Address, ...]  # the voters' controller listeners
    delete_topic_delay_ms: int
    heartbeat_interval_ms: int = 2000
    request_timeout_ms: int = 2000
    endpoints: tuple[str, ...] = ()  # "NAME://host:port", sent with RegisterBroker
    status_address: Address | None = None  # where to serve BrokerStatus (None: nowhere)


class ControllerUnavailable(Exception):
    """No controller answered (all tried); the caller backs off and tries again."""


def write_checkpoint(log_dir: Path, image: MetadataImage) -> None:
    body = {"applied_offset": image.last_applied_offset, "image_hash": image.content_hash()}
    partition_dir.write_file_durably(log_dir / CHECKPOINT_FILE, json.dumps(body) + "\n")


def reconcile_once(settings: BrokerSettings, image: MetadataImage, now_ms: int) -> int | None:
    """Scan, decide and apply (blocking I/O: runs in a worker thread). Returns the earliest
    due time of the deletions still pending, None when there are none."""
    local, staged = partition_dir.scan(settings.log_dir)
    actions = reconcile(local=local, staged=staged,
                        assignment=assignment_for(image, settings.broker_id),
                        now_ms=now_ms, delete_delay_ms=settings.delete_topic_delay_ms)
    partition_dir.apply_actions(settings.log_dir, actions)
    if actions:
        log.info("reconciled partitions", extra={
            "broker": settings.broker_id, "offset": image.last_applied_offset,
            "actions": [type(a).__name__ for a in actions]})
    _, remaining = partition_dir.scan(settings.log_dir)
    return _earliest_due(remaining)


def _earliest_due(staged: list[StagedDeletion]) -> int | None:
    dues = [s.due_ms for s in staged if s.due_ms is not None]
    return min(dues) if dues else None


class BrokerServer:
    def __init__(self, node: RaftNode, settings: BrokerSettings, *,
                 wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self._node = node
        self.settings = settings
        self._wall_clock_ms = wall_clock_ms  # due times survive restarts: wall clock
        self._image = MetadataImage.empty()
        self._start_hw: int | None = None  # the high watermark first seen after start
        self.caught_up = trio.Event()
        self._wake_reconcile = trio.Event()
        self._wake_checkpoint = trio.Event()
        self.incarnation_id = Uuid.random()
        self.broker_epoch = -1
        self.is_fenced = True
        self.reconciled_offset = -1  # image offset of the last reconciliation that finished

    def install(self) -> BrokerServer:
        self._node.add_commit_listener(self._on_commit)
        self._node.add_background_task(self.run)
        self._node.add_api_handler(STATUS_API, self._handle_status)
        return self

    @property
    def image(self) -> MetadataImage:
        return self._image

    # --- the committed log (runs in the node's core task: quick, never blocks) --------

    def _on_commit(self, batch: Batch) -> None:
        if self._start_hw is None:
            self._start_hw = max(self._node.high_watermark, batch.next_offset)
        delta = MetadataDelta(self._image)
        for index, data in enumerate(batch.records):
            delta.apply_bytes(data, batch.base_offset + index)
        self._image = delta.build()
        if not self.caught_up.is_set() and \
                self._image.last_applied_offset + 1 >= self._start_hw:
            log.info("caught up with the metadata log", extra={
                "broker": self.settings.broker_id, "high_watermark": self._start_hw,
                "offset": self._image.last_applied_offset})
            self.caught_up.set()
        self._wake_reconcile.set()
        self._wake_checkpoint.set()

    # --- tasks ------------------------------------------------------------------------

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._checkpoint_loop)
            nursery.start_soon(self._reconcile_loop)
            nursery.start_soon(self._controller_loop)
            if self.settings.status_address is not None:
                await nursery.start(self._serve_status, self.settings.status_address)

    async def _checkpoint_loop(self) -> None:
        written = None
        while True:
            self._wake_checkpoint = trio.Event()
            image = self._image
            if image.last_applied_offset != written:
                await trio.to_thread.run_sync(write_checkpoint, self.settings.log_dir, image)
                written = image.last_applied_offset
            await self._wake_checkpoint.wait()

    async def _reconcile_loop(self) -> None:
        await self.caught_up.wait()
        while True:
            self._wake_reconcile = trio.Event()
            image = self._image
            try:
                next_due = await trio.to_thread.run_sync(
                    reconcile_once, self.settings, image, self._wall_clock_ms())
                self.reconciled_offset = image.last_applied_offset
                wake_in_s = math.inf if next_due is None else \
                    max(0.0, (next_due - self._wall_clock_ms()) / 1000)
            except (OSError, partition_dir.PartitionDirError) as exc:
                log.error("reconciliation failed, will retry", extra={
                    "broker": self.settings.broker_id, "error": str(exc)})
                wake_in_s = RECONCILE_ERROR_BACKOFF_S
            with trio.move_on_after(wake_in_s):
                await self._wake_reconcile.wait()

    async def _controller_loop(self) -> None:
        """Register, then heartbeat every interval; register again when the controller
        no longer knows this incarnation's epoch."""
        interval_s = self.settings.heartbeat_interval_ms / 1000
        while True:
            await self._register()
            while True:
                request = admin.BrokerHeartbeatRequest(
                    broker_id=self.settings.broker_id, broker_epoch=self.broker_epoch,
                    current_metadata_offset=self._image.last_applied_offset)
                try:
                    response = await self.send_to_controller("BrokerHeartbeat", request)
                except ControllerUnavailable as exc:
                    log.info("heartbeat not delivered", extra={"error": str(exc)})
                    await trio.sleep(interval_s)
                    continue
                if isinstance(response, admin.BrokerHeartbeatResponse):
                    if response.error_code in (ErrorCode.STALE_BROKER_EPOCH,
                                               ErrorCode.BROKER_ID_NOT_REGISTERED):
                        log.warning("controller rejected heartbeat, registering again",
                                    extra={"error_code": response.error_code})
                        break
                    if response.error_code == ErrorCode.NONE and \
                            response.is_fenced != self.is_fenced:
                        log.info("broker fencing changed", extra={
                            "broker": self.settings.broker_id, "fenced": response.is_fenced})
                        self.is_fenced = response.is_fenced
                await trio.sleep(interval_s)

    async def _register(self) -> None:
        request = admin.RegisterBrokerRequest(
            broker_id=self.settings.broker_id, incarnation_id=self.incarnation_id,
            endpoints=self.settings.endpoints)
        while True:
            try:
                response = await self.send_to_controller("RegisterBroker", request)
            except ControllerUnavailable as exc:
                log.info("registration not delivered", extra={"error": str(exc)})
                await trio.sleep(RETRY_BACKOFF_S)
                continue
            if isinstance(response, admin.RegisterBrokerResponse) and \
                    response.error_code == ErrorCode.NONE:
                self.broker_epoch = response.broker_epoch
                self.is_fenced = True
                log.info("registered", extra={"broker": self.settings.broker_id,
                                              "broker_epoch": response.broker_epoch,
                                              "incarnation": str(self.incarnation_id)})
                return
            # e.g. DUPLICATE_BROKER_REGISTRATION until the previous incarnation's session
            # expires: try again after a heartbeat interval
            log.info("registration refused", extra={
                "error_code": getattr(response, "error_code", None),
                "error": getattr(response, "error_message", None)})
            await trio.sleep(self.settings.heartbeat_interval_ms / 1000)

    async def send_to_controller(self, api: str, request: Any) -> admin.AdminResponse:
        """Send to the leader this observer knows, else each controller in turn, following
        NOT_CONTROLLER to the leader it names. Any other answer is returned."""
        candidates: list[Address] = []
        if self._node.leader_address is not None:
            candidates.append(self._node.leader_address)
        candidates += [a for a in self.settings.controllers if a not in candidates]
        errors: list[str] = []
        tried: set[Address] = set()
        while candidates:
            address = candidates.pop(0)
            if address in tried:
                continue
            tried.add(address)
            try:
                body = await self._request(address, api, admin.encode_body(request))
                response = admin.decode_response(api, body)
            except (OSError, FrameError, admin.AdminDecodeError, trio.TooSlowError) as exc:
                errors.append(f"{address[0]}:{address[1]}: {type(exc).__name__}: {exc}")
                continue
            if isinstance(response, admin.AdminErrorResponse) and \
                    response.top_level_error == ErrorCode.NOT_CONTROLLER:
                if response.leader_address:
                    host, _, port = response.leader_address.rpartition(":")
                    candidates.insert(0, (host, int(port)))
                errors.append(f"{address[0]}:{address[1]}: not the controller")
                continue
            return response
        raise ControllerUnavailable("; ".join(errors) or "no controller address")

    async def _request(self, address: Address, api: str, body: Any) -> Any:
        correlation_id = next(_correlation_ids)
        with trio.fail_after(self.settings.request_timeout_ms / 1000):
            stream = await trio.open_tcp_stream(*address)
            framed = FramedStream(stream)
            try:
                await framed.send({"api": api, "version": 0, "correlation_id": correlation_id,
                                   "cluster_id": self.settings.cluster_id, "body": body})
                while True:
                    reply = await framed.receive()
                    if reply is None:
                        raise FrameError("connection closed before the response")
                    if reply["correlation_id"] == correlation_id:
                        return reply["body"]
            finally:
                await framed.aclose()

    # --- status -----------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        image = self._image
        return {
            "error_code": 0, "broker_id": self.settings.broker_id,
            "incarnation_id": str(self.incarnation_id), "broker_epoch": self.broker_epoch,
            "is_fenced": self.is_fenced, "caught_up": self.caught_up.is_set(),
            "applied_offset": image.last_applied_offset, "image_hash": image.content_hash(),
            "reconciled_offset": self.reconciled_offset,
            "high_watermark": self._node.high_watermark, "leader_id": self._node.leader_id,
            "hosted": [{"topic": h.topic, "topic_id": str(h.topic_id),
                        "partition": h.partition, "leader": h.leader,
                        "leader_epoch": h.leader_epoch}
                       for h in hosted_partitions(image, self.settings.broker_id)],
        }

    async def _handle_status(self, body: Any, cluster_id: str) -> dict[str, Any]:
        return self.status()

    async def _serve_status(self, address: Address,
                            task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                            ) -> None:
        listeners = await trio.open_tcp_listeners(address[1], host=address[0])
        log.info("serving broker status", extra={"broker": self.settings.broker_id,
                                                 "address": f"{address[0]}:{address[1]}"})
        task_status.started()
        await trio.serve_listeners(self._status_connection, listeners)

    async def _status_connection(self, stream: trio.SocketStream) -> None:
        framed = FramedStream(stream, max_frame_bytes=1 << 20)
        try:
            while (frame := await framed.receive()) is not None:
                if frame["cluster_id"] not in (None, "", self.settings.cluster_id):
                    body: dict[str, Any] = {
                        "error_code": int(ErrorCode.INCONSISTENT_CLUSTER_ID),
                        "error_message": "wrong cluster id"}
                elif frame["api"] != STATUS_API:
                    body = {"error_code": int(ErrorCode.INVALID_REQUEST),
                            "error_message": f"only {STATUS_API} is served here"}
                else:
                    body = self.status()
                await framed.send({"api": frame["api"], "version": 0,
                                   "correlation_id": frame["correlation_id"],
                                   "cluster_id": self.settings.cluster_id, "body": body})
        except (FrameError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            log.info("status connection closed", extra={"reason": str(exc)})
        finally:
            await framed.aclose()


def install_broker(node: RaftNode, config: Any) -> BrokerServer:
    """Wire the broker role into a node built from a `tools.config.NodeConfig`."""
    client = config.client_address
    endpoints = tuple(f"{name}://{host}:{port}" for name, (host, port)
                      in config.listeners.items()
                      if name not in {n.upper() for n in config.controller_listener_names})
    settings = BrokerSettings(
        broker_id=config.node_id, log_dir=Path(config.log_dir), cluster_id=node.cluster_id,
        controllers=tuple(config.voters[v] for v in sorted(config.voters)),
        delete_topic_delay_ms=config.delete_topic_delay_ms,
        heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
        request_timeout_ms=config.request_timeout_ms, endpoints=endpoints,
        status_address=client)
    return BrokerServer(node, settings).install()

