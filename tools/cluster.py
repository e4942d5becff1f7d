"""Local multi-process cluster launcher: formats the nodes, writes their configurations,
starts and stops their processes, and asks them (through `tools.quorum_client`) who
leads and whether the brokers are ready.

Used by `kraft quorum`, the integration tests, the demo, chaos and the bench. Layout:

    DIR/cluster.json           cluster_id, base_port (when given); per node: id, roles,
                               controller and client addresses, pid, data dir, node dir,
                               config path
    DIR/node-N/node.toml       the node's configuration (Kafka key names)
    DIR/node-N/data/           its log directory (formatted here)
    DIR/node-N/node.log        its stdout and stderr (JSON log lines)
    DIR/node-N/node.pid        its process id while started
    DIR/admin.properties       with `tls=True` (`kraft quorum start --tls`): how the
    DIR/client.properties      admin (a super user) and an unprivileged client connect,
    DIR/tls/                   and the throwaway CA and certificates (`tools.tls_certs`)

Voters get ids 1..V, brokers V+1..V+B (brokers are raft observers for now). Every node is
its own detached process (new session), so it outlives the command that started it.

A TLS cluster's listeners are all SSL with mutual TLS (`ssl.client.auth=required`): the
voters' `CONTROLLER`, the brokers' Kafka listener (named `SSL`) and `STATUS`. Every node's
`super.users` names the nodes and the admin identity, also when `settings` give their own
`super.users` (theirs are added to the nodes' and the admin's, never in their place), so
the nodes' requests to each other and the launcher's stay allowed under the authorizer.
A loaded cluster dials them as its admin (`Cluster.client_ssl`:
`admin.properties`, or `client.properties` in a cluster made before there was an admin),
through the blocking client `tools.quorum_client`; `cluster_properties` names the file
another client of the cluster uses.

A `Cluster` object owns the node processes it started: it reaps them and keeps their
exit codes (`exit_codes`); a node started by another process (or object) is known by its
pid and command line only. Starting refuses ports another process holds (`busy_ports`),
and a wait that `watch`es fails at once, with the node's last error line, when a node it
started has died (`NodeDied`). Every request carries the cluster's id, so a node of
another cluster on a recorded address answers INCONSISTENT_CLUSTER_ID, never a leader.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from raft.common.durable import make_private_dir
from raft.common.uuid import Uuid
from tools.ports import HOST, busy_ports, free_ports
from tools.quorum_client import ClusterError as ClusterError  # the launcher's error too
from tools.quorum_client import (
    append_records,
    client_ssl_context,
    describe_quorum,
    request,
)

CLUSTER_FILE = "cluster.json"
CLIENT_PROPERTIES = "client.properties"  # a TLS cluster's unprivileged client (tools.tls_certs)
ADMIN_PROPERTIES = "admin.properties"  # a TLS cluster's admin, a super user (tools.tls_certs)


def cluster_properties(cluster_dir: str | os.PathLike[str], *, admin: bool = True
                       ) -> Path | None:
    """The client properties file a TLS cluster directory offers: its admin's
    (`admin.properties`) when `admin` and it has one, else its unprivileged client's
    (`client.properties`); None for a plaintext cluster."""
    names = (ADMIN_PROPERTIES, CLIENT_PROPERTIES) if admin else (CLIENT_PROPERTIES,)
    return next((p for n in names if (p := Path(cluster_dir) / n).is_file()), None)


class NodeDied(ClusterError):
    """A node this launcher started exited while it waited for the cluster."""


METRICS_EVENT = "serving Prometheus metrics"  # tools/metrics.py's log line, with its url


def _events_backwards(log_text: str) -> Iterator[dict[str, Any] | str]:
    """A node's log, last line first: each JSON log line as its event, any other line
    (what the command line printed) as text."""
    for line in reversed(log_text.splitlines()):
        try:
            event = json.loads(line) if line.startswith("{") else None
        except ValueError:
            event = None
        yield event if isinstance(event, dict) else line


def last_error_line(log_text: str) -> str | None:
    """The last error a node's log holds: an ERROR or CRITICAL JSON log line's message, or
    the `error: ...` line the command line prints before it exits (None: neither)."""
    for event in _events_backwards(log_text):
        if isinstance(event, str) and event.startswith("error: "):
            return event.removeprefix("error: ")
        if isinstance(event, dict) and event.get("level") in ("ERROR", "CRITICAL"):
            return str(event.get("msg"))
    return None


def metrics_url(log_text: str) -> str | None:
    """Where a node's log last said it serves Prometheus metrics (None: it did not)."""
    return next((str(e["url"]) for e in _events_backwards(log_text)
                 if isinstance(e, dict) and e.get("msg") == METRICS_EVENT and "url" in e),
                None)


