"""`kraft chaos`: a seeded nemesis against a fresh local cluster, with a checked history.

    kraft chaos --cluster DIR --duration SECONDS --seed N [--voters 3 --brokers 3]
                [--faults kill,pause,leader,partition,slow-disk,clock,slow-net,lossy-net,wipe,
                          wipe-voter]
                [--dynamic] [--secure] [--no-snapshots] [--skip-replay] [--json]

Starts a cluster in DIR (short timeouts; unless --no-snapshots, a snapshot every 150-200
records, a log start that follows them and small segments: SNAPSHOT_SETTINGS),
runs the workload (tools/chaos/workload.py)
while the nemesis (tools/chaos/nemesis.py) kills, pauses and restarts nodes and (with
`partition`) cuts node-to-voter and broker-to-broker links through TCP proxies
(tools/chaos/proxy.py), (with `slow-net`, `lossy-net`) delays or loses chunks on a node's
links through the same proxies, and
(with `slow-disk`, `clock`) slows a node's fsyncs or skews its clock through its test-only
fault file (every node gets `fault.injection.file`, raft/fault_injection.py), and (with
`wipe`) restarts a broker with an empty metadata directory; heals
everything, waits (bounded) for the cluster to settle, checks the history against the
final state (tools/chaos/checker.py), stops the cluster, writes the acknowledged
produces as DIR/acknowledged.jsonl (tools/chaos/acknowledged_history.py), runs `kraft
replay --history` with it on the logs (so the brokers' partition logs must hold every
acknowledged produce once, at its offset: `acknowledged-writes-present`), and writes the
verdict to DIR/chaos-verdict.json (the history is DIR/history.jsonl, the faults on the
wall clock DIR/faults.jsonl, which `kraft replay --faults` reads)
with what the nodes did with snapshots (written, log-start advances, fetched; with
snapshots on, a run of SNAPSHOT_CHECK_MIN_S or more in which no node wrote one or moved
its log start is an error: the run did not exercise them).
With `--secure` the cluster is the launcher's mutual-TLS one (`kraft quorum start --tls`)
with the brokers' Kafka listener SASL_SSL (SCRAM-SHA-512 users bootstrapped as `kraft
format --add-scram` does, passwords in DIR/chaos-users.json) and the StandardAuthorizer
on, the workload's principals granted exactly the ACLs they use (tools/chaos/security.py);
every workload client logs in, the admin churn with its own certificate (the proxies
forward the TLS bytes untouched: certificates name 127.0.0.1, which every client dials).
While the workload runs, an attacker (tools/chaos/attacker.py: a certificate of the
cluster's CA with no ACL) sends every request the authorization table refuses it to every
controller; after healing, requests that must be refused are tried
(tools/chaos/secure_probes.py): one that is allowed, in either, fails the run.
With `--dynamic` the voters are a dynamic quorum (KIP-853), formatted as `kraft quorum
start --dynamic` does (`kraft format --initial-controllers`), and `wipe-voter` may be
asked for (without `--dynamic` it is a usage error): a voter loses its whole data directory,
comes back formatted anew under a new directory id, and is replaced as an operator would
(`kraft quorum remove-controller` of its old key, `add-controller` of its new one). After
the run the leader's voter set must hold every voter id exactly once with the directory id
on its disk (a violation `voter-set` otherwise).
Exit 0: no violation; 1: a violation, a harness error or a failed replay (with the seed
to reproduce); 2: bad usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import random
import secrets
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from metadata import records as rec
from metadata.admin import CreateAclsRequest, CreateAclsResponse
from metadata.bootstrap import write_bootstrap_records
from raft.snapshot import SnapshotError
from raft.storage import StorageError
from tools.chaos.acknowledged_history import write_acknowledged_history
from tools.chaos.attacker import Attacker
from tools.chaos.checker import CheckResult, FinalState, Violation, check
from tools.chaos.client_checks import ClientResult
from tools.chaos.final import (
    event_messages,
    final_topics,
    read_all,
    reference_hashes,
    scan_broker_dirs,
    settle_brokers,
    snapshot_activity,
)
from tools.chaos.group_workload import GroupConfig, GroupWorkload
from tools.chaos.history import UNKNOWN, HistoryWriter
from tools.chaos.nemesis import (
    DYNAMIC_KINDS,
    FAULT_FILE,
    FAULT_LOG_FILE,
    KINDS,
    NET_KINDS,
    WIPE_WAIT_S,
    Nemesis,
    schedule,
)
from tools.chaos.planted import PLANTED_BUGS, interpreter_args
from tools.chaos.proxy import ProxyNet
from tools.chaos.secure_probes import ALLOWED, REFUSED, probe
from tools.chaos.security import (
    ADMIN_CN,
    BROKER_USER,
    CHECKER_USER,
    MECHANISM,
    USERS,
    ClientSecurity,
    node_settings,
    workload_acls,
)
from tools.chaos.voter_set import voter_keys
from tools.chaos.workload import AdminCaller, Workload, WorkloadConfig
from tools.cluster import CLUSTER_FILE, Cluster, ClusterError
from tools.commands.replay import require_extra
from tools.errors import stop_on_signals, usage_error
from tools.progress import Poll, ProgressDisplay, Reading
from tools.quorum_client import client_ssl_context

log = logging.getLogger(__name__)

SETTINGS: dict[str, Any] = {
    "controller.quorum.election.timeout.ms": 300,
    "controller.quorum.fetch.timeout.ms": 600,
    "controller.quorum.election.backoff.max.ms": 200,
    "controller.quorum.request.timeout.ms": 400,
    "controller.quorum.fetch.max.wait.ms": 150,
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 500,
    "delete.topic.delay.ms": 2000,
    "replica.lag.time.max.ms": 2000,  # faults shrink ISRs (AlterPartition), heals expand them
    "fault.injection.file": FAULT_FILE,  # relative: in each node's directory (slow-disk, clock)
    "offsets.topic.num.partitions": 3,  # the group workload's __consumer_offsets (50: too busy)
    # the history checks that every topic was made by a create it recorded: a producer's
    # Metadata must not make a churned topic again (as Kafka's would by default)
    "auto.create.topics.enable": False,
    # the workload's topics delete and clean small segments (WorkloadConfig): look often
    "log.retention.check.interval.ms": 1000,
    "log.cleaner.backoff.ms": 1000,
}
# Snapshots (KIP-630) on by default: every node snapshots its image every 12 KiB of
# committed records (150-200 of the workload's), moves its log start to its newest
# snapshot once it holds over 24 KiB of log (so a couple of snapshots above the log start
# can still be checked against a log replay), in 4 KiB segments (so whole segments
# really are deleted), and a node behind the leader's log start catches up by
# FetchSnapshot in 2 KiB chunks. `--no-snapshots` runs with the node defaults (a
# snapshot every 20 MiB, 100 MiB of log kept: a chaos run reaches neither).
SNAPSHOT_SETTINGS: dict[str, Any] = {
    "metadata.log.max.record.bytes.between.snapshots": 12 * 1024,
    "metadata.max.retention.bytes": 24 * 1024,
    "log.segment.bytes": 4 * 1024,
    "fetch.snapshot.max.bytes": 2 * 1024,
}
START_TIMEOUT_S = 60.0
SETTLE_TIMEOUT_S = 60.0
READ_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 60.0  # the consumer group reaches the high watermarks after healing
# staged deletions are due within the delete delay; then they must be gone
DIRS_TIMEOUT_S = SETTINGS["delete.topic.delay.ms"] / 1000 + 30.0
REPLAY_TIMEOUT_S = 600.0
# A run this long commits well over 1,000 records (about 10 snapshot intervals); shorter
# ones may end before the first log-start advance (about 30 s in).
SNAPSHOT_CHECK_MIN_S = 120.0
VERDICT_FILE = "chaos-verdict.json"
HISTORY_FILE = "history.jsonl"
ACKNOWLEDGED_FILE = "acknowledged.jsonl"  # the acknowledged produces, as `--history` reads
# --planted-bug: a broker cut off from the controllers is fenced after 1.5 s, not 3 s, so
# that most partitions (1-4 s) move its leaderships while it still takes writes: what a
# broken acks=all rule then acknowledged is lost, and the checks must say so
PLANTED_SETTINGS: dict[str, Any] = {"broker.session.timeout.ms": 1500}
USERS_FILE = "chaos-users.json"  # --secure: the SCRAM users' passwords (0600)
ADMIN_PROPERTIES = "chaos-admin.properties"  # --secure: the admin churn's TLS client
ATTACKER_PROPERTIES = "chaos-attacker.properties"  # --secure: a client with no rights
ATTACKER_CN = "chaos-attacker"
GRANT_TIMEOUT_S = 30.0


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--cluster", required=True, type=Path, metavar="DIR",
                        help="a new directory for the cluster, its history and verdict")
    parser.add_argument("--duration", type=float, default=120.0, metavar="SECONDS",
                        help="how long the workload and the faults run")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the fault schedule and the workload (printed)")
    parser.add_argument("--voters", type=int, default=3, help="controllers (default 3)")
    parser.add_argument("--brokers", type=int, default=3, help="brokers (default 3)")
    parser.add_argument("--faults", default="kill,pause,leader",
                        help=f"comma-separated fault kinds among {', '.join(KINDS)} "
                             "(empty: none)")
    parser.add_argument("--no-snapshots", dest="snapshots", action="store_false",
                        help="run the nodes with the default snapshot interval and "
                             "retention, which a chaos run never reaches (by default chaos "
                             "snapshots every 150-200 records and moves log starts, so "
                             "FetchSnapshot is exercised)")
    parser.add_argument("--secure", action="store_true",
                        help="mutual TLS between the nodes, the brokers' listener SASL_SSL "
                             "with SCRAM-SHA-512 users, the StandardAuthorizer on and each "
                             "workload client granted only the ACLs it uses")
    parser.add_argument("--dynamic", action="store_true",
                        help="a dynamic quorum (KIP-853, as kraft quorum start --dynamic); "
                             "needed by the wipe-voter fault")
    parser.add_argument("--planted-bug", choices=PLANTED_BUGS, default=None,
                        help="run the brokers with one data-plane rule broken "
                             "(tools/chaos/planted.py), to see the checks catch it")
    parser.add_argument("--skip-replay", action="store_true", help="skip the Spark replay")
    parser.add_argument("--replay-master", default="local[2]", metavar="MASTER",
                        help="Spark master of the final replay (default local[2])")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")


def run(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    if set(faults) - set(KINDS):
        raise usage_error(f"--faults: unknown kinds {sorted(set(faults) - set(KINDS))}")
    if DYNAMIC_KINDS & set(faults) and not args.dynamic:
        raise usage_error("--faults wipe-voter needs --dynamic (a voter is replaced by its "
                          "replica key only in a dynamic quorum)")
    if args.duration <= 0 or args.voters < 1 or args.brokers < 1:
        raise usage_error("--duration, --voters and --brokers must be positive")
    # before a cluster starts: the workload's Kafka clients, and Spark for the replay
    require_extra("chaos", "kraft chaos", ("kafka", "confluent_kafka"))
    if not args.skip_replay:
        require_extra("replay", "kraft chaos (without --skip-replay)", ("pyspark",))
    directory = args.cluster.resolve()
    if (directory / CLUSTER_FILE).exists():
        raise usage_error(f"--cluster {directory} already holds a cluster; chaos needs a new one")
    directory.mkdir(parents=True, exist_ok=True)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # its retries are in the history
    if not args.json:
        print(f"chaos: seed {seed}, {args.duration:.0f} s, faults {','.join(faults) or 'none'}",
              flush=True)
    stop_on_signals()  # the faults are healed and the cluster stopped on the way out
    with ProgressDisplay("chaos", unit="s") as display:  # on stderr, when a terminal
        verdict = run_chaos(directory, seed=seed, duration_s=args.duration,
                            voters=args.voters, brokers=args.brokers, faults=faults,
                            replay=not args.skip_replay, replay_master=args.replay_master,
                            snapshots=args.snapshots, display=display, secure=args.secure,
                            dynamic=args.dynamic, planted_bug=args.planted_bug)
    (directory / VERDICT_FILE).write_text(json.dumps(verdict, indent=2) + "\n")
    print(json.dumps(verdict) if args.json else _text(verdict, directory))
    return 0 if verdict["ok"] else 1


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Credentials:
    """A secured rig's logins: the workload's SASL_SSL users and the CA, the admin
    churn's TLS client context and its certificate's principal."""

    clients: ClientSecurity
    admin_ssl: ssl.SSLContext
    admin_principal: str
    attacker_ssl: ssl.SSLContext  # a certificate of the cluster's CA with no ACL


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ChaosRig:
    """A new cluster with what runs against it: the history, the nemesis with its seeded
    fault plan, the TCP proxies (None when no network fault was asked for) and, with
    --secure, the workload's credentials."""

    cluster: Cluster
    history: HistoryWriter
    nemesis: Nemesis
    net: ProxyNet | None
    credentials: Credentials | None = None
    # --secure: what each request that must be refused got (tools/chaos/secure_probes.py)
    probes: dict[str, str] = dataclasses.field(default_factory=dict)
    dynamic: bool = False  # a dynamic quorum (KIP-853)
    # --dynamic: the leader's voter set after healing, and how it is not whole
    quorum: dict[str, Any] = dataclasses.field(default_factory=dict)


