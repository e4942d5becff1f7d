"""`kraft format` (like kafka-storage.sh format) and `kraft random-uuid`.

`kraft format` lays out a whole node directory: `meta.properties`, and the metadata
partition `__cluster_metadata-0/` with its first, empty segment (what a node's first start
would create), so `kraft dump-log`, `kraft storage info`, `kraft replay --logs` and `kraft
node` all work on a directory that was only formatted. kraft-py has no feature levels,
and the metadata topic ID is chosen by the first leader; the only bootstrap records are
users' SCRAM credentials: `--add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]'`
(kafka-storage.sh's flag; `iterations=N` too, default 4096) writes them, salted, to
`DIR/bootstrap.records`, and the first active controller of the fresh log appends them
(`metadata.bootstrap`): format every controller with the same `--add-scram`. A directory
a running node holds (its `.lock`) is refused.

Every format writes a new `directory.id` into meta.properties (Kafka's: the second half
of the replica key, KIP-853). The dynamic quorum's flags are kafka-storage.sh's:
`--standalone` (this controller alone is the first voter: needs --config for its
controller endpoint), `--initial-controllers ID@HOST:PORT:DIRECTORY_ID,...` (the first
voters; this node's entry's directory id becomes its directory.id) and
`--no-initial-controllers` (a controller to add later, an observer until then). With
the first two the metadata partition gets the bootstrap checkpoint
`00000000000000000000-0000000000.checkpoint` holding KRaftVersionRecord(1) and the
VotersRecord (`raft.voters.write_bootstrap_checkpoint`): kraft.version 1, voters from
the log. Without any of the three the quorum stays static (kraft.version 0,
controller.quorum.voters), as before.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from metadata import records as rec
from metadata.bootstrap import BootstrapError, check, write_bootstrap_records
from metadata.features import (
    LATEST_METADATA_LEVEL,
    METADATA_VERSION,
    parse_metadata_version,
    release_name,
)
from raft.common.uuid import Uuid
from raft.control_records import Endpoint
from raft.log import METADATA_PARTITION_DIR, DiskLog
from raft.storage import (
    LogDirLockedError,
    StorageError,
    format_log_dir,
    lock_log_dir,
    read_meta_properties,
)
from raft.voters import ReplicaKey, Voter, VoterSet, parse_controllers, write_bootstrap_checkpoint
from tools.config import ConfigError, load
from tools.errors import CommandError, usage_error


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    if verb == "random-uuid":
        parser.set_defaults(action=_random_uuid)
        return
    parser.add_argument("--config", "-c", help="the node's configuration (TOML or "
                        ".properties): its log directory and node.id, as kafka-storage.sh "
                        "format -c reads them")
    parser.add_argument("--dir", help="the node's log directory")
    parser.add_argument("--cluster-id", "-t", required=True,
                        help="the cluster's ID (make one with `kraft random-uuid`)")
    parser.add_argument("--node-id", type=int, help="this node's id")
    parser.add_argument("--add-scram", action="append", default=[],
                        metavar="MECHANISM=[name=NAME,password=PW]",
                        help="a user's SCRAM credential for the new cluster's metadata log "
                        "(may repeat; `iterations=N` too)")
    level = parser.add_mutually_exclusive_group()
    level.add_argument("--release-version", "-r", metavar="VERSION",
                       help="the metadata.version to start with, by release name or level "
                       f"(default: the latest, {release_name(LATEST_METADATA_LEVEL)})")
    level.add_argument("--feature", "-f", action="append", default=[],
                       metavar="metadata.version=LEVEL", help="a feature's initial level")
    parser.add_argument("--ignore-formatted", action="store_true",
                        help="succeed when the directory is already formatted the same way")
    quorum = parser.add_mutually_exclusive_group()
    quorum.add_argument("--standalone", action="store_true",
                        help="a dynamic quorum (kraft.version 1) whose first voter is this "
                        "controller alone (needs --config)")
    quorum.add_argument("--initial-controllers", metavar="ID@HOST:PORT:DIRECTORY_ID,...",
                        help="a dynamic quorum (kraft.version 1) with these first voters")
    quorum.add_argument("--no-initial-controllers", action="store_true",
                        help="a controller of a dynamic quorum, to be added with kraft quorum "
                        "add-controller (an observer until then)")
    parser.set_defaults(action=_format)


def run(args: argparse.Namespace) -> int:
    code: int = args.action(args)
    return code


def _random_uuid(args: argparse.Namespace) -> int:
    value = str(Uuid.random())
    print(json.dumps({"uuid": value}) if args.json else value)
    return 0


def _from_config(args: argparse.Namespace) -> None:
    """--config fills --dir and --node-id (which must agree with it when also given)."""
    if args.config:
        try:
            config = load(args.config)
        except ConfigError as exc:
            raise usage_error(str(exc)) from None
        for option, value in (("dir", str(config.log_dir)), ("node_id", config.node_id)):
            given = getattr(args, option)
            if given is not None and str(given) != str(value):
                raise usage_error(f"--{option.replace('_', '-')} {given} disagrees with "
                                  f"{args.config} ({value})")
            setattr(args, option, value)
    if args.dir is None or args.node_id is None:
        raise usage_error("need --config FILE, or --dir DIR and --node-id N")


def _format(args: argparse.Namespace) -> int:
    _from_config(args)
    try:
        Uuid.from_string(args.cluster_id)
    except ValueError as exc:
        raise usage_error(f"--cluster-id: {exc}") from None
    if args.node_id < 0:
        raise usage_error(f"--node-id must be >= 0, got {args.node_id}")
    bootstrap = [_metadata_version(args), *_scram_records(args.add_scram)]
    voters, directory_id = _initial_voters(args)
    try:
        formatted = format_log_dir(args.dir, cluster_id=args.cluster_id, node_id=args.node_id,
                                   ignore_formatted=args.ignore_formatted,
                                   directory_id=directory_id)
        if formatted or not (Path(args.dir) / METADATA_PARTITION_DIR).is_dir():
            lay_out_metadata_log(args.dir)
        if formatted:
            write_bootstrap_records(args.dir, bootstrap)
        if formatted and (voters is not None or args.standalone):
            write_bootstrap_checkpoint(Path(args.dir) / METADATA_PARTITION_DIR,
                                       voters or _standalone_voters(args))
    except LogDirLockedError as exc:
        raise usage_error(str(exc)) from None
    except StorageError as exc:
        raise CommandError(str(exc), exit_code=1) from None
    except OSError as exc:
        raise CommandError(f"cannot format {args.dir}: {exc}", exit_code=1) from None
    meta = read_meta_properties(args.dir)
    directory = meta.directory_id if meta is not None else None
    if args.json:
        print(json.dumps({"dir": args.dir, "cluster_id": args.cluster_id,
                          "node_id": args.node_id, "formatted": formatted,
                          "directory_id": directory}))
    elif formatted:
        print(f"Formatted {args.dir} for cluster {args.cluster_id}, node {args.node_id}")
    else:
        print(f"{args.dir} is already formatted for cluster {args.cluster_id}, "
              f"node {args.node_id}: left as it is")
    return 0


def _initial_voters(args: argparse.Namespace) -> tuple[VoterSet | None, str | None]:
    """--initial-controllers as a voter set, and this node's directory id in it."""
    if args.standalone and not args.config:
        raise usage_error("--standalone needs --config (the controller's endpoint)")
    if not args.initial_controllers:
        return None, None
    try:
        voters = parse_controllers(args.initial_controllers)
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    mine = voters.voter(args.node_id)
    if mine is None:
        raise usage_error(f"--initial-controllers names no node {args.node_id} (this node)")
    return voters, str(mine.key.directory_id)


