"""`kraft quorum start|stop|kill|restart|describe|append|snapshot`: drive a local cluster.

    kraft quorum start --cluster DIR --voters 3 [--brokers 0] [--base-port P] [--tls] [--json]
    kraft quorum stop --cluster DIR
    kraft quorum kill --cluster DIR --node N [--signal KILL|STOP|CONT|TERM]
    kraft quorum restart --cluster DIR --node N
    kraft quorum describe (--bootstrap-server H:P[,...] | --bootstrap-controller H:P[,...]
                           | --cluster DIR)
                          (--status | --replication) [--human-readable] [--json]
                          [--timeout SECONDS]
    kraft quorum append (--cluster DIR | --bootstrap-controller H:P[,...]) --count N [--batch B]
    kraft quorum snapshot --cluster DIR [--node N] [--json]   (tools.commands.quorum_snapshot)
    kraft quorum start ... --dynamic   (kraft.version 1: voters from the log, KIP-853)
    kraft quorum add-node | add-controller | remove-controller ...
                                                   (tools.commands.quorum_voters)

`start` reads each `--set` value as a node reads it (a usage error names a bad one),
refuses ports another process holds before it starts any node, and watches the nodes it
started until a leader and every broker are ready: when one dies, or the wait times out,
it stops the others and exits 1 with that node's last error line.

`start --tls` makes a throwaway CA and certificates (`tools.tls_certs`) and starts every
listener as SSL with mutual TLS; the other verbs given `--cluster DIR` read the
cluster's `admin.properties` (its admin identity, a super user) and connect over TLS
themselves, and `describe`, `append`, `add-controller` and `remove-controller` take
`--command-config FILE` (a client properties file, as Kafka's tools) to use another
identity, or with `--bootstrap-server`/`--bootstrap-controller`.

`describe` prints what kafka-metadata-quorum.sh 3.9 prints; a non-leader redirects the
request to the leader. As in Kafka's tool, `--bootstrap-server` names brokers: Kafka's
DescribeQuorum goes to a broker's Kafka listener, which forwards it to the controllers
(`broker.kafka.admin.quorum_api`; `tools.client.admin`); `--bootstrap-controller` names
controllers. `--replication` lists the leader first, then the other voters, then the
observers; `--human-readable` shows the timestamps as "N ms ago" and the status's lag time
as "N ms". `--status` lists each voter with its endpoints (`CONTROLLER://HOST:PORT`): from
cluster.json with `--cluster`; through a broker, the voters the broker knows; with
`--bootstrap-controller`, the addresses the leader dials its voters at. `append` needs controllers
(Kafka's protocol has no such request).
"""

from __future__ import annotations

import argparse
import difflib
import json
import signal
import time
from collections.abc import Mapping
from typing import Any

from tools.cluster import Cluster, ClusterError, metrics_url
from tools.commands import quorum_snapshot, quorum_voters
from tools.errors import CommandError, usage_error
from tools.quorum_client import append_records, describe_quorum

