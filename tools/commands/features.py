"""`kraft features`: describe, upgrade, downgrade and disable feature levels, as Kafka
3.9's kafka-features.sh.

    kraft features TARGET describe [--json]
    kraft features TARGET upgrade [--metadata VERSION] [--feature NAME=LEVEL ...] [--dry-run]
    kraft features TARGET downgrade [--metadata VERSION] [--feature NAME=LEVEL ...]
                          [--unsafe] [--dry-run]
    kraft features TARGET disable --feature NAME ... [--unsafe] [--dry-run]
    TARGET: --cluster DIR | --bootstrap-server H:P[,...] | --bootstrap-controller H:P[,...]
    (every action takes --timeout SECONDS and --json)

Two features (`metadata/features.py`): `metadata.version`, the records the controller
may write (`--metadata` takes its release name, e.g. 0.1-IV1), and `kraft.version`
(KIP-853): 0 is the static quorum of `controller.quorum.voters`, 1 keeps the voters in
the log so `kraft quorum add-controller` / `remove-controller` change them.

Through a broker (`--bootstrap-server`): ApiVersions v3's features and UpdateFeatures
(API 57), as Kafka's admin client. Through the controllers: their DescribeFeatures and
UpdateFeatures RPCs for metadata.version; kraft.version 0 -> 1 asks the raft leader to
write KRaftVersionRecord(1) and the first VotersRecord, the same voters, each with the
directory id the leader heard in its recent Fetches and its controller endpoint (from
cluster.json, or what each controller reports for itself): every voter must be running
and formatted with a directory.id. Neither feature goes down (as in Kafka 3.9:
metadata.version levels change the records).

Output as kafka-features.sh's: `describe` one line per feature; an update one line per
feature, by name ("metadata.version was upgraded to 2.", with --dry-run "can be"), a
refusal "Could not upgrade metadata.version to 1. WHY", then "N out of M operation(s)
failed." on stderr and exit 1. A feature this build does not have, a level outside its
range or a feature named twice is one line and exit 2, before anything is sent.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from metadata.admin import (
    DescribeFeaturesRequest,
    DescribeFeaturesResponse,
    FeatureUpdate,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from metadata.features import (
    KRAFT_VERSION,
    METADATA_LEVELS,
    METADATA_VERSION,
    SUPPORTED,
    UpgradeType,
    parse_metadata_version,
    release_name,
    update_refusal,
)
from raft import messages
from raft.common.errors import ErrorCode
from raft.control_records import Endpoint
from tools.admin_client import describe_error
from tools.cluster import ClusterError
from tools.commands import quorum_voters
from tools.commands.topics import add_controller_target, admin_client, through_broker
from tools.errors import CommandError, usage_error
from tools.quorum_client import describe_quorum
from tools.voter_changes import send_change_to_leader

Update = tuple[str, int]  # (feature, level)


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    add_controller_target(parser, brokers=True)
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties (security.protocol, ssl.*, sasl.*), as "
                        "Kafka's tools; default with --cluster: its admin.properties when "
                        "it has one")
    actions = parser.add_subparsers(dest="action", required=True, parser_class=type(parser))
    describe = actions.add_parser("describe", help="each feature's supported and "
                                  "finalized levels")
    upgrade = actions.add_parser("upgrade", help="raise feature levels")
    downgrade = actions.add_parser("downgrade", help="lower feature levels")
    disable = actions.add_parser("disable", help="set features to level 0")
    for action in (upgrade, downgrade):
        action.add_argument("--metadata", metavar="VERSION",
                            help="the metadata.version by release name, e.g. "
                            f"{METADATA_LEVELS[-1].release}")
        action.add_argument("--feature", action="append", default=[], metavar="NAME=LEVEL",
                            help="a feature and its new level (may repeat)")
    disable.add_argument("--feature", action="append", default=[], metavar="NAME",
                         help="a feature to disable (may repeat)")
    for action in (downgrade, disable):
        action.add_argument("--unsafe", action="store_true",
                            help="even if it may lose metadata (UNSAFE_DOWNGRADE)")
    for action in (upgrade, downgrade, disable):
        action.add_argument("--dry-run", action="store_true",
                            help="validate the change without making it")
    for action in (describe, upgrade, downgrade, disable):
        action.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS")
        action.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    try:
        if not through_broker(args):
            return _run(args)
        from tools.client.connection import ClientError  # kio and trio: only when used
        try:
            return _run(args)
        except ClientError as exc:
            raise CommandError(str(exc)) from None
    except ClusterError as exc:
        raise CommandError(str(exc)) from None


def _run(args: argparse.Namespace) -> int:
    return _describe(args) if args.action == "describe" else _update(args)


# --- describe -------------------------------------------------------------------------


def _level_text(feature: str, level: int) -> str:
    """metadata.version by its release name, as kafka-features.sh prints it."""
    return release_name(level) if feature == METADATA_VERSION else str(level)


def describe_rows(described: DescribeFeaturesResponse) -> list[dict[str, Any]]:
    """One row per supported feature, by name; a feature not finalized is at level 0."""
    finalized = {f.name: f.max_version for f in described.finalized}
    return [{"feature": f.name, "supported_min_version": f.min_version,
             "supported_max_version": f.max_version,
             "finalized_version_level": finalized.get(f.name, 0), "epoch": described.epoch}
            for f in sorted(described.supported, key=lambda f: f.name)]


def _describe(args: argparse.Namespace) -> int:
    rows = describe_rows(admin_client(args).call(DescribeFeaturesRequest()))
    if args.json:
        print(json.dumps(rows))
        return 0
    for row in rows:
        name = row["feature"]
        print(f"Feature: {name}\tSupportedMinVersion: "
              f"{_level_text(name, row['supported_min_version'])}\tSupportedMaxVersion: "
              f"{_level_text(name, row['supported_max_version'])}\tFinalizedVersionLevel: "
              f"{_level_text(name, row['finalized_version_level'])}\tEpoch: {row['epoch']}")
    return 0


# --- upgrade, downgrade, disable ------------------------------------------------------


def requested_updates(args: argparse.Namespace) -> list[Update]:
    """The (feature, level) pairs asked for, each checked against this build's ranges
    (a usage error otherwise, as nothing was sent)."""
    if args.action == "disable":
        pairs = [(name.strip(), 0) for name in args.feature]
    else:
        pairs = [_name_and_level(text) for text in args.feature]
        if args.metadata is not None:
            try:
                pairs.append((METADATA_VERSION, parse_metadata_version(args.metadata)))
            except ValueError:
                known = ", ".join(e.release for e in METADATA_LEVELS)
                raise usage_error(f"Unsupported metadata version {args.metadata}. Supported "
                                  f"metadata versions are {known}") from None
    if not pairs:
        raise usage_error(f"You must specify at least one feature to {args.action}")
    seen: set[str] = set()
    for name, level in pairs:
        if name in seen:
            raise usage_error(f"Feature {name} was specified more than once.")
        seen.add(name)
        supported = SUPPORTED.get(name)
        if supported is None:
            raise usage_error(f"unknown feature {name!r} (this build has "
                              f"{', '.join(sorted(SUPPORTED))})")
        low, high = supported
        if not (low <= level <= high):
            raise usage_error(f"{name} level {level} is outside this build's {low}-{high}")
    return pairs


def _name_and_level(text: str) -> Update:
    name, equals, level = text.partition("=")
    if not equals:
        raise usage_error(f"Can't parse feature=level string {text}: equals sign not found.")
    try:
        return name.strip(), int(level.strip())
    except ValueError:
        raise usage_error(f"Can't parse feature=level string {text}: unable to parse "
                          f"{level.strip()} as a short.") from None


def _upgrade_type(args: argparse.Namespace) -> UpgradeType:
    if args.action == "upgrade":
        return UpgradeType.UPGRADE
    return UpgradeType.UNSAFE_DOWNGRADE if args.unsafe else UpgradeType.SAFE_DOWNGRADE


def _update(args: argparse.Namespace) -> int:
    pairs = requested_updates(args)
    upgrade_type = _upgrade_type(args)
    updates = tuple(FeatureUpdate(feature=name, max_version_level=level,
                                  upgrade_type=upgrade_type) for name, level in pairs)
    if through_broker(args):
        outcomes = _results(admin_client(args).call(
            UpdateFeaturesRequest(feature_updates=updates, validate_only=args.dry_run)))
    else:
        outcomes = _through_controllers(args, updates)
    return _report(args, dict(pairs), outcomes)


def _results(response: UpdateFeaturesResponse) -> dict[str, str | None]:
    """Feature -> None (done) or why not."""
    return {r.feature: None if r.error_code == ErrorCode.NONE
            else describe_error(r.error_code, r.error_message) for r in response.results}


def _through_controllers(args: argparse.Namespace, updates: Sequence[FeatureUpdate]
                         ) -> dict[str, str | None]:
    outcomes: dict[str, str | None] = {}
    others = tuple(u for u in updates if u.feature != KRAFT_VERSION)
    if others:
        outcomes.update(_results(admin_client(args).call(
            UpdateFeaturesRequest(feature_updates=others, validate_only=args.dry_run))))
    for update in updates:
        if update.feature == KRAFT_VERSION:
            outcomes[KRAFT_VERSION] = _kraft_version(args, update)
    return outcomes


def _kraft_version(args: argparse.Namespace, update: FeatureUpdate) -> str | None:
    """kraft.version through the raft leader (None: done, or only checked with
    --dry-run); why not, as Kafka's INVALID_UPDATE_VERSION message."""
    addresses = quorum_voters.controller_addresses(args)
    state = describe_quorum(addresses, timeout_s=5.0, ssl_context=args.client_ssl)
    level = update.max_version_level
    refusal = update_refusal(KRAFT_VERSION, state["kraft_version"], level,
                             UpgradeType(update.upgrade_type))
    if refusal is not None:
        return describe_error(ErrorCode.INVALID_UPDATE_VERSION, refusal)
    if args.dry_run or level == state["kraft_version"]:
        return None
    nodes = tuple(messages.NodeEndpoints(node_id=voter_id, listeners=tuple(
        _endpoint(text) for text in texts)) for voter_id, texts in
        sorted(_voter_endpoints(args, state).items()))
    try:
        send_change_to_leader(addresses, messages.UpdateKRaftVersionRequest(
            cluster_id=quorum_voters.target_cluster_id(args, addresses),
            kraft_version=level, nodes=nodes), args.timeout, args.client_ssl)
    except CommandError as exc:
        return str(exc)
    return None


