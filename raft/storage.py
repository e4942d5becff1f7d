"""A node's log directory: `meta.properties` (written by `kraft format`, with a new
`directory.id` on every format: the replica key's second half, KIP-853), `quorum-state`,
the metadata partition's `high-watermark-checkpoint` and `log-start-offset`, and `.lock`
(`lock_log_dir`: one process at a time uses a directory).

All are small files replaced atomically: write a temp file, fsync it, rename it over the
old one, fsync the directory. A crash leaves either the old or the new content, never a
mix; a leftover temp file is ignored.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from raft.common.connection_limits import out_of_descriptors
from raft.common.durable import fsync_dir, make_private_dir, open_private, write_atomically
from raft.common.uuid import Uuid
from raft.types import ElectionState

META_PROPERTIES = "meta.properties"
QUORUM_STATE = "quorum-state"
META_PROPERTIES_VERSION = 1
HIGH_WATERMARK_CHECKPOINT = "high-watermark-checkpoint"
HIGH_WATERMARK_CHECKPOINT_VERSION = 0
LOG_START_OFFSET = "log-start-offset"


class StorageError(Exception):
    """A log directory is missing, unformatted, formatted for someone else, or damaged."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    version: int = META_PROPERTIES_VERSION
    # Kafka's directory.id (KIP-858/853): None in a directory formatted before it existed
    directory_id: str | None = None

    def to_text(self) -> str:
        directory = "" if self.directory_id is None else f"directory.id={self.directory_id}\n"
        return (f"#\n# written by kraft format\nversion={self.version}\n"
                f"cluster.id={self.cluster_id}\nnode.id={self.node_id}\n{directory}")

    @classmethod
    def from_text(cls, text: str, source: str = "meta.properties") -> MetaProperties:
        values: dict[str, str] = {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith(("#", "!")):
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise StorageError(f"{source}:{number}: expected key=value, got {raw!r}")
            values[key.strip()] = value.strip()
        try:
            version = int(values["version"])
            cluster_id = values["cluster.id"]
            node_id = int(values["node.id"])
        except KeyError as exc:
            raise StorageError(f"{source}: missing {exc.args[0]}") from None
        except ValueError as exc:
            raise StorageError(f"{source}: {exc}") from None
        if version != META_PROPERTIES_VERSION:
            raise StorageError(f"{source}: unsupported version {version}")
        directory = values.get("directory.id")
        if directory is not None:
            try:
                Uuid.from_string(directory)
            except ValueError as exc:
                raise StorageError(f"{source}: directory.id: {exc}") from None
        return cls(cluster_id=cluster_id, node_id=node_id, version=version,
                   directory_id=directory)


def write_quorum_state(log_dir: str | os.PathLike[str], state: ElectionState) -> None:
    data = json.dumps(state.to_json(), sort_keys=True).encode() + b"\n"
    write_atomically(Path(log_dir) / QUORUM_STATE, data)


def read_quorum_state(log_dir: str | os.PathLike[str], *,
                      voters: Collection[int] | None = None) -> ElectionState | None:
    """The persisted election state; None for a node that never wrote one. With `voters`
    (the configured voter ids) a state file naming another voter set is a StorageError
    (see `check_quorum_state_voters`)."""
    path = Path(log_dir) / QUORUM_STATE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise TypeError(f"expected an object, got {type(data).__name__}")
        state = ElectionState.from_json(data)
    except (ValueError, TypeError, KeyError) as exc:
        raise StorageError(f"{path}: corrupt quorum-state: {exc}") from None
    if voters is not None:
        check_quorum_state_voters(state, voters, path)
    return state


def check_quorum_state_voters(state: ElectionState, voters: Collection[int],
                              path: str | os.PathLike[str]) -> None:
    """The quorum is static: a quorum-state written under another voter set means the
    configuration changed under a node that voted or followed in it (Kafka refuses to
    start the same way). A state without voters (none recorded) passes."""
    persisted, configured = sorted(set(state.voters)), sorted(set(voters))
    if persisted and persisted != configured:
        raise StorageError(
            f"configured voter set {configured} is different from the voter set "
            f"{persisted} read from the state file {path}; check that "
            "controller.quorum.voters is up to date")


def write_high_watermark_checkpoint(partition_dir: str | os.PathLike[str], offset: int) -> None:
    """Record that the records below `offset` (exclusive) of this partition directory's
    log are committed: "version: 0\noffset: N\n"."""
    text = f"version: {HIGH_WATERMARK_CHECKPOINT_VERSION}\noffset: {offset}\n"
    write_atomically(Path(partition_dir) / HIGH_WATERMARK_CHECKPOINT, text.encode())


def read_high_watermark_checkpoint(partition_dir: str | os.PathLike[str]) -> int | None:
    """The checkpointed high watermark; None when the file is missing, unreadable or not
    what `write_high_watermark_checkpoint` writes (it is a hint for tools, never fatal).
    Out of file descriptors is an OSError: the file may well hold a value, and a writer
    that took None for 0 could later move the checkpoint back."""
    try:
        text = (Path(partition_dir) / HIGH_WATERMARK_CHECKPOINT).read_text(encoding="utf-8")
    except OSError as exc:
        if out_of_descriptors(exc):
            raise
        return None
    except UnicodeDecodeError:
        return None
    fields = {key.strip(): value.strip()
              for key, _, value in (line.partition(":") for line in text.splitlines())}
    offset = fields.get("offset", "")
    if fields.get("version") != str(HIGH_WATERMARK_CHECKPOINT_VERSION) or \
            not (offset.isascii() and offset.isdigit()):
        return None
    return int(offset)


def write_meta_properties(log_dir: str | os.PathLike[str], meta: MetaProperties) -> None:
    write_atomically(Path(log_dir) / META_PROPERTIES, meta.to_text().encode())


def read_meta_properties(log_dir: str | os.PathLike[str]) -> MetaProperties | None:
    """None when the directory is not formatted."""
    path = Path(log_dir) / META_PROPERTIES
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise StorageError(f"{path}: not text: {exc}") from None
    return MetaProperties.from_text(text, str(path))


def format_log_dir(log_dir: str | os.PathLike[str], *, cluster_id: str, node_id: int,
                   ignore_formatted: bool = False, directory_id: str | None = None) -> bool:
    """Write meta.properties (like kafka-storage.sh format), under the directory's lock (a
    running node's directory is refused, LogDirLockedError). Returns False when the
    directory was already formatted identically and `ignore_formatted` is set. The metadata
    partition's directory is laid out by its log (`tools.commands.format`)."""
    path = Path(log_dir)
    if not path.is_dir():
        make_private_dir(path, parents=True, exist_ok=True)
        fsync_dir(path.parent)
    lock = lock_log_dir(path)
    try:
        existing = read_meta_properties(path)
        if existing is not None:
            if (existing.cluster_id, existing.node_id) != (cluster_id, node_id):
                raise StorageError(
                    f"{path} is already formatted for cluster {existing.cluster_id} node "
                    f"{existing.node_id}, not cluster {cluster_id} node {node_id}")
            if not ignore_formatted:
                raise StorageError(f"{path} is already formatted (use --ignore-formatted)")
            return False
        write_meta_properties(path, MetaProperties(
            cluster_id=cluster_id, node_id=node_id,
            directory_id=directory_id or str(Uuid.random())))
        return True
    finally:
        lock.release()


def open_log_dir(log_dir: str | os.PathLike[str], cluster_id: str | None = None,
                 node_id: int | None = None) -> MetaProperties:
    """Check that `log_dir` is formatted, for this cluster and node when given."""
    path = Path(log_dir)
    if not path.is_dir():
        raise StorageError(f"{path}: log directory does not exist (run kraft format)")
    meta = read_meta_properties(path)
    if meta is None:
        raise StorageError(f"{path}: not formatted, no {META_PROPERTIES} (run kraft format)")
    if cluster_id is not None and meta.cluster_id != cluster_id:
        raise StorageError(f"{path}: formatted for cluster {meta.cluster_id}, "
                           f"but this node is configured for cluster {cluster_id}")
    if node_id is not None and meta.node_id != node_id:
        raise StorageError(f"{path}: formatted for node {meta.node_id}, "
                           f"but this node is configured as node {node_id}")
    return meta


def write_log_start(partition_dir: str | os.PathLike[str], offset: int, epoch: int) -> None:
    """Record that the log starts at `offset`, after a record of `epoch` (the snapshot
    standing in for what lies below): "version: 0\noffset: N\nepoch: E\n"."""
    text = f"version: 0\noffset: {offset}\nepoch: {epoch}\n"
    write_atomically(Path(partition_dir) / LOG_START_OFFSET, text.encode())


def read_log_start(partition_dir: str | os.PathLike[str]) -> tuple[int, int]:
    """(log start offset, its epoch); (0, 0) when the file is missing. Unlike the
    high-watermark checkpoint this file is not a hint: the log below its offset may be
    gone, so a damaged one is a StorageError naming it."""
    path = Path(partition_dir) / LOG_START_OFFSET
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return 0, 0
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(f"{path}: unreadable log start offset: {exc}") from None
    fields = {key.strip(): value.strip()
              for key, _, value in (line.partition(":") for line in text.splitlines())}
    values = [fields.get(key, "") for key in ("offset", "epoch")]
    if fields.get("version") != "0" or not all(v.isascii() and v.isdigit() for v in values):
        raise StorageError(f"{path}: not a log start offset file: {text[:80]!r}")
    return int(values[0]), int(values[1])


LOCK_FILE = ".lock"


class LogDirLockedError(StorageError):
    """Another process holds the log directory's lock; `pid` is the one it wrote (None
    when unreadable)."""

    def __init__(self, log_dir: Path, pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "a process whose pid is not recorded"
        super().__init__(f"{log_dir} is in use by another process ({holder}; lock file "
                         f"{log_dir / LOCK_FILE})")
        self.pid = pid


@dataclass(eq=False)
class LogDirLock:
    """An exclusive `flock` on `<log dir>/.lock`, held while the file stays open. The file
    holds the holder's pid (a hint for the error message; the lock itself is the flock,
    which the kernel drops when the process dies, so a stale file never blocks)."""

    path: Path
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            os.ftruncate(self.fd, 0)  # no pid left behind for a later reader to trust
            os.close(self.fd)
            self.fd = -1


def lock_log_dir(log_dir: str | os.PathLike[str]) -> LogDirLock:
    """Take `log_dir`'s lock without waiting: LogDirLockedError naming the holder's pid when
    another process has it, StorageError when the directory does not exist. Taken before
    anything reads or repairs the directory, so a second node on a live directory never
    runs recovery over the first one's files."""
    directory = Path(log_dir)
    if not directory.is_dir():
        raise StorageError(f"{directory}: log directory does not exist (run kraft format)")
    path = directory / LOCK_FILE
    fd = open_private(path, os.O_RDWR | os.O_CREAT)  # not inherited by child processes
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        raise LogDirLockedError(directory, int(text) if text.isdigit() else None) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return LogDirLock(path, fd)