def _build_rig(directory: Path, *, seed: int, duration_s: float, voters: int, brokers: int,
              faults: list[str], snapshots: bool = True, secure: bool = False,
              dynamic: bool = False, planted_bug: str | None = None) -> ChaosRig:
    settings = {**SETTINGS, **(SNAPSHOT_SETTINGS if snapshots else {}),
                **(PLANTED_SETTINGS if planted_bug else {})}
    passwords = {user: secrets.token_urlsafe(18) for user in USERS} if secure else {}
    if secure:
        from tools import tls_certs
        settings |= node_settings(
            node_principals=[tls_certs.node_principal(n)
                             for n in range(1, voters + brokers + 1)],
            operator_principal=tls_certs.admin_principal(),
            broker_password=passwords[BROKER_USER])
    cluster = Cluster.create(directory, voters=voters, brokers=brokers, settings=settings,
                             tls=secure, dynamic=dynamic)
    if planted_bug is not None:
        cluster.broker_interpreter_args = interpreter_args(planted_bug)
    credentials = _secure(cluster, passwords) if secure else None
    history = HistoryWriter(directory / HISTORY_FILE)
    plan = schedule(seed, duration_s, faults, sorted(cluster.nodes),
                    broker_ids=[n for n, info in sorted(cluster.nodes.items())
                                if not info.is_voter],
                    voter_ids=cluster.voter_ids, dynamic=dynamic)
    # the proxies' own randomness (which chunk is lost, each jitter) is seeded too
    net = (ProxyNet.install(cluster, random.Random(f"proxy-{seed}"))
           if NET_KINDS & set(faults) else None)
    nemesis = Nemesis(cluster, plan, net, fault_log=directory / FAULT_LOG_FILE,
                      wipe_wait_s=WIPE_WAIT_S if snapshots else 0.0)
    return ChaosRig(cluster=cluster, history=history, nemesis=nemesis,
                    net=net, credentials=credentials, dynamic=dynamic)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _secure(cluster: Cluster, passwords: dict[str, str]) -> Credentials:
    """The SCRAM users in every voter's bootstrap records (what `kraft format
    --add-scram` writes: the first active controller appends them), their passwords in
    DIR/chaos-users.json, and the admin churn's certificate, signed by the cluster's CA,
    with its client properties (DIR/chaos-admin.properties)."""
    from tools import tls_certs
    from tools.commands.users import upsertion
    credentials: list[rec.Record] = []
    for user, password in passwords.items():
        u = upsertion(user, MECHANISM, {"password": password})
        credentials.append(rec.UserScramCredential(
            name=u.name, mechanism=u.mechanism, salt=u.salt, stored_key=u.stored_key,
            server_key=u.server_key, iterations=u.iterations))
    for node_id in cluster.voter_ids:
        write_bootstrap_records(cluster.node(node_id).data_dir, credentials)
    directory = cluster.directory
    _write_private(directory / USERS_FILE, (json.dumps(
        {"mechanism": MECHANISM, "passwords": passwords}, indent=2) + "\n").encode())
    tls_dir = directory / tls_certs.TLS_DIR
    return Credentials(clients=ClientSecurity(ca_file=str(tls_dir / "ca.pem"),
                                              passwords=passwords),
                       admin_ssl=_client_identity(directory, ADMIN_CN, ADMIN_PROPERTIES,
                                                  "the admin churn's client (the "
                                                  "controllers' admin RPCs)"),
                       admin_principal=tls_certs.certificate_principal(ADMIN_CN),
                       attacker_ssl=_client_identity(directory, ATTACKER_CN,
                                                     ATTACKER_PROPERTIES,
                                                     "the attacker: no ACL at all"))


