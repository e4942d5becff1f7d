"""A broker node's registration and heartbeats to the active controller (Trio).

The broker registers once per process start (a new incarnation ID), then heartbeats
every `broker.heartbeat.interval.ms` with the last metadata offset it has applied (from
its commit listener: it fetches the metadata log as a raft observer). Once its image has
caught up with the log (`ready_to_unfence`) and applied its own registration record
(the controller unfences no heartbeat before that) it heartbeats at once, and again every
`FENCED_POLL_S` for as long as the controller keeps it fenced, as Kafka's broker re-sends
while the controller says it is not caught up: the controller unfences a broker on the
first heartbeat that shows the log applied up to its registration, which the image may
reach only after the registration's answer (`next_wait_s`). It finds the
active controller by asking any voter and following NOT_CONTROLLER's leader address. On
STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED it registers again; DUPLICATE_BROKER_
REGISTRATION (its previous incarnation's session has not expired) is retried.

On a graceful stop (`controlled_shutdown`), heartbeats ask to shut down (Kafka's
`wantShutDown`): the controller fences the broker and moves the leadership of its
partitions to other ISR members; the broker stops once the controller says it may and
its own image shows it leads nothing, so clients move to the new leaders before it goes.
The one heartbeat loop sends them, every `SHUTDOWN_POLL_S` from then on.

Each heartbeat of an unfenced broker also lists the partitions marked for deletion that
this broker leads with an empty log (`empty_partitions`, set by the broker role when it
has a Kafka listener: `broker.kafka.ordered.empty_marked`), so the controller can remove
them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from broker.settings import Address
from metadata.admin import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    EmptyPartition,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
)
from metadata.controller_client import ControllerClient, ControllerUnavailable
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from raft.node import RaftNode
from raft.types import Batch

log = logging.getLogger(__name__)

SHUTDOWN_POLL_S = 0.05  # a controlled shutdown asks again this often (the image catching up)
FENCED_POLL_S = 0.1  # a ready broker the controller still fences asks again this often
RETRY_S = 1.0  # a failed registration, or an attempt no controller answered, at most this


def next_wait_s(*, interval_s: float, registered: bool, answered: bool, ready: bool,
                fenced: bool, want_shut_down: bool) -> float:
    """How long the heartbeat loop waits before its next attempt (a wake-up, as
    `ready_to_unfence` or a controlled shutdown sends, ends the wait early; `answered`:
    a controller answered the last attempt): a broker that is neither shutting down,
    unregistered, unanswered nor ready and fenced heartbeats once an interval."""
    if want_shut_down:
        return SHUTDOWN_POLL_S
    if not registered or not answered:  # no faster: each failure logs a line
        return min(interval_s, RETRY_S)
    if ready and fenced:
        return min(interval_s, FENCED_POLL_S)
    return interval_s


class BrokerHeartbeat:
    def __init__(self, node: RaftNode, *, endpoints: tuple[str, ...],
                 heartbeat_interval_ms: int, request_timeout_ms: int = 2000) -> None:
        self._node = node
        self._endpoints = endpoints
        self._interval_s = heartbeat_interval_ms / 1000
        self._timeout_s = request_timeout_ms / 1000
        self.incarnation_id = Uuid.random()
        self.broker_epoch: int | None = None
        self.is_fenced = True
        self.ready = False  # its image has caught up with the log: it may be unfenced
        self.applied_offset = node.first_published_offset - 1  # a snapshot's, or none
        transport_tls = node.transport.tls
        self._client = ControllerClient(
            voters=node.voters, cluster_id=node.cluster_id,
            ssl_context=node.transport.client_ssl_context,
            bind_identity=transport_tls is not None and transport_tls.bind_identity)
        self.empty_partitions: Callable[[], Awaitable[tuple[EmptyPartition, ...]]] | None = \
            None
        self.want_shut_down = False
        self.should_shut_down = False  # the controller's last answer to want_shut_down
        self._wake = trio.Event()  # set: heartbeat now (a shutdown was asked for)
        self._answered = trio.Event()  # set (and replaced) after every attempt

    def install(self) -> BrokerHeartbeat:
        self._node.add_commit_listener(self._on_commit)
        self._node.add_background_task(self.run)
        return self

    def _on_commit(self, batch: Batch) -> None:
        self.applied(batch.next_offset - 1)

    def applied(self, offset: int) -> None:
        """The broker's image holds every record up to `offset` now (a commit, or a
        snapshot fetched from the leader)."""
        before, self.applied_offset = self.applied_offset, offset
        epoch = self.broker_epoch
        if self.ready and self.is_fenced and epoch is not None and \
                before < epoch <= self.applied_offset:
            self._wake.set()  # its registration applied: this heartbeat can unfence it

    async def run(self) -> None:
        broker_id = self._node.node_id
        while True:
            answered = True
            try:
                if self.broker_epoch is None:
                    await self._register(broker_id)
                else:
                    await self._heartbeat(broker_id)
            except ControllerUnavailable as exc:
                answered = False
                log.info("controller unreachable", extra={"broker": broker_id,
                                                          "reason": str(exc)})
            self._answered.set()
            self._answered = trio.Event()
            with trio.move_on_after(next_wait_s(
                    interval_s=self._interval_s, registered=self.broker_epoch is not None,
                    answered=answered, ready=self.ready, fenced=self.is_fenced,
                    want_shut_down=self.want_shut_down)):
                await self._wake.wait()
            self._wake = trio.Event()

    def ready_to_unfence(self) -> None:
        """The broker's image has caught up with the log: heartbeat (or register) at
        once, and keep asking until the controller unfences it."""
        self.ready = True
        # the controller unfences only a heartbeat showing the registration record (at
        # offset broker_epoch) applied: until then one would be wasted (`applied`
        # wakes the loop when it is applied)
        if self.broker_epoch is None or self.applied_offset >= self.broker_epoch:
            self._wake.set()

    async def _register(self, broker_id: int) -> None:
        response = await self._call(RegisterBrokerRequest(
            broker_id=broker_id, incarnation_id=self.incarnation_id, endpoints=self._endpoints))
        if isinstance(response, RegisterBrokerResponse):
            if response.error_code == ErrorCode.NONE:
                self.broker_epoch = response.broker_epoch
                self.is_fenced = True  # every registration starts fenced
                if self.ready and self.applied_offset >= response.broker_epoch:
                    self._wake.set()  # already applied: heartbeat to be unfenced now
                log.info("broker registered", extra={"broker": broker_id,
                                                     "broker_epoch": response.broker_epoch})
            else:
                log.info("broker registration refused",
                         extra={"broker": broker_id, "error": response.error_message})

    async def controlled_shutdown(self, leads_nothing: Callable[[], bool]) -> None:
        """Heartbeat asking to shut down until the controller says this broker may stop
        and `leads_nothing()` (its image shows no partition it leads); unbounded: the
        caller bounds it. A broker never registered has nothing to move."""
        self.want_shut_down = True
        self._wake.set()  # the loop heartbeats now, then every SHUTDOWN_POLL_S
        started = trio.current_time()
        while self.broker_epoch is not None:
            await self._answered.wait()
            if self.should_shut_down and leads_nothing():
                log.info("controlled shutdown: leadership moved away", extra={
                    "broker": self._node.node_id,
                    "elapsed_ms": round((trio.current_time() - started) * 1000)})
                return

    async def _heartbeat(self, broker_id: int) -> None:
        assert self.broker_epoch is not None
        # a fenced broker leads nothing in the controller's image (fencing moves every
        # leadership away), so its reports would be refused: not walked for (a walk of
        # every topic once, after a catch-up, on the way to being unfenced)
        empty = await self.empty_partitions() \
            if self.empty_partitions is not None and not self.is_fenced else ()
        response = await self._call(BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=self.broker_epoch,
            current_metadata_offset=self.applied_offset, empty_marked_partitions=empty or None,
            want_shut_down=self.want_shut_down or None))
        self.should_shut_down = False
        if not isinstance(response, BrokerHeartbeatResponse):
            return
        if response.error_code in (ErrorCode.STALE_BROKER_EPOCH,
                                   ErrorCode.BROKER_ID_NOT_REGISTERED):
            self.broker_epoch = None
        elif response.error_code == ErrorCode.NONE:
            if response.is_fenced != self.is_fenced:
                log.info("broker fenced" if response.is_fenced else "broker unfenced",
                         extra={"broker": broker_id})
            self.is_fenced = response.is_fenced
            self.should_shut_down = bool(response.should_shut_down)

    async def _call(self, request: Any) -> Any:
        return await self._client.call(request, timeout_s=self._timeout_s)


def install_broker_heartbeat(node: RaftNode, *, client_address: Address | None,
                             heartbeat_interval_ms: int, request_timeout_ms: int
                             ) -> BrokerHeartbeat:
    endpoints = (f"PLAINTEXT://{client_address[0]}:{client_address[1]}",) if client_address \
        else ()
    return BrokerHeartbeat(node, endpoints=endpoints, heartbeat_interval_ms=heartbeat_interval_ms,
                           request_timeout_ms=request_timeout_ms).install()