SIGNALS = {"KILL": signal.SIGKILL, "STOP": signal.SIGSTOP, "CONT": signal.SIGCONT,
           "TERM": signal.SIGTERM}


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    actions = parser.add_subparsers(dest="action", required=True,
                                    parser_class=type(parser))
    start = actions.add_parser("start", help="format, start every node, wait for a leader")
    start.add_argument("--cluster", required=True, metavar="DIR",
                       help="the cluster's directory: made (formatted) when it holds none")
    start.add_argument("--voters", type=int, default=3,
                       help="controllers of a new cluster (default 3)")
    start.add_argument("--brokers", type=int, default=0,
                       help="brokers of a new cluster (default 0)")
    start.add_argument("--base-port", type=int, default=None, metavar="PORT",
                       help="a new cluster's first port: voters, then brokers, then their "
                       "status ports, consecutive; add-node takes the next (default: any "
                       "free ports)")
    start.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="a node setting for every node, e.g. "
                       "controller.quorum.election.timeout.ms=300")
    start.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                       help="wait this long for a leader and the brokers (default 30)")
    start.add_argument("--tls", action="store_true",
                       help="a new cluster with a throwaway CA: every listener SSL with "
                       "mutual TLS; the admin uses DIR/admin.properties (the default of "
                       "--cluster DIR), an unprivileged client DIR/client.properties")
    start.add_argument("--dynamic", action="store_true",
                       help="a dynamic quorum (kraft.version 1, KIP-853): the voters are "
                       "formatted as with kraft format --initial-controllers")
    start.add_argument("--json", action="store_true")
    stop = actions.add_parser("stop", help="stop every node (SIGTERM, then SIGKILL)")
    stop.add_argument("--cluster", required=True, metavar="DIR")
    stop.add_argument("--json", action="store_true")
    kill = actions.add_parser("kill", help="send a signal to one node")
    kill.add_argument("--cluster", required=True, metavar="DIR")
    kill.add_argument("--node", type=int, required=True)
    kill.add_argument("--signal", choices=sorted(SIGNALS), default="KILL",
                      help="the signal to send (default KILL)")
    kill.add_argument("--json", action="store_true")
    restart = actions.add_parser("restart", help="stop one node and start it again")
    restart.add_argument("--cluster", required=True, metavar="DIR")
    restart.add_argument("--node", type=int, required=True)
    restart.add_argument("--json", action="store_true")
    describe = actions.add_parser("describe", help="DescribeQuorum, like kafka-metadata-quorum.sh")
    _target(describe, brokers=True)
    what = describe.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true",
                      help="the leader, epoch, high watermark, lag and voters")
    what.add_argument("--replication", action="store_true",
                      help="each replica's log end, lag and last fetch")
    describe.add_argument("--human-readable", action="store_true",
                          help="timestamps as 'N ms ago', the lag time as 'N ms'")
    describe.add_argument("--json", action="store_true")
    describe.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                          help="with --bootstrap-server: give up after this long")
    demo = actions.add_parser("demo", help="start 3 voters, append, kill the leader, "
                              "show the new leader, stop (used by `kraft demo`)")
    demo.add_argument("--cluster", required=True, metavar="DIR")
    append = actions.add_parser("append", help="append NoOp records, return once committed")
    _target(append)
    append.add_argument("--count", type=int, required=True, help="NoOp records to append")
    append.add_argument("--batch", type=int, default=1,
                        help="records per batch (default 1)")
    append.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="give up after this long (default 60)")
    append.add_argument("--json", action="store_true")
    quorum_snapshot.add_parser(actions)
    quorum_voters.add_parsers(actions, _target)


def _target(parser: argparse.ArgumentParser, *, brokers: bool = False) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    if brokers:
        group.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                           help="broker addresses (their Kafka listeners forward "
                           "DescribeQuorum), as kafka-metadata-quorum.sh")
    group.add_argument("--bootstrap-controller", metavar="HOST:PORT[,...]",
                       help="controller addresses (as kafka-metadata-quorum.sh)")
    group.add_argument("--cluster", metavar="DIR")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties (security.protocol, ssl.*), as Kafka's tools")


def split_addresses(text: str) -> list[str]:
    return [a.strip() for a in text.split(",") if a.strip()]


def controller_addresses(args: argparse.Namespace) -> list[str]:
    """The addresses --bootstrap-controller names."""
    addresses = split_addresses(args.bootstrap_controller or "")
    if not addresses:
        raise usage_error("--bootstrap-controller: no controller address given")
    return addresses


def _addresses(args: argparse.Namespace) -> tuple[list[str], str]:
    """(controller addresses, cluster id or "") for --cluster or --bootstrap-controller."""
    if args.cluster:
        cluster = Cluster.load(args.cluster)
        return cluster.controller_addresses(), cluster.cluster_id
    return controller_addresses(args), ""


