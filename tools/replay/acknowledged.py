"""`kraft replay --history F`: the acknowledged writes a client recorded, checked against
the brokers' partition logs (`acknowledged-writes-present`).

The file holds one JSON object per line (blank lines are skipped), one per write the
cluster acknowledged (the second is wrapped here)::

    {"topic": "orders", "partition": 0, "offset": 41, "value": "aGVsbG8="}
    {"topic": "orders", "partition": 1, "offset": 7,
     "value_sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
     "key": "a2V5"}

`topic`, `partition` and `offset` (the offset the produce answer gave) are required, and
exactly one of `value` (the value's bytes in base64; null for a tombstone) or
`value_sha256` (the SHA-256 of the value's bytes, hex). `key` (base64, optional) is the
record's key: on a compacted topic a write is legally gone when a later record has its
key. `topic_id` (optional, as `kraft topics` prints it) names the topic when its name was
deleted and reused since; without it the name's topic at the end of the log is meant.
Anything else is bad input: one error naming the line, exit 2. Only writes acknowledged
by every in-sync replica (acks=all) must survive a leader change; list only those.

The check reads each partition from its agreed log, the replica with the highest
checkpointed high watermark (tools.replay.partition_checks), and requires every write
below that high watermark to be there exactly once: the record at its offset has its
value, and no other offset holds that value unless another acknowledged write claims it.
A write below the log start (retention, DeleteRecords), or on a compacted topic with a
later record of its key, may legally be gone; writes above the checkpointed high
watermark (written after the broker's last checkpoint), of a deleted topic, or in a batch
whose body does not decode cannot be checked: the counts say how many.
"""

from __future__ import annotations

import base64
import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from raft.common.uuid import Uuid
from tools.replay.checks import MAX_EXAMPLES, PARTITION_CHECKS, CheckResult
from tools.replay.inputs import read_json_lines
from tools.replay.partition_history import PartitionHistory, PartitionKey
from tools.replay.partition_logs import Replica, record_values

NAME = "acknowledged-writes-present"
DESCRIPTION = PARTITION_CHECKS[NAME]


@dataclass(frozen=True, slots=True, kw_only=True)
class AckedWrite:
    line: int
    topic: str
    partition: int
    offset: int
    value_sha256: str | None  # None: a tombstone
    key: bytes | None = None
    topic_id: Uuid | None = None  # None: the topic the name has at the end

    def describe(self) -> dict[str, Any]:
        return {"line": self.line, "topic": self.topic, "partition": self.partition,
                "offset": self.offset}


def value_digest(value: bytes | None) -> str | None:
    return None if value is None else hashlib.sha256(value).hexdigest()


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _write(number: int, data: Any) -> AckedWrite:
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    topic, partition, offset = data.get("topic"), data.get("partition"), data.get("offset")
    if not isinstance(topic, str) or not topic:
        raise ValueError("`topic` must be a non-empty string")
    if not _count(partition) or not _count(offset):
        raise ValueError("`partition` and `offset` must be integers >= 0")
    if ("value" in data) == ("value_sha256" in data):
        raise ValueError("exactly one of `value` and `value_sha256` is needed")
    if "value" in data:
        value = data["value"]
        if value is not None and not isinstance(value, str):
            raise ValueError("`value` must be base64 or null")
        digest = value_digest(None if value is None else base64.b64decode(value, validate=True))
    else:
        digest = data["value_sha256"]
        if not isinstance(digest, str) or len(digest) != 64 or \
                digest.strip("0123456789abcdef"):
            raise ValueError("`value_sha256` must be 64 lowercase hex digits")
    key, topic_id = data.get("key"), data.get("topic_id")
    if key is not None and not isinstance(key, str):
        raise ValueError("`key` must be base64 or null")
    if topic_id is not None and not isinstance(topic_id, str):
        raise ValueError("`topic_id` must be a topic ID string")
    return AckedWrite(line=number, topic=topic, partition=partition, offset=offset,
                      value_sha256=digest,
                      key=None if key is None else base64.b64decode(key, validate=True),
                      topic_id=None if topic_id is None else Uuid.from_string(topic_id))


def read_history(path: Path) -> list[AckedWrite]:
    """The acknowledged writes of a history file; InputError naming the bad line."""
    return read_json_lines(path, "--history", _write)


