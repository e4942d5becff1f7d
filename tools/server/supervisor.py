"""Run a built node until SIGTERM/SIGINT, and keep it alive through a full disk.

A failed write to the log directory (ENOSPC) does not end the process: the node is torn
down (its listeners close, so clients and peers go elsewhere; nothing undurable was
acknowledged), the directory is probed every `PROBE_INTERVAL_S`, and once a probe write
succeeds the whole node is rebuilt from what is durable, on the same ports. A broken
Raft invariant is never rebuilt: it propagates.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import signal
from pathlib import Path

import trio

from raft.common.durable import open_private
from raft.core import RaftInvariantError
from raft.node import LogDirFailure, RaftNode
from tools.config import NodeConfig
from tools.server.build import BuiltNode, build_node

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_S = 10.0
# of it, at most this long moving a broker's partition leadership away first
CONTROLLED_SHUTDOWN_TIMEOUT_S = 5.0
PROBE_INTERVAL_S = 1.0  # how often a failed log directory is tried again
PROBE_FILE = ".kraft-write-probe"
PROBE_BYTES = 64 * 1024  # some room, not just one free page, before the node comes back
PROBE_REPORT_EVERY_S = 30.0  # "still failing" at most this often, not every probe
REBIND_TIMEOUT_S = 5.0  # a rebuilt node waits this long for its port to be free again
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


async def supervise(config: NodeConfig, built: BuiltNode) -> None:
    """Run the node until SIGTERM/SIGINT. When its log directory fails (a full disk) the
    node is torn down, the directory probed until it takes writes again, and the node
    rebuilt from disk in this same process; it may fail and recover any number of times."""
    await built.node.transport.bind()  # outside the nursery: a busy port is a plain OSError
    stop_requested = trio.Event()
    running: list[BuiltNode] = [built]  # the node a signal must shut down, if any

    async def watch_signals() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("signal received, shutting down",
                         extra={"signal": signal.Signals(signum).name})
                stop_requested.set()
                with trio.move_on_after(SHUTDOWN_TIMEOUT_S):
                    for stopping in list(running):
                        await before_stop(stopping)
                        await stopping.node.shutdown()
                    await trio.sleep(math.inf)  # until the supervisor below returns
                log.error("graceful shutdown timed out")
                nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch_signals)
        while True:
            failure = await run_until_disk_failure(built.node, config.log_dir)
            running.clear()
            built.close()  # every task of the node has ended: nothing uses these files
            if failure is None or stop_requested.is_set():
                break
            log.info("not accepting writes; probing the log directory until it takes "
                     "writes again", extra={"dir": str(config.log_dir),
                                            "interval_s": PROBE_INTERVAL_S})
            rebuilt = None
            while rebuilt is None and await wait_for_space(config.log_dir, stop_requested):
                log.info("space returned, restarting from disk",
                         extra={"dir": str(config.log_dir)})
                rebuilt = rebuild_node(config)
            if rebuilt is None:  # a stop signal while probing
                break
            built = rebuilt
            if stop_requested.is_set():  # the signal came during the last probe
                built.close()
                break
            running.append(built)
            await bind_with_retry(built.node)
        nursery.cancel_scope.cancel()


async def before_stop(built: BuiltNode) -> None:
    """The node's own steps before a graceful stop, within CONTROLLED_SHUTDOWN_TIMEOUT_S:
    past it the node stops anyway (the controller fences it when its session ends)."""
    with trio.move_on_after(CONTROLLED_SHUTDOWN_TIMEOUT_S) as scope:
        for step in built.before_stop:
            await step()
    if scope.cancelled_caught:
        log.warning("controlled shutdown did not finish in time, stopping anyway",
                    extra={"node": built.node.node_id,
                           "timeout_s": CONTROLLED_SHUTDOWN_TIMEOUT_S})


async def run_until_disk_failure(node: RaftNode, log_dir: Path) -> OSError | None:
    """Run `node` to its end: None after a graceful stop, the OSError when its log
    directory failed. Any other error (a broken invariant first) propagates."""
    try:
        await node.run()
    except BaseExceptionGroup as group:
        if find_exception(group, RaftInvariantError) is not None:
            raise  # the node's own state is broken: never rebuilt, even beside a disk error
        failure = find_exception(group, LogDirFailure)
        if isinstance(failure, LogDirFailure):
            return failure.error  # raft.node logged the ERROR and failed every waiter
        disk_full = _find_disk_full(group)
        if disk_full is None:
            raise
        # e.g. a broker's checkpoint write: the same full disk, seen outside the log
        log.error("log directory failed, node stopped accepting writes",
                  extra={"node": node.node_id, "dir": str(disk_full.filename or log_dir),
                         "error": str(disk_full)})
        return disk_full
    return None


def probe_log_dir(log_dir: Path) -> None:
    """Write, fsync and remove a small file; OSError while the directory takes no writes."""
    path = log_dir / PROBE_FILE
    try:
        fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            view = memoryview(bytes(PROBE_BYTES))
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        path.unlink(missing_ok=True)


async def wait_for_space(log_dir: Path, stop_requested: trio.Event) -> bool:
    """Probe `log_dir` every PROBE_INTERVAL_S: True once a probe succeeds, False on a stop
    signal. Reports the failure now and then, not at every probe."""
    started = trio.current_time()
    next_report = started + PROBE_REPORT_EVERY_S
    probes = 0
    while not stop_requested.is_set():
        try:  # a hung disk must not hold up a stop: the thread may be abandoned
            await trio.to_thread.run_sync(probe_log_dir, log_dir, abandon_on_cancel=True)
            return True
        except OSError as exc:
            probes += 1
            if trio.current_time() >= next_report:
                next_report += PROBE_REPORT_EVERY_S
                log.warning("log directory still takes no writes", extra={
                    "dir": str(log_dir), "error": str(exc), "probes": probes,
                    "waited_s": round(trio.current_time() - started)})
        with trio.move_on_after(PROBE_INTERVAL_S):
            await stop_requested.wait()
    return False


def rebuild_node(config: NodeConfig) -> BuiltNode | None:
    """The node rebuilt from what is durable (recovery cuts a torn tail); None when the
    directory fails again meanwhile. A corrupt log or directory is fatal, as at start."""
    try:
        return build_node(config)
    except OSError as exc:
        log.warning("log directory failed again while restarting, probing again",
                    extra={"dir": str(config.log_dir), "error": str(exc)})
        return None


async def bind_with_retry(node: RaftNode) -> None:
    """Bind a rebuilt node's port; peers' connections to the old socket may hold it a
    moment."""
    deadline = trio.current_time() + REBIND_TIMEOUT_S
    while True:
        try:
            await node.transport.bind()
            return
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or trio.current_time() >= deadline:
                raise
        await trio.sleep(0.1)


def find_exception(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first `kind` in a (nested) exception group."""
    if isinstance(exc, kind):
        return exc
    for inner in exc.exceptions if isinstance(exc, BaseExceptionGroup) else ():
        if (found := find_exception(inner, kind)) is not None:
            return found
    return None


def _find_disk_full(exc: BaseException) -> OSError | None:
    if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
        return exc
    for inner in exc.exceptions if isinstance(exc, BaseExceptionGroup) else ():
        if (found := _find_disk_full(inner)) is not None:
            return found
    return None
