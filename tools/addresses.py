"""Broker bootstrap addresses for the client commands: `--cluster DIR` (a local cluster's
brokers, tools/cluster.py) or `--bootstrap-server HOST:PORT[,...]`."""

from __future__ import annotations

import argparse

from tools.cluster import Cluster, ClusterError
from tools.errors import usage_error


def add_broker_target(parser: argparse.ArgumentParser) -> None:
    """The two ways a client verb names the brokers, read back by `broker_addresses`."""
    parser.add_argument("--cluster", metavar="DIR", help="a local cluster's directory")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                        help="broker Kafka listeners")


def broker_addresses(cluster_dir: str | None, bootstrap_server: str | None) -> list[str]:
    if cluster_dir:
        try:
            cluster = Cluster.load(cluster_dir)
        except ClusterError as exc:
            raise usage_error(f"--cluster {cluster_dir}: {exc}") from None
        addresses = [n.client_address for n in sorted(cluster.nodes.values(),
                                                      key=lambda n: n.id)
                     if n.client_address]
        if not addresses:
            raise usage_error(f"--cluster {cluster_dir}: the cluster has no brokers")
        return addresses
    addresses = [a.strip() for a in (bootstrap_server or "").split(",") if a.strip()]
    if not addresses and bootstrap_server is not None:
        raise usage_error("--bootstrap-server: no broker address given")
    if not addresses:
        raise usage_error("give --cluster DIR or --bootstrap-server HOST:PORT[,...]")
    return addresses
