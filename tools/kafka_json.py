"""The JSON files of Kafka's partition tools (kafka-delete-records.sh's offsets,
kafka-reassign-partitions.sh's plans, kafka-leader-election.sh's partitions): their shared
outer shape, read with one clear error."""

from __future__ import annotations

import json


def partition_entries(text: str, shape: str, key: str = "partitions"
                      ) -> list[dict[str, object]]:
    """The entries of a Kafka tool's {"partitions": [...]} JSON file (or the list under
    `key`; `shape` shows the document in the error); ValueError naming what is wrong. An
    entry that is not an object reads as an empty one."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    entries = document.get(key) if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"expected {shape} with at least one entry")
    return [entry if isinstance(entry, dict) else {} for entry in entries]