def _port(address: str) -> int:
    return int(address.rpartition(":")[2])


def _refuse_busy(owners: Mapping[int, str]) -> None:
    """ClusterError naming each port of `owners` (port -> whose) another process holds."""
    busy = busy_ports(owners)
    if busy:
        raise ClusterError("port" + ("s" if len(busy) > 1 else "") + " in use by another "
                           "process: " + ", ".join(f"{HOST}:{p} ({owners[p]})" for p in busy))


def _super_users(*lists: str) -> str:
    """One `super.users` (`User:a;User:b`) holding every principal of `lists`, once each."""
    names = [n.strip() for text in lists for n in text.split(";") if n.strip()]
    return ";".join(dict.fromkeys(names))


def _write_metadata_version(data_dir: str) -> None:
    """The latest metadata.version among a voter's bootstrap records, as `kraft format`
    writes it by default (kafka-storage.sh always records one)."""
    from metadata import records as rec
    from metadata.bootstrap import write_bootstrap_records
    from metadata.features import LATEST_METADATA_LEVEL, METADATA_VERSION
    write_bootstrap_records(data_dir, [rec.FeatureLevel(name=METADATA_VERSION,
                                                        feature_level=LATEST_METADATA_LEVEL)])


def _write_bootstrap(data_dir: str, voters: Any) -> None:
    """The bootstrap checkpoint (KRaftVersionRecord + VotersRecord) in the node's
    metadata partition directory, as kraft format --initial-controllers writes it."""
    from raft.log import METADATA_PARTITION_DIR
    from raft.voters import write_bootstrap_checkpoint
    partition = Path(data_dir) / METADATA_PARTITION_DIR
    make_private_dir(partition, parents=True, exist_ok=True)
    write_bootstrap_checkpoint(partition, voters)


# -- processes ---------------------------------------------------------------------------


def is_alive(pid: int | None, marker: str | None = None) -> bool:
    """True if `pid` runs (not a zombie) and, when given, its command line holds `marker`
    (so a recycled pid is not mistaken for our node)."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    if stat.rpartition(")")[2].split()[0] in ("Z", "X"):
        return False
    return marker is None or marker in cmdline


@dataclass
class NodeInfo:
    id: int
    roles: list[str]
    controller_address: str | None
    client_address: str | None
    data_dir: str
    dir: str
    config: str
    pid: int | None = None
    status_address: str | None = None  # a broker's BrokerStatus port (msgpack)

    @property
    def is_voter(self) -> bool:
        return "controller" in self.roles

    @property
    def log_path(self) -> Path:
        return Path(self.dir) / "node.log"

    def log_text(self) -> str:
        """Its node.log ("" before it ever started)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


