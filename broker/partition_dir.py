"""The thin I/O under reconciliation: scan a log dir, read and write partition.metadata
durably, and apply `broker.reconcile` actions.

Every action is idempotent and ordered so that a crash between any two system calls
leaves a state that the next scan + reconcile finishes:

- a new partition's directory holds no data yet: its file is created in place and made
  durable (`sync_partition_metadata`) only before the first data is written there, by
  the broker opening the partition's log. A crash before that leaves a directory with
  nothing but a missing or partial file (read as missing), which the next
  reconciliation completes (`WriteMetadataFile`: temp file, fsync, rename, directory
  fsync) when the partition is hosted here. Data never sits in a directory without a
  durable partition.metadata, so data without one is a stray, never adopted by name.
  Creating thousands of partitions thus costs one fsync (the log dir's), not three per
  partition;
- staging writes `deletion.metadata` (due time, reason) into the partition directory
  *before* moving it under `deleting/`, so a staged directory always knows when it may
  be removed, and pending deletions survive restarts;
- removing a staged directory deletes `deletion.metadata` last, so an interrupted
  removal is still due and is simply done again.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

from broker.reconcile import (
    DELETING_DIR,
    Action,
    CreatePartition,
    DeleteStaged,
    LocalPartition,
    RenamePartitionDir,
    ScheduleDeletion,
    StagedDeletion,
    StageForDeletion,
    WriteMetadataFile,
    parse_partition_dir_name,
)
from raft.common.durable import (
    TEMP_SUFFIX,
    fsync_dir,
    make_private_dir,
    open_private,
    write_atomically,
)
from raft.common.uuid import Uuid

log = logging.getLogger(__name__)

PARTITION_METADATA = "partition.metadata"
DELETION_METADATA = "deletion.metadata"
_RESERVED_PREFIXES = ("__cluster_metadata", ".")  # the raft log itself; hidden entries
PARTITION_METADATA_VERSION = 0
# what a new partition's directory holds before its data: the file, or its temp file
_METADATA_NAMES = (PARTITION_METADATA, PARTITION_METADATA + TEMP_SUFFIX)


class PartitionDirError(Exception):
    """The log dir is in a state no action can safely fix (names the path)."""


# --- durable small files ------------------------------------------------------------


def write_file_durably(path: Path, text: str) -> None:
    write_atomically(path, text.encode("ascii"))


def _parse_key_values(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def format_partition_metadata(topic_id: Uuid) -> str:
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {topic_id}\n"


def parse_partition_metadata(text: str) -> Uuid:
    """The topic ID of a partition.metadata text; ValueError when it is not one."""
    fields = _parse_key_values(text)
    if fields.get("version") != str(PARTITION_METADATA_VERSION):
        raise ValueError(f"unsupported partition.metadata version {fields.get('version')!r}")
    if "topic_id" not in fields:
        raise ValueError("partition.metadata has no topic_id")
    return Uuid.from_string(fields["topic_id"])


def read_partition_metadata(partition_dir: Path) -> Uuid | None:
    """The directory's topic ID; None when the file is missing or unreadable (logged)."""
    path = partition_dir / PARTITION_METADATA
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("unreadable partition.metadata", extra={"path": str(path), "error": str(exc)})
        return None
    try:
        return parse_partition_metadata(text)
    except ValueError as exc:
        log.warning("invalid partition.metadata", extra={"path": str(path), "error": str(exc)})
        return None


def write_partition_metadata(partition_dir: Path, topic_id: Uuid, *,
                             durable: bool = True) -> None:
    """`durable`: replaces the file, which is whole or absent after any crash. Else the
    file of a new directory is created in place: a crash may leave it partial, read as
    missing (the next reconciliation writes it again, durably); `sync_partition_metadata`
    makes it durable."""
    path = partition_dir / PARTITION_METADATA
    text = format_partition_metadata(topic_id)
    if durable:
        write_file_durably(path, text)
        return
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        os.write(fd, text.encode("ascii"))  # a few dozen bytes: one write takes them
    finally:
        os.close(fd)


