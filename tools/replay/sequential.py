"""The per-node checks: one pass over one node's records in offset order.

These checks are about the *order* of one log (what is live at each offset), so they run
as a plain sequential scan inside the Spark task that decodes that node's segments (see
`load.decode_node`), rather than as many SQL queries: `NodeScan` takes the rows in offset
order and yields violations (capped at `MAX_KEPT` per check and node), the LeaderChange
claims, and one summary row. The driver
merges nodes: a violation replicated on several nodes counts once, with its node list.

Topic state follows what a replaying image does with a bad record (see
`metadata.image`): a record that names a dead topic changes nothing; a Topic record
reusing an ID or a live name is flagged but still applied, so one fault is reported once
rather than cascading into every later record of that topic.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from metadata.uuid import METADATA_TOPIC_ID, ZERO_UUID

MAX_KEPT = 10_000
RESERVED = {str(ZERO_UUID), str(METADATA_TOPIC_ID)}
INPUT_COLUMNS = ("node", "offset", "epoch", "record_hash", "record_type", "topic_id", "name",
                 "partition", "leader_id", "detail", "file")
NAMES_LIVE_TOPIC = ("PARTITION", "PARTITION_CHANGE", "REMOVE_TOPIC", "RENAME_TOPIC")

# Emitted tuples: ("violation", check, node, offset, epoch, record_hash, reason, record)
#                 ("leader", epoch, leader_id, node, offset, record_hash)
#                 ("summary", node, summary dict)


class NodeScan:
    def __init__(self, node: int) -> None:
        self.node = node
        self.kept: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.out: list[tuple[Any, ...]] = []
        self.prev_offset: int | None = None
        self.prev_epoch: int | None = None
        self.live: dict[str, str] = {}  # topic_id -> name
        self.live_by_name: dict[str, str] = {}  # name -> topic_id
        self.first_use: dict[str, int] = {}  # topic_id -> offset of its first assignment
        self.removed: set[str] = set()
        self.metadata_topic: tuple[str, int] | None = None
        self.records = 0
        self.start: int | None = None
        self.files: set[str] = set()
        self.topics_created = 0
        self.epochs: list[list[int]] = []  # [epoch, first offset, last offset] runs

    def flag(self, check: str, row: Any, reason: str) -> None:
        self.counts[check] = self.counts.get(check, 0) + 1
        if self.kept.get(check, 0) >= MAX_KEPT:
            return
        self.kept[check] = self.kept.get(check, 0) + 1
        record = {"record_type": row[4], "topic_id": row[5], "name": row[6],
                  "partition": row[7], "leader_id": row[8]}
        self.out.append(("violation", check, self.node, row[1], row[2], row[3], reason,
                         {k: v for k, v in record.items() if v is not None}))

    def step(self, row: Any) -> None:
        _, offset, epoch, record_hash, kind, topic_id, name, _, leader_id, detail, file = row
        self.records += 1
        self.files.add(file)
        if self.start is None:
            self.start = offset
        if self.prev_offset is not None and offset != self.prev_offset + 1:
            self.flag("offsets_contiguous", row, "duplicate offset" if offset ==
                      self.prev_offset else f"gap: previous record is at offset "
                      f"{self.prev_offset}")
        if self.prev_epoch is not None and epoch < self.prev_epoch:
            self.flag("epochs_monotonic", row, f"epoch {epoch} after epoch {self.prev_epoch}")
        if self.epochs and self.epochs[-1][0] == epoch and self.epochs[-1][2] + 1 == offset:
            self.epochs[-1][2] = offset
        else:
            self.epochs.append([epoch, offset, offset])
        self.prev_offset, self.prev_epoch = offset, max(epoch, self.prev_epoch or epoch)
        if kind == "UNDECODABLE":
            self.flag("records_decodable", row, detail or "undecodable")
        elif kind == "LEADER_CHANGE":
            self.out.append(("leader", epoch, leader_id, self.node, offset, record_hash))
        elif kind == "METADATA_TOPIC":
            self.metadata_topic_record(row, topic_id, offset)
        elif kind == "TOPIC":
            self.topic_record(row, topic_id, name, offset)
        elif kind in NAMES_LIVE_TOPIC:
            self.topic_user(row, kind, topic_id, name)

    def metadata_topic_record(self, row: Any, topic_id: str | None, offset: int) -> None:
        if topic_id is None or topic_id in RESERVED:
            self.flag("topic_ids_valid", row, "metadata topic ID is missing, ZERO_UUID or "
                      "the sentinel")
        if self.metadata_topic is not None:
            self.flag("metadata_topic_once", row, "metadata topic ID assigned again (first "
                      f"at offset {self.metadata_topic[1]})")
            return
        if topic_id is not None and topic_id in self.first_use:
            self.flag("topic_ids_valid", row, "metadata topic takes the ID of the topic "
                      f"created at offset {self.first_use[topic_id]}")
        self.metadata_topic = (topic_id or "", offset)

    def topic_record(self, row: Any, topic_id: str | None, name: str | None,
                     offset: int) -> None:
        self.topics_created += 1
        if topic_id is None or topic_id in RESERVED:
            self.flag("topic_ids_valid", row, "topic ID is missing, ZERO_UUID or the sentinel")
            return
        if self.metadata_topic is not None and topic_id == self.metadata_topic[0]:
            self.flag("topic_ids_valid", row, "topic takes the metadata topic's ID (assigned "
                      f"at offset {self.metadata_topic[1]})")
        elif topic_id in self.first_use:
            after = " after RemoveTopic" if topic_id in self.removed else ""
            self.flag("topic_ids_valid", row, f"topic ID reused{after}: first assigned at "
                      f"offset {self.first_use[topic_id]}")
        self.first_use.setdefault(topic_id, offset)
        if name is not None and self.live_by_name.get(name, topic_id) != topic_id:
            self.flag("name_one_live_id", row, f"name already maps to live topic ID "
                      f"{self.live_by_name[name]}")
            return
        self.removed.discard(topic_id)
        self.live[topic_id] = name or ""
        if name is not None:
            self.live_by_name[name] = topic_id

    def topic_user(self, row: Any, kind: str, topic_id: str | None, name: str | None) -> None:
        if topic_id is None or topic_id not in self.live:
            self.flag("records_name_live_topic", row, "no live topic with this ID here")
            return
        if kind == "REMOVE_TOPIC":
            old = self.live.pop(topic_id)
            if self.live_by_name.get(old) == topic_id:
                del self.live_by_name[old]
            self.removed.add(topic_id)
        elif kind == "RENAME_TOPIC" and name is not None:
            holder = self.live_by_name.get(name)
            if holder is not None and holder != topic_id:
                self.flag("name_one_live_id", row, f"new name already maps to live topic "
                          f"ID {holder}")
                return
            old = self.live[topic_id]
            if self.live_by_name.get(old) == topic_id:
                del self.live_by_name[old]
            self.live[topic_id] = name
            self.live_by_name[name] = topic_id

    def finish(self) -> Iterator[tuple[Any, ...]]:
        if self.topics_created and self.metadata_topic is None:
            self.counts["metadata_topic_once"] = self.counts.get("metadata_topic_once", 0) + 1
            self.out.append(("violation", "metadata_topic_once", self.node, self.prev_offset,
                             self.prev_epoch, 0, "the log creates topics but never assigns "
                             "the metadata topic ID", {}))
        yield from self.out
        yield ("summary", self.node, {
            "node": self.node, "records": self.records, "start_offset": self.start,
            "end_offset": None if self.prev_offset is None else self.prev_offset + 1,
            "last_epoch": self.prev_epoch, "segments": len(self.files), "epochs": self.epochs,
            "violation_counts": dict(self.counts)})