def _print(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2) if args.json else text)


def _settings(pairs: list[str]) -> dict[str, Any]:
    """The `--set KEY=VALUE` pairs as node settings, each value read as its key reads it
    (a usage error names an unknown key, with a close one, or the bad value)."""
    # the node configuration: `start` only
    from tools.config import KEYS_BY_NAME, KNOWN_KEYS, ConfigError, canonical_key
    settings: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise usage_error(f"--set {pair!r}: expected KEY=VALUE")
        if key not in KNOWN_KEYS:
            close = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=1)
            raise usage_error(f"--set {pair!r}: unknown node setting {key!r}" +
                              (f" (did you mean {close[0]!r}?)" if close else "") +
                              "; `kraft config-keys` lists them")
        try:
            KEYS_BY_NAME[canonical_key(key)].convert(key, value)
        except ConfigError as exc:
            raise usage_error(f"--set {pair!r}: {exc}") from None
        settings[key] = int(value) if value.lstrip("-").isdigit() else value
    return settings


def _start(args: argparse.Namespace) -> int:
    settings = _settings(args.set)
    try:
        cluster = Cluster.load(args.cluster)
        created = False
    except ClusterError:
        if args.voters < 1 or args.brokers < 0:
            raise usage_error("--voters must be at least 1, --brokers at least 0") from None
        cluster = Cluster.create(args.cluster, voters=args.voters, brokers=args.brokers,
                                 base_port=args.base_port, settings=settings, tls=args.tls,
                                 dynamic=args.dynamic)
        created = True
    if args.tls and not created and cluster.client_properties is None:
        raise usage_error(f"--tls: the cluster in {cluster.directory} was made without TLS")
    cluster.start()
    try:
        leader = cluster.wait_for_leader(args.timeout, watch=True)
        brokers = cluster.wait_for_brokers(args.timeout, watch=True)
    except ClusterError as exc:  # no node of a failed start is left running
        cluster.shut_down(timeout_s=5)
        raise ClusterError(f"{exc}; the cluster's nodes are stopped") from None
    data = {"cluster_dir": str(cluster.directory), "cluster_id": cluster.cluster_id,
            "created": created, "leader_id": leader["leader_id"],
            "client_properties": str(cluster.client_properties or "") or None,
            "admin_properties": str(cluster.admin_properties or "") or None,
            "leader_epoch": leader["leader_epoch"], "leader_address": leader["leader_address"],
            "nodes": {n.id: {"pid": n.pid, "roles": n.roles,
                             "controller_address": n.controller_address,
                             "client_address": n.client_address,
                             "metrics_url": metrics_url(n.log_text())}
                      for n in cluster.nodes.values()}}
    lines = [f"{'Created' if created else 'Started'} cluster {cluster.cluster_id} in "
             f"{cluster.directory}"]
    for n in cluster.nodes.values():
        url = data["nodes"][n.id]["metrics_url"]
        lines.append(f"  node {n.id} ({','.join(n.roles)}) pid {n.pid} "
                     f"{n.controller_address or n.client_address}"
                     + (f", metrics {url}" if url else ""))
    lines.append(f"Leader: node {leader['leader_id']} (epoch {leader['leader_epoch']}) at "
                 f"{leader['leader_address']}")
    if brokers:
        lines.append(f"Brokers registered and unfenced: {', '.join(map(str, brokers))}")
    if cluster.client_properties is not None:
        lines.append(f"TLS (mutual): the admin uses {cluster.admin_properties}, an "
                     f"unprivileged client {cluster.client_properties}")
    _print(args, data, "\n".join(lines))
    return 0


def _stop(args: argparse.Namespace) -> int:
    cluster = Cluster.load(args.cluster)
    running = cluster.running()
    forced = cluster.stop()
    _print(args, {"stopped": running, "killed": forced},
           f"stopped nodes {running or 'none'}" + (f" (SIGKILL for {forced})" if forced else ""))
    return 0