def _client_identity(directory: Path, common_name: str, file_name: str, purpose: str
                     ) -> ssl.SSLContext:
    """A certificate for `common_name` signed by the cluster's CA, and its client
    properties (DIR/`file_name`); the TLS context it dials with."""
    from tools import tls_certs
    identity = tls_certs.write_client_identity(directory, common_name, file_name,
                                               f"kraft chaos --secure: {purpose}")
    context = client_ssl_context(identity.properties)
    assert context is not None  # security.protocol=SSL
    return context


def _grant(cluster: Cluster, credentials: Credentials, timeout_s: float) -> int:
    """Create the workload's ACLs through the controllers as the operator (a super
    user), then wait (bounded) until every broker applied the log through them, so the
    workload's first requests are judged by them. Returns how many ACLs."""
    group = GroupConfig()
    workload = WorkloadConfig()
    acls = workload_acls(admin_principal=credentials.admin_principal,
                         churn_topics=workload.churn_names, stable_topics=workload.stable_names,
                         group_topic=group.topic, group=group.group)
    caller = AdminCaller(cluster.controller_addresses(), cluster.cluster_id, cluster.client_ssl)
    response, _ = caller.call(CreateAclsRequest(creations=tuple(acls)), is_write=True)
    if not isinstance(response, CreateAclsResponse):
        raise ClusterError(f"creating the workload's ACLs: {response}")
    refused = [r for r in response.results if r.error_code]
    if refused:
        raise ClusterError(f"creating the workload's ACLs: {refused[0]}")
    committed = cluster.describe(timeout_s=2.0)["high_watermark"]
    brokers = [n for n, info in sorted(cluster.nodes.items()) if not info.is_voter]
    deadline = time.monotonic() + timeout_s
    while True:
        behind = [n for n in brokers if (s := cluster.broker_status(n)) is None
                  or (s.get("applied_offset") or -1) < committed - 1]
        if not behind:
            return len(acls)
        if time.monotonic() > deadline:
            raise ClusterError(f"brokers {behind} did not apply the ACLs within {timeout_s} s")
        time.sleep(0.1)