@dataclass
class Cluster:
    directory: Path
    cluster_id: str
    nodes: dict[int, NodeInfo] = field(default_factory=dict)
    started_pids: list[int] = field(default_factory=list)  # every pid this object started
    exit_codes: dict[int, int] = field(default_factory=dict)  # pid -> exit code (negative:
    # a signal) of the nodes this object started and reaped
    base_port: int | None = None  # the first of its consecutive ports (None: any free ones)
    broker_interpreter_args: tuple[str, ...] = ()  # every broker start's, unless given
    # (`kraft chaos --planted-bug`: tools/chaos/planted.py); not saved
    _children: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)  # not reaped
    _client_ssl: list[ssl.SSLContext | None] = field(default_factory=list)  # once loaded

    @property
    def client_properties(self) -> Path | None:
        """A TLS cluster's unprivileged client properties file (None: plaintext)."""
        return cluster_properties(self.directory, admin=False)

    @property
    def admin_properties(self) -> Path | None:
        """The properties file of the identity this cluster's own requests use: the
        admin's (`cluster_properties`; None: plaintext)."""
        return cluster_properties(self.directory)

    @property
    def client_ssl(self) -> ssl.SSLContext | None:
        """The context this cluster's own requests dial with, the admin's (None:
        plaintext)."""
        if not self._client_ssl:
            properties = self.admin_properties
            self._client_ssl.append(client_ssl_context(properties) if properties else None)
        return self._client_ssl[0]

    # -- layout ----------------------------------------------------------------------

    @classmethod
    def create(cls, directory: str | os.PathLike[str], *, voters: int, brokers: int = 0,
               base_port: int | None = None, settings: Mapping[str, Any] | None = None,
               cluster_id: str | None = None, tls: bool = False,
               dynamic: bool = False) -> Cluster:
        """Format the directories and write the configs (nothing is started). `tls`:
        a throwaway CA and certificates, every listener SSL with mutual TLS. `dynamic`:
        kraft.version 1 (KIP-853), the voters formatted as with kafka-storage.sh's
        --initial-controllers (each with the bootstrap checkpoint of them all)."""
        from raft.storage import format_log_dir  # formatting: not a client's start
        from tools.config import to_toml  # the node configuration: only to write one
        directory = Path(directory).resolve()
        if (directory / CLUSTER_FILE).exists():
            raise ClusterError(f"{directory} already holds a cluster")
        if voters < 1 or brokers < 0:
            raise ClusterError("need at least one voter and no negative broker count")
        # voters, then brokers' Kafka ports, then brokers' STATUS ports
        ports = (list(range(base_port, base_port + voters + 2 * brokers)) if base_port
                 else free_ports(voters + 2 * brokers))
        if base_port:  # before anything is written: a busy port makes no cluster
            _refuse_busy({port: f"node {i + 1 if i < voters + brokers else i + 1 - brokers}"
                          for i, port in enumerate(ports)})
        cluster = cls(directory, cluster_id or str(Uuid.random()), base_port=base_port)
        quorum = ",".join(f"{n}@{HOST}:{ports[n - 1]}" for n in range(1, voters + 1))
        tls_files = None
        if tls:
            from tools.tls_certs import write_cluster_tls  # cryptography: only when used
            directory.mkdir(parents=True, exist_ok=True)
            tls_files = write_cluster_tls(directory, list(range(1, voters + brokers + 1)))
        client_listener = "SSL" if tls else "PLAINTEXT"
        initial = None
        if dynamic:
            from raft.voters import parse_controllers
            initial = parse_controllers(",".join(
                f"{n}@{HOST}:{ports[n - 1]}:{Uuid.random()}" for n in range(1, voters + 1)))
        for node_id in range(1, voters + brokers + 1):
            is_voter = node_id <= voters
            node_dir = directory / f"node-{node_id}"
            address = f"{HOST}:{ports[node_id - 1]}"
            status = None if is_voter else f"{HOST}:{ports[node_id - 1 + brokers]}"
            info = NodeInfo(id=node_id, roles=["controller"] if is_voter else ["broker"],
                            controller_address=address if is_voter else None,
                            client_address=None if is_voter else address,
                            status_address=status,
                            data_dir=str(node_dir / "data"), dir=str(node_dir),
                            config=str(node_dir / "node.toml"))
            format_log_dir(info.data_dir, cluster_id=cluster.cluster_id, node_id=node_id,
                           directory_id=str(initial.directory_of(node_id))
                           if initial is not None and is_voter else None)
            if is_voter:
                _write_metadata_version(info.data_dir)
            if initial is not None and is_voter:
                _write_bootstrap(info.data_dir, initial)
            node_settings: dict[str, Any] = {
                "node.id": node_id, "process.roles": ",".join(info.roles),
                "controller.quorum.voters": quorum,
                "listeners": f"CONTROLLER://{address}" if is_voter
                else f"{client_listener}://{address},STATUS://{status}",
                "log.dirs": info.data_dir, "cluster.id": cluster.cluster_id}
            if tls_files is not None:
                from tools.tls_certs import node_tls_settings
                node_settings["listener.security.protocol.map"] = (
                    "CONTROLLER:SSL" if is_voter else "CONTROLLER:SSL,SSL:SSL,STATUS:SSL")
                node_settings.update(node_tls_settings(tls_files, node_id))
            launcher_super_users = str(node_settings.get("super.users", ""))
            node_settings.update(settings or {})
            if tls_files is not None:  # the nodes and the admin stay super users
                from tools.tls_certs import admin_principal
                node_settings["super.users"] = _super_users(
                    launcher_super_users, str(node_settings.get("super.users", "")),
                    admin_principal())
            Path(info.config).write_text(to_toml(node_settings))
            cluster.nodes[node_id] = info
        cluster.save()
        return cluster

    def add_controller_node(self, *, port: int | None = None,
                            bootstrap_servers: bool = False) -> NodeInfo:
        """A new controller node (the next id) formatted as with kafka-storage.sh's
        --no-initial-controllers: it knows the configured voters only as whom to ask,
        and runs as an observer until `kraft quorum add-controller` adds it (KIP-853).
        Not started; its settings follow the first controller's. `bootstrap_servers`:
        it knows no voter, only `controller.quorum.bootstrap.servers` (every controller
        address so far), and learns the voters from them at start. Its port: `port`,
        else in a cluster made with a base port the one after its highest (ClusterError
        when another process holds it), else a free one."""
        node_id = max(self.nodes) + 1
        first = self.nodes[min(self.voter_ids)]
        if port is None and self.base_port:  # the next of the cluster's own ports
            port = 1 + max(self.own_ports())
            _refuse_busy({port: f"node {node_id}"})
        address = f"{HOST}:{port or free_ports(1, avoid=self.own_ports())[0]}"
        node_dir = self.directory / f"node-{node_id}"
        info = NodeInfo(id=node_id, roles=["controller"], controller_address=address,
                        client_address=None, data_dir=str(node_dir / "data"),
                        dir=str(node_dir), config=str(node_dir / "node.toml"))
        from raft.storage import format_log_dir
        format_log_dir(info.data_dir, cluster_id=self.cluster_id, node_id=node_id)
        import tomllib

        from tools.config import to_toml
        settings = tomllib.loads(Path(first.config).read_text())
        settings.update({"node.id": node_id, "listeners": f"CONTROLLER://{address}",
                         "log.dirs": info.data_dir})
        if bootstrap_servers:
            del settings["controller.quorum.voters"]
            settings["controller.quorum.bootstrap.servers"] = ",".join(
                self.controller_addresses())
        text = to_toml(settings)
        Path(info.config).write_text(text)
        self.nodes[node_id] = info
        self.save()
        return info

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> Cluster:
        directory = Path(directory).resolve()
        try:
            data = json.loads((directory / CLUSTER_FILE).read_text())
        except FileNotFoundError:
            raise ClusterError(f"no cluster in {directory} (no {CLUSTER_FILE})") from None
        except (OSError, ValueError) as exc:
            raise ClusterError(f"{directory / CLUSTER_FILE}: {exc}") from None
        nodes = {int(n["id"]): NodeInfo(**n) for n in data["nodes"]}
        return cls(directory, data["cluster_id"], nodes, base_port=data.get("base_port"))

    def save(self) -> None:
        data = {"cluster_id": self.cluster_id, "base_port": self.base_port,
                "nodes": [asdict(n) for n in sorted(self.nodes.values(), key=lambda n: n.id)]}
        temp = self.directory / (CLUSTER_FILE + ".tmp")
        temp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(temp, self.directory / CLUSTER_FILE)

    def own_ports(self) -> set[int]:
        """Every port the cluster's nodes listen on (bound or not yet)."""
        return {_port(a) for n in self.nodes.values()
                for a in (n.controller_address, n.client_address, n.status_address) if a}

    def node(self, node_id: int) -> NodeInfo:
        if node_id not in self.nodes:
            raise ClusterError(f"no node {node_id} in {self.directory} "
                               f"(nodes: {', '.join(map(str, sorted(self.nodes)))})")
        return self.nodes[node_id]

    @property
    def voter_ids(self) -> list[int]:
        return sorted(n.id for n in self.nodes.values() if n.is_voter)

    def controller_addresses(self, exclude: Iterable[int] = ()) -> list[str]:
        skip = set(exclude)
        return [n.controller_address for n in self.nodes.values()
                if n.controller_address and n.id not in skip]

    # -- processes -------------------------------------------------------------------

    def is_running(self, node_id: int) -> bool:
        info = self.node(node_id)
        return self._is_alive(info.pid, info.config)

    def _is_alive(self, pid: int | None, marker: str | None = None) -> bool:
        """`is_alive`, but a child of this object's is polled, which reaps it once it
        exited and keeps its exit code."""
        child = self._children.get(pid) if pid else None
        if child is None:
            return is_alive(pid, marker)
        if child.poll() is None:
            return True
        self.exit_codes[child.pid] = child.returncode
        del self._children[child.pid]
        return False

    def running(self) -> list[int]:
        return [n for n in sorted(self.nodes) if self.is_running(n)]

    def start_node(self, node_id: int, *, log_level: str = "INFO",
                   interpreter_args: Sequence[str] = ()) -> int:
        """Start `kraft node` for `node_id`; `interpreter_args` go to Python before the
        module (a profiler: `-m cProfile -o FILE`)."""
        info = self.node(node_id)
        if self.is_running(node_id):
            raise ClusterError(f"node {node_id} is already running (pid {info.pid})")
        if not interpreter_args and not info.is_voter:
            interpreter_args = self.broker_interpreter_args
        command = [sys.executable, *interpreter_args, "-m", "tools.cli", "--log-format",
                   "json", "--log-level", log_level, "node", "--config", info.config]
        with open(info.log_path, "ab") as out:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=out, start_new_session=True, cwd=info.dir)
        info.pid = process.pid
        self._children[process.pid] = process
        self.started_pids.append(process.pid)
        (Path(info.dir) / "node.pid").write_text(f"{process.pid}\n")
        self.save()
        return process.pid

    def start(self) -> None:
        """Start every node; ClusterError, with none started, when one already runs or
        another process holds a node's port."""
        running = self.running()
        if running:
            raise ClusterError(f"the cluster in {self.directory} is already running "
                               f"(nodes {', '.join(map(str, running))})")
        _refuse_busy({_port(a): f"node {n.id}" for n in self.nodes.values()
                      for a in (n.controller_address, n.client_address, n.status_address)
                      if a})
        for node_id in sorted(self.nodes):
            self.start_node(node_id)

    def raise_if_a_node_died(self) -> None:
        """NodeDied, with the node's exit code and last error line, when a node this
        object started (and did not stop) has exited."""
        for info in sorted(self.nodes.values(), key=lambda n: n.id):
            if info.pid in self._children and not self._is_alive(info.pid):
                error = last_error_line(info.log_text())
                raise NodeDied(f"node {info.id} exited with code "
                               f"{self.exit_codes[info.pid]}: "
                               f"{error or 'no error line'} (log: {info.log_path})")

    def send_signal(self, node_id: int, signum: int) -> None:
        info = self.node(node_id)
        if not self.is_running(node_id):
            raise ClusterError(f"node {node_id} is not running")
        assert info.pid is not None
        os.kill(info.pid, signum)

    def wait_exit(self, node_id: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.is_running(node_id):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def kill(self, node_id: int, signum: int = signal.SIGKILL, timeout_s: float = 5.0) -> None:
        """Send `signum`; for KILL and TERM, wait (bounded) until the process is gone."""
        self.send_signal(node_id, signum)
        if signum in (signal.SIGKILL, signal.SIGTERM) and not self.wait_exit(node_id,
                                                                                timeout_s):
            raise ClusterError(f"node {node_id} did not exit within {timeout_s} s")
        if signum in (signal.SIGKILL, signal.SIGTERM):
            self._forget_pid(node_id)

    def _forget_pid(self, node_id: int) -> None:
        info = self.node(node_id)
        info.pid = None
        (Path(info.dir) / "node.pid").unlink(missing_ok=True)
        self.save()

    def stop_node(self, node_id: int, timeout_s: float = 10.0) -> bool:
        """SIGTERM (after SIGCONT, in case it is stopped), then SIGKILL if it lingers.
        Returns True when it exited on SIGTERM."""
        info = self.node(node_id)
        if not self.is_running(node_id):
            self._forget_pid(node_id)
            return True
        assert info.pid is not None
        os.kill(info.pid, signal.SIGCONT)
        os.kill(info.pid, signal.SIGTERM)
        graceful = self.wait_exit(node_id, timeout_s)
        if not graceful:
            os.kill(info.pid, signal.SIGKILL)
            self.wait_exit(node_id, 5.0)
        self._forget_pid(node_id)
        return graceful

    def stop(self, timeout_s: float = 10.0) -> list[int]:
        """Stop every node: brokers first, while the quorum can still commit their
        controlled shutdowns, then the voters, the leader last, so the others do not start
        elections while going down. Returns the ids that needed SIGKILL."""
        try:
            leader = describe_quorum(self.controller_addresses(), timeout_s=1.0,
                                     cluster_id=self.cluster_id,
                                     ssl_context=self.client_ssl)["leader_id"]
        except ClusterError:
            leader = None
        order = sorted(self.nodes, key=lambda n: (self.nodes[n].is_voter, n == leader, n))
        return [n for n in order if not self.stop_node(n, timeout_s)]

    def restart(self, node_id: int, timeout_s: float = 10.0) -> int:
        self.stop_node(node_id, timeout_s)
        return self.start_node(node_id)

    def shut_down(self, timeout_s: float = 10.0) -> None:
        """`stop` every node, then SIGKILL whatever this object started that still runs
        (also when stopping failed): no node outlives the caller."""
        try:
            self.stop(timeout_s)
        finally:
            self.kill_all_started()

    def kill_all_started(self) -> None:
        """SIGKILL every process this object started (test clean-up, by pid)."""
        for pid in self.started_pids:
            if self._is_alive(pid):
                try:
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            child = self._children.pop(pid, None)
            if child is not None:
                self.exit_codes[pid] = child.wait(5)

    # -- requests --------------------------------------------------------------------

    def describe(self, exclude: Iterable[int] = (), timeout_s: float = 2.0) -> dict[str, Any]:
        skip = set(exclude)
        return describe_quorum(self.controller_addresses(skip), timeout_s=timeout_s,
                               avoid=self._addresses_of(skip), cluster_id=self.cluster_id,
                               ssl_context=self.client_ssl)

    def _addresses_of(self, node_ids: Iterable[int]) -> set[str]:
        return {a for n in node_ids if (a := self.node(n).controller_address)}

    def wait_for_leader(self, timeout_s: float = 20.0, *, above_epoch: int = 0,
                        exclude: Iterable[int] = (), watch: bool = False) -> dict[str, Any]:
        """Poll DescribeQuorum (bounded) until a leader in an epoch > `above_epoch`, not
        in `exclude`, answers; returns the description. `watch`: NodeDied as soon as a
        node this object started has exited."""
        skip = set(exclude)
        deadline = time.monotonic() + timeout_s
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            if watch:
                self.raise_if_a_node_died()
            try:
                state = self.describe(exclude=skip, timeout_s=0.5)
                if state["leader_epoch"] > above_epoch and state["leader_id"] not in skip \
                        and state["leader_id"] >= 0:
                    return state
                last_error = f"leader {state['leader_id']} epoch {state['leader_epoch']}"
            except ClusterError as exc:
                last_error = str(exc)
            time.sleep(0.05)
        raise ClusterError(f"no leader within {timeout_s} s ({last_error})")

    def broker_status(self, node_id: int, timeout_s: float = 1.0) -> dict[str, Any] | None:
        """A broker's BrokerStatus (applied offset, image hash, fenced, ...), or None while
        it does not answer."""
        address = self.node(node_id).status_address
        if address is None:
            raise ClusterError(f"node {node_id} is not a broker")
        try:
            body = request(address, "BrokerStatus", {}, cluster_id=self.cluster_id,
                           timeout_s=timeout_s, ssl_context=self.client_ssl)
        except ClusterError:
            return None
        return body if isinstance(body, dict) and body.get("error_code") == 0 else None

    def wait_for_brokers(self, timeout_s: float = 30.0, *, watch: bool = False) -> list[int]:
        """Poll (bounded) until every broker is registered and unfenced; returns their ids.
        Until then a create with replication factor > 0 unfenced brokers is refused.
        `watch`: as `wait_for_leader`'s."""
        brokers = [n for n, info in self.nodes.items() if not info.is_voter]
        deadline = time.monotonic() + timeout_s
        pending = list(brokers)
        while pending:
            if watch:
                self.raise_if_a_node_died()
            pending = [n for n in pending
                       if not ((s := self.broker_status(n)) and not s.get("is_fenced", True))]
            if pending and time.monotonic() > deadline:
                raise ClusterError(f"brokers {pending} not unfenced within {timeout_s} s")
            if pending:
                time.sleep(0.05)
        return brokers

    def append(self, count: int, batch: int = 1, *, exclude: Iterable[int] = (),
               timeout_s: float = 30.0, in_flight: int = 64) -> dict[str, Any]:
        """Append `count` NoOp records through the leader; returns once committed
        (see `append_records`)."""
        skip = set(exclude)
        return append_records(self.controller_addresses(skip), count, batch,
                              cluster_id=self.cluster_id, timeout_s=timeout_s,
                              in_flight=in_flight, avoid=self._addresses_of(skip),
                              ssl_context=self.client_ssl)
