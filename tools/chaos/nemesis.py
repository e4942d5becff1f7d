"""The nemesis: a seeded schedule of process faults, applied to a local cluster.

The schedule is a pure function of (seed, duration, faults, node ids): a list of
`Fault`s, one at a time, each healed before the next starts, so a 3-voter quorum keeps
a majority between faults and every fault is healed at the end. Kinds:
- kill:   SIGKILL a node, then start it again after `hold_s`;
- pause:  SIGSTOP a node, SIGCONT it after `hold_s`;
- leader: the same against whichever voter leads when the fault starts (kill or pause,
          chosen by the schedule);
- partition: cut a node's links to and from the voters and, for a broker, the other
          brokers (partition replication); or, one-way, only its links to them; through
          the proxies of tools/chaos/proxy.py, until `hold_s`;
- slow-net:  delay every chunk on all of a node's links by `amount` ms (jitter: a
          quarter of it), through the proxies;
- lossy-net: lose each chunk on all of a node's links with probability `amount` (the
          proxy retransmits after a stall, as TCP would: late, never missing);
- slow-disk: every fsync of a node sleeps `amount` ms first;
- clock:  a node's clock runs at rate `amount` (e.g. 0.9 or 1.1) against real time;
- wipe:   SIGKILL a broker, delete its metadata log directory (`__cluster_metadata-0`:
          segments, snapshots, log start, high-watermark checkpoint; its partition data
          and meta.properties stay), and start it again after `hold_s`: it must catch up
          from the leader, by FetchSnapshot once the leader's log no longer starts at 0
          (with snapshots on, `kraft chaos` has the wipe wait up to WIPE_WAIT_S for
          every voter's log start to pass 0, so it does).
          Brokers only: a voter that forgot its log and vote while keeping its replica
          key could break the quorum's guarantees, which is outside the fault model (a
          voter catches up by FetchSnapshot when a kill, pause or partition leaves it
          behind the leader's log start; a voter's lost disk is `wipe-voter`, which gives
          it a new key).
- wipe-voter: (a dynamic quorum only, `kraft chaos --dynamic`) SIGKILL a voter (the
          leader when the schedule says so), delete its whole data directory and format it
          anew (a new directory id, no initial controllers: `kraft format
          --no-initial-controllers`); after `hold_s` start it (an observer under its new
          replica key), remove its old key and add the new one as `kraft quorum
          remove-controller` / `add-controller` do (tools/voter_changes.py),
          asking again while the leader answers REQUEST_TIMED_OUT, for at most
          REPLACE_TIMEOUT_S. Healed: the voter set is whole again, with the new key. Faults
          run one at a time, so no second voter is wiped before the replacement ended, and
          none is wiped unless the leader's voter set is whole (tools/chaos/voter_set.py):
          a majority of the voters always keeps its disk.
Every fault, once healed (or given up), is appended to the run's fault log when the
nemesis has one (`kraft chaos` writes DIR/faults.jsonl: FAULT_LOG_FILE), one JSON object a
line (`Injected.log_line`): kind, target (the node id it hit; null when no leader was
found), leader (aimed at the leader), amount, start_ms and end_ms (wall-clock ms since the
epoch; end_ms null when it was never healed) and error, which `kraft replay --faults`
lays beside the metadata log's times (docs/replay.md).
The slow-disk and clock faults go through the node's test-only fault file
(raft/fault_injection.py, the `fault.injection.file` key, which the chaos launcher sets
to FAULT_FILE in every node's directory): written atomically to inject, removed to heal.
Only processes the cluster object started are signalled (by their recorded pid).
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from raft.common.uuid import Uuid
from raft.control_records import Endpoint
from raft.fault_injection import clear_fault_file, write_fault_file
from raft.log import METADATA_PARTITION_DIR
from raft.storage import StorageError, format_log_dir, read_log_start
from tools.chaos.proxy import ProxyNet
from tools.chaos.voter_set import (
    ADD,
    DONE,
    REMOVE,
    replacement_step,
    voter_keys,
    voter_set_problems,
)
from tools.cluster import Cluster, ClusterError
from tools.errors import CommandError
from tools.voter_changes import add_voter, directory_id_of, remove_voter

log = logging.getLogger(__name__)

KINDS = ("kill", "pause", "leader", "partition", "slow-disk", "clock", "slow-net",
         "lossy-net", "wipe", "wipe-voter")
DYNAMIC_KINDS = frozenset({"wipe-voter"})  # they need a dynamic quorum (KIP-853)
# a wiped voter's replacement (start, remove the old key, add the new one) gives up after
# this long: the new observer must catch up with the leader first, by FetchSnapshot
REPLACE_TIMEOUT_S = 90.0
_REPLACE_REQUEST_S = 10.0  # one remove or add, retried while REQUEST_TIMED_OUT
_REPLACE_POLL_S = 0.2
_WHOLE_WAIT_S = 10.0  # before a wipe: a leader elected, a voter set whole
NET_KINDS = frozenset({"partition", "slow-net", "lossy-net"})  # they need the proxies
FAULT_FILE = "fault-injection.json"  # in each node's directory (next to node.toml)
FAULT_LOG_FILE = "faults.jsonl"  # the run's faults on the wall clock, for kraft replay
FSYNC_DELAYS_MS = (20, 100, 300)
CLOCK_RATES = (0.5, 0.9, 1.1, 1.5)
NET_DELAYS_MS = (50, 150, 400)
NET_LOSS_RATES = (0.05, 0.2, 0.5)
AMOUNTS = {"slow-disk": FSYNC_DELAYS_MS, "clock": CLOCK_RATES, "slow-net": NET_DELAYS_MS,
           "lossy-net": NET_LOSS_RATES}
LEADER = -1  # target: the leader when the fault starts


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    at_s: float  # seconds after the start of the schedule
    # kill | pause | partition | partition-one-way | slow-disk | clock | slow-net |
    # lossy-net | wipe | wipe-voter
    kind: str
    target: int  # a node id, or LEADER
    hold_s: float  # how long before it is healed
    # slow-disk: fsync delay (ms); clock: rate; slow-net: delay (ms); lossy-net: loss
    amount: float | None = None

    def describe(self) -> str:
        who = "the leader" if self.target == LEADER else f"node {self.target}"
        amount = "" if self.amount is None else f" ({self.amount:g})"
        return f"{self.kind}{amount} {who} for {self.hold_s:.1f} s at +{self.at_s:.1f} s"


@dataclass(frozen=True, slots=True, kw_only=True)
class Injected:
    """A fault as it happened."""

    kind: str
    target: int
    node_id: int | None  # resolved target (None: no leader was found)
    start_s: float
    healed_s: float | None
    error: str | None = None
    amount: float | None = None
    start_ms: int | None = None  # wall clock (ms since the epoch), for the fault log
    end_ms: int | None = None  # healed, on the wall clock (None: never healed)

    def log_line(self) -> dict[str, object]:
        """The fault log's line (the module docstring)."""
        return {"kind": self.kind, "target": self.node_id, "leader": self.target == LEADER,
                "amount": self.amount, "start_ms": self.start_ms, "end_ms": self.end_ms,
                "error": self.error}

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "target": "leader" if self.target == LEADER else self.target,
                "node": self.node_id, "amount": self.amount,
                "start_s": round(self.start_s, 3),
                "healed_s": None if self.healed_s is None else round(self.healed_s, 3),
                "error": self.error}