def _start_cluster(cluster: Cluster) -> str:
    """Start every node, wait for a leader and unfenced brokers; the Kafka bootstrap list."""
    cluster.start()  # a node that dies starting (its port taken) fails the start at once
    cluster.wait_for_leader(START_TIMEOUT_S, watch=True)
    cluster.wait_for_brokers(START_TIMEOUT_S, watch=True)
    return ",".join(n.client_address for n in cluster.nodes.values() if n.client_address)


def _run_workload_under_faults(workload: Workload, nemesis: Nemesis,
                              duration_s: float, group: GroupWorkload | None = None,
                              display: ProgressDisplay | None = None,
                              attacker: Attacker | None = None) -> list[str]:
    """Set the workloads up, run them for `duration_s` while the nemesis injects its
    faults (and the attacker, with --secure, tries every refused request); the
    workloads' own errors."""
    workload.setup()
    if group is not None:
        group.setup()
    nemesis.start()
    deadline = time.monotonic() + duration_s
    if attacker is not None:
        attacker.start(deadline)
    if display is not None:
        display.phase("workload and faults", total=duration_s,
                      poll=_counts(workload, nemesis, group, deadline - duration_s,
                                   duration_s))
    if group is not None:
        group.start(deadline)
    try:
        workload.run(deadline)
        if group is not None:
            group.join(deadline)
    finally:
        if attacker is not None:
            attacker.stop()
    nemesis.stop()
    return workload.errors + ([] if group is None else group.errors)


