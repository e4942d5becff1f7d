"""A stand-in for `os` (and `fsync_dir`) in `raft.log`'s namespace that knows what a crash
would leave of one directory.

Every call goes through to the real `os`. On the way, `CrashDisk` keeps what a power cut
would keep: each file's content as of its last fsync, and the directory's names as of
the directory's last fsync. Data not yet synced is lost, and so is a name not yet synced
(a file created since, or the old target of a rename); a name removed since comes back.
Files are told apart by a generation number, not by inode, since an unlinked file's inode
number is soon reused.

`inject(n, error)` makes the n-th step (0-based; a step is any call that changes files,
listed in `steps`) raise `error` instead of running. With `Died` that is the process dying
just before the step: `Died` is no OSError, so no cleanup runs either.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import raft.log
from raft.common.durable import fsync_dir as real_fsync_dir


class Died(BaseException):
    """The process died here (raised instead of a step)."""


class CrashDisk:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.steps: list[tuple[str, str]] = []  # (call, file name) in order
        self._inject: tuple[int, BaseException] | None = None
        self._generation: dict[int, int] = {}  # live inode -> generation
        self._next_generation = 0
        self._opened: set[int] = set()  # fds opened through us, for `abandon`
        self._durable_data: dict[int, bytes] = {}  # generation -> content at its last fsync
        self._durable_names: dict[str, int] = {}  # name -> generation at the dir's last fsync
        self.sync_all()

    # --- control -------------------------------------------------------------------------

    def inject(self, step: int, error: BaseException) -> None:
        self._inject = (len(self.steps) + step, error)

    def sync_all(self) -> None:
        """Take everything in the directory as durable now (after a flush, say)."""
        for path in self._files():
            with path.open("rb") as f:
                self._durable_data[self._generation_of(os.fstat(f.fileno()).st_ino)] = f.read()
        self._sync_names()

    @contextmanager
    def installed(self) -> Iterator[CrashDisk]:
        saved = raft.log.os, raft.log.fsync_dir
        raft.log.os, raft.log.fsync_dir = self, self.fsync_dir  # type: ignore[assignment]
        try:
            yield self
        finally:
            raft.log.os, raft.log.fsync_dir = saved

    def abandon(self) -> None:
        """Close what a dead process left open (closing changes nothing on disk)."""
        for fd in self._opened:
            try:
                os.close(fd)
            except OSError:
                pass
        self._opened.clear()

    def power_cut(self, target: Path) -> Path:
        """Write into `target` (a new directory) what a power cut would leave."""
        target.mkdir()
        for name, generation in self._durable_names.items():
            (target / name).write_bytes(self._durable_data.get(generation, b""))
        return target

    def count(self, *calls: str) -> int:
        return sum(1 for call, _ in self.steps if call in calls)

    # --- os, as raft.log sees it -----------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def open(self, path: Any, flags: int, mode: int = 0o777) -> int:
        self._step("open", Path(path).name)
        existed = os.path.exists(path)
        fd = os.open(path, flags, mode)
        self._opened.add(fd)
        if not existed:  # a new file, whatever its inode number was used for before
            self._generation.pop(os.fstat(fd).st_ino, None)
        return fd

    def close(self, fd: int) -> None:
        self._opened.discard(fd)
        os.close(fd)

    def pwrite(self, fd: int, data: Any, position: int) -> int:
        self._step("pwrite", self._name(fd))
        return os.pwrite(fd, data, position)

    def ftruncate(self, fd: int, length: int) -> None:
        self._step("ftruncate", self._name(fd))
        os.ftruncate(fd, length)

    def fsync(self, fd: int) -> None:
        self._step("fsync", self._name(fd))
        os.fsync(fd)
        size = os.fstat(fd).st_size
        self._durable_data[self._generation_of(os.fstat(fd).st_ino)] = os.pread(fd, size, 0)

    def fsync_dir(self, path: Path) -> None:
        assert Path(path) == self.directory, f"fsync of another directory {path}"
        self._step("fsync_dir", "")
        real_fsync_dir(path)
        self._sync_names()

    def unlink(self, path: Any) -> None:
        self._step("unlink", Path(path).name)
        st = os.stat(path)
        os.unlink(path)
        if st.st_nlink == 1:
            self._generation.pop(st.st_ino, None)

    def rename(self, src: Any, dst: Any) -> None:
        self._step("rename", f"{Path(src).name} -> {Path(dst).name}")
        self._moving(dst, lambda: os.rename(src, dst))

    def replace(self, src: Any, dst: Any) -> None:
        self._step("replace", f"{Path(src).name} -> {Path(dst).name}")
        self._moving(dst, lambda: os.replace(src, dst))

    # --- internals ---------------------------------------------------------------------------

    def _step(self, call: str, name: str) -> None:
        if self._inject is not None and self._inject[0] == len(self.steps):
            error, self._inject = self._inject[1], None
            self.steps.append((f"{call} (failed)", name))
            raise error
        self.steps.append((call, name))

    def _moving(self, dst: Any, move: Callable[[], None]) -> None:
        replaced = os.stat(dst).st_ino if os.path.exists(dst) else None
        move()
        if replaced is not None:
            self._generation.pop(replaced, None)

    def _files(self) -> list[Path]:
        return sorted(p for p in self.directory.iterdir() if p.is_file())

    def _generation_of(self, inode: int) -> int:
        if inode not in self._generation:
            self._generation[inode] = self._next_generation
            self._next_generation += 1
        return self._generation[inode]

    def _sync_names(self) -> None:
        self._durable_names = {p.name: self._generation_of(p.stat().st_ino)
                               for p in self._files()}

    def _name(self, fd: int) -> str:
        return Path(os.readlink(f"/proc/self/fd/{fd}")).name
