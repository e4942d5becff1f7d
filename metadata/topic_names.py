"""Kafka's topic name rules (`org.apache.kafka.common.internals.Topic.validate`)."""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249  # Kafka: 255 minus room for a partition suffix and delete marker
METADATA_TOPIC_NAME = "__cluster_metadata"  # the raft log's own topic: never a user topic
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