def _counts(workload: Workload, nemesis: Nemesis, group: GroupWorkload | None,
            started: float, duration_s: float) -> Poll:
    """The progress display's poll while the workload runs (read from its refresh
    thread): seconds of the duration gone, faults injected of those planned, operations
    completed (those of unknown outcome among them) and errors so far. History
    violations are only known once the final state is checked (`_check_history`)."""

    def poll() -> Reading:
        done = workload.history.completed()
        injected = list(nemesis.injected)
        errors = (len(workload.errors) + (0 if group is None else len(group.errors))
                  + sum(1 for f in injected if f.error))
        return Reading(completed=min(time.monotonic() - started, duration_s),
                       total=duration_s,
                       stats={"faults": f"{len(injected)}/{len(nemesis.faults)}",
                              "operations": sum(done.values()), "unknown": done[UNKNOWN],
                              "errors": errors})

    return poll


def _observe_final_state(rig: ChaosRig, bootstrap: str, group: GroupWorkload | None = None
                         ) -> tuple[FinalState, str]:
    """Heal every fault, let the cluster settle, and read back what it holds: the final
    state to check the history against, and the leader's data directory. The group
    workload drains first; its topic and the internal topics (`__consumer_offsets`) are
    not read for the history checker (the group's topic is read for its own checks)."""
    cluster = rig.cluster
    rig.nemesis.heal_all()
    leader = cluster.wait_for_leader(START_TIMEOUT_S)
    if rig.dynamic:
        rig.quorum.update(_final_voter_set(rig.nemesis, SETTLE_TIMEOUT_S))
    leader_dir = cluster.node(leader["leader_id"]).data_dir
    cluster.wait_for_brokers(START_TIMEOUT_S)
    topics = final_topics(cluster, SETTLE_TIMEOUT_S)
    observed = settle_brokers(cluster, SETTLE_TIMEOUT_S)
    if group is not None:
        group.observe_final(topics, DRAIN_TIMEOUT_S, READ_TIMEOUT_S, {
            node_id: Path(info.data_dir) for node_id, info in cluster.nodes.items()
            if not info.is_voter})
    credentials = rig.credentials
    reads, complete, starts = read_all(bootstrap, {
        name: topic for name, topic in topics.items() if not name.startswith("__")
        and (group is None or name != group.config.topic)}, READ_TIMEOUT_S,
        None if credentials is None else credentials.clients.kafka_python(CHECKER_USER))
    if credentials is not None:  # the security in force: requests that must be refused
        rig.probes.update(probe(
            bootstrap=bootstrap, controllers=cluster.controller_addresses(),
            cluster_id=cluster.cluster_id, stable_topic=WorkloadConfig().stable_names[0],
            clients=credentials.clients, admin_ssl=credentials.admin_ssl))
    disks = scan_broker_dirs(cluster, DIRS_TIMEOUT_S)
    final = FinalState(topics={name: t.topic_id for name, t in topics.items()},
                       reads=reads, read_complete=complete, brokers=observed,
                       assignments={t.topic_id: dict(enumerate(t.replicas))
                                    for t in topics.values()}, disks=disks,
                       log_starts=starts, compacted=frozenset(
                           t.topic_id for name, t in topics.items()
                           if name in WorkloadConfig().compacted_names))
    return final, leader_dir


