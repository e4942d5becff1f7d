"""The chaos checker: a pure function of the recorded history and the final state.

Rules (an `unknown` operation may or may not have taken effect, at any time after its
invocation; a `failed` one did not):
- create_lost / delete_undone: an acknowledged create is in the final metadata unless a
  delete that may have happened could have removed it; an acknowledged delete's topic ID
  is never in the final metadata; no final topic comes from nowhere.
- id_reused: every topic ID handed out by a create is new (KIP-516: a recreated name
  gets a new ID, IDs are never reused).
- stale_read: a describe by ID never answers another topic's name/ID pair, never finds
  a topic after its delete was acknowledged, and never misses a topic whose create was
  acknowledged while no delete of it was invoked; a describe by name answers a known pair.
- lost_write / duplicate / misplaced: every acknowledged produce (acks=all) whose topic
  was not deleted meanwhile is readable at its acknowledged offset, exactly once, unless
  retention or compaction may legally have removed it: it lies below its partition's
  log start at the final read, or its topic is compacted and a record of its key was read
  at a later offset of its partition. The offsets of a partition are read in order.
- deleted_data: no record produced before a topic was (re)created is readable under it.
- divergence: every broker applied the same offset and its image hash equals the
  controller log's image hash at that offset.
- stale_partition / missing_partition: once the delete delay has passed, a broker's log
  dir holds exactly the partitions the final metadata assigns to it, each under its
  current topic ID (KIP-516: nothing of a deleted or replaced topic is left in place),
  and no staged deletion is overdue.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tools.chaos.history import Event, Operation, pair


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadRecord:
    topic_id: str
    partition: int
    offset: int
    value: str
    key: str | None = None
    producer: tuple[int, int] | None = None  # (producer id, epoch) of its stored batch


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerObservation:
    node_id: int
    applied_offset: int | None  # None: the broker did not answer
    image_hash: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionDir:
    topic: str
    partition: int
    topic_id: str | None  # from partition.metadata; None: missing or unreadable


@dataclass(frozen=True, slots=True, kw_only=True)
class StagedDir:
    name: str  # under deleting/
    due_ms: int | None  # wall clock


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerDisk:
    """A broker's log dir as scanned at `observed_ms` (wall clock), after the delete delay
    of every acknowledged delete had passed."""

    node_id: int
    observed_ms: int
    partitions: Sequence[PartitionDir]
    staged: Sequence[StagedDir]


OVERDUE_GRACE_MS = 5_000  # a staged deletion this far past its due time was forgotten


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalState:
    topics: Mapping[str, str]  # name -> topic ID, from the controller after healing
    reads: Sequence[ReadRecord] = ()  # every record of every final topic's partitions
    read_complete: Mapping[str, bool] = field(default_factory=dict)  # topic ID -> fully read
    brokers: Sequence[BrokerObservation] = ()
    reference_hashes: Mapping[int, str] = field(default_factory=dict)  # offset -> hash
    # topic ID -> partition -> replica broker ids, from the controller after healing
    assignments: Mapping[str, Mapping[int, Sequence[int]]] = field(default_factory=dict)
    disks: Sequence[BrokerDisk] = ()
    # (topic ID, partition) -> its log start once read (retention removed what is below)
    log_starts: Mapping[tuple[str, int], int] = field(default_factory=dict)
    compacted: frozenset[str] = frozenset()  # topic IDs whose cleanup.policy compacts


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    kind: str
    message: str
    op_index: int | None = None

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "message": self.message, "op_index": self.op_index}


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    operations: dict[str, dict[str, int]]  # op -> status -> count
    violations: tuple[Violation, ...]
    records_read: int
    writes_verified: int  # acknowledged produces found at their acknowledged offset
    # acknowledged produces legally gone: below the log start, or superseded on a
    # compacted topic (tools/chaos/workload.py's topics delete and clean segments)
    writes_removed: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations


def check(events: Iterable[Event], final: FinalState) -> CheckResult:
    operations = pair(events)
    index = _Index(operations)
    violations = _check_metadata(index, final)
    violations += _check_describes(index)
    data_violations, verified, removed = _check_data(index, final)
    violations += data_violations
    violations += _check_convergence(final)
    for disk in final.disks:
        violations += _check_partition_dirs(disk, final)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for op in operations:
        counts[op.op][op.status] += 1
    return CheckResult(operations={k: dict(v) for k, v in sorted(counts.items())},
                       violations=tuple(violations), records_read=len(final.reads),
                       writes_verified=verified, writes_removed=removed)


# -- metadata --------------------------------------------------------------------------


class _Index:
    """Lookups over the operations, built once: a history of a long run holds ~100,000
    operations, so no rule may scan them all per operation."""

    def __init__(self, operations: Sequence[Operation]) -> None:
        self.operations = operations
        self.created: dict[str, Operation] = {}  # topic ID -> the ok create that returned it
        self.first_created: dict[str, float] = {}  # topic ID -> invoke time of the first
        self.deleted_at: dict[str, float] = {}  # topic ID -> first ok delete's completion
        self.unknown_create: dict[str, float] = {}  # name -> earliest unknown create invoke
        # deletes that may have happened, by the name or the ID they target: the latest
        # end time and the earliest invoke time
        self.delete_end: dict[str, float] = {}
        self.delete_start: dict[str, float] = {}
        self.churn_end: dict[str, float] = {}  # name -> latest end of a create/delete
        for op in operations:
            name = op.args.get("name")
            if op.op == "create" and op.is_ok and "topic_id" in op.result:
                topic_id = op.result["topic_id"]
                self.created[topic_id] = op
                self.first_created.setdefault(topic_id, op.invoke_time)
            if op.op == "create" and op.status == "unknown" and name is not None:
                self.unknown_create[name] = min(self.unknown_create.get(name, math.inf),
                                                op.invoke_time)
            if op.op in ("create", "delete") and op.may_have_happened and name is not None:
                self.churn_end[name] = max(self.churn_end.get(name, -math.inf), op.end_time)
            if op.op == "delete" and op.may_have_happened:
                self._index_delete(op)

    def _index_delete(self, op: Operation) -> None:
        if op.is_ok:  # an acknowledged delete answers the ID it removed
            deleted_id = op.result["topic_id"]
            self.deleted_at[deleted_id] = min(self.deleted_at.get(deleted_id, math.inf),
                                              op.end_time)
        for target in ("name", "topic_id"):  # what it deletes by (tools/chaos/workload.py)
            if target in op.args:
                key = f"{target}:{op.args[target]}"
                self.delete_end[key] = max(self.delete_end.get(key, -math.inf), op.end_time)
                self.delete_start[key] = min(self.delete_start.get(key, math.inf),
                                             op.invoke_time)

    def delete_may_end_after(self, name: str, topic_id: str, time: float) -> bool:
        """Some delete that may have happened, of this name or ID, ended after `time`."""
        return max(self.delete_end.get(f"name:{name}", -math.inf),
                   self.delete_end.get(f"topic_id:{topic_id}", -math.inf)) > time

    def delete_began_before(self, name: str, topic_id: str, time: float) -> bool:
        """Some delete that may have happened, of this name or ID, was invoked before."""
        return min(self.delete_start.get(f"name:{name}", math.inf),
                   self.delete_start.get(f"topic_id:{topic_id}", math.inf)) < time

    def creation_lower_bound(self, name: str, topic_id: str) -> float | None:
        """The earliest time the topic with this ID can have been created."""
        if topic_id in self.first_created:
            return self.first_created[topic_id]
        return self.unknown_create.get(name)


def _check_metadata(index: _Index, final: FinalState) -> list[Violation]:
    final_ids = set(final.topics.values())
    return (_ids_reused(index) + _creates_lost(index, final_ids)
            + _deletes_undone(index, final_ids) + _final_topics_unexplained(index, final))


def _ids_reused(index: _Index) -> list[Violation]:
    """Two acknowledged creates returned the same topic ID."""
    violations = []
    seen: dict[str, Operation] = {}
    for op in index.operations:
        topic_id = op.result.get("topic_id") if op.op == "create" and op.is_ok else None
        if topic_id is None:
            continue
        if topic_id in seen:
            violations.append(Violation(kind="id_reused", op_index=op.index, message=(
                f"create of {op.args.get('name')!r} returned {topic_id}, already returned "
                f"by op {seen[topic_id].index}")))
        seen[topic_id] = op
    return violations


def _creates_lost(index: _Index, final_ids: set[str]) -> list[Violation]:
    """An acknowledged create missing from the final metadata with no delete to explain."""
    violations = []
    for topic_id, op in index.created.items():
        name = str(op.args.get("name"))
        if topic_id in final_ids:
            continue
        if not index.delete_may_end_after(name, topic_id, op.invoke_time):
            violations.append(Violation(kind="create_lost", op_index=op.index, message=(
                f"acknowledged create of {name!r} ({topic_id}) is not in the final "
                f"metadata and no delete could have removed it")))
    return violations


def _deletes_undone(index: _Index, final_ids: set[str]) -> list[Violation]:
    return [Violation(kind="delete_undone", message=(
                f"topic {topic_id} is in the final metadata after its delete was "
                f"acknowledged"))
            for topic_id in index.deleted_at if topic_id in final_ids]


def _final_topics_unexplained(index: _Index, final: FinalState) -> list[Violation]:
    """A final topic under another name than its create, or created by no operation."""
    violations = []
    created = index.created
    for name, topic_id in sorted(final.topics.items()):
        if topic_id in created:
            if created[topic_id].args.get("name") != name:
                violations.append(Violation(kind="create_lost", message=(
                    f"final topic {name!r} has ID {topic_id}, created as "
                    f"{created[topic_id].args.get('name')!r}")))
            continue
        if name not in index.unknown_create:
            violations.append(Violation(kind="create_lost", message=(
                f"final topic {name!r} ({topic_id}) was created by no operation")))
    return violations


def _check_describes(index: _Index) -> list[Violation]:
    violations = []
    created, deleted_at = index.created, index.deleted_at
    for op in index.operations:
        if op.op == "describe_id":
            violations += _check_describe_id(op, index)
        elif op.op == "describe_name" and op.is_ok:
            topic_id = op.result.get("topic_id")
            origin = created.get(str(topic_id))
            if origin is not None and origin.args.get("name") != op.args.get("name"):
                violations.append(Violation(kind="stale_read", op_index=op.index, message=(
                    f"describe of name {op.args.get('name')!r} answered {topic_id}, the ID "
                    f"of {origin.args.get('name')!r}")))
            if topic_id in deleted_at and deleted_at[str(topic_id)] < op.invoke_time:
                violations.append(Violation(kind="stale_read", op_index=op.index, message=(
                    f"describe of name {op.args.get('name')!r} answered {topic_id} after "
                    f"its delete was acknowledged")))
    return violations


def _check_describe_id(op: Operation, index: _Index) -> list[Violation]:
    asked = str(op.args.get("topic_id"))
    origin = index.created.get(asked)
    deleted_at = index.deleted_at
    if op.is_ok:
        got_id, got_name = op.result.get("topic_id"), op.result.get("name")
        if got_id != asked or (origin is not None and origin.args.get("name") != got_name):
            return [Violation(kind="stale_read", op_index=op.index, message=(
                f"describe by ID {asked} answered {got_name!r} ({got_id})"))]
        if asked in deleted_at and deleted_at[asked] < op.invoke_time:
            return [Violation(kind="stale_read", op_index=op.index, message=(
                f"describe by ID {asked} found {got_name!r} after its delete was "
                f"acknowledged"))]
        return []
    if op.status == "failed" and op.result.get("error") == "UNKNOWN_TOPIC_ID" \
            and origin is not None and origin.end_time < op.invoke_time:
        name = str(origin.args.get("name"))
        if not index.delete_began_before(name, asked, op.end_time):
            return [Violation(kind="stale_read", op_index=op.index, message=(
                f"describe by ID {asked} answered UNKNOWN_TOPIC_ID after its create was "
                f"acknowledged and before any delete of it"))]
    return []


# -- data ------------------------------------------------------------------------------


def _check_data(index: _Index, final: FinalState) -> tuple[list[Violation], int, int]:
    violations: list[Violation] = []
    produced = {str(op.args["value"]): op for op in index.operations
                if op.op == "produce"}
    names_of = {topic_id: name for name, topic_id in final.topics.items()}
    located: dict[str, list[ReadRecord]] = defaultdict(list)
    by_partition: dict[tuple[str, int], list[ReadRecord]] = defaultdict(list)
    for record in final.reads:
        located[record.value].append(record)
        by_partition[(record.topic_id, record.partition)].append(record)
    for (topic_id, partition), records in sorted(by_partition.items()):
        offsets = [r.offset for r in records]
        if offsets != sorted(set(offsets)):
            violations.append(Violation(kind="misplaced", message=(
                f"{topic_id}-{partition}: offsets read out of order or twice")))
    for value, records in sorted(located.items()):
        if len(records) > 1:
            violations.append(Violation(kind="duplicate", message=(
                f"value {value!r} readable {len(records)} times")))
        for record in records:
            violations += _check_origin(index, produced.get(value), record,
                                        names_of.get(record.topic_id))
    outcomes: Counter[str] = Counter()
    latest: dict[tuple[str, int, str | None], int] = {
        (r.topic_id, r.partition, r.key): r.offset for r in final.reads
        if r.topic_id in final.compacted and r.key is not None}
    for value, op in produced.items():
        outcome = _check_acknowledged(index, op, final, located.get(value, []), latest)
        if isinstance(outcome, Violation):
            violations.append(outcome)
        else:
            outcomes[outcome] += 1
    return violations, outcomes[FOUND], outcomes[REMOVED]


def _check_origin(index: _Index, op: Operation | None, record: ReadRecord, name: str | None
                  ) -> list[Violation]:
    where = f"{name}-{record.partition}@{record.offset} ({record.topic_id})"
    if op is None or not op.may_have_happened:
        return [Violation(kind="deleted_data", message=(
            f"{where} holds {record.value!r}, which no produce may have written"))]
    if op.args.get("name") != name or op.args.get("partition") != record.partition:
        return [Violation(kind="misplaced", op_index=op.index, message=(
            f"{where} holds {record.value!r}, produced to {op.args.get('name')}-"
            f"{op.args.get('partition')}"))]
    born = index.creation_lower_bound(str(name), record.topic_id)
    if born is not None and op.end_time < born:
        return [Violation(kind="deleted_data", op_index=op.index, message=(
            f"{where} holds {record.value!r}, written before this topic ID was created "
            f"(data of a deleted topic)"))]
    return []


FOUND, REMOVED, UNCHECKED = "found", "removed", "unchecked"


def _check_acknowledged(index: _Index, op: Operation, final: FinalState,
                        found: Sequence[ReadRecord],
                        latest: Mapping[tuple[str, int, str | None], int]
                        ) -> Violation | str:
    """What became of a produce: FOUND at its offset, legally REMOVED (below the log
    start; on a compacted topic, superseded by a later record of its key, `latest`: the
    offset of each key's last record read), UNCHECKED (not acknowledged, its topic not
    read in full, or maybe deleted and recreated since), or lost: the Violation."""
    name = str(op.args.get("name"))
    topic_id = final.topics.get(name)
    churned = index.churn_end.get(name, -math.inf) > op.invoke_time
    if not op.is_ok or topic_id is None or churned or not final.read_complete.get(topic_id):
        return UNCHECKED
    partition, offset = op.args.get("partition"), op.result.get("offset")
    wanted = (topic_id, partition, offset)
    if any((r.topic_id, r.partition, r.offset) == wanted for r in found):
        return FOUND
    if isinstance(partition, int) and isinstance(offset, int) and (
            offset < final.log_starts.get((topic_id, partition), 0)
            or latest.get((topic_id, partition, op.args.get("key")), -1) > offset):
        return REMOVED
    return Violation(kind="lost_write", op_index=op.index, message=(
        f"acknowledged produce of {op.args.get('value')!r} to {name}-"
        f"{op.args.get('partition')} at offset {op.result.get('offset')} is not readable "
        f"there (found at {[(r.partition, r.offset) for r in found]})"))


# -- convergence -----------------------------------------------------------------------


def _check_convergence(final: FinalState) -> list[Violation]:
    violations = []
    offsets = {b.applied_offset for b in final.brokers}
    if len(offsets) > 1:
        violations.append(Violation(kind="divergence", message=(
            "brokers applied different offsets: " + ", ".join(
                f"{b.node_id}@{b.applied_offset}" for b in final.brokers))))
    for broker in final.brokers:
        if broker.applied_offset is None:
            violations.append(Violation(kind="divergence", message=(
                f"broker {broker.node_id} did not report its image")))
            continue
        expected = final.reference_hashes.get(broker.applied_offset)
        if expected is None:  # a snapshot moved the voter's log start past that offset
            continue          # after the brokers reported: they are compared below
        if expected != broker.image_hash:
            violations.append(Violation(kind="divergence", message=(
                f"broker {broker.node_id} image hash {str(broker.image_hash)[:12]} at offset "
                f"{broker.applied_offset}, controller's {str(expected)[:12]}")))
    reported = {b.image_hash for b in final.brokers if b.applied_offset is not None}
    if len(offsets) == 1 and len(reported) > 1:
        violations.append(Violation(kind="divergence", message=(
            "brokers at the same offset hold different images: " + ", ".join(
                f"{b.node_id}: {str(b.image_hash)[:12]}" for b in final.brokers))))
    return violations


# -- partition directories -------------------------------------------------------------


def _check_partition_dirs(disk: BrokerDisk, final: FinalState) -> list[Violation]:
    broker = disk.node_id
    violations = []
    names_of = {topic_id: name for name, topic_id in final.topics.items()}
    expected = {(names_of[topic_id], partition, topic_id)
                for topic_id, partitions in final.assignments.items() if topic_id in names_of
                for partition, replicas in partitions.items() if broker in replicas}
    found = {(d.topic, d.partition, d.topic_id) for d in disk.partitions}
    # one dir per (topic, partition), one ID per name: sorting never compares the IDs
    for topic, partition, topic_id in sorted(found - expected):
        current = final.topics.get(topic)
        why = ("its topic was deleted" if current is None
               else f"the topic's ID is {current}" if current != topic_id
               else "the partition is not assigned to this broker")
        violations.append(Violation(kind="stale_partition", message=(
            f"broker {broker} still hosts {topic}-{partition} of topic ID {topic_id} "
            f"after the delete delay: {why}")))
    for topic, partition, topic_id in sorted(expected - found):
        violations.append(Violation(kind="missing_partition", message=(
            f"broker {broker} has no {topic}-{partition} ({topic_id}), assigned to it")))
    for staged in disk.staged:
        if staged.due_ms is None or staged.due_ms + OVERDUE_GRACE_MS < disk.observed_ms:
            violations.append(Violation(kind="stale_partition", message=(
                f"broker {broker}: staged deletion {staged.name} is overdue "
                f"(due {staged.due_ms}, seen at {disk.observed_ms})")))
    return violations