def _report(args: argparse.Namespace, levels: dict[str, int],
            outcomes: dict[str, str | None]) -> int:
    """kafka-features.sh's lines (or --json), by feature; exit 1 when any failed."""
    action = args.action
    rows = []
    for name in sorted(levels):
        error = outcomes.get(name, "no answer for this feature")
        rows.append({"feature": name, "level": levels[name], "action": action,
                     "dry_run": args.dry_run, "error": error})
        if args.json:
            continue
        target = "" if action == "disable" else f" to {levels[name]}"
        if error is None:
            done = "disabled" if action == "disable" else f"{action}d{target}"
            print(f"{name} {'can be' if args.dry_run else 'was'} {done}.")
        else:
            print(f"{'Can not' if args.dry_run else 'Could not'} {action} {name}{target}. "
                  f"{error}")
    if args.json:
        print(json.dumps(rows))
    failed = sum(row["error"] is not None for row in rows)
    if failed:
        raise CommandError(f"{failed} out of {len(rows)} operation(s) failed.", exit_code=1)
    return 0


def _voter_endpoints(args: argparse.Namespace, state: dict[str, Any]) -> dict[int, list[str]]:
    from tools.commands.quorum import voter_endpoints
    return voter_endpoints(args, state)


def _endpoint(text: str) -> Endpoint:
    """`CONTROLLER://HOST:PORT` as an Endpoint."""
    name, _, rest = text.partition("://")
    host, _, port = rest.rpartition(":")
    return Endpoint(name=name, host=host, port=int(port))