def _final_voter_set(nemesis: Nemesis, timeout_s: float) -> dict[str, Any]:
    """--dynamic: wait (bounded) until the leader's voter set holds every voter id once
    with the directory id on its disk; the set seen last and how it is not whole."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            voters = voter_keys(nemesis.cluster.describe(timeout_s=2.0)["voters"])
            problems = nemesis.voter_set_problems()
        except ClusterError as exc:
            voters, problems = [], [f"no leader answered DescribeQuorum: {exc}"]
        if not problems or time.monotonic() >= deadline:
            return {"voters": [{"id": n, "directory_id": d} for n, d in voters],
                    "problems": problems}
        time.sleep(0.2)


def _tear_down(rig: ChaosRig, workload: Workload | None,
               group: GroupWorkload | None = None) -> None:
    """Stop the workloads and the nemesis, close the history, stop the cluster (killing
    what does not stop) and the proxies."""
    if workload is not None:
        workload.stop()
    if group is not None:
        group.stop()
    rig.nemesis.stop()
    rig.history.close()
    try:
        rig.cluster.shut_down()
    finally:
        if rig.net is not None:
            rig.net.close()


def _check_history(history: HistoryWriter, final: FinalState, leader_dir: str) -> CheckResult:
    """The history against the final state, with the image hashes the leader's log gives
    at each offset a broker reported."""
    hashes = reference_hashes(leader_dir, [b.applied_offset for b in final.brokers
                                           if b.applied_offset is not None])
    return check(history.events(), dataclasses.replace(final, reference_hashes=hashes))


def run_chaos(directory: Path, *, seed: int, duration_s: float, voters: int, brokers: int,
              faults: list[str], replay: bool, replay_master: str,
              snapshots: bool = True, display: ProgressDisplay | None = None,
              secure: bool = False, dynamic: bool = False,
              planted_bug: str | None = None) -> dict[str, Any]:
    began = time.monotonic()
    display = display or ProgressDisplay("chaos", enabled=False)
    rig = _build_rig(directory, seed=seed, duration_s=duration_s, voters=voters,
                    brokers=brokers, faults=faults, snapshots=snapshots, secure=secure,
                    dynamic=dynamic, planted_bug=planted_bug)
    credentials = rig.credentials
    acl_count = 0
    errors: list[str] = []
    observed: tuple[FinalState, str] | None = None
    workload: Workload | None = None
    group: GroupWorkload | None = None
    attacker: Attacker | None = None
    try:
        display.phase("cluster start")  # phase names: short, the line is one terminal line
        bootstrap = _start_cluster(rig.cluster)
        if credentials is not None:
            display.phase("granting ACLs")
            acl_count = _grant(rig.cluster, credentials, GRANT_TIMEOUT_S)
        admin_ssl = None if credentials is None else credentials.admin_ssl
        logins = None if credentials is None else credentials.clients
        workload = Workload(history=rig.history, addresses=rig.cluster.controller_addresses(),
                            cluster_id=rig.cluster.cluster_id, bootstrap=bootstrap,
                            config=WorkloadConfig(), seed=seed, admin_ssl=admin_ssl,
                            clients=logins)
        group = GroupWorkload(directory=directory, history=rig.history,
                              addresses=rig.cluster.controller_addresses(),
                              cluster_id=rig.cluster.cluster_id, bootstrap=bootstrap,
                              seed=seed, kills="kill" in faults, admin_ssl=admin_ssl,
                              clients=logins)
        attacker = None if credentials is None else Attacker(  # all along the run
            controllers=rig.cluster.controller_addresses, cluster_id=rig.cluster.cluster_id,
            ssl_context=credentials.attacker_ssl, target_voter=rig.cluster.voter_ids[0])
        errors += _run_workload_under_faults(workload, rig.nemesis, duration_s, group,
                                             display, attacker)
        display.phase("healing, final read")
        observed = _observe_final_state(rig, bootstrap, group)
    except Exception as exc:  # the verdict must still be written, as a failure
        log.exception("chaos run failed")
        errors.append(f"harness: {type(exc).__name__}: {exc}")
    finally:
        display.phase("cluster stop")
        _tear_down(rig, workload, group)
    display.phase("history check")
    result = None if observed is None else _check_history(rig.history, *observed)
    clients: ClientResult | None = None
    if result is not None and group is not None:
        clients = group.check()
        errors += group.final_errors
        result = dataclasses.replace(result, violations=result.violations + clients.violations)
    errors += rig.nemesis.final_errors
    if result is not None and rig.quorum.get("problems"):
        result = dataclasses.replace(result, violations=result.violations + tuple(
            Violation(kind="voter-set", message=f"after the run: {problem}")
            for problem in rig.quorum["problems"]))
    if result is not None:
        display.update(violations=len(result.violations))
    try:
        activity = [n.to_json() for n in snapshot_activity(rig.cluster)]
    except (OSError, StorageError, SnapshotError) as exc:
        activity = []
        errors.append(f"snapshots: {type(exc).__name__}: {exc}")
    if snapshots and duration_s >= SNAPSHOT_CHECK_MIN_S:
        errors += _snapshots_unexercised(activity)
    errors += [f"security: {name} was allowed; it must be refused"
               for name, outcome in rig.probes.items() if outcome == ALLOWED]
    if attacker is not None:
        rig.probes.update({f"attacker_{k}": str(n) for k, n in attacker.outcomes.items()})
        errors += [f"security: the attacker was served {hole}" for hole in attacker.allowed]
    acknowledged = write_acknowledged_history(
        directory / ACKNOWLEDGED_FILE, rig.history.events(),
        frozenset() if group is None else group.resent())
    if replay:
        display.phase("Spark replay")
        if result is not None:  # still shown while the replay runs
            display.update(violations=len(result.violations))
    replay_result = _replay(directory, replay_master) if replay else None
    return _verdict(seed=seed, duration_s=duration_s, voters=voters, brokers=brokers,
                   faults=faults, injected=[f.to_json() for f in rig.nemesis.injected],
                   errors=errors, result=result,
                   final=None if observed is None else observed[0],
                   replay_result=replay_result, elapsed_s=time.monotonic() - began,
                   network=None if rig.net is None else dataclasses.asdict(rig.net.stats()),
                   snapshots=_snapshot_summary(snapshots, activity),
                   clients=None if clients is None else clients.counts,
                   security=_security_summary(rig, acl_count),
                   quorum=rig.quorum if dynamic else None,
                   acknowledged=acknowledged.to_json(), planted_bug=planted_bug)


def _security_summary(rig: ChaosRig, acl_count: int) -> dict[str, Any] | None:
    """The verdict's `security` (None: a plaintext run): what the clients logged in
    with, how many ACLs they were granted, and how many requests the nodes refused (the
    controllers log each refused admin request; the count is informational)."""
    if rig.credentials is None:
        return None
    refused = sum(1 for info in rig.cluster.nodes.values()
                  for msg in event_messages(info.log_path) if msg == "admin request refused")
    return {"tls": "mutual", "kafka_listener": "SASL_SSL", "mechanism": MECHANISM,
            "authorizer": True, "acls": acl_count, "admin_requests_refused": refused,
            "probes": dict(rig.probes)}


def _snapshot_summary(enabled: bool, activity: list[dict[str, Any]]) -> dict[str, Any]:
    """The verdict's `snapshots`: whether the small snapshot settings were on, the totals
    over every node, and each node's counts and final log start."""
    return {"enabled": enabled,
            **{key: sum(n[key] for n in activity)
               for key in ("written", "log_start_advances", "fetched")},
            "nodes": activity}


