"""The Trio shell of the metadata controller: serves the admin APIs on a `RaftNode`.

- A commit listener replays every committed record into the node's MetadataImage,
  from the image the node started from (empty, or a snapshot's: `initial_image`).
- The node is the *active* controller once it leads and its committed image holds the
  LeaderChange record of its own epoch: then every record of earlier epochs has
  committed too (Raft commits earlier entries with the first one of the new epoch), so
  a fresh `Controller` built on that image sees everything. Until then, and on every
  other node, admin requests get NOT_CONTROLLER (41) with the leader's id and address.
- Writes queue (`metadata.write_queue`); one proposer keeps at most one "decide
  everything queued" step waiting in the node's inbox. That step runs in the core task
  (`decide_and_propose`), takes every write queued by then, decides them against the
  controller's view and appends all their records as one Raft batch, so log order is
  decision order and writes that arrive together share one append, fsync and
  replication round. There is no timer: a write waits only for the core task, and the
  writes that arrive while it is busy (e.g. fsyncing the previous batch) make the next
  batch.
- A write is answered from the commit listener, as soon as the committed image holds
  its records (or, when it writes nothing, the pending records its answer rests on) as
  they were proposed: in the same turn of the core task that learnt the new high
  watermark from the majority's Fetch. A write that changes nothing and rests on nothing
  pending is answered at once. If leadership is lost, or what commits is not what was
  proposed, every write still waiting is answered NOT_CONTROLLER, never success.
- A background task fences brokers whose session expired (`Controller.tick`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from metadata import records as rec
from metadata.acl_control import (
    admin_refusal,
    delete_topics_refusals,
    describable,
    describe_acls,
    merge_delete_results,
)
from metadata.admin import (
    API_NAMES,
    WRITE_APIS,
    AdminDecodeError,
    AdminErrorResponse,
    AdminRequest,
    AdminResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeFeaturesRequest,
    DescribeTopicsRequest,
    DescribeTopicsResponse,
    DescribeUserScramCredentialsRequest,
    decode_request,
    encode_body,
)
from metadata.authorizer import OFF, AuthorizerSettings
from metadata.bootstrap import is_fresh_image, is_fresh_record
from metadata.controller import Controller, ControllerConfig, describe_topics
from metadata.delta import MetadataDelta
from metadata.fast_records import PARTITIONS
from metadata.feature_control import describe_features
from metadata.image import MetadataImage
from metadata.scram_control import describe_user_scram_credentials
from metadata.write_queue import WriteQueue
from raft.common.errors import ErrorCode
from raft.common.gc_pause import gc_paused
from raft.common.session import current_session
from raft.node import LogDirFailure, NotLeaderError, RaftNode
from raft.rpc_host import RpcHost
from raft.types import Batch

log = logging.getLogger(__name__)

ADMIN_APIS = tuple(API_NAMES)  # every admin RPC of metadata.admin is served
TICK_INTERVAL_S = 0.25


class _NotActive(Exception):
    """This node is not the active controller (now)."""


class _Write:
    """One admin write's answer, set once (`WriteQueue` keys)."""

    __slots__ = ("done", "response")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.response: AdminResponse | None = None