def wall_ms() -> int:
    """Now on the wall clock, in ms since the epoch (the metadata log's batch times)."""
    return time.time_ns() // 1_000_000


def _check_kinds(faults: Sequence[str], *, broker_ids: Sequence[int],
                 voter_ids: Sequence[int], dynamic: bool) -> None:
    """ValueError for a fault kind this cluster cannot take."""
    unknown = set(faults) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown fault kinds {sorted(unknown)} (known: {', '.join(KINDS)})")
    if "wipe" in faults and not broker_ids:
        raise ValueError("wipe faults need brokers to target (a voter is never wiped)")
    if DYNAMIC_KINDS & set(faults) and not dynamic:
        raise ValueError("wipe-voter faults need a dynamic quorum (--dynamic)")
    if "wipe-voter" in faults and not voter_ids:
        raise ValueError("wipe-voter faults need voters to target")


def schedule(seed: int, duration_s: float, faults: Sequence[str], node_ids: Sequence[int],
             *, hold_s: tuple[float, float] = (1.0, 4.0),
             gap_s: tuple[float, float] = (1.0, 3.0),
             broker_ids: Sequence[int] = (), voter_ids: Sequence[int] = (),
             dynamic: bool = False) -> list[Fault]:
    """The faults of one run; the last one is healed before `duration_s`. `wipe` faults
    target `broker_ids` only (needed when `wipe` is asked for); `wipe-voter` faults need
    `dynamic` and target one of `voter_ids` or, one time in three, the leader."""
    _check_kinds(faults, broker_ids=broker_ids, voter_ids=voter_ids, dynamic=dynamic)
    if not faults:
        return []
    rng = random.Random(seed)
    out: list[Fault] = []
    now = rng.uniform(*gap_s)
    while True:
        kind = rng.choice(sorted(faults))
        hold = rng.uniform(*hold_s)
        if now + hold > duration_s:
            return out
        if kind == "partition":
            out.append(Fault(at_s=now, kind=rng.choice(("partition", "partition-one-way")),
                             target=rng.choice(list(node_ids)), hold_s=hold))
        elif kind in AMOUNTS:
            amount = rng.choice(AMOUNTS[kind])
            out.append(Fault(at_s=now, kind=kind, target=rng.choice(list(node_ids)),
                             hold_s=hold, amount=amount))
        elif kind == "leader":
            out.append(Fault(at_s=now, kind=rng.choice(("kill", "pause")), target=LEADER,
                             hold_s=hold))
        elif kind == "wipe":
            out.append(Fault(at_s=now, kind=kind, target=rng.choice(list(broker_ids)),
                             hold_s=hold))
        elif kind == "wipe-voter":
            target = LEADER if rng.random() < 1 / 3 else rng.choice(list(voter_ids))
            out.append(Fault(at_s=now, kind=kind, target=target, hold_s=hold))
        else:
            out.append(Fault(at_s=now, kind=kind, target=rng.choice(list(node_ids)),
                             hold_s=hold))
        now += hold + rng.uniform(*gap_s)


