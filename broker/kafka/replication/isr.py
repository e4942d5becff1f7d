"""The partition leader's side of AlterPartition: shrink and expand ISRs through the
controller (Trio). The controller's answers carry Kafka's error codes (`kio`'s
`ErrorCode`, as every handler in `broker.kafka` uses).

Every `replica.lag.time.max.ms / 2` (at most a second), and at once when a follower
outside an ISR reaches the high watermark, the task looks at each open partition this
broker leads: a follower that has been behind the log end for the lag time is proposed
for removal, an unfenced replica that reached the high watermark for addition
(`PartitionState.isr_proposal`). All proposals of a round go in one request, so at most
one AlterPartition per partition is in flight. The high watermark follows the maximal
ISR meanwhile (`PartitionState.maybe_advance_high_watermark`): a removal takes effect
once the controller's ISR is in this broker's image, an addition at once.

Answers: success, or INVALID_UPDATE_VERSION / FENCED_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER
(this broker decided on an older state) -> wait for the image to show the newer state
(sent again if it does not within the lag time); another error (nothing was written)
-> forget the proposal and decide again from the image; no answer -> send the same ISR
again next round (it may have committed). NOT_CONTROLLER is followed by the client.

`IsrManager.on_isr_change` (set by `tools.metrics`; None: off) hears `"shrink"` and/or
`"expand"` for each ISR change the controller accepted, and `"failed"` for each one it
refused (Kafka's IsrShrinksPerSec, IsrExpandsPerSec and FailedIsrUpdatesPerSec).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from broker.dataplane.progress import AlterOutcome
from broker.kafka.context import BrokerContext
from broker.kafka.replication.replica import PartitionState
from metadata.admin import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
)
from metadata.controller_client import ControllerUnavailable
from metadata.image import PartitionImage
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid

log = logging.getLogger(__name__)

MAX_CHECK_INTERVAL_S = 1.0

Proposal = tuple[PartitionState, PartitionImage, tuple[int, ...]]


class IsrManager:
    def __init__(self, context: BrokerContext, *, replica_lag_time_max_ms: int,
                 request_timeout_ms: int = 2000) -> None:
        self.context = context
        self.lag_time_max_s = replica_lag_time_max_ms / 1000
        self._timeout_s = request_timeout_ms / 1000
        # an accepted change the image does not show within this is sent again
        self._image_wait_s = max(self._timeout_s, self.lag_time_max_s)
        self.on_isr_change: Callable[[str], None] | None = None  # metrics (see above)

    async def run(self) -> None:
        interval_s = min(self.lag_time_max_s / 2, MAX_CHECK_INTERVAL_S)
        while True:
            await self.run_once()
            await self.context.replicas.wait_isr_check(interval_s)

    async def run_once(self) -> None:
        proposals = self.propose(trio.current_time())
        if proposals:
            await self.send(proposals)

    def propose(self, now: float) -> list[Proposal]:
        """Observe the image, move high watermarks, and mark what to send as pending.
        A pending ISR whose outcome is unknown is sent again unchanged, never dropped:
        the controller may have committed it, and then its additions must keep counting
        until the image shows them."""
        context = self.context
        broker_id = context.broker_id
        broker_epoch = self.context.broker_epoch()
        eligible = frozenset(context.image.unfenced_broker_ids())
        proposals = []
        for state, partition in context.replicas.led_partitions():
            state.observe_partition(partition, now)
            if state.maybe_advance_high_watermark(partition, broker_id):
                context.replicas.notify_data()
            if broker_epoch is None:  # not registered yet: the controller would refuse
                continue
            new_isr = state.next_proposal(partition, broker_id, now,
                                          lag_time_max_s=self.lag_time_max_s,
                                          eligible=eligible)
            if new_isr is None:
                continue
            log.info("proposing a new ISR", extra={
                "topic_id": str(state.topic_id), "partition": state.partition,
                "isr": list(partition.isr), "new_isr": list(new_isr)})
            proposals.append((state, partition, new_isr))
        return proposals

    async def send(self, proposals: list[Proposal]) -> None:
        broker_epoch = self.context.broker_epoch()
        controller = self.context.controller
        if broker_epoch is None or controller is None:
            self._resend_later(proposals, trio.current_time())
            return
        by_topic: dict[Uuid, list[AlterPartitionData]] = {}
        for state, partition, new_isr in proposals:
            by_topic.setdefault(state.topic_id, []).append(AlterPartitionData(
                partition=state.partition, leader_epoch=partition.leader_epoch,
                partition_epoch=partition.partition_epoch, new_isr=new_isr))
        request = AlterPartitionRequest(
            broker_id=self.context.broker_id, broker_epoch=broker_epoch,
            topics=tuple(AlterPartitionTopic(topic_id=t, partitions=tuple(ps))
                         for t, ps in by_topic.items()))
        try:
            response = await controller.call(request, timeout_s=self._timeout_s)
        except ControllerUnavailable as exc:
            log.info("AlterPartition not answered, will resend", extra={"reason": str(exc)})
            self._resend_later(proposals, trio.current_time())
            return
        if not isinstance(response, AlterPartitionResponse):
            log.warning("AlterPartition failed, will resend", extra={
                "response": repr(response)})
            self._resend_later(proposals, trio.current_time())
            return
        self.handle_response(proposals, response, trio.current_time())

    def handle_response(self, proposals: list[Proposal], response: AlterPartitionResponse,
                        now: float) -> None:
        results = {(topic.topic_id, result.partition): result
                   for topic in response.topics for result in topic.partitions}
        for state, partition, new_isr in proposals:
            result = results.get((state.topic_id, state.partition))
            fields = {"topic_id": str(state.topic_id), "partition": state.partition,
                      "new_isr": list(new_isr)}
            if result is None:
                log.warning("AlterPartition answered without the partition", extra=fields)
                state.unanswered(partition, now)
                continue
            outcome = state.answered(partition, result.error_code, result.partition_epoch,
                                     now, self._image_wait_s)
            if outcome == AlterOutcome.CHANGED:
                log.info("ISR changed", extra={
                    **fields, "partition_epoch": result.partition_epoch})
                self._count_change(partition.isr, new_isr)
            elif outcome == AlterOutcome.WAIT_FOR_IMAGE:
                log.info("ISR change refused on older state, waiting for the image", extra={
                    **fields, "error": result.error_code, "reason": result.error_message})
            elif outcome == AlterOutcome.REFUSED:
                log.warning("ISR change refused", extra={
                    **fields, "error": result.error_code, "reason": result.error_message})
            if outcome != AlterOutcome.STALE and result.error_code != ErrorCode.NONE and \
                    self.on_isr_change is not None:
                self.on_isr_change("failed")

    def _count_change(self, old: tuple[int, ...], new: tuple[int, ...]) -> None:
        if self.on_isr_change is None:
            return
        if set(old) - set(new):
            self.on_isr_change("shrink")
        if set(new) - set(old):
            self.on_isr_change("expand")

    @staticmethod
    def _resend_later(proposals: list[Proposal], now: float) -> None:
        """The outcome is unknown: send the same ISR again next round."""
        for state, partition, _ in proposals:
            state.unanswered(partition, now)
