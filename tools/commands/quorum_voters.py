"""`kraft quorum add-controller` and `kraft quorum remove-controller`: change a dynamic
quorum's voters (KIP-853), as kafka-metadata-quorum.sh add-controller / remove-controller.

    kraft quorum add-node --cluster DIR [--bootstrap-servers] [--json]
    kraft quorum add-controller (--cluster DIR --node N
                                 | --bootstrap-controller H:P[,...] --config NODE_CONFIG)
                                [--timeout SECONDS] [--json]
    kraft quorum remove-controller (--cluster DIR | --bootstrap-controller H:P[,...])
                                   --node N --directory-id ID [--json]

`add-node` makes and starts the next node of a local cluster (`kraft quorum start
--dynamic`) as a controller formatted without initial controllers (with
`--bootstrap-servers` it knows only controller.quorum.bootstrap.servers): an observer
until added. `add-controller` reads the new controller's node id, directory id (its meta.properties:
`kraft format` writes a new one on every format) and controller endpoint, from
cluster.json's node N or from the node's own configuration, and sends AddRaftVoter to
the leader. The leader adds only an observer caught up with it (REQUEST_TIMED_OUT until
then: start the new controller first), one change at a time: the command asks again
until `--timeout`, and while no controller leads (an election, too few voters up) it
waits for one until then too, then prints one line naming each problem once.
`remove-controller` sends RemoveRaftVoter for the replica key (id, directory id): a
voter whose disk was replaced is removed by its old directory id, then its new one
added. Both print Kafka's lines ("Added controller 4 with directory id ...
and endpoints: CONTROLLER://HOST:PORT", "Removed KRaft controller 3 with directory id
...") or one error line with Kafka's error name; exit 1 on a refusal.
"""

from __future__ import annotations

import argparse
from typing import Any

from raft.common.uuid import Uuid
from raft.control_records import Endpoint
from raft.storage import read_meta_properties
from tools.cluster import Cluster, ClusterError
from tools.errors import CommandError, usage_error
from tools.quorum_client import cluster_id_of
from tools.voter_changes import REQUEST_TIMEOUT_S, add_voter, directory_id_of, remove_voter


def add_parsers(actions: Any, target: Any) -> None:
    node = actions.add_parser("add-node", help="a new controller for a dynamic quorum, "
                              "formatted without initial controllers, started (an observer "
                              "until add-controller)")
    node.add_argument("--cluster", required=True, metavar="DIR")
    node.add_argument("--bootstrap-servers", action="store_true",
                      help="configure it with controller.quorum.bootstrap.servers only")
    node.add_argument("--json", action="store_true")
    add = actions.add_parser("add-controller",
                             help="add a caught-up controller to the voters (KIP-853)")
    target(add)
    add.add_argument("--node", "--controller-id", dest="node", type=int,
                     help="with --cluster: the node to add")
    add.add_argument("--config", help="with --bootstrap-controller: the new controller's "
                     "node configuration (its node.id, log.dirs and controller listener)")
    add.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                     help="keep asking while the leader finds it not caught up")
    add.add_argument("--json", action="store_true")
    remove = actions.add_parser("remove-controller",
                                help="remove a voter by its replica key (KIP-853)")
    target(remove)
    remove.add_argument("--node", "--controller-id", dest="node", type=int, required=True,
                        help="the voter's node id")
    remove.add_argument("--directory-id", "--controller-directory-id", dest="directory_id",
                        required=True, help="the voter's directory id (kraft storage info)")
    remove.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS")
    remove.add_argument("--json", action="store_true")


def controller_addresses(args: argparse.Namespace) -> list[str]:
    if args.cluster:
        return Cluster.load(args.cluster).controller_addresses()
    addresses = [a.strip() for a in (args.bootstrap_controller or "").split(",") if a.strip()]
    if not addresses:
        raise usage_error("--bootstrap-controller: no controller address given")
    return addresses


