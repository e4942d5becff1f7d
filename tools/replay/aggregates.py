"""What the analysis needs from one log, gathered batch by batch.

Each record counts on its own: its kind, its batch's epoch and offsets, a Topic record's
name and ID, a RemoveTopic's ID; nothing depends on the records before it. So the
aggregates need not come from the sequential scan (`sequential.NodeScan`), whose
rules do: the task that indexes the scanned log gathers them on the other core while
the scan runs (`load.node_task`, plan key `aggregates`), from the same decoded batches
(`sequential.decode_batch`) and the same replay base. The table of recreated names the
analysis shows is made there too, as they are finished (`Aggregates.finish`), rather
than by the driver after the scan.
"""

from __future__ import annotations

import base64
from array import array
from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter
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
    record's (name, topic ID, offset), the IDs some RemoveTopic names, and the names
    recreated (`recreated_names`, made by `finish`)."""

    epochs: dict[int, list[int]] = field(default_factory=dict)
    kinds: list[int] = field(default_factory=list)  # per record while gathering
    kind_counts: dict[int, int] = field(default_factory=dict)  # filled by `finish`
    topic_offsets: array[int] = field(default_factory=lambda: array("q"))
    remove_offsets: array[int] = field(default_factory=lambda: array("q"))
    # while gathering (`finish` turns them into `recreated`)
    topics: list[tuple[str | None, bytes | None, int]] = field(default_factory=list)
    removed_ids: set[bytes] = field(default_factory=set)
    recreated: list[dict[str, Any]] = field(default_factory=list)

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
        """What is shipped to the driver: counts per kind and the recreated names in
        place of a kind per record, the Topic records and the removed IDs (a third of
        the bytes the first job's results carried through the JVM)."""
        self.kind_counts = dict(Counter(self.kinds))
        self.recreated = recreated_names(self.topics, self.removed_ids)
        self.kinds, self.topics, self.removed_ids = [], [], set()
        return self


def _texts(ids: list[bytes]) -> list[str]:
    """KIP-516 text of many 16-byte IDs in one base64 call: each padded to 18 bytes (a
    whole number of 3-byte groups) encodes to 24 characters whose first 22 are its text."""
    encoded = base64.urlsafe_b64encode(b"".join(i + b"\0\0" for i in ids)).decode("ascii")
    return [encoded[at:at + 22] for at in range(0, len(encoded), 24)]


def recreated_names(topics: list[tuple[str | None, bytes | None, int]],
                    removed_ids: set[bytes]) -> list[dict[str, Any]]:
    """Names that more than one topic ID took (`topics`: every Topic record's name, ID
    and offset): every Topic record of that name, its ID old (some RemoveTopic names it)
    or current. The names are counted in C first, so only the rows of names taken more
    than once are grouped."""
    taken = Counter(map(itemgetter(0), topics))
    by_name: dict[str, list[tuple[Any, ...]]] = {
        name: [] for name, count in taken.items() if count > 1 and name is not None}
    for row in topics:
        rows = by_name.get(row[0])  # type: ignore[arg-type]  # None finds none
        if rows is not None:
            rows.append(row)
    many = {name: sorted(rows, key=itemgetter(2)) for name, rows in by_name.items()
            if len({topic_id for _, topic_id, _ in rows if topic_id is not None}) > 1}
    ids = list({topic_id for rows in many.values() for _, topic_id, _ in rows
                if topic_id is not None})
    texts: dict[bytes | None, str | None] = dict(zip(ids, _texts(ids), strict=True))
    texts[None] = None
    table: list[dict[str, Any]] = []
    for name in sorted(many):
        rows = many[name]
        current = [i for _, i, _ in rows if i is None or i not in removed_ids]
        table.append({"name": name,
                      "old_ids": [texts[i] for _, i, _ in rows
                                  if i is not None and i in removed_ids],
                      "current_id": texts[current[-1]] if current else None,
                      "offsets": [offset for _, _, offset in rows]})
    table.sort(key=lambda e: -len(e["offsets"]))  # stable: by name within a length
    return table
