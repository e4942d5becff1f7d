"""What the analysis needs from one log, gathered batch by batch.

Each record counts on its own: its kind, its batch's epoch and offsets, a Topic record's
name and ID, a RemoveTopic's ID; nothing depends on the records before it. So the
aggregates need not come from the sequential scan (`sequential.NodeScan`), whose
rules do: the task that indexes the scanned log gathers them on the other core while
the scan runs (`load.node_task`, plan key `aggregates`), from the same decoded batches
(`sequential.decode_batch`) and the same replay base.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from metadata.records import RecordType

_TOPIC = int(RecordType.TOPIC)
_REMOVE_TOPIC = int(RecordType.REMOVE_TOPIC)


def topic_id_of(fields: Any) -> bytes | None:
    """A record map's topic ID: 16 bytes, or None when missing or malformed."""
    raw = fields.get("topic_id")
    return raw if type(raw) is bytes and len(raw) == 16 else None


def name_of(fields: Any) -> str | None:
    """A record map's topic name (`name`, else `new_name`), or None."""
    name = fields.get("name", fields.get("new_name"))
    return name if isinstance(name, str) else None


@dataclass(slots=True)
class Aggregates:
    """What the analysis needs from one log: per epoch [first offset, last offset,
    records], records per kind, the offsets of Topic and RemoveTopic records, every Topic
    record's (name, topic ID, offset) and the IDs some RemoveTopic names."""

    epochs: dict[int, list[int]] = field(default_factory=dict)
    kinds: list[int] = field(default_factory=list)  # per record while gathering
    kind_counts: dict[int, int] = field(default_factory=dict)  # filled by `finish`
    topic_offsets: array[int] = field(default_factory=lambda: array("q"))
    remove_offsets: array[int] = field(default_factory=lambda: array("q"))
    topics: list[tuple[str | None, bytes | None, int]] = field(default_factory=list)
    removed_ids: set[bytes] = field(default_factory=set)

    def add(self, first: int, epoch: int, kinds: list[int], maps: list[Any]) -> None:
        """One batch's records from offset `first`, decoded (`decode_batch`): only a
        Topic or RemoveTopic record is looked at one by one."""
        if not kinds:
            return
        self.kinds += kinds
        last = first + len(kinds) - 1
        entry = self.epochs.get(epoch)
        if entry is None:
            self.epochs[epoch] = [first, last, len(kinds)]
        else:  # min/max: a broken log need not be in order
            entry[0], entry[1] = min(entry[0], first), max(entry[1], last)
            entry[2] += len(kinds)
        if _TOPIC not in kinds and _REMOVE_TOPIC not in kinds:
            return
        for at in [at for at, kind in enumerate(kinds) if kind == _TOPIC or kind == _REMOVE_TOPIC]:
            fields, offset = maps[at], first + at
            if kinds[at] == _TOPIC:
                self.topic_offsets.append(offset)
                self.topics.append((name_of(fields), topic_id_of(fields), offset))
            else:
                self.remove_offsets.append(offset)
                topic_id = topic_id_of(fields)
                if topic_id is not None:
                    self.removed_ids.add(topic_id)

    def finish(self) -> Aggregates:
        """Counts per kind in place of a kind per record (what is shipped)."""
        self.kind_counts = dict(Counter(self.kinds))
        self.kinds = []
        return self