def _kill(args: argparse.Namespace) -> int:
    cluster = Cluster.load(args.cluster)
    cluster.kill(args.node, SIGNALS[args.signal])
    _print(args, {"node": args.node, "signal": args.signal},
           f"sent SIG{args.signal} to node {args.node}")
    return 0


def _restart(args: argparse.Namespace) -> int:
    cluster = Cluster.load(args.cluster)
    pid = cluster.restart(args.node)
    _print(args, {"node": args.node, "pid": pid}, f"restarted node {args.node} (pid {pid})")
    return 0


def status_view(state: dict[str, Any], cluster_id: str, now_ms: int,
                endpoints: dict[int, list[str]] | None = None) -> dict[str, Any]:
    """kafka-metadata-quorum.sh --status fields from a DescribeQuorum description; each
    voter with its endpoints (`endpoints`: id -> ["CONTROLLER://HOST:PORT", ...]); and
    the quorum's kraft.version when the description has it (the controllers' answer
    does; Kafka's DescribeQuorum, asked through a broker, carries none)."""
    voters = state["voters"]
    leader = next((v for v in voters if v["replica_id"] == state["leader_id"]), None)
    leader_end = leader["log_end_offset"] if leader else state["high_watermark"]
    followers = [v for v in voters if v["replica_id"] != state["leader_id"]]
    lag = max((leader_end - v["log_end_offset"] for v in followers), default=0)
    caught_up = [v["last_caught_up_timestamp"] for v in followers]
    reference = leader["last_caught_up_timestamp"] if leader and \
        leader["last_caught_up_timestamp"] > 0 else now_ms
    lag_time = max((reference - t if t > 0 else -1 for t in caught_up), default=0)
    # KIP-853: a dynamic quorum's leader names each voter's endpoints (its VotersRecord)
    # and directory id; kafka-metadata-quorum.sh 3.9 prints both.
    dynamic = bool(state.get("nodes"))  # a static quorum's lines stay as they were

    def _directory(replica: dict[str, Any]) -> dict[str, Any]:
        """Kafka 3.9's "directoryId" of a replica of a dynamic quorum."""
        directory = replica.get("replica_directory_id")
        return {"directoryId": str(directory)} if dynamic and directory is not None else {}
    endpoints = {**(endpoints or {}), **state.get("nodes", {})}
    return {"ClusterId": cluster_id or state.get("cluster_id") or "",
            "LeaderId": state["leader_id"], "LeaderEpoch": state["leader_epoch"],
            "HighWatermark": state["high_watermark"], "MaxFollowerLag": max(lag, 0),
            "MaxFollowerLagTimeMs": lag_time,
            **({"KRaftVersion": state["kraft_version"]} if "kraft_version" in state else {}),
            "CurrentVoters": [{"id": v["replica_id"], **_directory(v),
                               "endpoints": endpoints.get(v["replica_id"], [])}
                              for v in voters],
            "CurrentObservers": [{"id": o["replica_id"], **_directory(o)}
                                 for o in state["observers"]]}


def replication_view(state: dict[str, Any]) -> list[dict[str, Any]]:
    """kafka-metadata-quorum.sh --replication rows: the leader, the other voters, then
    the observers (each group by id)."""
    voters = sorted(state["voters"], key=lambda v: v["replica_id"])
    leader = next((v for v in voters if v["replica_id"] == state["leader_id"]), None)
    leader_end = leader["log_end_offset"] if leader else state["high_watermark"]
    ordered = ([(leader, "Leader")] if leader else []) + \
        [(v, "Follower") for v in voters if v is not leader] + \
        [(o, "Observer") for o in sorted(state["observers"], key=lambda o: o["replica_id"])]
    return [{"NodeId": replica["replica_id"], "LogEndOffset": replica["log_end_offset"],
             "Lag": max(leader_end - replica["log_end_offset"], 0),
             "LastFetchTimestamp": replica["last_fetch_timestamp"],
             "LastCaughtUpTimestamp": replica["last_caught_up_timestamp"],
             "Status": status} for replica, status in ordered]


