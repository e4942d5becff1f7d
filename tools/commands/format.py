"""`kraft format` (like kafka-storage.sh format) and `kraft random-uuid`."""

from __future__ import annotations

import argparse
import json

from raft.common.uuid import Uuid
from raft.storage import StorageError, format_log_dir
from tools.errors import CommandError, usage_error


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    if verb == "random-uuid":
        parser.set_defaults(action=_random_uuid)
        return
    parser.add_argument("--dir", required=True, help="the node's log directory")
    parser.add_argument("--cluster-id", required=True,
                        help="the cluster's ID (make one with `kraft random-uuid`)")
    parser.add_argument("--node-id", required=True, type=int, help="this node's id")
    parser.add_argument("--ignore-formatted", action="store_true",
                        help="succeed when the directory is already formatted the same way")
    parser.set_defaults(action=_format)


def run(args: argparse.Namespace) -> int:
    code: int = args.action(args)
    return code


def _random_uuid(args: argparse.Namespace) -> int:
    value = str(Uuid.random())
    print(json.dumps({"uuid": value}) if args.json else value)
    return 0


def _format(args: argparse.Namespace) -> int:
    try:
        Uuid.from_string(args.cluster_id)
    except ValueError as exc:
        raise usage_error(f"--cluster-id: {exc}") from None
    if args.node_id < 0:
        raise usage_error(f"--node-id must be >= 0, got {args.node_id}")
    try:
        formatted = format_log_dir(args.dir, cluster_id=args.cluster_id, node_id=args.node_id,
                                   ignore_formatted=args.ignore_formatted)
    except StorageError as exc:
        raise CommandError(str(exc), exit_code=1) from None
    except OSError as exc:
        raise CommandError(f"cannot format {args.dir}: {exc}", exit_code=1) from None
    if args.json:
        print(json.dumps({"dir": args.dir, "cluster_id": args.cluster_id,
                          "node_id": args.node_id, "formatted": formatted}))
    elif formatted:
        print(f"Formatted {args.dir} for cluster {args.cluster_id}, node {args.node_id}")
    else:
        print(f"{args.dir} is already formatted for cluster {args.cluster_id}, "
              f"node {args.node_id}: left as it is")
    return 0
