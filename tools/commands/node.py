"""`kraft node --config FILE`: one node in the foreground, logs on stderr (INFO and up
unless `--log-level` says otherwise).

FILE is TOML or a Kafka `server.properties` (`tools.config`). Before anything reads the
log directory the node takes its lock (`raft.storage.lock_log_dir`, `<dir>/.lock`): a
second node on a live directory exits 2 naming the holder's pid, and never runs recovery
over the first one's files. A broker configured with `controller.quorum.bootstrap.servers`
only learns the voters' ids and endpoints from those servers first (DescribeQuorum).

SIGTERM (or Ctrl-C): a leader resigns with EndQuorumEpoch, queued messages drain
(bounded), exit 0. The node is built and supervised by `tools.server` (the composition
root): the `Append` API, the controller and broker roles, and recovery in place after a
full disk.

A broken Raft invariant (`raft.core.RaftInvariantError`: the core found its own state
broken, e.g. a leader asked it to truncate below its high watermark) stops the node at
once, never rebuilt: nothing more is sent or acknowledged, one ERROR line names the
invariant, and the process exits with code 3 (`INVARIANT_EXIT_CODE`).

Exit codes: 0 stopped by SIGTERM/SIGINT; 1 a log directory or a listen address the node
cannot start from; 2 bad usage or configuration, a log directory in use by another
process, a corrupt log, or snapshots the node cannot start from (none valid, or one ahead
of the log: `metadata.snapshot_loader`); 3 a broken Raft invariant.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
import time
from dataclasses import replace

import trio

from metadata.snapshot_policy import SnapshotStartError
from raft import messages
from raft.core import RaftInvariantError
from raft.log import LogCorruptionError
from raft.storage import LogDirLockedError, StorageError, lock_log_dir
from tools.config import Address, ConfigError, NodeConfig, load
from tools.errors import CommandError, usage_error
from tools.server.build import build_node
from tools.server.node_tls import node_tls
from tools.server.supervisor import find_exception, supervise

INVARIANT_EXIT_CODE = 3  # a broken Raft invariant stopped the node (logged as one ERROR)
DEFAULT_LOG_LEVEL = "INFO"  # tools.cli: a node logs its start, elections, snapshots
SWITCH_INTERVAL_S = 0.001  # the GIL's hand-over interval in a node (Python's default: 5 ms)
DISCOVERY_TIMEOUT_S = 30.0  # a bootstrap-servers-only broker waits this long for the voters

log = logging.getLogger(__name__)


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--config", required=True,
                        help="the node's configuration: TOML, or a Kafka .properties file")
    parser.epilog = ("exit codes: 0 stopped by SIGTERM/SIGINT; 1 a log directory or listen "
                     "address it cannot start from; 2 bad usage or configuration, a log "
                     "directory in use by another process, a corrupt log, or snapshots it "
                     "cannot start from; "
                     f"{INVARIANT_EXIT_CODE} a broken Raft invariant stopped the node")


def run(args: argparse.Namespace) -> int:
    try:
        config = load(args.config)
        node_tls(config)  # the TLS files load: a bad keystore is a configuration error
    except ConfigError as exc:
        raise usage_error(str(exc)) from None
    for warning in config.warnings:
        log.warning("%s: %s", config.source, warning)
    try:  # before anything reads the directory: recovery may cut a torn tail
        lock = lock_log_dir(config.log_dir)
    except LogDirLockedError as exc:
        raise usage_error(str(exc)) from None
    except StorageError as exc:
        raise CommandError(str(exc)) from None
    try:
        if not config.voters:
            config = replace(config, voters=discover_voters(config))
        code = _run_locked(config)
    finally:
        lock.release()
    return exit_now(code)


def exit_now(code: int) -> int:
    """End a stopped node's process without Python's finalization (under a profiler,
    `python -m cProfile`, return `code`: the profile is written at the normal exit).
    What the node keeps is on disk, fsynced, and its files are closed by then; the full
    collection and the frees of finalization are all that is left, and they took 0.9 s
    for a follower holding a million partitions and 2.7 s for the leader (its last log
    line to the next process's start), time a restart waits for."""
    if sys.getprofile() is not None:
        return code
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run_locked(config: NodeConfig) -> int:
    try:
        built = build_node(config)
    except (StorageError, LogCorruptionError, SnapshotStartError, OSError) as exc:
        raise startup_error(config, exc) from None
    # The node's worker threads (snapshot writes, image hashes, a fetched snapshot's
    # load) hold the GIL for seconds of CPU; the event loop waits for it at every wake-up,
    # up to the switch interval each time: a request/answer round trip that costs 0.04 ms
    # took 10.7 ms beside a busy thread at the default 5 ms, and 2.3 ms at 1 ms.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        trio.run(supervise, config, built)
    except BaseExceptionGroup as group:
        # a broken invariant, or a rebuild that met a corrupt log or a busy port
        if find_exception(group, RaftInvariantError) is not None:
            return INVARIANT_EXIT_CODE  # raft.node logged the one ERROR line
        for kind in (StorageError, LogCorruptionError, SnapshotStartError):
            if (found := find_exception(group, kind)) is not None:
                raise startup_error(config, found) from None
        busy = find_exception(group, OSError)
        if isinstance(busy, OSError) and busy.errno == errno.EADDRINUSE:
            raise listen_error(config, busy) from None
        raise
    except OSError as exc:  # the first bind, outside the nursery
        raise listen_error(config, exc) from None
    return 0


def discover_voters(config: NodeConfig, timeout_s: float = DISCOVERY_TIMEOUT_S
                    ) -> dict[int, Address]:
    """The voters (id -> endpoint) of a broker configured with bootstrap servers only: each
    server is asked DescribeQuorum and answers with its own node id, the leader's id and
    address, and the voter ids. Retried until every voter's endpoint is known (the
    controllers may still be starting), else a usage error naming the missing ones."""
    from tools.quorum_client import ClusterError, request  # the blocking msgpack client
    # the controller listener's TLS, as the node itself will dial the voters
    context = node_tls(config).client if config.is_tls(config.controller_listener_name) \
        else None
    body = messages.encode_message(messages.DescribeQuorumRequest(cluster_id=""))[1]
    deadline = time.monotonic() + timeout_s
    endpoints: dict[int, Address] = {}
    voter_ids: set[int] = set()
    problems: list[str] = []
    while True:
        for host, port in config.bootstrap_servers:
            try:
                reply = request(f"{host}:{port}", "DescribeQuorumRequest", body,
                                cluster_id=config.cluster_id, timeout_s=2.0,
                                ssl_context=context)
            except ClusterError as exc:
                problems.append(str(exc))
                continue
            _learn(reply, (host, port), endpoints, voter_ids)
        if voter_ids and voter_ids <= set(endpoints):
            voters = {v: endpoints[v] for v in sorted(voter_ids)}
            log.info("voters learned from controller.quorum.bootstrap.servers",
                     extra={"voters": voters})
            return voters
        if time.monotonic() >= deadline:
            missing = sorted(voter_ids - set(endpoints)) or "all"
            raise usage_error(
                f"controller.quorum.bootstrap.servers: no endpoint learned for voters "
                f"{missing} within {timeout_s:.0f} s (list every controller, or set "
                f"controller.quorum.voters){'; last error: ' + problems[-1] if problems else ''}")
        time.sleep(0.5)


def _learn(reply: object, address: Address, endpoints: dict[int, Address],
           voter_ids: set[int]) -> None:
    if not isinstance(reply, dict):
        return
    if isinstance(reply.get("node_id"), int):
        endpoints[reply["node_id"]] = address
    leader, leader_address = reply.get("leader_id"), reply.get("leader_address")
    if isinstance(leader, int) and leader >= 0 and isinstance(leader_address, str):
        host, _, port = leader_address.rpartition(":")
        if port.isdigit():
            endpoints[leader] = (host, int(port))
    for topic in reply.get("topics") or ():
        for partition in topic.get("partitions") or ():
            for voter in partition.get("current_voters") or ():
                if isinstance(voter, dict) and isinstance(voter.get("replica_id"), int):
                    voter_ids.add(voter["replica_id"])
            for node in partition.get("nodes") or ():  # KIP-853: the VotersRecord's
                listeners = node.get("listeners") if isinstance(node, dict) else None
                if isinstance(node.get("node_id"), int) and listeners and \
                        isinstance(listeners[0], dict):
                    endpoints.setdefault(node["node_id"], (str(listeners[0]["host"]),
                                                           int(listeners[0]["port"])))


def startup_error(config: NodeConfig, exc: BaseException) -> CommandError:
    """One line for a log directory the node cannot start from."""
    if isinstance(exc, LogCorruptionError | SnapshotStartError):  # the files, no traceback
        return CommandError(str(exc), exit_code=2)
    if isinstance(exc, OSError):  # e.g. ENOSPC while recovery cuts a torn tail
        return CommandError(f"log directory {config.log_dir}: {exc}")
    return CommandError(str(exc))


def listen_error(config: NodeConfig, exc: OSError) -> CommandError:
    address = config.controller_address or config.client_address or config.status_address
    where = f"{address[0]}:{address[1]}" if address else "its listeners"
    return CommandError(f"cannot listen on {where}: {exc.strerror or exc}")