def ms_ago(timestamp: int, now_ms: int) -> str:
    """A timestamp as kafka-metadata-quorum.sh --human-readable shows it."""
    return f"{max(now_ms - timestamp, 0)} ms ago" if timestamp > 0 else "unknown"


def humanize_rows(rows: list[dict[str, Any]], now_ms: int) -> list[dict[str, Any]]:
    return [{**row, "LastFetchTimestamp": ms_ago(row["LastFetchTimestamp"], now_ms),
             "LastCaughtUpTimestamp": ms_ago(row["LastCaughtUpTimestamp"], now_ms)}
            for row in rows]


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    columns = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in columns]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(str(r[c]).ljust(w) for c, w in zip(columns, widths, strict=True))
              for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def status_text(view: dict[str, Any], *, human_readable: bool = False, indent: str = "") -> str:
    """The --status block; lists as JSON, as kafka-metadata-quorum.sh prints them."""
    width = max(len(k) for k in view) + 2
    shown = dict(view)
    if human_readable and isinstance(shown["MaxFollowerLagTimeMs"], int) and \
            shown["MaxFollowerLagTimeMs"] >= 0:
        shown["MaxFollowerLagTimeMs"] = f"{shown['MaxFollowerLagTimeMs']} ms"
    return "\n".join(f"{indent}{k + ':':<{width}}"
                     f"{json.dumps(v) if isinstance(v, list) else v}" for k, v in shown.items())


def controller_endpoints(addresses: Mapping[int, str]) -> dict[int, list[str]]:
    """Voter id -> its endpoints as Kafka's tool prints them, from its controller address."""
    return {node_id: [f"CONTROLLER://{address}"] for node_id, address in addresses.items()}


def cluster_endpoints(cluster: Cluster) -> dict[int, list[str]]:
    return controller_endpoints({n.id: n.controller_address for n in cluster.nodes.values()
                                 if n.controller_address})


def voter_endpoints(args: argparse.Namespace, state: dict[str, Any]) -> dict[int, list[str]]:
    """Voter id -> its controller endpoints: cluster.json's with --cluster, else the
    addresses the leader that answered DescribeQuorum dials its voters at."""
    if args.cluster:
        return cluster_endpoints(Cluster.load(args.cluster))
    return controller_endpoints(state["voter_addresses"])


def _through_broker(args: argparse.Namespace) -> tuple[dict[str, Any], dict[int, list[str]]]:
    """(state, voter endpoints) from Kafka's DescribeQuorum, sent to a broker."""
    from tools.addresses import broker_addresses  # kio and trio: only when used
    from tools.client.admin import BrokerAdminClient
    from tools.client.connection import ClientError
    try:
        client = BrokerAdminClient(broker_addresses(None, args.bootstrap_server),
                                   ssl_context=args.client_ssl, sasl=args.client_sasl,
                                   timeout_s=args.timeout)
        return client.describe_quorum()
    except ClientError as exc:
        raise CommandError(str(exc)) from None


def _describe(args: argparse.Namespace) -> int:
    endpoints: dict[int, list[str]] | None = None
    if args.bootstrap_server is not None:
        state, endpoints = _through_broker(args)
        cluster_id = ""  # the state's, from the broker's Metadata
    else:
        addresses, cluster_id = _addresses(args)
        # a stopped node only times out
        state = describe_quorum(addresses, timeout_s=2.0, cluster_id=cluster_id,
                                ssl_context=args.client_ssl)
    now_ms = int(time.time() * 1000)
    if args.status:
        if endpoints is None:
            endpoints = voter_endpoints(args, state)
        view = status_view(state, cluster_id, now_ms, endpoints)
        _print(args, view, status_text(view, human_readable=args.human_readable))
    else:
        rows = replication_view(state)
        _print(args, rows, _table(humanize_rows(rows, now_ms) if args.human_readable
                                  else rows))
    return 0


