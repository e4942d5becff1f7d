"""Metadata (v0-v12) and DescribeCluster from the broker's own MetadataImage (pure).

Topics by name or, from v10, by topic ID (KIP-516); responses carry topic IDs. An
unknown name gets UNKNOWN_TOPIC_OR_PARTITION, an unknown ID UNKNOWN_TOPIC_ID (at v10 and
v11, whose topic name is not nullable, with the name ""). `is_internal` is true for the
internal topics (`metadata.topic_names`: `__consumer_offsets`). Brokers
are the unfenced brokers with a PLAINTEXT endpoint. In KRaft clients send admin
requests to the "controller" a broker names; we name ourselves and forward them.

With the authorizer on (`described`: may the caller DESCRIBE this topic?), a topic the
caller may not describe is left out of an all-topics answer and answered
TOPIC_AUTHORIZATION_FAILED when named (by name or by ID), as Kafka does. A topic named
by name that the image does not hold is answered as `unknown_topic` says (auto-creation:
broker/kafka/admin/auto_create.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from broker.kafka import response_shapes as shapes
from broker.kafka.authz import every_operation
from metadata.authorizer import ResourceType
from metadata.image import NO_LEADER, MetadataImage, TopicImage
from metadata.topic_names import is_internal_topic
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid

CLIENT_LISTENER = "PLAINTEXT"


def to_kafka_uuid(topic_id: Uuid) -> uuid.UUID:
    return uuid.UUID(bytes=topic_id.to_bytes())


def from_kafka_uuid(value: uuid.UUID | None) -> Uuid | None:
    """None for a missing or all-zero ID (Kafka's "use the name")."""
    if value is None or value.int == 0:
        return None
    return Uuid.from_bytes(value.bytes)


def broker_endpoints(image: MetadataImage) -> list[shapes.BrokerEndpoint]:
    """[{node_id, host, port, rack}] of unfenced brokers with a PLAINTEXT endpoint (as in
    Kafka, a fenced broker is not shown to clients)."""
    out: list[shapes.BrokerEndpoint] = []
    for broker in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        if broker.fenced:
            continue
        for endpoint in broker.endpoints:
            name, sep, address = endpoint.partition("://")
            host, _, port = address.rpartition(":")
            if sep and name.upper() == CLIENT_LISTENER and port.isdigit():
                out.append({"node_id": broker.broker_id, "host": host, "port": int(port),
                            "rack": broker.rack})
                break
    return out


def topic_metadata(topic: TopicImage, image: MetadataImage) -> shapes.TopicMetadata:
    live = {b.broker_id for b in image.brokers.values()}
    return {
        "error_code": 0, "name": topic.name, "topic_id": to_kafka_uuid(topic.topic_id),
        "is_internal": is_internal_topic(topic.name),
        "partitions": [{
            "error_code": int(ErrorCode.LEADER_NOT_AVAILABLE) if p.leader == NO_LEADER else 0,
            "partition_index": p.partition, "leader_id": p.leader,
            "leader_epoch": p.leader_epoch, "replica_nodes": list(p.replicas),
            "isr_nodes": list(p.isr),
            "offline_replicas": [r for r in p.replicas if r not in live]}
            for p in topic.partitions],
    }


def _unnamed(version: int) -> str | None:
    """The name of a topic answered by ID without revealing it: null from v12; v10 and
    v11 carry topic IDs but no nullable name, so "" there (as Kafka's error response)."""
    return None if version >= 12 else ""


def _everything(name: str) -> bool:
    return True


def _unknown(name: str) -> ErrorCode:
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _all_operations(name: str) -> int:
    return every_operation(ResourceType.TOPIC)


EVERY_CLUSTER_OPERATION = every_operation(ResourceType.CLUSTER)


def handle_metadata_request(image: MetadataImage, request: Any, version: int, *,
                            broker_id: int, cluster_id: str,
                            described: Callable[[str], bool] = _everything,
                            unknown_topic: Callable[[str], ErrorCode] = _unknown,
                            operations: Callable[[str], int] = _all_operations,
                            cluster_operations: Callable[[], int] = lambda: (
                                EVERY_CLUSTER_OPERATION)
                            ) -> shapes.MetadataResponse:
    """`operations`: the caller's authorized operations on a topic, answered when the
    request asks (`include_topic_authorized_operations`, v8+); `cluster_operations` on
    the cluster (`include_cluster_authorized_operations`, v8-v10: librdkafka's
    DescribeCluster)."""
    wanted = request.topics
    topics: list[shapes.TopicMetadata] = []
    if wanted is None or (version == 0 and not wanted):
        topics = [topic_metadata(t, image)
                  for t in sorted(image.topics.values(), key=lambda t: t.name)
                  if described(t.name)]
    else:
        for item in wanted:
            name = item if isinstance(item, str) else item.name
            topic_id = None if isinstance(item, str) else \
                from_kafka_uuid(getattr(item, "topic_id", None))
            if topic_id is not None:
                topic = image.topic(topic_id)
                if topic is None or not described(topic.name):
                    topics.append({"error_code": int(
                        ErrorCode.UNKNOWN_TOPIC_ID if topic is None
                        else ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                        "name": _unnamed(version), "topic_id": to_kafka_uuid(topic_id),
                        "partitions": []})
                    continue
            else:
                if not described(name or ""):  # known or not: nothing is revealed
                    topics.append({"error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                   "name": name, "topic_id": uuid.UUID(int=0),
                                   "partitions": []})
                    continue
                topic = image.topic_by_name(name or "")
                if topic is None:
                    topics.append({"error_code": int(unknown_topic(name or "")),
                                   "name": name, "topic_id": uuid.UUID(int=0),
                                   "partitions": []})
                    continue
            topics.append(topic_metadata(topic, image))
    if getattr(request, "include_topic_authorized_operations", False):
        for answered in topics:
            if answered["error_code"] == 0:
                answered["topic_authorized_operations"] = operations(answered["name"] or "")
    response: shapes.MetadataResponse = {
        "throttle_time": 0, "brokers": broker_endpoints(image), "cluster_id": cluster_id,
        "controller_id": broker_id, "topics": topics}
    if getattr(request, "include_cluster_authorized_operations", False):
        response["cluster_authorized_operations"] = cluster_operations()
    return response


def handle_describe_cluster_request(image: MetadataImage, request: Any, version: int, *,
                                    broker_id: int, cluster_id: str,
                                    operations: int = EVERY_CLUSTER_OPERATION
                                    ) -> shapes.DescribeClusterResponse:
    """`operations`: the caller's authorized operations on the cluster, answered when the
    request asks (`include_cluster_authorized_operations`)."""
    brokers: list[shapes.ClusterBroker] = [
        {"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
        for b in broker_endpoints(image)]
    response: shapes.DescribeClusterResponse = {
        "throttle_time": 0, "error_code": 0, "cluster_id": cluster_id,
        "controller_id": broker_id, "brokers": brokers}
    if getattr(request, "include_cluster_authorized_operations", False):
        response["cluster_authorized_operations"] = operations
    return response
