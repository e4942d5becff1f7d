"""`kraft quorum snapshot --cluster DIR [--node N] [--json]`: running nodes snapshot their
committed metadata image now.

Each node gets one `WriteSnapshot` request (`metadata.snapshot_writer`) on the port tools
already use: a voter's controller listener, a broker's STATUS listener. One line per
node: the node, its snapshot file, end offset, epoch, size and write time, or the error;
exit 1 when any node failed. A node whose image has not moved since its last snapshot
answers with that file ("existing").
"""

from __future__ import annotations

import argparse
import json
import ssl
from typing import Any

from raft.common.errors import ErrorCode
from tools.cluster import Cluster, ClusterError, NodeInfo
from tools.quorum_client import request

# metadata.snapshot_writer.WRITE_SNAPSHOT_API, not imported: that module loads trio
WRITE_SNAPSHOT_API = "WriteSnapshot"
DEFAULT_TIMEOUT_S = 60.0  # a large image takes a while to write


def add_parser(actions: Any) -> None:
    snapshot = actions.add_parser("snapshot", help="running nodes snapshot their metadata "
                                  "image now")
    snapshot.add_argument("--cluster", required=True, metavar="DIR")
    snapshot.add_argument("--command-config", metavar="FILE",
                          help="client properties (security.protocol, ssl.*), as Kafka's "
                          "tools; default: the cluster's admin identity")
    snapshot.add_argument("--node", type=int, default=None,
                          help="only this node (default: every node)")
    snapshot.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                          help="seconds to wait for each node")
    snapshot.add_argument("--json", action="store_true")


def request_snapshot(cluster: Cluster, node: NodeInfo, timeout_s: float, *,
                     ssl_context: ssl.SSLContext | None = None) -> dict[str, Any]:
    """The node's WriteSnapshot answer; {"node_id", "error"} when it failed. Over TLS
    with `ssl_context` (the verb's identity, which may not be the cluster's admin)."""
    address = node.controller_address or node.status_address
    try:
        if address is None:
            raise ClusterError("no controller or status listener to ask")
        if not cluster.is_running(node.id):
            raise ClusterError("not running")
        body = request(address, WRITE_SNAPSHOT_API, {}, cluster_id=cluster.cluster_id,
                       timeout_s=timeout_s, ssl_context=ssl_context)
    except ClusterError as exc:
        return {"node_id": node.id, "error": str(exc)}
    if not isinstance(body, dict) or body.get("error_code") != 0:
        if not isinstance(body, dict):
            return {"node_id": node.id, "error": repr(body)}
        return {"node_id": node.id, "error": f"{_error_name(body.get('error_code'))}: "
                                             f"{body.get('error_message')}"}
    return body


def _error_name(code: Any) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code!r:.20}"


def line(answer: dict[str, Any]) -> str:
    if "error" in answer:
        return f"node {answer['node_id']}  error: {answer['error']}"
    existing = "" if answer["created"] else "  (existing)"
    return (f"node {answer['node_id']}  {answer['file']}  end offset {answer['end_offset']}  "
            f"epoch {answer['epoch']}  {answer['size_bytes']} bytes  "
            f"{answer['elapsed_ms']:.1f} ms{existing}")


def run(args: argparse.Namespace) -> int:
    cluster = Cluster.load(args.cluster)
    nodes = [cluster.node(args.node)] if args.node is not None else \
        [cluster.nodes[n] for n in sorted(cluster.nodes)]
    answers = [request_snapshot(cluster, node, args.timeout, ssl_context=args.client_ssl)
               for node in nodes]
    if args.json:
        print(json.dumps(answers, indent=2))
    else:
        print("\n".join(line(a) for a in answers))
    return 1 if any("error" in a for a in answers) else 0