def _append(args: argparse.Namespace) -> int:
    if args.count < 1 or not 1 <= args.batch <= args.count:
        raise usage_error("need --count >= 1 and 1 <= --batch <= --count")
    addresses, cluster_id = _addresses(args)
    reply = append_records(addresses, args.count, args.batch, cluster_id=cluster_id,
                           timeout_s=args.timeout, ssl_context=args.client_ssl,
                           refusals_end_call=True)
    summary = {k: reply[k] for k in ("count", "epoch", "last_offset", "elapsed_ms")}
    _print(args, {**summary, "batches": reply["batches"]},
           f"appended {reply['count']} records in {len(reply['batches'])} batches, committed "
           f"up to offset {reply['last_offset']} (epoch {reply['epoch']}) in "
           f"{reply['elapsed_ms']:.0f} ms")
    return 0


def _status_text(cluster: Cluster) -> str:
    view = status_view(cluster.describe(), cluster.cluster_id, int(time.time() * 1000),
                       cluster_endpoints(cluster))
    return status_text(view, indent="  ")


def _wait_replicated(cluster: Cluster, last_offset: int, timeout_s: float = 10.0) -> None:
    """Bounded wait until every voter holds `last_offset` (the leader's view)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        voters = cluster.describe()["voters"]
        if all(v["log_end_offset"] > last_offset for v in voters):
            return
        time.sleep(0.05)


def run_demo(directory: str, say: Any = print) -> None:
    """The quorum part of `make demo`: a 3-voter cluster survives the loss of its leader."""
    cluster = Cluster.create(directory, voters=3)
    try:
        say(f"$ kraft quorum start --cluster {directory} --voters 3")
        cluster.start()
        leader = cluster.wait_for_leader(30)
        say(f"  leader: node {leader['leader_id']} (epoch {leader['leader_epoch']})")
        reply = cluster.append(500, batch=50)
        say(f"$ kraft quorum append --cluster {directory} --count 500 --batch 50\n"
            f"  committed up to offset {reply['last_offset']} in {reply['elapsed_ms']:.0f} ms")
        _wait_replicated(cluster, reply["last_offset"])
        say(f"$ kraft quorum describe --cluster {directory} --status\n{_status_text(cluster)}")
        say(f"$ kraft quorum kill --cluster {directory} --node {leader['leader_id']}")
        killed_at = time.monotonic()
        cluster.kill(leader["leader_id"], signal.SIGKILL)
        new = cluster.wait_for_leader(30, above_epoch=leader["leader_epoch"],
                                      exclude=[leader["leader_id"]])
        say(f"  new leader: node {new['leader_id']} (epoch {new['leader_epoch']}) after "
            f"{time.monotonic() - killed_at:.1f} s")
        reply = cluster.append(100, batch=10, exclude=[leader["leader_id"]])
        say(f"  appended 100 more, committed up to offset {reply['last_offset']}")
        say(f"$ kraft quorum describe --cluster {directory} --status\n{_status_text(cluster)}")
    finally:
        try:
            say(f"$ kraft quorum stop --cluster {directory}")
        finally:  # the nodes never outlive the demo, whatever happened to stdout
            cluster.shut_down(timeout_s=5)


def _demo(args: argparse.Namespace) -> int:
    run_demo(args.cluster)
    return 0


def run(args: argparse.Namespace) -> int:
    handlers = {"start": _start, "stop": _stop, "kill": _kill, "restart": _restart,
                "describe": _describe, "append": _append, "demo": _demo,
                "snapshot": quorum_snapshot.run,
                "add-controller": quorum_voters.add_controller,
                "add-node": quorum_voters.add_node,
                "remove-controller": quorum_voters.remove_controller}
    try:
        return handlers[args.action](args)
    except ClusterError as exc:
        raise CommandError(str(exc)) from None