def agreed_replica(replicas: Sequence[Replica]) -> Replica | None:
    """The replica whose log the writes are read from: the highest checkpointed high
    watermark (then the longest log, then the lowest broker id)."""
    checkpointed = [r for r in replicas if r.high_watermark is not None]
    if not checkpointed:
        return None
    return max(checkpointed, key=lambda r: (r.high_watermark or 0, r.log_end, -r.broker))


def _records(replica: Replica, bound: int, counts: Counter[str]
             ) -> dict[int, tuple[bytes | None, str | None]]:
    """offset -> (key, value digest) of the agreed log below `bound`; the offsets of
    batches not decoded here are left out (counted)."""
    out: dict[int, tuple[bytes | None, str | None]] = {}
    for batch in replica.batches:
        if batch.base_offset >= bound:
            break
        values = record_values(replica, batch)
        if values is None:
            counts["undecodable_batches"] += 1
            out.update({o: (None, "?") for o in range(batch.base_offset,
                                                      batch.last_offset + 1)})
            continue
        out.update({o: (k, value_digest(v)) for o, k, v in values if o < bound})
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class _AgreedLog:
    """One partition's agreed log below its high watermark: offset -> (key, value
    digest), how many records hold each digest, the last offset of each key."""

    records: Mapping[int, tuple[bytes | None, str | None]]
    held: Counter[str | None]
    latest: Mapping[bytes | None, int]
    replica: Replica
    compacted: bool


def _verdict(write: AckedWrite, agreed: _AgreedLog, claimed: Counter[str | None]
             ) -> str | None:
    """Why `write` fails (None: present, or legally gone)."""
    log, held, replica = agreed.records, agreed.held, agreed.replica
    found = log.get(write.offset)
    if found is not None and found[1] == "?":
        return None  # in a batch not decoded here (counted)
    if found is None or found[1] != write.value_sha256:
        if write.offset < replica.log_start:
            return None
        if agreed.compacted and write.key is not None and \
                agreed.latest.get(write.key, -1) > write.offset:
            return None
        if found is None:
            return f"missing: no record at offset {write.offset}"
        return f"offset {write.offset} holds another value"
    if write.value_sha256 is not None and \
            held[write.value_sha256] > claimed[write.value_sha256]:
        return (f"its value is stored {held[write.value_sha256]} times, acknowledged "
                f"{claimed[write.value_sha256]} time(s)")
    return None


def check_acknowledged(writes: Sequence[AckedWrite] | None,
                       partitions: Mapping[PartitionKey, list[Replica]],
                       history: PartitionHistory) -> CheckResult:
    if writes is None:
        return CheckResult(name=NAME, description=DESCRIPTION, violations=0, skipped=True,
                           note="no --history given")
    counts: Counter[str] = Counter(writes=len(writes))
    examples: list[dict[str, Any]] = []
    by_partition: dict[tuple[Uuid | None, int], list[AckedWrite]] = {}
    for write in writes:
        topic_id = write.topic_id or history.topic_ids.get(write.topic)
        by_partition.setdefault((topic_id, write.partition), []).append(write)
    for (topic_id, number), mine in sorted(by_partition.items(), key=str):
        replica = None if topic_id is None else \
            agreed_replica(partitions.get((topic_id, number), []))
        if topic_id is None or replica is None or replica.high_watermark is None:
            counts["not_checked_no_agreed_log"] += len(mine)
            continue
        bound = replica.high_watermark
        log = _records(replica, bound, counts)
        agreed = _AgreedLog(records=log, held=Counter(digest for _, digest in log.values()),
                            latest={key: offset for offset, (key, _) in sorted(log.items())},
                            replica=replica, compacted=topic_id in history.compacted)
        claimed = Counter(w.value_sha256 for w in mine)
        for write in mine:
            if write.offset >= bound:
                counts["not_checked_above_high_watermark"] += 1
                continue
            counts["checked"] += 1
            reason = _verdict(write, agreed, claimed)
            if reason is not None:
                examples.append({**write.describe(), "broker": replica.broker,
                                 "high_watermark": bound, "reason": reason})
    return CheckResult(name=NAME, description=DESCRIPTION, violations=len(examples),
                       examples=tuple(examples[:MAX_EXAMPLES]), counts=dict(counts))
