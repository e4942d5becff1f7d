"""The acknowledged produces of a chaos history as a `kraft replay --history` file (format:
tools/replay/acknowledged.py), so the replay proves the brokers' partition logs hold each
one exactly once, at its offset.

Every `produce` answered with an offset (acks=all) is one line: topic, partition, offset
and its value in base64, and its key in base64 when it had one (on a compacted topic the
replay then knows a later record of the key may legally have replaced it). So is every
`idem_produce` of the group workload's idempotent producers (acks=all too) answered with
an offset, but for the values stored twice under two epochs of one producer id (`resent`:
librdkafka's re-send after an epoch bump, which the client checks count), which are left
out and counted: the replay would take the first copy, never acknowledged, for a
duplicate. A name the workload deletes is created again under a new topic ID, so its lines
name the ID of the topic the produce went to: the last create of the name acknowledged
before the produce was sent, when no other create of the name may have taken effect before
the produce was answered. When the history does not pin the ID down the write is left out
and counted: naming the wrong topic would report a loss that is none. A name no delete
ever targeted keeps one topic all run long (its create may be unknown, e.g. a retried
setup), the one the replay finds under it: its lines name no ID.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

from tools.chaos.history import Event, Operation, pair


@dataclass(frozen=True, slots=True, kw_only=True)
class AcknowledgedHistory:
    lines: tuple[str, ...]  # one `--history` JSON object each
    left_out: int  # acknowledged produces to a reused name whose topic ID is not certain,
    # and idempotent ones stored twice under two epochs

    def to_json(self) -> dict[str, int]:
        return {"writes": len(self.lines), "left_out": self.left_out}


def _deleted_names(operations: Sequence[Operation]) -> set[str]:
    """The names a delete (of any outcome) targeted, by name or by a topic ID created
    under the name."""
    created_as = {str(op.result["topic_id"]): str(op.args.get("name")) for op in operations
                  if op.op == "create" and op.is_ok and "topic_id" in op.result}
    names = set()
    for op in operations:
        if op.op == "delete":
            name = op.args.get("name") or created_as.get(str(op.args.get("topic_id")))
            if name is not None:
                names.add(str(name))
    return names


def topic_id_of(produce: Operation, creates: Sequence[Operation]) -> str | None:
    """The topic ID `produce` wrote to, from the creates of its name (None: not certain)."""
    before = [c for c in creates if c.is_ok and "topic_id" in c.result
              and c.end_time < produce.invoke_time]
    if not before:
        return None
    last = max(before, key=lambda c: c.end_time)
    rivals = [c for c in creates if c is not last and c.may_have_happened
              and c.invoke_time < produce.end_time and c.end_time > last.invoke_time]
    return None if rivals else str(last.result["topic_id"])


def acknowledged_history(events: Iterable[Event], resent: AbstractSet[str] = frozenset()
                         ) -> AcknowledgedHistory:
    operations = pair(events)
    reused = _deleted_names(operations)
    creates: dict[str, list[Operation]] = {}
    for op in operations:
        if op.op == "create":
            creates.setdefault(str(op.args.get("name")), []).append(op)
    lines, left_out = [], 0
    for op in operations:
        if op.op not in ("produce", "idem_produce") or not op.is_ok or \
                not isinstance(op.result.get("offset"), int) or op.result["offset"] < 0:
            continue
        if op.op == "idem_produce" and str(op.args["value"]) in resent:
            left_out += 1
            continue
        name = str(op.args.get("name") or op.args["topic"])
        entry: dict[str, object] = {
            "topic": name, "partition": op.args.get("partition", op.result.get("partition")),
            "offset": op.result["offset"],
            "value": base64.b64encode(str(op.args["value"]).encode()).decode()}
        if op.args.get("key") is not None:  # compaction may supersede it by a later one
            entry["key"] = base64.b64encode(str(op.args["key"]).encode()).decode()
        if name in reused:
            topic_id = topic_id_of(op, creates.get(name, []))
            if topic_id is None:
                left_out += 1
                continue
            entry["topic_id"] = topic_id
        lines.append(json.dumps(entry))
    return AcknowledgedHistory(lines=tuple(lines), left_out=left_out)


def write_acknowledged_history(path: Path, events: Iterable[Event],
                               resent: AbstractSet[str] = frozenset()) -> AcknowledgedHistory:
    """Write the `--history` file of `events` to `path` and say what it holds."""
    history = acknowledged_history(events, resent)
    path.write_text("".join(line + "\n" for line in history.lines), encoding="utf-8")
    return history
