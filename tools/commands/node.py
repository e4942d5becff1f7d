"""`kraft node --config FILE`: one node in the foreground, logs on stderr.

SIGTERM (or Ctrl-C): a leader resigns with EndQuorumEpoch, queued messages drain
(bounded), exit 0. Besides the raft RPCs and DescribeQuorum the node serves the admin
api `Append` (NoOp records through the leader, answered once committed), used by
`kraft quorum append`, the tests, the demo and the bench.

A failed write to the log directory (a full disk: ENOSPC) does not end the process: the
node is torn down (its listeners close, so clients and peers go elsewhere; nothing
undurable was acknowledged), the directory is probed every `PROBE_INTERVAL_S`, and once a
probe write succeeds the whole node is rebuilt from what is durable, on the same ports.

A broken Raft invariant (`raft.core.RaftInvariantError`: the core found its own state
broken, e.g. a leader asked it to truncate below its high watermark) stops the node at
once, never rebuilt: nothing more is sent or acknowledged, one ERROR line names the
invariant, and the process exits with code 3 (`INVARIANT_EXIT_CODE`).

Exit codes: 0 stopped by SIGTERM/SIGINT; 1 a log directory or a listen address the node
cannot start from; 2 bad usage or configuration, or a corrupt log; 3 a broken Raft
invariant.
"""

from __future__ import annotations

import argparse
import errno
import logging
import math
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from metadata.records import NoOp
from raft.core import RaftConfig, RaftInvariantError
from raft.errors import ErrorCode
from raft.log import DiskLog, LogCorruptionError
from raft.node import ApiError, LogDirFailure, NotLeaderError, RaftNode
from raft.storage import StorageError, open_log_dir, read_quorum_state, write_quorum_state
from tools.config import ConfigError, NodeConfig, load
from tools.errors import CommandError, usage_error

log = logging.getLogger(__name__)

APPEND_API = "Append"
APPEND_MAX_IN_FLIGHT = 64
APPEND_MAX_RECORDS = 10_000_000
SHUTDOWN_TIMEOUT_S = 10.0
PROBE_INTERVAL_S = 1.0  # how often a failed log directory is tried again
PROBE_FILE = ".kraft-write-probe"
PROBE_BYTES = 64 * 1024  # some room, not just one free page, before the node comes back
PROBE_REPORT_EVERY_S = 30.0  # "still failing" at most this often, not every probe
REBIND_TIMEOUT_S = 5.0  # a rebuilt node waits this long for its port to be free again
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
INVARIANT_EXIT_CODE = 3  # a broken Raft invariant stopped the node (logged as one ERROR)


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--config", required=True, help="the node's TOML configuration")
    parser.epilog = ("exit codes: 0 stopped by SIGTERM/SIGINT; 1 a log directory or listen "
                     "address it cannot start from; 2 bad usage or configuration, or a "
                     f"corrupt log; {INVARIANT_EXIT_CODE} a broken Raft invariant stopped "
                     "the node")


def raft_config(config: NodeConfig) -> RaftConfig:
    return RaftConfig(voters=tuple(sorted(config.voters)),
                      election_timeout_ms=config.election_timeout_ms,
                      fetch_timeout_ms=config.fetch_timeout_ms,
                      election_backoff_max_ms=config.election_backoff_max_ms,
                      request_timeout_ms=config.request_timeout_ms,
                      fetch_max_wait_ms=config.fetch_max_wait_ms,
                      fetch_max_bytes=config.fetch_max_bytes, pre_vote=config.pre_vote)


@dataclass(eq=False)
class BuiltNode:
    """A node built from its configuration, and the files to close before a rebuild."""

    node: RaftNode
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for close in self.closers:
            close()


def build_node(config: NodeConfig) -> BuiltNode:
    """Open the log directory named by `config` and build the node (not yet running)
    with every part its roles need."""
    meta = open_log_dir(config.log_dir, cluster_id=config.cluster_id or None,
                        node_id=config.node_id)
    disk_log = DiskLog.open_metadata_log(config.log_dir, segment_bytes=config.log_segment_bytes)
    log_dir = config.log_dir
    node = RaftNode(node_id=config.node_id, cluster_id=meta.cluster_id, voters=config.voters,
                    config=raft_config(config), log=disk_log,
                    election=read_quorum_state(log_dir, voters=config.voters),
                    write_election=lambda state: write_quorum_state(log_dir, state),
                    listen=config.controller_address,
                    max_frame_bytes=config.socket_request_max_bytes,
                    send_queue_size=config.send_queue_max_messages,
                    fault_file=config.fault_injection_file or None)
    built = BuiltNode(node, [disk_log.close])
    install_append_api(node)
    if config.is_voter:  # the metadata controller's admin APIs (active on the leader)
        from metadata.controller_shell import install_controller
        install_controller(node, broker_session_timeout_ms=config.broker_session_timeout_ms)
    if "broker" in config.roles:  # registration and heartbeats to the active controller
        from metadata.broker_heartbeat import install_broker_heartbeat
        heartbeat = install_broker_heartbeat(
            node, client_address=config.client_address,
            heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
            request_timeout_ms=config.request_timeout_ms)
        from broker.server import install_broker  # observer image + partition dirs (issue 6)
        server = install_broker(node, config, heartbeat)
        from broker.kafka.listener import install_kafka_listener  # Kafka clients (issue 7)
        kafka = install_kafka_listener(node, config, server)
        if kafka is not None:  # its partition logs stay open until closed
            built.closers.append(kafka.dispatcher.context.replicas.close_all)
    return built