class ControllerShell:
    def __init__(self, node: RaftNode, *, config: ControllerConfig | None = None,
                 rng: random.Random | None = None,
                 initial_image: MetadataImage | None = None,
                 authorizer: AuthorizerSettings = OFF) -> None:
        self._node = node
        self._config = config or ControllerConfig()
        # who may call the admin API (metadata.acl_control.admin_refusal); OFF: anyone
        self._authorizer = authorizer
        # topic IDs from the OS's entropy, as Kafka's Uuid.randomUuid(); tests pass a seed
        self._rng = rng or random.SystemRandom()
        # every committed record, on every node (the node publishes from its end)
        self._image = MetadataImage.empty() if initial_image is None else initial_image
        self._controller: Controller | None = None
        self._controller_epoch = -1
        self._writes: WriteQueue[_Write] = WriteQueue()
        self._proposer_wake = trio.Event()  # set when a write is queued
        # kraft format --add-scram (metadata.bootstrap): the first proposal of a controller
        # activated on a fresh log (raft's control records only) starts with them
        self._bootstrap: tuple[rec.Record, ...] = ()
        self._fresh = initial_image is None or is_fresh_image(initial_image)
        self._bootstrap_due = False

    def install(self, rpc: RpcHost) -> ControllerShell:
        for api in ADMIN_APIS:
            rpc.add_api_handler(api, self._handler_for(api))
        self._node.add_commit_listener(self._on_commit)
        self._node.add_background_task(self._tick_forever)
        self._node.add_background_task(self._propose_forever)
        return self

    @property
    def image(self) -> MetadataImage:
        """The committed image on this node."""
        return self._image

    @property
    def is_active(self) -> bool:
        return self._active() is not None

    # --- the committed log (runs in the node's core task) -----------------------------

    def set_bootstrap_records(self, records: tuple[rec.Record, ...]) -> None:
        """The records `kraft format` left for a fresh log (`metadata.bootstrap`)."""
        self._bootstrap = records

    def reset_image(self, image: MetadataImage) -> None:
        """A snapshot fetched from the leader replaced the log; the leader, the only node
        with an active controller, never loads one."""
        if self._controller is not None:
            raise AssertionError("the active controller's node loaded a fetched snapshot")
        self._image = image

    def _on_commit(self, batch: Batch) -> None:
        self._active()  # a lost leadership fails the writes before anything is applied
        entries: list[tuple[int, rec.Record | bytes]] = []
        with gc_paused():  # a bulk replay at start-up (raft.common.gc_pause)
            for index, data in enumerate(batch.records):
                if self._controller is None and PARTITIONS.image(data) is not None:
                    # a Partition record (metadata.fast_records): no leader change; the
                    # delta takes its bytes (an active controller compares records)
                    entries.append((batch.base_offset + index, data))
                    self._fresh = False
                    continue
                try:
                    record: rec.Record | bytes = rec.decode(data)
                except rec.RecordError:
                    record = data  # replay notes it as an anomaly
                entries.append((batch.base_offset + index, record))
                self._fresh = self._fresh and is_fresh_record(record)
                if self._is_own_leader_change(record, batch.epoch):
                    self._apply(entries)
                    entries = []
                    self._activate(batch.epoch)
            self._apply(entries)
        if self._controller is not None and self._writes.waiting:
            self._answer(self._writes.applied(self._image.last_applied_offset))

    def _is_own_leader_change(self, record: object, epoch: int) -> bool:
        return (isinstance(record, rec.LeaderChange) and record.leader_id == self._node.node_id
                and epoch == self._node.epoch and self._node.is_leader)

    def _apply(self, entries: list[tuple[int, rec.Record | bytes]]) -> None:
        if not entries:
            return
        if self._controller is not None:
            diverged = self._controller.on_committed(entries)
            self._image = self._controller.committed
            if diverged:  # not what was proposed: the writes waiting on it did not commit
                log.warning("committed records differ from the proposed ones",
                            extra={"node": self._node.node_id, "offset": entries[0][0]})
                self._fail_writes()
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
        if self._fresh and self._bootstrap:  # the first proposal carries them
            self._bootstrap_due = True
            self._proposer_wake.set()
        log.info("active controller", extra={"node": self._node.node_id, "epoch": epoch,
                                             "offset": self._image.last_applied_offset})

    def _active(self) -> Controller | None:
        node = self._node
        if self._controller is not None and not (node.is_leader
                                                 and node.epoch == self._controller_epoch):
            log.info("controller inactive", extra={"node": node.node_id,
                                                   "epoch": self._controller_epoch})
            self._controller = None
            self._fail_writes()
        return self._controller

    def _fail_writes(self, response: AdminResponse | None = None) -> None:
        """Answer every queued and waiting write with `response` (NOT_CONTROLLER)."""
        if self._writes.queued or self._writes.waiting:
            self._answer(self._writes.fail(response or self._not_controller_response()))

    @staticmethod
    def _answer(answers: list[tuple[_Write, AdminResponse]]) -> None:
        for write, response in answers:
            write.response = response
            write.done.set()

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
        session = current_session()  # the connection's: bound by the transport
        controller = self._active()
        if controller is None:  # before judging the caller: a stale image may lack its ACLs
            return self._not_controller()
        refusal = admin_refusal(controller.committed, session.principal, session.client_host,
                                request, self._authorizer)
        if refusal is not None:
            log.info("admin request refused", extra={
                "api": api, "principal": str(session.principal),
                "reason": refusal.error_message})
            return encode_body(refusal)
        try:
            if isinstance(request, DeleteTopicsRequest):
                return encode_body(await self._delete_topics(controller.committed, request))
            if api in WRITE_APIS:
                return encode_body(await self._write(request))
            if isinstance(request, DescribeAclsRequest):
                return encode_body(describe_acls(controller.committed, request))
            if isinstance(request, DescribeFeaturesRequest):
                return encode_body(describe_features(
                    controller.committed, kraft_version=self._node.core.kraft_version))
            if isinstance(request, DescribeUserScramCredentialsRequest):
                return encode_body(describe_user_scram_credentials(controller.committed,
                                                                   request))
            assert isinstance(request, DescribeTopicsRequest)
            described = describe_topics(controller.committed, request)
            if self._authorizer.enabled and request.names is None and request.topic_ids is None:
                may = describable(controller.committed, session.principal,
                                  session.client_host, self._authorizer)
                described = DescribeTopicsResponse(  # every topic: those it may describe
                    topics=tuple(t for t in described.topics if may(t.name or "")),
                    error_code=described.error_code, error_message=described.error_message)
            return encode_body(described)
        except (_NotActive, NotLeaderError):
            return self._not_controller()

    async def _delete_topics(self, committed: MetadataImage, request: DeleteTopicsRequest
                             ) -> Any:
        """Decided per topic for its caller (`delete_topics_refusals`); the others are
        written, and the answers keep the request's order."""
        session = current_session()
        refusals = delete_topics_refusals(committed, session.principal, session.client_host,
                                          request, self._authorizer)
        kept = tuple(t for t, r in zip(request.topics, refusals, strict=True) if r is None)
        response: Any = DeleteTopicsResponse(responses=())
        if kept:
            response = await self._write(DeleteTopicsRequest(topics=kept))
        if not isinstance(response, DeleteTopicsResponse):
            return response
        return merge_delete_results(refusals, response)

    async def _write(self, request: AdminRequest) -> Any:
        if self._active() is None:
            raise _NotActive()
        write = _Write()
        self._writes.submit(write, request)
        self._proposer_wake.set()
        await write.done.wait()
        return write.response

    async def _propose_forever(self) -> None:
        """Keep one decide step for the queued writes in the core task's inbox while
        writes are queued; it takes whatever is queued when it runs (no timer)."""
        async with trio.open_nursery() as nursery:
            while True:
                await self._proposer_wake.wait()
                self._proposer_wake = trio.Event()
                taken = trio.Event()
                nursery.start_soon(self._propose_queued, taken)
                await taken.wait()

    async def _propose_queued(self, taken: trio.Event) -> None:
        def decide(now_ms: int, next_offset: int) -> list[bytes]:
            taken.set()  # writes queued from now on go to the next step
            controller = self._active()
            if controller is None:
                raise _NotActive()
            bootstrap: tuple[rec.Record, ...] = ()
            if self._bootstrap_due:  # once per activation; a lost batch is not retried
                self._bootstrap_due = False
                bootstrap = controller.bootstrap(self._bootstrap,
                                                 next_offset=next_offset).records
                log.info("appending the bootstrap records", extra={
                    "records": len(bootstrap), "offset": next_offset})
            proposal = self._writes.decide(controller, now_ms=now_ms, rng=self._rng,
                                           next_offset=next_offset + len(bootstrap))
            for _, error in proposal.errors:
                log.error("controller decision failed", exc_info=error)
            self._answer(list(proposal.answers))
            return [record.encode() for record in (*bootstrap, *proposal.records)]

        try:
            # returns once the batch committed; its writes were answered by then
            await self._node.decide_and_propose(decide)
        except (_NotActive, NotLeaderError):
            # not the leader (any more), or the batch was cut from the log
            self._active()
            self._fail_writes()
        except LogDirFailure as exc:  # the node stops; the clients try another controller
            self._fail_writes(AdminErrorResponse(top_level_error=ErrorCode.KAFKA_STORAGE_ERROR,
                                                 error_message=str(exc)))
        except Exception as exc:  # a bug must not leave writes unanswered or stop the node
            log.exception("proposing the queued writes failed")
            self._fail_writes(AdminErrorResponse(
                top_level_error=ErrorCode.UNKNOWN_SERVER_ERROR,
                error_message=f"{type(exc).__name__}: {exc}"))
        finally:
            taken.set()

    def _not_controller(self) -> dict[str, Any]:
        return encode_body(self._not_controller_response())

    def _not_controller_response(self) -> AdminErrorResponse:
        node = self._node
        leader, address = node.leader_id, node.leader_address
        return AdminErrorResponse(
            top_level_error=ErrorCode.NOT_CONTROLLER,
            error_message=(f"node {node.node_id} is not the active controller"
                           + ("" if leader is None else f"; the leader is {leader}")),
            leader_id=-1 if leader is None else leader,
            leader_address=None if address is None else f"{address[0]}:{address[1]}")

    # --- broker sessions --------------------------------------------------------------

    async def _tick_forever(self) -> None:
        while True:
            await trio.sleep(TICK_INTERVAL_S)
            controller = self._active()
            # a turn of the core loop only when a session may have expired
            if controller is None or not controller.tick_due(self._node.now_ms()):
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


def install_controller(node: RaftNode, rpc: RpcHost, *, broker_session_timeout_ms: int,
                       ordered_delivery_default: bool, unclean_election_default: bool = False,
                       initial_image: MetadataImage | None = None,
                       authorizer: AuthorizerSettings = OFF) -> ControllerShell:
    """Serve the admin APIs on `node` (a voter) through `rpc`; call before `node.run()`. With
    `initial_image` (a snapshot's), `node` must publish from just after its offset."""
    config = ControllerConfig(broker_session_timeout_ms=broker_session_timeout_ms,
                              ordered_delivery_default=ordered_delivery_default,
                              unclean_election_default=unclean_election_default)
    return ControllerShell(node, config=config, initial_image=initial_image,
                           authorizer=authorizer).install(rpc)
