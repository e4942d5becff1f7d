"""The broker role inside `kraft node` (process.roles contains `broker`): the Trio shell
around the pure `broker.hosting` / `broker.reconcile` and the I/O of `broker.partition_dir`.

- The node's raft core is an observer: it fetches the metadata log by topic ID and
  follows leader changes. A commit listener replays each committed batch into this
  broker's own `MetadataImage` after every start: from offset 0, or from the snapshot
  the node started from (`initial_image`, the node publishing from its end).
- Registration and heartbeats (RegisterBroker, BrokerHeartbeat, following NOT_CONTROLLER)
  are `broker.heartbeat`'s, installed beside this (`broker.role`); its state
  (incarnation, broker epoch, fenced) shows in the status.
- Reconciliation by topic ID (in place of LeaderAndIsr/StopReplica) starts once the image
  has caught up to the leader's high watermark first heard after start — before that, a
  partial image would make live topics look deleted — and runs again on every image
  change and whenever a staged deletion falls due. The leader's, not this node's: an
  observer's own high watermark stops at its log end, so after its first fetch of a long
  log it would claim a catch-up that has barely begun.
- `<log.dir>/metadata-image.checkpoint` (JSON {"applied_offset", "image_hash"}, written
  durably) follows the image, for the Spark replay: at once when the image first
  advances, then at most once per `CHECKPOINT_INTERVAL_S` while it keeps advancing, and
  once more when the broker stops. Not once per commit: each write is two fsyncs and a
  content hash of the whole image, and every create commits several times per second
  on a busy cluster, on the disk the quorum's own fsyncs wait for. Nor more than
  `CHECKPOINT_SHARE` of the time: the hash of a million partitions takes ~0.3 s, and a
  broker catching up such a log would spend a third of its time hashing images that
  are gone a second later.
- `BrokerStatus` (msgpack, same framing): applied offset, image hash, hosted partitions,
  pending deletions; with `wait_for_applied_offset` (and `max_wait_ms`) answered once
  the image has applied that offset (`answer_status`). Served through the node's
  listener when it has one, and on the broker's `STATUS://` listener (the client
  listener speaks the Kafka protocol), which also serves the node's `WriteSnapshot`
  (`metadata.snapshot_writer`): a broker has no other port for tools. Over TLS when
  `STATUS` is mapped to SSL (`BrokerSettings.status_ssl_context`): a handshake within
  `connections.authentication.timeout.ms`, else closed. Its connections are capped and
  closed when idle as every listener's (`raft.common.connection_limits`); its frames
  are at most `STATUS_MAX_FRAME_BYTES` (or `socket.request.max.bytes`, if smaller).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import trio

from broker import access_table, partition_dir
from broker.hosting import assignment_for, changed_topics, hosted_partitions
from broker.reconcile import LocalPartition, StagedDeletion, after_actions, reconcile
from broker.settings import Address, BrokerSettings
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from metadata.snapshot_writer import WRITE_SNAPSHOT_API
from raft.common import tls
from raft.common.connection_limits import ConnectionGate, idle_deadline, serve_with_limits
from raft.common.errors import ErrorCode
from raft.common.framing import FramedStream, FrameError
from raft.common.gc_pause import gc_paused
from raft.common.session import Session, bind_session
from raft.common.uuid import Uuid
from raft.node import RaftNode
from raft.rpc_host import RpcHost
from raft.types import Batch

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "metadata-image.checkpoint"  # format: tools.replay's docstring
STATUS_API = "BrokerStatus"
RECONCILE_ERROR_BACKOFF_S = 1.0
CHECKPOINT_INTERVAL_S = 1.0
CHECKPOINT_SHARE = 0.1  # of the time, at most, spent writing image checkpoints
STATUS_WAIT_DEFAULT_MS = 500  # a status that waits for an applied offset (`answer_status`)
STATUS_WAIT_MAX_MS = 30_000
STATUS_MAX_FRAME_BYTES = 1 << 20  # a status request is a few hundred bytes


class Registration(Protocol):
    """What the status shows of the broker's registration (broker.heartbeat)."""

    incarnation_id: Uuid
    broker_epoch: int | None
    is_fenced: bool


def checkpoint_pause_s(write_s: float) -> float:
    """The wait after a checkpoint write that took `write_s` before the next: the
    interval, or longer when writes are slow (at most CHECKPOINT_SHARE of the time)."""
    return max(CHECKPOINT_INTERVAL_S, write_s / CHECKPOINT_SHARE)