def install_append_api(node: RaftNode) -> None:
    """`Append {count, batch, in_flight=64}` -> `{error_code, epoch, last_offset, batches:
    [[epoch, last_offset], ...], latencies_ms, elapsed_ms}` once every batch has committed;
    at most `in_flight` batches wait for their commit at a time."""

    async def handle(body: Any, cluster_id: str) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiError(ErrorCode.INVALID_REQUEST, "Append body must be a map")
        count, batch = body.get("count"), body.get("batch", 1)
        in_flight = body.get("in_flight", APPEND_MAX_IN_FLIGHT)
        if type(count) is not int or type(batch) is not int or \
                not 0 < count <= APPEND_MAX_RECORDS or not 0 < batch <= count:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"need 0 < batch <= count <= {APPEND_MAX_RECORDS}")
        if type(in_flight) is not int or not 0 < in_flight <= APPEND_MAX_IN_FLIGHT:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"need 0 < in_flight <= {APPEND_MAX_IN_FLIGHT}")
        record = NoOp().encode()
        sizes = [batch] * (count // batch) + ([count % batch] if count % batch else [])
        results: list[tuple[int, int]] = [(0, 0)] * len(sizes)
        latencies: list[float] = [0.0] * len(sizes)
        window = trio.Semaphore(in_flight)
        started = trio.current_time()

        failures: list[NotLeaderError] = []

        async def one(index: int, size: int) -> None:
            try:
                begin = trio.current_time()
                results[index] = await node.propose_and_wait([record] * size)
                latencies[index] = (trio.current_time() - begin) * 1000
            except NotLeaderError as exc:  # stop the rest; the client follows the leader
                failures.append(exc)
                nursery.cancel_scope.cancel()
            except LogDirFailure:  # this node stopped: the client tries another one
                failures.append(NotLeaderError(None, None))
                nursery.cancel_scope.cancel()
            finally:
                window.release()

        async with trio.open_nursery() as nursery:
            for index, size in enumerate(sizes):
                await window.acquire()
                nursery.start_soon(one, index, size)
        if failures:
            raise failures[0]
        return {"error_code": 0, "epoch": results[-1][0], "last_offset": results[-1][1],
                "count": count, "batches": [list(r) for r in results],
                "latencies_ms": [round(v, 3) for v in latencies],
                "elapsed_ms": round((trio.current_time() - started) * 1000, 3)}

    node.add_api_handler(APPEND_API, handle)


async def supervise(config: NodeConfig, built: BuiltNode) -> None:
    """Run the node until SIGTERM/SIGINT. When its log directory fails (a full disk) the
    node is torn down, the directory probed until it takes writes again, and the node
    rebuilt from disk in this same process; it may fail and recover any number of times."""
    await built.node.transport.bind()  # outside the nursery: a busy port is a plain OSError
    stop_requested = trio.Event()
    running: list[RaftNode] = [built.node]  # the node a signal must shut down, if any

    async def watch_signals() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("signal received, shutting down",
                         extra={"signal": signal.Signals(signum).name})
                stop_requested.set()
                with trio.move_on_after(SHUTDOWN_TIMEOUT_S):
                    for node in list(running):
                        await node.shutdown()
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
            running.append(built.node)
            await bind_with_retry(built.node)
        nursery.cancel_scope.cancel()


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
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
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


def run(args: argparse.Namespace) -> int:
    try:
        config = load(args.config)
    except ConfigError as exc:
        raise usage_error(str(exc)) from None
    try:
        built = build_node(config)
    except (StorageError, LogCorruptionError, OSError) as exc:
        raise startup_error(config, exc) from None
    try:
        trio.run(supervise, config, built)
    except BaseExceptionGroup as group:
        # a broken invariant, or a rebuild that met a corrupt log or a busy port
        if find_exception(group, RaftInvariantError) is not None:
            return INVARIANT_EXIT_CODE  # raft.node logged the one ERROR line
        for kind in (StorageError, LogCorruptionError):
            if (found := find_exception(group, kind)) is not None:
                raise startup_error(config, found) from None
        busy = find_exception(group, OSError)
        if isinstance(busy, OSError) and busy.errno == errno.EADDRINUSE:
            raise listen_error(config, busy) from None
        raise
    except OSError as exc:  # the first bind, outside the nursery
        raise listen_error(config, exc) from None
    return 0


def startup_error(config: NodeConfig, exc: BaseException) -> CommandError:
    """One line for a log directory the node cannot start from."""
    if isinstance(exc, LogCorruptionError):  # file and byte offset, no traceback
        return CommandError(str(exc), exit_code=2)
    if isinstance(exc, OSError):  # e.g. ENOSPC while recovery cuts a torn tail
        return CommandError(f"log directory {config.log_dir}: {exc}")
    return CommandError(str(exc))


def listen_error(config: NodeConfig, exc: OSError) -> CommandError:
    address = config.controller_address
    return CommandError(f"cannot listen on {address[0]}:{address[1]}: "  # type: ignore[index]
                        f"{exc.strerror or exc}")


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