def _standalone_voters(args: argparse.Namespace) -> VoterSet:
    """This controller alone, with the directory id just written and its endpoint."""
    config = load(args.config)
    meta = read_meta_properties(args.dir)
    if meta is None or meta.directory_id is None or config.controller_address is None:
        raise usage_error("--standalone: this node has no controller listener or directory id")
    host, port = config.controller_address
    return VoterSet((Voter(ReplicaKey(args.node_id, Uuid.from_string(meta.directory_id)),
                           (Endpoint(name="CONTROLLER", host=host, port=port),)),))


def _metadata_version(args: argparse.Namespace) -> rec.FeatureLevel:
    """--release-version or --feature metadata.version=N (the latest by default)."""
    text = args.release_version
    for option in args.feature:
        name, _, value = option.partition("=")
        if name != METADATA_VERSION or text is not None:
            raise usage_error(f"--feature: expected {METADATA_VERSION}=LEVEL once, got "
                              f"{option!r} (kraft.version comes from --standalone or "
                              "--initial-controllers)")
        text = value
    try:
        level = LATEST_METADATA_LEVEL if text is None else parse_metadata_version(text)
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    return rec.FeatureLevel(name=METADATA_VERSION, feature_level=level)


def _scram_records(options: list[str]) -> list[rec.Record]:
    """--add-scram values -> UserScramCredential records (salted here: the password
    goes no further)."""
    from tools.commands.users import parse_scram_configs, upsertion
    records: list[rec.Record] = []
    for text in options:
        for mechanism, values in parse_scram_configs(
                text, option="--add-scram", need=("name", "password"),
                allowed=("name", "password", "iterations")):
            u = upsertion(values["name"], mechanism, values)
            records.append(rec.UserScramCredential(
                name=u.name, mechanism=u.mechanism, salt=u.salt, stored_key=u.stored_key,
                server_key=u.server_key, iterations=u.iterations))
    try:
        check(records)
    except BootstrapError as exc:
        raise usage_error(f"--add-scram: {exc}") from None
    return records


def lay_out_metadata_log(log_dir: str) -> None:
    """Create the metadata partition directory and its first segment, durably, under the
    directory's lock (opening the log is what a node's first start does)."""
    lock = lock_log_dir(log_dir)
    try:
        DiskLog.open_metadata_log(log_dir).close()
    finally:
        lock.release()
