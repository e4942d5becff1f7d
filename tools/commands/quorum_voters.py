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
until `--timeout`. `remove-controller` sends RemoveRaftVoter for the replica key (id,
directory id): a voter whose disk was replaced is removed by its old directory id, then
its new one added. Both print Kafka's lines ("Added controller 4 with directory id ...
and endpoints: CONTROLLER://HOST:PORT", "Removed KRaft controller 3 with directory id
...") or one error line with Kafka's error name; exit 1 on a refusal.
"""

from __future__ import annotations

import argparse
import ssl
import time
from pathlib import Path
from typing import Any

from raft import messages
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from raft.control_records import Endpoint
from raft.storage import read_meta_properties
from tools.cluster import Cluster, ClusterError, describe_quorum, request
from tools.errors import CommandError, usage_error

_RETRY_S = 0.3
_REQUEST_TIMEOUT_S = 10.0


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
    remove.add_argument("--node", "--controller-id", dest="node", type=int, required=True)
    remove.add_argument("--directory-id", "--controller-directory-id", dest="directory_id",
                        required=True)
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
    """The cluster id the requests must name: cluster.json's, or the controllers'."""
    if args.cluster:
        return Cluster.load(args.cluster).cluster_id
    try:
        return str(describe_quorum(addresses, timeout_s=_REQUEST_TIMEOUT_S)["cluster_id"])
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


def add_voter(addresses: list[str], *, cluster_id: str, node_id: int, directory_id: Uuid,
              endpoint: Endpoint, timeout_s: float,
              ssl_context: ssl.SSLContext | None = None) -> None:
    """AddRaftVoter for (node_id, directory_id) at `endpoint`, as `add-controller` sends
    it (kraft chaos's wipe-voter fault adds the replacement this way too)."""
    send_change_to_leader(addresses, messages.AddRaftVoterRequest(
        cluster_id=cluster_id, voter_id=node_id, voter_directory_id=directory_id,
        listeners=(endpoint,)), timeout_s, ssl_context)


def remove_voter(addresses: list[str], *, cluster_id: str, node_id: int, directory_id: Uuid,
                 timeout_s: float, ssl_context: ssl.SSLContext | None = None) -> None:
    """RemoveRaftVoter for the replica key (node_id, directory_id), as `remove-controller`
    sends it."""
    send_change_to_leader(addresses, messages.RemoveRaftVoterRequest(
        cluster_id=cluster_id, voter_id=node_id, voter_directory_id=directory_id),
        timeout_s, ssl_context)


def send_change_to_leader(addresses: list[str], message: Any, timeout_s: float,
                          ssl_context: ssl.SSLContext | None = None) -> None:
    """Send the voter change to the leader; retried while refused for a reason that
    passes (not caught up yet, a change in progress, no leader) until `timeout_s`."""
    api, body = messages.encode_message(message)
    deadline = time.monotonic() + timeout_s
    last = "no controller answered"
    while True:
        for address in addresses:
            try:
                reply = request(address, api, body, timeout_s=_REQUEST_TIMEOUT_S,
                                ssl_context=ssl_context)
            except ClusterError as exc:
                last = str(exc)
                continue
            try:
                answer = messages.decode_message("VoterChangeResponse", reply)
            except messages.MessageError:
                last = f"{address}: {reply.get('error_message', reply)}"
                continue
            assert isinstance(answer, messages.VoterChangeResponse)
            code = answer.error_code
            if code == ErrorCode.NONE:
                return
            last = f"{code.name}: {answer.error_message or ''}".rstrip(": ")
            if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                continue
            if code != ErrorCode.REQUEST_TIMED_OUT:
                raise CommandError(last)
            break  # the leader answered: wait before asking it again
        if time.monotonic() >= deadline:
            raise CommandError(f"gave up after {timeout_s:g} s: {last}")
        time.sleep(_RETRY_S)


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
              directory_id=directory_id, endpoint=endpoint, timeout_s=args.timeout)
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
                 directory_id=directory_id, timeout_s=args.timeout)
    if args.json:
        print(json.dumps({"removed": args.node, "directory_id": str(directory_id)}))
    else:
        print(f"Removed KRaft controller {args.node} with directory id {directory_id}")
    return 0


def directory_id_of(data_dir: str | Path) -> str | None:
    """A node's directory id from its meta.properties (None before KIP-853 formats)."""
    meta = read_meta_properties(data_dir)
    return meta.directory_id if meta is not None else None
