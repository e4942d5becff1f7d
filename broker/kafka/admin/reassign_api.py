"""AlterPartitionReassignments (API 45, v0) and ListPartitionReassignments (API 46, v0):
Kafka's `AdminClient.alterPartitionReassignments` / `listPartitionReassignments`,
kafka-reassign-partitions.sh (KIP-455).

Alter is forwarded to the active controller as the `metadata.admin` RPC of the same
name, which decides each partition (`metadata.reassignments`) with Kafka's error codes.
The answer is held until this broker's image shows every accepted partition with the
target it was given (ongoing, or already completed) or, for a cancel, with none ongoing
(bounded by the request's timeout), so a List here right after sees it.

List answers from this broker's image: every partition with a reassignment ongoing
(replicas, adding, removing), of the topics named (null: of every topic; an unknown
topic or partition is left out, as Kafka's controller does).

Authorization as Kafka's: ALTER on the cluster for Alter, DESCRIBE for List, else
CLUSTER_AUTHORIZATION_FAILED at the top (and on every partition named, for Alter);
nothing is forwarded.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from broker.kafka import authz
from broker.kafka import response_shapes as shapes
from broker.kafka.admin.admin_api import forward_to_controller, kafka_error, request_timeout_s
from broker.kafka.context import BrokerContext
from metadata.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignableTopic,
)
from metadata.image import MetadataImage
from metadata.reassignments import target_replicas
from raft.common.errors import ErrorCode

log = logging.getLogger(__name__)

Target = tuple[str, int, tuple[int, ...] | None]  # (topic, partition, target or cancel)


def _every_partition_answered(topics: Iterable[ReassignableTopic], code: int,
                              message: str | None) -> list[shapes.ReassignableTopicResponse]:
    return [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index, "error_code": code, "error_message": message}
        for p in t.partitions]} for t in topics]


def _shows(image: MetadataImage, accepted: list[Target]) -> bool:
    """Every accepted partition as the controller left it: with its target, or (a
    cancel) with nothing ongoing."""
    for name, index, target in accepted:
        topic = image.topic_by_name(name)
        if topic is None or index >= len(topic.partitions):
            return False
        part = topic.partitions[index]
        if part.reassigning if target is None else target_replicas(part) != target:
            return False
    return True


async def handle_alter_partition_reassignments_request(
        context: BrokerContext, request: Any, version: int
) -> shapes.AlterPartitionReassignmentsResponse:
    topics = tuple(ReassignableTopic(name=t.name, partitions=tuple(ReassignablePartition(
        partition_index=int(p.partition_index),
        replicas=None if p.replicas is None else tuple(int(r) for r in p.replicas))
        for p in t.partitions)) for t in request.topics)
    if not authz.cluster_allowed(context, authz.Op.ALTER):
        refusal = "ALTER on the cluster is not allowed"
        return {"throttle_time": 0, "error_code": authz.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": refusal, "responses": _every_partition_answered(
                    topics, authz.CLUSTER_AUTHORIZATION_FAILED, refusal)}
    timeout_s = request_timeout_s(request, context)
    response, error, message = await forward_to_controller(
        context, AlterPartitionReassignmentsRequest(topics=topics), timeout_s)
    if response is None:
        log.info("reassignment refused", extra={"error": error, "why": message})
        return {"throttle_time": 0, "error_code": error, "error_message": message,
                "responses": _every_partition_answered(topics, error, message)}
    assert isinstance(response, AlterPartitionReassignmentsResponse)
    targets = {(t.name, p.partition_index): p.replicas for t in topics for p in t.partitions}
    accepted = [(t.name, p.partition_index, targets[t.name, p.partition_index])
                for t in response.responses for p in t.partitions
                if p.error_code == ErrorCode.NONE]
    if accepted:
        await context.wait_image(lambda image: _shows(image, accepted), timeout_s)
    log.info("partition reassignments", extra={"accepted": len(accepted)})
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "responses": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": kafka_error(p.error_code),
             "error_message": p.error_message} for p in t.partitions]}
        for t in response.responses]}


def list_reassignments(image: MetadataImage, wanted: dict[str, frozenset[int]] | None
                       ) -> list[shapes.OngoingTopicReassignment]:
    """The ongoing reassignments of the topics (and partitions) `wanted`, None: all."""
    names = sorted(image.topic_ids_by_name) if wanted is None else sorted(wanted)
    answer: list[shapes.OngoingTopicReassignment] = []
    for name in names:
        topic = image.topic_by_name(name)
        if topic is None:
            continue
        ongoing: list[shapes.OngoingPartitionReassignment] = [
            {"partition_index": p.partition, "replicas": list(p.replicas),
             "adding_replicas": list(p.adding_replicas),
             "removing_replicas": list(p.removing_replicas)}
            for p in topic.partitions if p.reassigning
            and (wanted is None or p.partition in wanted[name])]
        if ongoing:
            answer.append({"name": name, "partitions": ongoing})
    return answer


async def handle_list_partition_reassignments_request(
        context: BrokerContext, request: Any, version: int
) -> shapes.ListPartitionReassignmentsResponse:
    if not authz.cluster_allowed(context, authz.Op.DESCRIBE):
        return {"throttle_time": 0, "error_code": authz.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "DESCRIBE on the cluster is not allowed", "topics": []}
    wanted = None if request.topics is None else {
        t.name: frozenset(int(p) for p in t.partition_indexes) for t in request.topics}
    return {"throttle_time": 0, "error_code": 0, "error_message": None,
            "topics": list_reassignments(context.image, wanted)}
