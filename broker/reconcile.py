"""Reconcile the partition directories on a broker's disk with the metadata image (pure).

This replaces LeaderAndIsr/StopReplica: the broker compares what it finds on disk with
what the image says and returns a list of actions for `broker.partition_dir` to apply,
in order. The rules for deleted topics and stale directories, by topic ID:

- a local partition whose topic ID is absent from the image, or differs from the image's
  ID for that name, is stale: it is staged under `deleting/<topic_id>_<partition>` and
  removed once `delete.topic.delay.ms` has passed;
- so is a live topic's partition whose number the image no longer has (a shrink removed
  the topic's last partitions once they were empty: `metadata` RemovePartition);
- so is a live topic's partition that this broker does not host (a stray: copied here,
  or left behind when the partition's replicas moved): once the broker has caught up
  with the metadata log (`broker.server` reconciles only then), the image is the truth;
- a directory without a valid partition.metadata that holds data is a stray too: its
  topic ID is unknown, so it is never adopted by name (after disk damage it may hold a
  deleted topic's records under a reused name). One that holds nothing is a new
  partition's directory cut short by a crash (`broker.partition_dir` writes the file
  before any data): if hosted here it gets the image's ID, else it is staged;
- a directory whose ID the image knows under another name was renamed: it is moved to
  the new name and keeps its data and its partition.metadata;
- a hosted partition with no directory is created with its partition.metadata.

Safety: an action never removes a directory outside `deleting/`, and nothing is removed
before `delete.topic.delay.ms` has passed. Applying the actions then
reconciling again yields no action (a fixpoint), so a crash at any step is finished by the
next reconciliation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from raft.common.uuid import ZERO_UUID, Uuid

DELETING_DIR = "deleting"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """`<topic>-<partition>` -> (topic, partition); None for anything else."""
    topic, sep, number = name.rpartition("-")
    if not sep or not topic or not number.isdigit() or not number.isascii():
        return None
    if number != str(int(number)):  # "A-01" is not a partition directory
        return None
    return topic, int(number)


def staged_dir_name(topic_id: Uuid, partition: int, suffix: int = 0) -> str:
    """`<topic_id>_<partition>`, with `.<n>` when that name is already taken."""
    base = f"{topic_id}_{partition}"
    return base if suffix == 0 else f"{base}.{suffix}"


# --- inputs -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalPartition:
    """A `<topic>-<partition>` directory found in the log dir; topic_id is None when it
    has no (readable) partition.metadata, and then `holds_data` says whether anything
    else is in it (read only for such a directory: unknown counts as data)."""

    topic: str
    partition: int
    topic_id: Uuid | None
    holds_data: bool = True
    # derived, kept: reconciliation sorts and looks up every local partition by it
    dir_name: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dir_name", partition_dir_name(self.topic, self.partition))


@dataclass(frozen=True, slots=True, kw_only=True)
class StagedDeletion:
    """A directory under `deleting/`; due_ms is None when its due time was never recorded
    (it then gets one, never an immediate delete)."""

    name: str
    due_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HostedPartition:
    """A partition assigned to this broker by the image, and who leads it."""

    topic: str
    topic_id: Uuid
    partition: int
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int = 0

    @property
    def dir_name(self) -> str:
        return partition_dir_name(self.topic, self.partition)


@dataclass(frozen=True, slots=True, kw_only=True)
class Assignment:
    """What reconciliation needs from the image: every live topic's ID by name, the
    partitions this broker hosts (see `broker.hosting`: of the topics in scope) and each
    live topic's partition count by ID (a topic missing there is not checked for removed
    partitions). `hosts(topic_id, partition)` answers for any live topic, in scope or not
    (None: read from `hosted`)."""

    topic_ids: Mapping[str, Uuid]
    hosted: tuple[HostedPartition, ...]
    partition_counts: Mapping[Uuid, int] = field(default_factory=dict)
    names_by_id: Mapping[Uuid, str] | None = None  # None: `topic_ids` inverted
    hosts: Callable[[Uuid, int], bool] | None = None


# --- actions ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _PartitionDirAction:
    """An action on the directory of `topic`-`partition`, which holds `topic_id`."""

    topic: str
    partition: int
    topic_id: Uuid

    @property
    def dir_name(self) -> str:
        return partition_dir_name(self.topic, self.partition)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartition(_PartitionDirAction):
    """A hosted partition without a directory gets one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteMetadataFile(_PartitionDirAction):
    """A hosted partition's directory that a crash left without partition.metadata and
    without data: it gets the image's ID."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StageForDeletion:
    """Move `<dir_name>` to `deleting/<staged_name>`, to be removed at `due_ms`."""

    dir_name: str
    staged_name: str
    topic_id: Uuid  # the stale ID (ZERO_UUID when the directory had no partition.metadata)
    partition: int
    due_ms: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RenamePartitionDir:
    """A renamed topic: the directory follows the name, data and partition.metadata stay."""

    from_dir: str
    to_dir: str
    topic_id: Uuid


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleDeletion:
    """A staged directory with no recorded due time gets one."""

    staged_name: str
    due_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteStaged:
    """Remove `deleting/<staged_name>`, whose delay has passed."""

    staged_name: str
    due_ms: int


Action = (CreatePartition | WriteMetadataFile | StageForDeletion | RenamePartitionDir
          | ScheduleDeletion | DeleteStaged)


# --- the decision -------------------------------------------------------------------


def stale_reason(local: LocalPartition, topic_ids: Mapping[str, Uuid],
                 names_by_id: Mapping[Uuid, str],
                 partition_counts: Mapping[Uuid, int] | None = None,
                 hosts: Callable[[Uuid, int], bool] | None = None) -> str | None:
    """Why `local` is stale by the image alone (its topic ID, its partition number
    beyond the live topic's count, or a partition this broker does not host), or None
    when the image says it holds a partition this broker keeps."""
    reason = _stale_topic_reason(local, topic_ids, names_by_id)
    if reason is not None:
        return reason
    live_id = local.topic_id if local.topic_id is not None else topic_ids[local.topic]
    count = (partition_counts or {}).get(live_id)
    if count is not None and local.partition >= count:
        return (f"partition {local.partition} of topic id {live_id} was removed: the "
                f"image's topic has {count} partitions")
    if hosts is not None and not hosts(live_id, local.partition):
        return (f"a stray: partition {local.partition} of topic id {live_id} is not "
                "assigned to this broker")
    return None


def _stale_topic_reason(local: LocalPartition, topic_ids: Mapping[str, Uuid],
                        names_by_id: Mapping[Uuid, str]) -> str | None:
    known_id = topic_ids.get(local.topic)
    if local.topic_id is None:
        if known_id is None:
            return "no partition.metadata and the image has no topic of that name"
        if local.holds_data:
            return ("a stray: data without a valid partition.metadata (its topic ID is "
                    "unknown, so it is never adopted by name)")
        return None  # a new partition's directory cut short: gets the image's ID
    if local.topic_id in names_by_id:
        return None  # live (maybe under a new name)
    if known_id is not None:
        return f"topic id {local.topic_id} differs from the image's {known_id}"
    return f"topic id {local.topic_id} is not in the image"


def _live_primaries(parts: Sequence[LocalPartition], topic_ids: Mapping[str, Uuid],
                    names_by_id: Mapping[Uuid, str], partition_counts: Mapping[Uuid, int],
                    hosts: Callable[[Uuid, int], bool]) -> dict[tuple[Uuid, int], str]:
    """For each kept (topic id, partition) on disk, the directory that is its copy: the
    one already under the image's name, else one that proves its ID with
    partition.metadata, else an empty file-less one under the image's name."""
    primaries: dict[tuple[Uuid, int], str] = {}
    ranked = sorted(
        (part for part in parts
         if stale_reason(part, topic_ids, names_by_id, partition_counts, hosts) is None),
        key=lambda part: (part.topic_id is None, part.topic_id is not None
                          and names_by_id[part.topic_id] != part.topic, part.dir_name))
    for part in ranked:
        topic_id = part.topic_id if part.topic_id is not None else topic_ids[part.topic]
        primaries.setdefault((topic_id, part.partition), part.dir_name)
    return primaries


def reconcile(*, local: Iterable[LocalPartition], staged: Iterable[StagedDeletion],
              assignment: Assignment, now_ms: int, delete_delay_ms: int) -> list[Action]:
    """The actions that bring the disk in line with `assignment`, in the order to apply
    them: stagings (which free names), renames, completions, creations, then the
    scheduling and removal of staged directories."""
    topic_ids = assignment.topic_ids
    names_by_id = assignment.names_by_id
    if names_by_id is None:
        names_by_id = {topic_id: name for name, topic_id in topic_ids.items()}
    locals_sorted = sorted(local, key=lambda p: p.dir_name)
    staged_list = list(staged)
    taken_staged = {s.name for s in staged_list}
    counts = assignment.partition_counts
    hosts = assignment.hosts or _hosted_lookup(assignment.hosted)
    primaries = _live_primaries(locals_sorted, topic_ids, names_by_id, counts, hosts)

    stage: list[StageForDeletion] = []
    keep: set[str] = set()  # final names of the live directories
    movers: list[LocalPartition] = []
    complete: list[WriteMetadataFile] = []
    for part in locals_sorted:
        reason = stale_reason(part, topic_ids, names_by_id, counts, hosts)
        live_id = part.topic_id if part.topic_id is not None else topic_ids.get(part.topic)
        if reason is None and live_id is not None:
            primary = primaries[(live_id, part.partition)]
            if primary != part.dir_name:
                # A second copy of a live partition (a leftover, or a copy by hand): the
                # primary keeps serving; this one waits out the delay like any stale dir.
                reason = f"a second copy of topic id {live_id} partition {part.partition}, " \
                         f"live in {primary}"
        if reason is not None:
            stale_id = part.topic_id if part.topic_id is not None else ZERO_UUID
            name = _free_staged_name(stale_id, part.partition, taken_staged)
            taken_staged.add(name)
            stage.append(StageForDeletion(
                dir_name=part.dir_name, staged_name=name, topic_id=stale_id,
                partition=part.partition, due_ms=now_ms + delete_delay_ms, reason=reason))
        elif part.topic_id is None:
            complete.append(WriteMetadataFile(topic=part.topic, partition=part.partition,
                                             topic_id=topic_ids[part.topic]))
            keep.add(part.dir_name)
        elif names_by_id[part.topic_id] == part.topic:
            keep.add(part.dir_name)
        else:
            movers.append(part)

    renames = _plan_renames(movers, names_by_id)
    keep.update(rename.to_dir for rename in renames)

    creates = [CreatePartition(topic=h.topic, partition=h.partition, topic_id=h.topic_id)
               for h in sorted(assignment.hosted, key=lambda h: (h.topic, h.partition))
               if h.dir_name not in keep]

    housekeeping: list[Action] = []
    for item in sorted(staged_list, key=lambda s: s.name):
        if item.due_ms is None:
            housekeeping.append(ScheduleDeletion(staged_name=item.name,
                                                 due_ms=now_ms + delete_delay_ms))
        elif item.due_ms <= now_ms:
            housekeeping.append(DeleteStaged(staged_name=item.name, due_ms=item.due_ms))

    return [*stage, *renames, *complete, *creates, *housekeeping]


def _hosted_lookup(hosted: Iterable[HostedPartition]) -> Callable[[Uuid, int], bool]:
    keys = {(h.topic_id, h.partition) for h in hosted}
    return lambda topic_id, partition: (topic_id, partition) in keys


def _plan_renames(movers: list[LocalPartition],
                  names_by_id: Mapping[Uuid, str]) -> list[RenamePartitionDir]:
    """Move each renamed topic's directory to its new name. Live (id, partition) pairs
    are unique by now, so a target is only ever occupied by another mover: renames are
    ordered so chains (a->b while b->c) finish in one pass, and a cycle (a->b, b->a) is
    broken through a temporary name that a later scan would still recognise."""
    renames: list[RenamePartitionDir] = []
    pending = {part.dir_name: part for part in movers}

    def target_of(part: LocalPartition) -> str:
        assert part.topic_id is not None
        return partition_dir_name(names_by_id[part.topic_id], part.partition)

    while pending:
        ready = [name for name, part in sorted(pending.items())
                 if target_of(part) not in pending]
        if not ready:
            # Targets are unique, so only cycles remain: park one member under a fresh
            # temporary name, which frees the name its predecessor is waiting for.
            name, part = min(pending.items())
            assert part.topic_id is not None
            parked = _parking_name(part, pending)
            renames.append(RenamePartitionDir(from_dir=name, to_dir=parked.dir_name,
                                              topic_id=part.topic_id))
            del pending[name]
            pending[parked.dir_name] = parked
            continue
        for name in ready:
            part = pending.pop(name)
            assert part.topic_id is not None
            renames.append(RenamePartitionDir(from_dir=name, to_dir=target_of(part),
                                              topic_id=part.topic_id))
    return renames


def _parking_name(part: LocalPartition, taken: Mapping[str, LocalPartition]) -> LocalPartition:
    suffix = 0
    while True:
        topic = f"{part.topic_id}.renaming" + (f".{suffix}" if suffix else "")
        parked = LocalPartition(topic=topic, partition=part.partition, topic_id=part.topic_id)
        if parked.dir_name not in taken:
            return parked
        suffix += 1


def _free_staged_name(topic_id: Uuid, partition: int, taken: set[str]) -> str:
    suffix = 0
    while staged_dir_name(topic_id, partition, suffix) in taken:
        suffix += 1
    return staged_dir_name(topic_id, partition, suffix)


def after_actions(local: Iterable[LocalPartition], staged: Iterable[StagedDeletion],
                  actions: Iterable[Action]) -> tuple[list[LocalPartition],
                                                      list[StagedDeletion]]:
    """What a scan of the log dir finds once `actions` (found against `local` and
    `staged`) were applied. The broker keeps this view from one pass to the next instead
    of reading every partition.metadata again: it alone changes these directories."""
    parts = {p.dir_name: p for p in local}
    pending = {s.name: s for s in staged}
    for action in actions:
        if isinstance(action, CreatePartition | WriteMetadataFile):
            if isinstance(action, CreatePartition) or action.dir_name in parts:
                parts[action.dir_name] = LocalPartition(
                    topic=action.topic, partition=action.partition, topic_id=action.topic_id)
        elif isinstance(action, StageForDeletion):
            del parts[action.dir_name]
            pending[action.staged_name] = StagedDeletion(name=action.staged_name,
                                                         due_ms=action.due_ms)
        elif isinstance(action, RenamePartitionDir):
            moved = parts.pop(action.from_dir)
            parsed = parse_partition_dir_name(action.to_dir)
            assert parsed is not None
            parts[action.to_dir] = LocalPartition(topic=parsed[0], partition=parsed[1],
                                                  topic_id=moved.topic_id)
        elif isinstance(action, ScheduleDeletion):
            pending[action.staged_name] = StagedDeletion(name=action.staged_name,
                                                         due_ms=action.due_ms)
        else:
            pending.pop(action.staged_name, None)
    return ([parts[name] for name in sorted(parts)],
            [pending[name] for name in sorted(pending)])


def is_fixpoint(actions: Sequence[Action]) -> bool:
    """Nothing left to do (used by the shell to log 'reconciled')."""
    return not actions