def sync_partition_metadata(partition_dir: Path) -> None:
    """fsync a partition.metadata written without it, and its directory: before the
    first data goes into `partition_dir`, so data never outlives its topic ID."""
    fd = os.open(partition_dir / PARTITION_METADATA, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(partition_dir)


def read_due_ms(staged_dir: Path) -> int | None:
    try:
        fields = _parse_key_values((staged_dir / DELETION_METADATA).read_text(encoding="utf-8"))
        return int(fields["due_ms"])
    except (OSError, UnicodeDecodeError, KeyError, ValueError):
        return None


def write_deletion_metadata(target_dir: Path, *, due_ms: int, reason: str, origin: str) -> None:
    reason_line = reason.replace("\n", " ")
    write_file_durably(target_dir / DELETION_METADATA,
                       f"version: 0\ndue_ms: {due_ms}\ndir: {origin}\nreason: {reason_line}\n")


# --- scan ---------------------------------------------------------------------------


def scan(log_dir: Path) -> tuple[list[LocalPartition], list[StagedDeletion]]:
    """The partition directories and the staged deletions found in `log_dir`."""
    local: list[LocalPartition] = []
    for entry in sorted(log_dir.iterdir()):
        if not entry.is_dir() or entry.name == DELETING_DIR:
            continue
        if entry.name.startswith(_RESERVED_PREFIXES):
            continue
        parsed = parse_partition_dir_name(entry.name)
        if parsed is None:
            continue  # not a partition directory: never ours to touch
        topic, partition = parsed
        topic_id = read_partition_metadata(entry)
        holds_data = topic_id is not None or any(
            child.name not in _METADATA_NAMES for child in entry.iterdir())
        local.append(LocalPartition(topic=topic, partition=partition, topic_id=topic_id,
                                    holds_data=holds_data))
    staged: list[StagedDeletion] = []
    deleting = log_dir / DELETING_DIR
    if deleting.is_dir():
        for entry in sorted(deleting.iterdir()):
            if not entry.is_dir():
                continue
            due_ms = read_due_ms(entry)
            if due_ms is None and not any(entry.iterdir()):
                due_ms = 0  # an interrupted removal: nothing left to keep
            staged.append(StagedDeletion(name=entry.name, due_ms=due_ms))
    return local, staged


# --- apply --------------------------------------------------------------------------


def apply_action(log_dir: Path, action: Action) -> None:
    """Apply one action; applying it again (after a crash) is harmless."""
    if isinstance(action, CreatePartition | WriteMetadataFile):
        _ensure_partition(log_dir, action)
    elif isinstance(action, StageForDeletion):
        _stage(log_dir, action)
    elif isinstance(action, RenamePartitionDir):
        _rename(log_dir, action)
    elif isinstance(action, ScheduleDeletion):
        staged_dir = log_dir / DELETING_DIR / action.staged_name
        if staged_dir.is_dir():
            write_deletion_metadata(staged_dir, due_ms=action.due_ms,
                                    reason="due time was not recorded",
                                    origin=action.staged_name)
    elif isinstance(action, DeleteStaged):
        _remove_staged(log_dir, action)
    else:  # pragma: no cover - exhaustiveness
        raise TypeError(f"unknown action {action!r}")


def apply_actions(log_dir: Path, actions: Iterable[Action]) -> None:
    """Apply in order. A run of CreatePartition actions makes its directories first and
    fsyncs the log dir once for all of them (one fsync of a directory that may hold
    thousands of entries, not one per partition), then writes each partition.metadata:
    as with one partition, no partition.metadata exists before its directory's entry
    is durable."""
    pending = list(actions)
    index = 0
    while index < len(pending):
        end = index
        while end < len(pending) and isinstance(pending[end], CreatePartition):
            end += 1
        if end - index > 1:
            run = [a for a in pending[index:end] if isinstance(a, CreatePartition)]
            made = _make_dirs(log_dir, run)
            if made:
                fsync_dir(log_dir)
            for action in run:
                if action.dir_name in made:  # empty: nothing to check before the write
                    _write_new_partition_metadata(log_dir / action.dir_name, action)
                else:
                    _ensure_partition(log_dir, action)
            index = end
        else:
            apply_action(log_dir, pending[index])
            index += 1


def _make_dirs(log_dir: Path, actions: list[CreatePartition]) -> set[str]:
    """The names of the directories made here (not yet durable), the others existing."""
    made: set[str] = set()
    for action in actions:
        try:
            make_private_dir(log_dir / action.dir_name)
        except FileExistsError:
            continue
        made.add(action.dir_name)
    return made


def _ensure_partition(log_dir: Path, action: CreatePartition | WriteMetadataFile) -> None:
    path = log_dir / action.dir_name
    if isinstance(action, WriteMetadataFile) and not path.is_dir():
        return  # the directory moved away since the scan: nothing to complete
    if not path.is_dir():
        make_private_dir(path)
        fsync_dir(log_dir)
    current = read_partition_metadata(path)
    if current == action.topic_id:
        return
    if current is not None:
        raise PartitionDirError(
            f"{path}: partition.metadata holds {current}, refusing to overwrite with "
            f"{action.topic_id}")
    if isinstance(action, CreatePartition):
        _write_new_partition_metadata(path, action)
        return
    write_partition_metadata(path, action.topic_id)
    log.info("completed a partition directory a crash left without partition.metadata",
             extra={"dir": action.dir_name, "topic_id": str(action.topic_id)})


def _write_new_partition_metadata(path: Path, action: CreatePartition) -> None:
    """A new directory holds no data: its file is made durable before its first data
    (see the module docstring). Logged at DEBUG: thousands a second when topics are
    created in bulk, and each reconciliation pass logs its counts at INFO."""
    write_partition_metadata(path, action.topic_id, durable=False)
    log.debug("created partition",
              extra={"dir": action.dir_name, "topic_id": str(action.topic_id)})


def _already_moved(source: Path, target: Path, *, verb: str, goal: str) -> bool:
    """True when only `target` is there: the move was done before a crash. False when the
    move is still to do; PartitionDirError when `source` is missing too, or when `target`
    exists already (a move never overwrites)."""
    if not source.is_dir():
        if target.is_dir():
            return True
        raise PartitionDirError(f"{source}: missing, cannot {goal}")
    if target.exists():
        raise PartitionDirError(f"{target}: already exists, cannot {verb} {source} there")
    return False


def _stage(log_dir: Path, action: StageForDeletion) -> None:
    source = log_dir / action.dir_name
    deleting = log_dir / DELETING_DIR
    target = deleting / action.staged_name
    if _already_moved(source, target, verb="stage", goal="stage it for deletion"):
        return
    found = read_partition_metadata(source)
    if action.topic_id.value != 0 and found != action.topic_id:
        raise PartitionDirError(f"{source}: holds topic id {found}, expected the stale "
                                f"{action.topic_id}; not staging it")
    log.warning("staging stale partition for deletion", extra={
        "dir": action.dir_name, "topic_id": str(action.topic_id),
        "partition": action.partition, "staged_as": f"{DELETING_DIR}/{action.staged_name}",
        "delete_at_ms": action.due_ms, "delete_at": _utc(action.due_ms),
        "reason": action.reason})
    write_deletion_metadata(source, due_ms=action.due_ms, reason=action.reason,
                            origin=action.dir_name)
    if not deleting.is_dir():
        make_private_dir(deleting)
        fsync_dir(log_dir)
    os.rename(source, target)
    fsync_dir(deleting)
    fsync_dir(log_dir)


def _rename(log_dir: Path, action: RenamePartitionDir) -> None:
    source = log_dir / action.from_dir
    target = log_dir / action.to_dir
    if _already_moved(source, target, verb="rename", goal=f"rename it to {target.name}"):
        return
    os.rename(source, target)
    fsync_dir(log_dir)
    log.info("renamed partition directory (topic renamed)", extra={
        "from_dir": action.from_dir, "to_dir": action.to_dir,
        "topic_id": str(action.topic_id)})


def _remove_staged(log_dir: Path, action: DeleteStaged) -> None:
    staged_dir = log_dir / DELETING_DIR / action.staged_name
    if not staged_dir.is_dir():
        return
    # deletion.metadata goes last: until then the directory is still due for removal.
    for root, dirs, files in os.walk(staged_dir, topdown=False):
        root_path = Path(root)
        for name in files:
            if root_path != staged_dir or name != DELETION_METADATA:
                (root_path / name).unlink()
        for name in dirs:
            (root_path / name).rmdir()
    (staged_dir / DELETION_METADATA).unlink(missing_ok=True)
    staged_dir.rmdir()
    fsync_dir(staged_dir.parent)
    log.info("removed staged partition", extra={
        "staged": f"{DELETING_DIR}/{action.staged_name}", "due_ms": action.due_ms})


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