def write_checkpoint(log_dir: Path, image: MetadataImage) -> None:
    body = {"applied_offset": image.last_applied_offset, "image_hash": image.content_hash()}
    partition_dir.write_file_durably(log_dir / CHECKPOINT_FILE, json.dumps(body) + "\n")


Disk = tuple[list[LocalPartition], list[StagedDeletion]]  # partition dirs, staged deletions


def reconcile_once(settings: BrokerSettings, image: MetadataImage, now_ms: int,
                   disk: Disk | None, reconciled: MetadataImage | None = None) -> Disk:
    """Decide and apply (blocking I/O: runs in a worker thread) against `disk`, the log
    dir as the last pass left it (None: scan it), and return the log dir as it is now:
    one scan per start or failure, not one per pass (a scan reads every partition's
    partition.metadata). `reconciled`: the image the last pass brought `disk` in line
    with; then only the topics changed since (`broker.hosting.changed_topics`) are
    reconciled, in a pass that costs what changed, not the whole image."""
    local, staged = partition_dir.scan(settings.log_dir) if disk is None else disk
    scope, topics = local, None
    if disk is not None and reconciled is not None:
        names, topics = changed_topics(reconciled, image)
        scope = [p for p in local if p.topic in names or p.topic_id in topics]
    actions = reconcile(local=scope, staged=staged,
                        assignment=assignment_for(image, settings.broker_id, topics),
                        now_ms=now_ms, delete_delay_ms=settings.delete_topic_delay_ms)
    partition_dir.apply_actions(settings.log_dir, actions)
    if actions:
        log.info("reconciled partitions", extra={
            "broker": settings.broker_id, "offset": image.last_applied_offset,
            "actions": dict(Counter(type(a).__name__ for a in actions))})
    return after_actions(local, staged, actions)


def _earliest_due(staged: list[StagedDeletion]) -> int | None:
    dues = [s.due_ms for s in staged if s.due_ms is not None]
    return min(dues) if dues else None