def _snapshots_unexercised(activity: list[dict[str, Any]]) -> list[str]:
    """With snapshots on, a long enough run wrote snapshots and moved log starts; if not,
    the settings did not reach the nodes (or they never snapshot): an error, not a pass."""
    errors = []
    if not any(n["written"] for n in activity):
        errors.append("snapshots: no node wrote a snapshot")
    if not any(n["log_start_advances"] for n in activity):
        errors.append("snapshots: no node's log start advanced")
    return errors


def _verdict(*, seed: int, duration_s: float, voters: int, brokers: int, faults: list[str],
            injected: list[dict[str, Any]], errors: list[str], result: CheckResult | None,
            final: FinalState | None, replay_result: dict[str, Any] | None,
            elapsed_s: float, network: dict[str, int] | None = None,
            snapshots: dict[str, Any] | None = None,
            clients: dict[str, int] | None = None,
            security: dict[str, Any] | None = None,
            quorum: dict[str, Any] | None = None,
            acknowledged: dict[str, int] | None = None,
            planted_bug: str | None = None) -> dict[str, Any]:
    """What chaos-verdict.json holds: ok only when the history was checked without a
    violation, nothing failed (harness, fault injection) and the replay passed."""
    errors = errors + [f"fault {f['kind']} on {f['node']}: {f['error']}" for f in injected
                       if f["error"]]
    violations = [] if result is None else [v.to_json() for v in result.violations]
    replay_ok = replay_result is None or replay_result["exit_code"] == 0
    ok = result is not None and not violations and not errors and replay_ok
    return {
        "ok": ok, "seed": seed, "duration_s": duration_s, "voters": voters,
        "brokers": brokers, "faults": faults, "planted_bug": planted_bug,
        "faults_injected": len(injected), "fault_log": injected,
        "operations_checked": 0 if result is None else sum(
            sum(v.values()) for v in result.operations.values()),
        "operations": {} if result is None else result.operations,
        "records_read": 0 if result is None else result.records_read,
        "writes_verified": 0 if result is None else result.writes_verified,
        # acknowledged writes retention or compaction legally removed (not lost)
        "writes_removed": 0 if result is None else result.writes_removed,
        "partition_dirs_checked": 0 if final is None else sum(
            len(d.partitions) + len(d.staged) for d in final.disks),
        # what the proxies forwarded and the stalls their losses cost (None: no proxies)
        "network": network,
        # snapshots written, log-start advances and snapshots fetched, in total and per node
        "snapshots": snapshots,
        # the group workload's counts (tools/chaos/client_checks.py; None: it did not run)
        "clients": clients,
        # --secure: TLS, SASL and ACLs (None: a plaintext cluster)
        "security": security,
        # --dynamic: the leader's voter set after the run and how it was not whole (None:
        # a static quorum)
        "quorum": quorum,
        "voters_replaced": sum(1 for f in injected if f["kind"] == "wipe-voter"
                               and f["healed_s"] is not None and not f["error"]),
        # the acknowledged produces written for `kraft replay --history`, and those left
        # out (a reused name's topic ID not certain; tools/chaos/acknowledged_history.py)
        "acknowledged": acknowledged,
        "violations": violations, "errors": errors, "replay": replay_result,
        "elapsed_s": round(elapsed_s, 1),
        "reproduce": (f"kraft chaos --cluster NEW_DIR --duration {duration_s:g} --seed {seed} "
                      f"--voters {voters} --brokers {brokers} --faults {','.join(faults)}"
                      + ("" if snapshots is None or snapshots["enabled"]
                         else " --no-snapshots")
                      + ("" if security is None else " --secure")
                      + ("" if quorum is None else " --dynamic")
                      + ("" if planted_bug is None else f" --planted-bug {planted_bug}")),
    }


