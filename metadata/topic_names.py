"""Kafka's topic name rules (`org.apache.kafka.common.internals.Topic.validate`) and its
internal topics (`Topic.isInternal`).

An internal topic belongs to the cluster, not to its clients: only the group coordinator
writes `__consumer_offsets` (through its own path, never a client's Produce), and only
a broker creates it, on first use. Clients may not produce to it, create, delete, grow
or rename it (`broker.kafka.partitions.produce`, `broker.kafka.admin.admin_api`,
`metadata.acl_control`): its partition count decides which partition, and so which
broker, holds each group's offsets."""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249  # Kafka: 255 minus room for a partition suffix and delete marker
METADATA_TOPIC_NAME = "__cluster_metadata"  # the raft log's own topic: never a user topic
GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME})
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def invalid_topic_name_reason(name: str) -> str | None:
    """Why `name` is not a legal topic name, or None when it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is {len(name)} characters long, the limit is {MAX_NAME_LENGTH}"
    if not _LEGAL.fullmatch(name):
        return (f"topic name {name!r} is illegal: only ASCII letters, digits, '.', '_' "
                "and '-' are allowed")
    if name == METADATA_TOPIC_NAME:
        return f"topic name {name!r} is reserved for the metadata log"
    return None


def is_internal_topic(name: str | None) -> bool:
    return name in INTERNAL_TOPICS
