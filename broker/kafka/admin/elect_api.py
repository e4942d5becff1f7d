"""ElectLeaders (API 43, v0-v2; Kafka's `AdminClient.electLeaders`,
kafka-leader-election.sh): forwarded to the active controller as the `metadata.admin`
ElectLeaders RPC, which decides each partition (`metadata.elections`: PREFERRED, or
UNCLEAN where `unclean.leader.election.enable` allows it) with Kafka's error codes. v0
has no election type: it is PREFERRED. A null topic list means every partition.

The answer is held until this broker's image shows every elected partition's new
leader epoch (bounded by the request's timeout), so a client's next Metadata here sees
the new leaders.

Authorization as Kafka's: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the
top and on every partition named (none when the request names every partition);
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
from metadata.admin import ElectionTopic, ElectLeadersRequest, ElectLeadersResponse
from metadata.elections import PREFERRED
from metadata.image import MetadataImage
from raft.common.errors import ErrorCode

log = logging.getLogger(__name__)

Key = tuple[str, int]  # (topic name, partition)


def _every_partition_answered(topics: Iterable[ElectionTopic], code: int, message: str | None
                              ) -> list[shapes.ReplicaElectionResult]:
    return [{"topic": t.topic, "partition_result": [
        {"partition_id": p, "error_code": code, "error_message": message}
        for p in t.partitions]} for t in topics]


def _leader_epochs(image: MetadataImage, topics: tuple[ElectionTopic, ...] | None
                   ) -> dict[Key, int]:
    """The leader epoch of each partition the request names (None: of every one), as
    this broker's image has it now."""
    wanted = {t.topic: set(t.partitions) for t in topics} if topics is not None else None
    return {(topic.name, p.partition): p.leader_epoch for topic in image.topics.values()
            if wanted is None or topic.name in wanted
            for p in topic.partitions if wanted is None or p.partition in wanted[topic.name]}


def _shows_new_leaders(image: MetadataImage, before: dict[Key, int],
                       elected: list[Key]) -> bool:
    for name, index in elected:
        topic = image.topic_by_name(name)
        if topic is None or index >= len(topic.partitions) or \
                topic.partitions[index].leader_epoch <= before.get((name, index), -1):
            return False
    return True


async def handle_elect_leaders_request(context: BrokerContext, request: Any,
                                       version: int) -> shapes.ElectLeadersResponse:
    topics = None if request.topic_partitions is None else tuple(
        ElectionTopic(topic=t.topic, partitions=tuple(int(p) for p in t.partitions))
        for t in request.topic_partitions)
    if not authz.cluster_allowed(context, authz.Op.ALTER):
        return {"throttle_time": 0, "error_code": authz.CLUSTER_AUTHORIZATION_FAILED,
                "replica_election_results": _every_partition_answered(
                    topics or (), authz.CLUSTER_AUTHORIZATION_FAILED,
                    "ALTER on the cluster is not allowed")}
    admin = ElectLeadersRequest(
        election_type=int(getattr(request, "election_type", PREFERRED)),
        topic_partitions=topics)
    timeout_s = request_timeout_s(request, context)
    before = _leader_epochs(context.image, topics)
    response, error, message = await forward_to_controller(context, admin, timeout_s)
    if response is not None:
        assert isinstance(response, ElectLeadersResponse)
        error, message = kafka_error(response.error_code), response.error_message
    if response is None or error:
        log.info("elect leaders refused", extra={"error": error, "why": message})
        return {"throttle_time": 0, "error_code": error,
                "replica_election_results": _every_partition_answered(
                    topics or (), error, message)}
    elected = [(t.topic, p.partition_id) for t in response.replica_election_results
               for p in t.partition_result if p.error_code == ErrorCode.NONE]
    if elected:
        await context.wait_image(lambda image: _shows_new_leaders(image, before, elected),
                                 timeout_s)
    log.info("elect leaders", extra={"election_type": admin.election_type,
                                     "elected": len(elected)})
    return {"throttle_time": 0, "error_code": 0, "replica_election_results": [
        {"topic": t.topic, "partition_result": [
            {"partition_id": p.partition_id, "error_code": kafka_error(p.error_code),
             "error_message": p.error_message} for p in t.partition_result]}
        for t in response.replica_election_results]}
