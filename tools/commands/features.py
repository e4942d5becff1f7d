"""`kraft features`: describe and upgrade `kraft.version`, as kafka-features.sh does.

    kraft features (--cluster DIR | --bootstrap-controller H:P[,...]) describe [--json]
    kraft features (--cluster DIR | --bootstrap-controller H:P[,...])
                   upgrade --feature kraft.version=1 [--timeout SECONDS] [--json]

kraft-py has one feature: `kraft.version` (KIP-853). 0 is the static quorum of
`controller.quorum.voters`; 1 keeps the voters in the log (VotersRecord) so `kraft quorum
add-controller` / `remove-controller` change them. `upgrade` asks the leader to write
KRaftVersionRecord(1) and the first VotersRecord: the same voters, each with the
directory id the leader heard in its recent Fetches and its controller endpoint (from
cluster.json, or what each controller reports for itself). Every voter must be running
and formatted with a directory.id. There is no downgrade (as in Kafka).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from raft import messages
from raft.control_records import Endpoint
from tools.cluster import ClusterError
from tools.commands import quorum_voters
from tools.errors import CommandError, usage_error
from tools.quorum_client import describe_quorum
from tools.voter_changes import send_change_to_leader

FEATURE = "kraft.version"
MAX_VERSION = 1


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--cluster", metavar="DIR")
    target.add_argument("--bootstrap-controller", metavar="HOST:PORT[,...]",
                        help="controller addresses (as kafka-features.sh)")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties (security.protocol, ssl.*), as Kafka's "
                        "tools; default with --cluster: its admin.properties when it has one")
    actions = parser.add_subparsers(dest="action", required=True, parser_class=type(parser))
    describe = actions.add_parser("describe", help="the finalized kraft.version")
    describe.add_argument("--json", action="store_true")
    upgrade = actions.add_parser("upgrade", help="upgrade kraft.version (0 -> 1)")
    upgrade.add_argument("--feature", required=True, metavar="kraft.version=1",
                         help="the feature and its new level")
    upgrade.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS")
    upgrade.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    try:
        return _describe(args) if args.action == "describe" else _upgrade(args)
    except ClusterError as exc:
        raise CommandError(str(exc)) from None


def _state(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    addresses = quorum_voters.controller_addresses(args)
    return addresses, describe_quorum(addresses, timeout_s=5.0, ssl_context=args.client_ssl)


def _describe(args: argparse.Namespace) -> int:
    _, state = _state(args)
    level = state["kraft_version"]  # the leader's, in its DescribeQuorum answer
    if args.json:
        print(json.dumps({"feature": FEATURE, "supported_min_version": 0,
                          "supported_max_version": MAX_VERSION,
                          "finalized_version_level": level, "epoch": state["leader_epoch"]}))
    else:
        print(f"Feature: {FEATURE}\tSupportedMinVersion: 0\tSupportedMaxVersion: "
              f"{MAX_VERSION}\tFinalizedVersionLevel: {level}\tEpoch: {state['leader_epoch']}")
    return 0


def _upgrade(args: argparse.Namespace) -> int:
    name, _, value = args.feature.partition("=")
    if name != FEATURE or not value.isdigit():
        raise usage_error(f"--feature: expected {FEATURE}=1, got {args.feature!r}")
    version = int(value)
    if version != MAX_VERSION:
        raise usage_error(f"--feature: {FEATURE} can only be upgraded to {MAX_VERSION}")
    addresses, state = _state(args)
    nodes = tuple(messages.NodeEndpoints(node_id=voter_id, listeners=tuple(
        _endpoint(text) for text in texts)) for voter_id, texts in
        sorted(_voter_endpoints(args, state).items()))
    send_change_to_leader(addresses, messages.UpdateKRaftVersionRequest(
        cluster_id=quorum_voters.target_cluster_id(args, addresses), kraft_version=version,
        nodes=nodes), args.timeout, args.client_ssl)
    if args.json:
        print(json.dumps({"feature": FEATURE, "finalized_version_level": version}))
    else:
        print(f"{FEATURE} was upgraded to {version}.")
    return 0


def _voter_endpoints(args: argparse.Namespace, state: dict[str, Any]) -> dict[int, list[str]]:
    from tools.commands.quorum import voter_endpoints
    return voter_endpoints(args, state)


def _endpoint(text: str) -> Endpoint:
    """`CONTROLLER://HOST:PORT` as an Endpoint."""
    name, _, rest = text.partition("://")
    host, _, port = rest.rpartition(":")
    return Endpoint(name=name, host=host, port=int(port))