# how long a fault aimed at the leader waits for one to be known before it is logged
# with the error "no leader"
LEADER_WAIT_S = 10.0
# how long a wipe waits, when the nodes snapshot, for every voter's log to start above 0
WIPE_WAIT_S = 20.0


class Nemesis:
    """Runs a schedule in a thread; `stop()` heals at once and ends it."""

    def __init__(self, cluster: Cluster, faults: Sequence[Fault], net: ProxyNet | None = None,
                 *, fault_log: Path | None = None,
                 leader_wait_s: float = LEADER_WAIT_S, wipe_wait_s: float = 0.0) -> None:
        self.cluster = cluster
        self.leader_wait_s = leader_wait_s
        self.wipe_wait_s = wipe_wait_s
        self.fault_log = fault_log
        self.net = net
        self.faults = list(faults)
        self.injected: list[Injected] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._start = 0.0
        # wipe-voter: node id -> (old directory id, new one) until the new key is a voter
        self.replacing: dict[int, tuple[str, str]] = {}
        self.final_errors: list[str] = []  # from heal_all (a replacement it could not end)

    def start(self) -> None:
        self._start = time.monotonic()
        self._thread.start()

    def stop(self, timeout_s: float = 30.0 + REPLACE_TIMEOUT_S) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # a run stopped before the faults began has none
            self._thread.join(timeout_s)

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _elapsed(self) -> float:
        return time.monotonic() - self._start

    def _run(self) -> None:
        for fault in self.faults:
            if self._stop.wait(max(0.0, fault.at_s - self._elapsed())):
                return
            injected = self._apply(fault)
            self.injected.append(injected)
            if self.fault_log is not None:
                with self.fault_log.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(injected.log_line()) + "\n")

    def _apply(self, fault: Fault) -> Injected:
        start, start_ms = self._elapsed(), wall_ms()
        try:
            node_id = self._resolve(fault.target)
        except ClusterError as exc:
            return Injected(kind=fault.kind, target=fault.target, node_id=None, start_s=start,
                            healed_s=None, error=f"no leader: {exc}", start_ms=start_ms)
        log.warning("fault", extra={"fault": fault.kind, "node": node_id})
        error = None
        try:
            self._inject(node_id, fault)
        except (ClusterError, OSError) as exc:
            error = str(exc)
        self._stop.wait(fault.hold_s)  # a stop request heals early
        try:
            self._heal(node_id, fault.kind)
        except (ClusterError, OSError) as exc:
            error = f"{error}; heal: {exc}" if error else f"heal: {exc}"
            return Injected(kind=fault.kind, target=fault.target, node_id=node_id,
                            start_s=start, healed_s=None, error=error, amount=fault.amount,
                            start_ms=start_ms)
        return Injected(kind=fault.kind, target=fault.target, node_id=node_id, start_s=start,
                        healed_s=self._elapsed(), error=error, amount=fault.amount,
                        start_ms=start_ms, end_ms=wall_ms())

    def _inject(self, node_id: int, fault: Fault) -> None:
        if fault.kind.startswith("partition"):
            if self.net is None:
                raise ClusterError("partition faults need the proxies (ProxyNet)")
            self.net.partition(node_id, one_way=fault.kind == "partition-one-way")
        elif fault.kind in ("slow-net", "lossy-net"):
            if self.net is None:
                raise ClusterError(f"{fault.kind} faults need the proxies (ProxyNet)")
            amount = fault.amount or 0.0
            if fault.kind == "slow-net":
                self.net.degrade(node_id, delay_ms=amount, jitter_ms=amount / 4)
            else:
                self.net.degrade(node_id, loss=amount)
        elif fault.kind == "kill":
            self.cluster.kill(node_id, signal.SIGKILL)
        elif fault.kind == "wipe":
            self.wipe(node_id)
        elif fault.kind == "wipe-voter":
            self.wipe_voter(node_id)
        elif fault.kind == "slow-disk":
            write_fault_file(self.fault_file(node_id), fsync_delay_ms=int(fault.amount or 0))
        elif fault.kind == "clock":
            write_fault_file(self.fault_file(node_id), clock_rate=fault.amount or 1.0)
        else:
            self.cluster.send_signal(node_id, signal.SIGSTOP)

    def _resolve(self, target: int) -> int:
        """The node a fault hits. One aimed at the leader waits, up to `leader_wait_s`
        (a stop request ends the wait), for a leader to be known: an election after the
        previous fault may still run, and on a loaded host one takes seconds."""
        if target != LEADER:
            return target
        deadline = time.monotonic() + self.leader_wait_s
        while True:
            try:
                leader = self.cluster.describe(timeout_s=3.0)["leader_id"]
            except ClusterError:
                if time.monotonic() >= deadline or self._stop.is_set():
                    raise
                leader = -1
            if leader >= 0:
                return int(leader)
            if time.monotonic() >= deadline or self._stop.wait(0.1):
                raise ClusterError("no leader known")

    def wipe(self, node_id: int) -> None:
        """SIGKILL a broker and delete its metadata log directory (it is started again
        when the fault heals)."""
        info = self.cluster.node(node_id)
        if info.is_voter:
            raise ClusterError(f"node {node_id} is a voter; only brokers are wiped")
        self._wait_for_voters_log_starts()
        if self.cluster.is_running(node_id):
            self.cluster.kill(node_id, signal.SIGKILL)
        metadata = Path(info.data_dir) / METADATA_PARTITION_DIR
        if metadata.exists():
            shutil.rmtree(metadata)

    def _wait_for_voters_log_starts(self) -> None:
        """Up to `wipe_wait_s` (or until the run stops), until every voter's metadata log
        starts above 0: whichever leads then, a wiped broker can only catch up by
        FetchSnapshot, which is what the fault is for. Each voter moves its own log start
        after its own snapshots, so on a slow host the first advances come late."""
        deadline = time.monotonic() + self.wipe_wait_s
        while time.monotonic() < deadline and not all(
                self._log_start(n) > 0 for n in self.cluster.voter_ids):
            if self._stop.wait(_REPLACE_POLL_S):
                return

    def _log_start(self, node_id: int) -> int:
        try:
            return read_log_start(Path(self.cluster.node(node_id).data_dir)
                                  / METADATA_PARTITION_DIR)[0]
        except StorageError:  # the checker reads it again at the end, and says so
            return 0

    def wipe_voter(self, node_id: int) -> None:
        """SIGKILL a voter, delete its data directory and format it anew (a new directory
        id, no bootstrap voters); refused unless the leader's voter set is whole, so a
        majority of the voters keeps its disk. Started and replaced when healed."""
        info = self.cluster.node(node_id)
        if not info.is_voter:
            raise ClusterError(f"node {node_id} is not a voter")
        deadline = time.monotonic() + _WHOLE_WAIT_S
        while problems := self._problems_or_no_leader():
            if time.monotonic() >= deadline:
                raise ClusterError(f"node {node_id} not wiped: the voter set is not whole "
                                   f"({'; '.join(problems)})")
            time.sleep(_REPLACE_POLL_S)
        old = directory_id_of(info.data_dir)
        if old is None:
            raise ClusterError(f"node {node_id}: no directory.id (not a dynamic quorum)")
        if self.cluster.is_running(node_id):
            self.cluster.kill(node_id, signal.SIGKILL)
        shutil.rmtree(info.data_dir)
        format_log_dir(info.data_dir, cluster_id=self.cluster.cluster_id, node_id=node_id)
        new = directory_id_of(info.data_dir)
        assert new is not None  # format_log_dir writes one
        assert new != old  # a new one on every format
        self.replacing[node_id] = (old, new)
        log.warning("voter wiped", extra={"node": node_id, "old_directory": old,
                                          "new_directory": new})

    def voter_set_problems(self) -> list[str]:
        """How the leader's voter set differs from every voter once, with the directory
        id on its disk now (ClusterError: no leader answered)."""
        expected = {n: directory_id_of(self.cluster.node(n).data_dir)
                    for n in self.cluster.voter_ids}
        voters = voter_keys(self.cluster.describe(timeout_s=2.0)["voters"])
        return voter_set_problems(voters, expected)

    def _problems_or_no_leader(self) -> list[str]:
        try:
            return self.voter_set_problems()
        except ClusterError as exc:
            return [f"no leader answered DescribeQuorum: {exc}"]

    def replace_voter(self, node_id: int, timeout_s: float = REPLACE_TIMEOUT_S) -> None:
        """Remove a wiped voter's old key and add its new one, as `kraft quorum
        remove-controller` and `add-controller` do, each step chosen from the leader's
        voter set of now (an answer lost on the way may hide a change that was made);
        ClusterError after `timeout_s`."""
        old, new = self.replacing[node_id]
        info = self.cluster.node(node_id)
        host, _, port = str(info.controller_address).rpartition(":")
        endpoint = Endpoint(name="CONTROLLER", host=host, port=int(port))
        cluster_id = self.cluster.cluster_id
        ssl_context = self.cluster.client_ssl
        deadline = time.monotonic() + timeout_s
        last = "not tried"
        while True:
            try:
                voters = voter_keys(self.cluster.describe(timeout_s=2.0)["voters"])
                step = replacement_step(voters, node_id, old, new)
                addresses = self.cluster.controller_addresses()
                request_s = max(1.0, min(_REPLACE_REQUEST_S, deadline - time.monotonic()))
                if step == DONE:
                    del self.replacing[node_id]
                    log.warning("voter replaced", extra={"node": node_id,
                                                         "new_directory": new})
                    return
                if step == REMOVE:
                    remove_voter(addresses, cluster_id=cluster_id, node_id=node_id,
                                 directory_id=Uuid.from_string(old), timeout_s=request_s,
                                 ssl_context=ssl_context)
                elif step == ADD:
                    add_voter(addresses, cluster_id=cluster_id, node_id=node_id,
                              directory_id=Uuid.from_string(new), endpoint=endpoint,
                              timeout_s=request_s, ssl_context=ssl_context)
                else:
                    last = f"node {node_id} is a voter under neither {old} nor {new}"
            except (ClusterError, CommandError) as exc:
                last = str(exc)
            if time.monotonic() >= deadline:
                raise ClusterError(f"node {node_id}'s replacement ({old} -> {new}) not done "
                                   f"within {timeout_s:g} s: {last}")
            time.sleep(_REPLACE_POLL_S)

    def fault_file(self, node_id: int) -> Path:
        return Path(self.cluster.node(node_id).dir) / FAULT_FILE

    def _heal(self, node_id: int, kind: str) -> None:
        if kind in ("slow-disk", "clock"):
            clear_fault_file(self.fault_file(node_id))
        elif kind.startswith("partition") or kind in ("slow-net", "lossy-net"):
            if self.net is not None:
                self.net.heal()
        elif kind in ("kill", "wipe"):
            if not self.cluster.is_running(node_id):
                self.cluster.start_node(node_id)
        elif kind == "wipe-voter":
            if not self.cluster.is_running(node_id):
                self.cluster.start_node(node_id)
            if node_id in self.replacing:
                self.replace_voter(node_id)
        elif self.cluster.is_running(node_id):
            self.cluster.send_signal(node_id, signal.SIGCONT)

    def heal_all(self) -> None:
        """Every node runs and none is stopped (idempotent; used at the end whatever
        happened)."""
        if self.net is not None:
            self.net.heal()
        for node_id in sorted(self.cluster.nodes):
            clear_fault_file(self.fault_file(node_id))
            if self.cluster.is_running(node_id):
                self.cluster.send_signal(node_id, signal.SIGCONT)
            else:
                self.cluster.start_node(node_id)
        for node_id in sorted(self.replacing):  # a replacement its heal could not end
            try:
                self.replace_voter(node_id)
            except ClusterError as exc:
                self.final_errors.append(str(exc))
