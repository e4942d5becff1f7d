"""`kraft node --config FILE`: one node in the foreground, logs on stderr.

SIGTERM (or Ctrl-C): a leader resigns with EndQuorumEpoch, queued messages drain
(bounded), exit 0. Besides the raft RPCs and DescribeQuorum the node serves the admin
api `Append` (NoOp records through the leader, answered once committed), used by
`kraft quorum append`, the tests, the demo and the bench.
"""

from __future__ import annotations

import argparse
import logging
import math
import signal
from typing import Any

import trio

from metadata.records import NoOp
from raft.core import RaftConfig
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


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--config", required=True, help="the node's TOML configuration")


def raft_config(config: NodeConfig) -> RaftConfig:
    return RaftConfig(voters=tuple(sorted(config.voters)),
                      election_timeout_ms=config.election_timeout_ms,
                      fetch_timeout_ms=config.fetch_timeout_ms,
                      election_backoff_max_ms=config.election_backoff_max_ms,
                      request_timeout_ms=config.request_timeout_ms,
                      fetch_max_wait_ms=config.fetch_max_wait_ms,
                      fetch_max_bytes=config.fetch_max_bytes, pre_vote=config.pre_vote)


def build_node(config: NodeConfig) -> RaftNode:
    """Open the log directory named by `config` and build the node (not yet running)."""
    meta = open_log_dir(config.log_dir, cluster_id=config.cluster_id or None,
                        node_id=config.node_id)
    disk_log = DiskLog.open_metadata_log(config.log_dir, segment_bytes=config.log_segment_bytes)
    log_dir = config.log_dir
    node = RaftNode(node_id=config.node_id, cluster_id=meta.cluster_id, voters=config.voters,
                    config=raft_config(config), log=disk_log,
                    election=read_quorum_state(log_dir),
                    write_election=lambda state: write_quorum_state(log_dir, state),
                    listen=config.controller_address,
                    max_frame_bytes=config.socket_request_max_bytes,
                    send_queue_size=config.send_queue_max_messages,
                    fault_file=config.fault_injection_file or None)
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
        install_kafka_listener(node, config, server)
    return node


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


async def serve(node: RaftNode) -> None:
    """Run `node` until SIGTERM/SIGINT, then shut it down gracefully (bounded)."""
    await node.transport.bind()  # outside the nursery: a busy port is a plain OSError
    async with trio.open_nursery() as nursery:
        async def watch_signals() -> None:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("signal received, shutting down",
                             extra={"signal": signal.Signals(signum).name})
                    await node.shutdown()
                    with trio.move_on_after(SHUTDOWN_TIMEOUT_S):
                        await trio.sleep(math.inf)
                    log.error("graceful shutdown timed out")
                    nursery.cancel_scope.cancel()

        nursery.start_soon(watch_signals)
        await node.run()
        nursery.cancel_scope.cancel()


def run(args: argparse.Namespace) -> int:
    try:
        config = load(args.config)
    except ConfigError as exc:
        raise usage_error(str(exc)) from None
    try:
        node = build_node(config)
    except StorageError as exc:
        raise CommandError(str(exc)) from None
    except LogCorruptionError as exc:  # file and byte offset, no traceback
        raise CommandError(str(exc), exit_code=2) from None
    except OSError as exc:  # e.g. ENOSPC while recovery cuts a torn tail
        raise CommandError(f"log directory {config.log_dir}: {exc}") from None
    try:
        trio.run(serve, node)
    except BaseExceptionGroup as group:
        failure = _find(group, LogDirFailure)
        if failure is None:
            raise
        raise CommandError(str(failure)) from None  # the node logged it too
    except OSError as exc:
        address = config.controller_address
        raise CommandError(f"cannot listen on {address[0]}:{address[1]}: "  # type: ignore[index]
                           f"{exc.strerror or exc}") from None
    return 0


def _find(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first `kind` in a (nested) exception group."""
    if isinstance(exc, kind):
        return exc
    for inner in exc.exceptions if isinstance(exc, BaseExceptionGroup) else ():
        if (found := _find(inner, kind)) is not None:
            return found
    return None