def target_cluster_id(args: argparse.Namespace, addresses: list[str]) -> str:
    """The cluster id the requests must name: cluster.json's, or the first controller's
    to answer (with or without a leader: the change waits for one, up to --timeout)."""
    if args.cluster:
        return Cluster.load(args.cluster).cluster_id
    try:
        return cluster_id_of(addresses, timeout_s=min(args.timeout, REQUEST_TIMEOUT_S),
                             ssl_context=args.client_ssl)
    except ClusterError as exc:
        raise CommandError(str(exc)) from None


def _new_controller(args: argparse.Namespace) -> tuple[int, Uuid, Endpoint]:
    """(node id, directory id, controller endpoint) of the controller to add."""
    if args.cluster:
        if args.node is None:
            raise usage_error("add-controller --cluster needs --node N")
        info = Cluster.load(args.cluster).node(args.node)
        node_id, data_dir, address = info.id, info.data_dir, info.controller_address
        if address is None:
            raise usage_error(f"node {node_id} has no controller listener")
        host, _, port = address.rpartition(":")
    else:
        if not args.config:
            raise usage_error("add-controller --bootstrap-controller needs --config FILE")
        from tools.config import ConfigError, load
        try:
            config = load(args.config)
        except ConfigError as exc:
            raise usage_error(str(exc)) from None
        if config.controller_address is None:
            raise usage_error(f"{args.config}: no controller listener")
        node_id, data_dir = config.node_id, str(config.log_dir)
        host, port = config.controller_address[0], str(config.controller_address[1])
    meta = read_meta_properties(data_dir)
    if meta is None or meta.directory_id is None:
        raise CommandError(f"{data_dir}: no directory.id in meta.properties (format it with "
                           "kraft format --no-initial-controllers)")
    return node_id, Uuid.from_string(meta.directory_id), Endpoint(
        name="CONTROLLER", host=host, port=int(port))


def add_node(args: argparse.Namespace) -> int:
    import json
    cluster = Cluster.load(args.cluster)
    info = cluster.add_controller_node(bootstrap_servers=args.bootstrap_servers)
    pid = cluster.start_node(info.id)
    directory = directory_id_of(info.data_dir)
    if args.json:
        print(json.dumps({"node": info.id, "pid": pid, "directory_id": directory,
                          "controller_address": info.controller_address}))
    else:
        print(f"Started node {info.id} (controller, not yet a voter) pid {pid} at "
              f"{info.controller_address}, directory id {directory}")
    return 0


def add_controller(args: argparse.Namespace) -> int:
    import json
    node_id, directory_id, endpoint = _new_controller(args)
    addresses = controller_addresses(args)
    add_voter(addresses, cluster_id=target_cluster_id(args, addresses), node_id=node_id,
              directory_id=directory_id, endpoint=endpoint, timeout_s=args.timeout,
              ssl_context=args.client_ssl)
    where = f"{endpoint.name}://{endpoint.host}:{endpoint.port}"
    if args.json:
        print(json.dumps({"added": node_id, "directory_id": str(directory_id),
                          "endpoints": [where]}))
    else:
        print(f"Added controller {node_id} with directory id {directory_id} and endpoints: "
              f"{where}")
    return 0


def remove_controller(args: argparse.Namespace) -> int:
    import json
    try:
        directory_id = Uuid.from_string(args.directory_id)
    except ValueError as exc:
        raise usage_error(f"--directory-id: {exc}") from None
    addresses = controller_addresses(args)
    remove_voter(addresses, cluster_id=target_cluster_id(args, addresses), node_id=args.node,
                 directory_id=directory_id, timeout_s=args.timeout, ssl_context=args.client_ssl)
    if args.json:
        print(json.dumps({"removed": args.node, "directory_id": str(directory_id)}))
    else:
        print(f"Removed KRaft controller {args.node} with directory id {directory_id}")
    return 0