def _replay(directory: Path, master: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "tools.cli", "replay", "--cluster", str(directory),
               "--master", master, "--history", str(directory / ACKNOWLEDGED_FILE), "--json"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              timeout=REPLAY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"exit_code": None, "error": f"replay ran over {REPLAY_TIMEOUT_S:.0f} s"}
    summary: Any = None
    for line in reversed(done.stdout.splitlines()):
        try:
            summary = json.loads(line)
            break
        except ValueError:
            continue
    checks = summary.get("checks") if isinstance(summary, dict) else None
    return {"exit_code": done.returncode,
            "checks": [replay_check_summary(c) for c in checks or [] if isinstance(c, dict)],
            "stderr_tail": done.stderr.strip().splitlines()[-3:] if done.returncode else []}


def replay_check_summary(check: dict[str, Any]) -> dict[str, Any]:
    """A check of `kraft replay --json` as the verdict keeps it: its counts (how many
    acknowledged writes were checked, ...) and, when it failed, its first examples."""
    return {"name": check.get("name"), "violations": check.get("violations"),
            "skipped": check.get("skipped"), "note": check.get("note"),
            "counts": check.get("counts") or {},
            "examples": (check.get("examples") or [])[:3] if check.get("violations") else []}


def _text(verdict: dict[str, Any], directory: Path) -> str:
    lines = [f"{'PASS' if verdict['ok'] else 'FAIL'}: seed {verdict['seed']}, "
             f"{verdict['faults_injected']} fault(s) injected, "
             f"{verdict['operations_checked']} operation(s) checked, "
             f"{verdict['records_read']} record(s) read, "
             f"{verdict['writes_verified']} acknowledged write(s) verified, "
             f"{verdict['writes_removed']} legally removed (retention, compaction), "
             f"{verdict['partition_dirs_checked']} broker partition dir(s) checked, "
             f"{len(verdict['violations'])} violation(s)"]
    for op, counts in verdict["operations"].items():
        lines.append(f"  {op:14} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    snapshots = verdict.get("snapshots")
    if snapshots is not None:
        lines.append(f"  snapshots      {'on' if snapshots['enabled'] else 'off'}: "
                     f"{snapshots['written']} written, {snapshots['log_start_advances']} "
                     f"log start advance(s), {snapshots['fetched']} fetched (FetchSnapshot)")
    security = verdict.get("security")
    if security is not None:
        lines.append(f"  security       mutual TLS, {security['kafka_listener']} "
                     f"{security['mechanism']}, authorizer on: {security['acls']} ACL(s) "
                     f"granted, {security['admin_requests_refused']} admin request(s) "
                     "refused")
        probes = security.get("probes") or {}
        lines.append("  probes         " + (", ".join(
            f"{name} {outcome}" for name, outcome in probes.items()) or "none ran")
            + ("" if all(o == REFUSED for o in probes.values()) else
               " (each must be refused)"))
    quorum = verdict.get("quorum")
    if quorum is not None:
        wiped = sum(1 for f in verdict["fault_log"] if f["kind"] == "wipe-voter")
        lines.append(f"  quorum         dynamic: {wiped} voter(s) wiped, "
                     f"{verdict['voters_replaced']} replaced; voters after the run "
                     + ", ".join(f"{v['id']}@{v['directory_id']}" for v in quorum["voters"])
                     + ("" if not quorum["problems"] else " (not whole)"))
    clients = verdict.get("clients")
    if clients is not None:
        lines.append("  clients        " + ", ".join(f"{k} {v}" for k, v in clients.items()))
    acknowledged = verdict.get("acknowledged")
    if acknowledged is not None:
        lines.append(f"  acknowledged   {acknowledged['writes']} produce(s) in {ACKNOWLEDGED_FILE}"
                     f" for the replay, {acknowledged['left_out']} left out (topic ID not "
                     "certain)")
    lines += [f"  violation {v['kind']}: {v['message']}" for v in verdict["violations"][:20]]
    lines += [f"  error: {e}" for e in verdict["errors"]]
    replay = verdict["replay"]
    if replay is not None:
        lines.append(f"  replay: exit {replay['exit_code']}")
        lines += [f"    {c['name']}: {c['violations']} violation(s)"
                  + (" (skipped)" if c["skipped"] else "")
                  + (f"; {c['note']}" if c.get("note") else "")
                  + "".join(f"\n      {json.dumps(e, default=str)}"
                            for e in c.get("examples", []))
                  for c in replay.get("checks", [])]
    lines.append(f"  verdict: {directory / VERDICT_FILE}")
    if not verdict["ok"]:
        lines.append(f"  reproduce: {verdict['reproduce']}")
    return "\n".join(lines)