class BrokerServer:
    def __init__(self, node: RaftNode, settings: BrokerSettings, *,
                 registration: Registration | None = None,
                 wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
                 initial_image: MetadataImage | None = None) -> None:
        self._node = node
        self.status_gate = ConnectionGate(
            "STATUS", settings.listener_limits(settings.status_limits))
        # every STATUS request passes the authorization table's STATUS rows first
        self._status_access = access_table.session_gate(
            access_table.STATUS, lambda: self.image.acls, settings.authorizer)
        self.settings = settings
        self._registration = registration
        self._wall_clock_ms = wall_clock_ms  # due times survive restarts: wall clock
        self._image = MetadataImage.empty() if initial_image is None else initial_image
        # Committed records go into one open delta (cheap, in the core task); the image is
        # built from it when a task next reads it, so a catch-up of many batches builds
        # one image, not one per batch.
        self._delta = MetadataDelta(self._image)
        self._delta_dirty = False
        self._start_hw: int | None = None  # the leader's high watermark first heard
        self.caught_up = trio.Event()
        self._wake_reconcile = trio.Event()
        self._wake_checkpoint = trio.Event()
        self.reconciled_offset = -1  # image offset of the last reconciliation that finished
        self.pending_deletions: list[StagedDeletion] = []
        self._reconciled = trio.Event()  # set (and replaced) after each reconciliation
        self._applied = trio.Event()  # set (and replaced) when the applied offset moves
        self._image_replaced = False  # by a snapshot: the next reconciliation is whole

    def install(self, rpc: RpcHost) -> BrokerServer:
        self._node.add_commit_listener(self._on_commit)
        self._node.add_leader_high_watermark_listener(self._on_leader_high_watermark)
        self._node.add_background_task(self.run)
        rpc.add_api_handler(STATUS_API, self._handle_status)
        self._rpc = rpc
        return self

    @property
    def registration(self) -> Registration | None:
        return self._registration

    @property
    def image(self) -> MetadataImage:
        """The image of every committed record applied so far."""
        if self._delta_dirty:
            self._image = self._delta.build()
            self._delta_dirty = False
        return self._image

    @property
    def applied_offset(self) -> int:
        """The offset of the last committed record applied (-1: none), without building
        the image (cheap: metrics read it after every turn of the node)."""
        return self._delta.last_applied_offset

    async def wait_reconciled(self, offset: int) -> None:
        """Until a reconciliation of an image at `offset` or later has finished."""
        while self.reconciled_offset < offset:
            await self._reconciled.wait()

    # --- the committed log (runs in the node's core task: quick, never blocks) --------

    def reset_image(self, image: MetadataImage) -> None:
        """A snapshot fetched from the leader replaced the log: its image is the one to
        reconcile against from now on (the next commits continue from it)."""
        self._image = image
        self._delta = MetadataDelta(image)
        self._delta_dirty = False
        self._image_replaced = True
        self._image_moved()

    def _on_commit(self, batch: Batch) -> None:
        # Until caught up, a replay of the log from its start or a snapshot: what it keeps
        # (the image) is left out of every later collection (raft.common.gc_pause), as a
        # loaded snapshot's is. Otherwise the collector walked the image built so far over
        # and over: 2.2 of 4.3 s of CPU for a million partitions applied batch by batch.
        with gc_paused(freeze=not self.caught_up.is_set()):
            self._delta.apply_records(batch.records, batch.base_offset)  # in bulk
        self._delta_dirty = True
        self._image_moved()

    def _image_moved(self) -> None:
        self._maybe_caught_up()
        self._wake_reconcile.set()
        self._wake_checkpoint.set()
        self._applied.set()
        self._applied = trio.Event()

    def _on_leader_high_watermark(self, high_watermark: int) -> None:
        if self._start_hw is None:
            self._start_hw = high_watermark
            self._maybe_caught_up()

    def _maybe_caught_up(self) -> None:
        applied = self._delta.last_applied_offset
        if not self.caught_up.is_set() and self._start_hw is not None and \
                applied + 1 >= self._start_hw:
            log.info("caught up with the metadata log", extra={
                "broker": self.settings.broker_id, "high_watermark": self._start_hw,
                "offset": applied})
            self.caught_up.set()

    # --- tasks ------------------------------------------------------------------------

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._checkpoint_loop)
            nursery.start_soon(self._reconcile_loop)
            if self.settings.status_address is not None:
                await nursery.start(self._serve_status, self.settings.status_address)

    async def _checkpoint_loop(self) -> None:
        written = None
        try:
            while True:
                self._wake_checkpoint = trio.Event()
                image = self.image
                if image.last_applied_offset == written:
                    await self._wake_checkpoint.wait()
                    continue
                began = trio.current_time()
                await trio.to_thread.run_sync(write_checkpoint, self.settings.log_dir, image)
                written = image.last_applied_offset
                await trio.sleep(checkpoint_pause_s(trio.current_time() - began))
        finally:  # a stop: the image as it is now (a failed disk stays failed: skip it)
            image = self.image
            if image.last_applied_offset != written:
                with trio.CancelScope(shield=True):
                    try:
                        await trio.to_thread.run_sync(write_checkpoint, self.settings.log_dir,
                                                      image)
                    except OSError:
                        pass

    async def _reconcile_loop(self) -> None:
        await self.caught_up.wait()
        disk: Disk | None = None
        reconciled: MetadataImage | None = None  # the image `disk` is in line with
        while True:
            self._wake_reconcile = trio.Event()
            image = self.image
            if self._image_replaced:  # a snapshot's: no relation to the last one
                self._image_replaced, reconciled = False, None
            try:
                disk = await trio.to_thread.run_sync(
                    reconcile_once, self.settings, image, self._wall_clock_ms(), disk,
                    reconciled)
                reconciled = image
                pending = disk[1]
                self.pending_deletions = pending
                self.reconciled_offset = image.last_applied_offset
                self._reconciled.set()
                self._reconciled = trio.Event()
                next_due = _earliest_due(pending)
                wake_in_s = math.inf if next_due is None else \
                    max(0.0, (next_due - self._wall_clock_ms()) / 1000)
            except (OSError, partition_dir.PartitionDirError) as exc:
                log.error("reconciliation failed, will retry", extra={
                    "broker": self.settings.broker_id, "error": str(exc)})
                disk = reconciled = None  # part-way through: the next pass scans it all
                wake_in_s = RECONCILE_ERROR_BACKOFF_S
            with trio.move_on_after(wake_in_s):
                await self._wake_reconcile.wait()

    # --- status -----------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        image = self.image
        registration = self._registration
        return {
            "error_code": 0, "broker_id": self.settings.broker_id,
            "incarnation_id": None if registration is None else str(registration.incarnation_id),
            "broker_epoch": None if registration is None else registration.broker_epoch,
            "is_fenced": True if registration is None else registration.is_fenced,
            "caught_up": self.caught_up.is_set(),
            "applied_offset": image.last_applied_offset, "image_hash": image.content_hash(),
            "reconciled_offset": self.reconciled_offset,
            "high_watermark": self._node.high_watermark, "leader_id": self._node.leader_id,
            "hosted": [{"topic": h.topic, "topic_id": str(h.topic_id),
                        "partition": h.partition, "leader": h.leader,
                        "leader_epoch": h.leader_epoch}
                       for h in hosted_partitions(image, self.settings.broker_id)],
            "pending_deletions": [{"staged": s.name, "due_ms": s.due_ms}
                                  for s in self.pending_deletions],
        }

    async def answer_status(self, body: Any) -> dict[str, Any]:
        """The status. A request naming `wait_for_applied_offset` is answered once the
        image has applied that offset, or after `max_wait_ms` (default 500, at most
        30,000) whichever comes first: a client learns when a change has reached this
        broker without polling for it."""
        wait = body.get("wait_for_applied_offset") if isinstance(body, dict) else None
        if wait is not None:
            max_wait_ms = body.get("max_wait_ms", STATUS_WAIT_DEFAULT_MS)
            if not _is_int(wait) or not _is_int(max_wait_ms) \
                    or not 0 <= max_wait_ms <= STATUS_WAIT_MAX_MS:
                return {"error_code": int(ErrorCode.INVALID_REQUEST), "error_message":
                        "wait_for_applied_offset and max_wait_ms must be integers, "
                        f"max_wait_ms within 0..{STATUS_WAIT_MAX_MS}"}
            with trio.move_on_after(max_wait_ms / 1000):
                while self.applied_offset < wait:
                    await self._applied.wait()
        return self.status()

    async def _handle_status(self, body: Any, cluster_id: str) -> dict[str, Any]:
        return await self.answer_status(body)

    async def _serve_status(self, address: Address,
                            task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                            ) -> None:
        try:
            listeners = await trio.open_tcp_listeners(address[1], host=address[0])
        except OSError as exc:  # status is a convenience: the broker keeps working
            log.error("cannot serve broker status", extra={
                "address": f"{address[0]}:{address[1]}", "error": str(exc)})
            task_status.started()
            return
        log.info("serving broker status", extra={"broker": self.settings.broker_id,
                                                 "address": f"{address[0]}:{address[1]}"})
        task_status.started()
        await serve_with_limits(self._status_connection, listeners, self.status_gate)

    async def _status_connection(self, stream: trio.SocketStream) -> None:
        secured: trio.abc.Stream = stream
        context = self.settings.status_ssl_context
        try:
            host = str(stream.socket.getpeername()[0])
        except OSError:
            host = ""
        if context is None:
            bind_session(Session(client_host=host))
        else:
            try:
                secured, cert = await tls.accept(
                    stream, context, timeout_s=self.status_gate.limits.authentication_timeout_s)
            except tls.TlsHandshakeError as exc:
                log.info("refused status connection", extra={"peer": host,
                                                             "reason": str(exc)})
                await trio.aclose_forcefully(stream)
                return
            bind_session(tls.tls_session(cert, client_host=host))
        limits = self.status_gate.limits
        framed = FramedStream(secured, max_frame_bytes=min(STATUS_MAX_FRAME_BYTES,
                                                           limits.max_request_bytes))
        try:
            while True:
                with trio.move_on_at(idle_deadline(trio.current_time(), limits)) as idle:
                    frame = await framed.receive()
                if idle.cancelled_caught:
                    log.info("status connection closed", extra={
                        "reason": f"no complete request for {limits.max_idle_ms} ms"})
                    break
                if frame is None:
                    break
                refusal = self._status_access(frame["api"])
                if refusal is not None:
                    code, why = refusal
                    body: dict[str, Any] = {"error_code": int(code), "error_message": why}
                elif frame["cluster_id"] not in (None, "", self._node.cluster_id):
                    body = {"error_code": int(ErrorCode.INCONSISTENT_CLUSTER_ID),
                            "error_message": "wrong cluster id"}
                elif frame["api"] == WRITE_SNAPSHOT_API:
                    body = await self._rpc.serve_api(WRITE_SNAPSHOT_API, frame["body"],
                                                     frame["cluster_id"])
                else:
                    body = await self.answer_status(frame["body"])
                await framed.send({"api": frame["api"], "version": 0,
                                   "correlation_id": frame["correlation_id"],
                                   "cluster_id": self._node.cluster_id, "body": body})
        except (FrameError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            log.info("status connection closed", extra={"reason": str(exc)})
        finally:
            await framed.aclose()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def install_broker(node: RaftNode, rpc: RpcHost, settings: BrokerSettings,
                   registration: Registration | None = None,
                   initial_image: MetadataImage | None = None) -> BrokerServer:
    """Install the broker's image, reconciliation and status on `node` (its apis on
    `rpc`). With
    `initial_image` (a snapshot's), `node` must publish from just after its offset."""
    return BrokerServer(node, settings, registration=registration,
                        initial_image=initial_image).install(rpc)

