"""`kraft node --config FILE`: one node in the foreground, logs on stderr.

SIGTERM (or Ctrl-C): a leader resigns with EndQuorumEpoch, queued messages drain
(bounded), exit 0. The node is built and supervised by `tools.server` (the composition
root): the `Append` API, the controller and broker roles, and recovery in place after a
full disk.

A broken Raft invariant (`raft.core.RaftInvariantError`: the core found its own state
broken, e.g. a leader asked it to truncate below its high watermark) stops the node at
once, never rebuilt: nothing more is sent or acknowledged, one ERROR line names the
invariant, and the process exits with code 3 (`INVARIANT_EXIT_CODE`).

Exit codes: 0 stopped by SIGTERM/SIGINT; 1 a log directory or a listen address the node
cannot start from; 2 bad usage or configuration, a corrupt log, or snapshots the node
cannot start from (none valid, or one ahead of the log: `metadata.snapshot_loader`); 3 a
broken Raft invariant.
"""

from __future__ import annotations

import argparse
import errno

import trio

from metadata.snapshot_policy import SnapshotStartError
from raft.core import RaftInvariantError
from raft.log import LogCorruptionError
from raft.storage import StorageError
from tools.config import ConfigError, NodeConfig, load
from tools.errors import CommandError, usage_error
from tools.server.build import build_node
from tools.server.supervisor import find_exception, supervise

INVARIANT_EXIT_CODE = 3  # a broken Raft invariant stopped the node (logged as one ERROR)


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--config", required=True, help="the node's TOML configuration")
    parser.epilog = ("exit codes: 0 stopped by SIGTERM/SIGINT; 1 a log directory or listen "
                     "address it cannot start from; 2 bad usage or configuration, a "
                     "corrupt log, or snapshots it cannot start from; "
                     f"{INVARIANT_EXIT_CODE} a broken Raft invariant stopped the node")


def run(args: argparse.Namespace) -> int:
    try:
        config = load(args.config)
    except ConfigError as exc:
        raise usage_error(str(exc)) from None
    try:
        built = build_node(config)
    except (StorageError, LogCorruptionError, SnapshotStartError, OSError) as exc:
        raise startup_error(config, exc) from None
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


def startup_error(config: NodeConfig, exc: BaseException) -> CommandError:
    """One line for a log directory the node cannot start from."""
    if isinstance(exc, LogCorruptionError | SnapshotStartError):  # the files, no traceback
        return CommandError(str(exc), exit_code=2)
    if isinstance(exc, OSError):  # e.g. ENOSPC while recovery cuts a torn tail
        return CommandError(f"log directory {config.log_dir}: {exc}")
    return CommandError(str(exc))


def listen_error(config: NodeConfig, exc: OSError) -> CommandError:
    address = config.controller_address
    return CommandError(f"cannot listen on {address[0]}:{address[1]}: "  # type: ignore[index]
                        f"{exc.strerror or exc}")
