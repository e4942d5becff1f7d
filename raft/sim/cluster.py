"""A simulated cluster running the real `RaftCore`: one heap of `(time, seq, event)`,
one seeded `Random` from which every node's `Random`, the network and the disks are
seeded, and the safety invariants checked after every event.

Each node is driven as the Trio shell drives it (see `raft.types`): after an event,
`ready()`; send the early messages (the leader's fetch answers); persist the election
state and flush the log (taking a simulated fsync, during which the node handles nothing
else: later events wait in its inbox; a crash meanwhile loses the unflushed records the
early messages carried); only then send the messages, record the high watermark and
`advance()`. Each node's clock runs at its own
rate (a few parts in a hundred off), so timers drift apart. Its wall clock may also
jump (`SimNode.wall_clock_ms`, the `clock-jump` fault); as in `RaftNode.now_ms`, the
core's milliseconds are monotonic time plus the wall clock's offset read at start, so a
jump shows from the node's next start on.

Each node also runs a tiny state machine over what it commits and snapshots it (see
`raft.sim.snapshots`): it writes a snapshot of its applied records every few committed
records and moves its log start there, so laggards, restarted nodes and observers whose
disk was wiped catch up by FetchSnapshot; a loaded snapshot (`Ready.loaded_snapshot`)
replaces the applied state, a restart rebuilds it from the snapshot at the log start.

Connections are modelled as far as the shell reports them to the core (see
`raft.transport`): when a voter crashes, every running node its closing connection
reaches gets "connection lost" (`RaftCore.peer_disconnected`), then "refused"
(`peer_unreachable`) at each reconnect attempt, with the transport's backoff, until the
voter runs again; a node that starts while a voter is down gets "refused" likewise. A
paused or partitioned node refuses nothing, so its peers hear nothing of it.
`reset_connection` is a connection lost (or refused by mistake) while both ends live.

With `dynamic` (kraft.version 1, KIP-853) every node has a directory id, the voters
start from a bootstrap voter set (the other nodes know none: formatted without
initial controllers), a wiped node comes back with a new directory id and no bootstrap,
and `reconfigure` hands AddRaftVoter / RemoveRaftVoter requests to the leader as a tool
would (`raft.sim.faults` draws them). After each event the cluster checks the voter
changes a leader appended (`Checker.on_voters_appended`), and a vote granted by a
replica whose directory id is not the one the VoteRequest named is a violation.

The cluster also counts how deep a run went: elections (epochs that had a leader, from
the checker), divergences (see `Divergences`), snapshots taken and snapshot fetches
completed; and how long each failover after a leader's crash took (`failovers_ms`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import random
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from raft.common.uuid import Uuid
from raft.control_records import Endpoint, VotersRecord
from raft.messages import (
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    VoteRequest,
    VoteResponse,
)
from raft.sim.disk import DiskConfig, RemovedTail, SimDisk
from raft.sim.disk_steps import CrashPoint
from raft.sim.invariants import Checker, Entry, entries_of, entry_of
from raft.sim.network import Network, NetworkConfig
from raft.sim.snapshots import (
    SNAPSHOT_CHUNK_BYTES,
    SnapshotConfig,
    SnapshotPolicy,
    StateMachine,
)
from raft.sim.trace import Trace
from raft.storage import StorageError
from raft.types import Envelope, Ready, SnapshotId
from raft.voters import ReplicaKey, Voter, VoterSet, voters_change_of

DELIVER, TICK, IO, PROPOSE, CALL, TRIM, PEER = range(7)
# Correlation ids per incarnation of a node, more than one ever sends: the replies its
# last incarnation's requests still get match none of the next one's, as a real
# node's drawn first id makes likely (raft/node.py).
INCARNATION_IDS = 1 << 24


def listeners_of(node_id: int, incarnation: int) -> tuple[Endpoint, ...]:
    """A dynamic run's node serves on another port after each restart (an ephemeral
    one): it has its voter entry updated (UpdateRaftVoter, KIP-853)."""
    return (Endpoint(name="CONTROLLER", host="127.0.0.1",
                     port=9000 + 100 * incarnation + node_id),)


CLUSTER_ID = "sim-cluster-000000000A"
_RATE_ONE = 1_000_000  # clock rate unit: parts per million
# The transport's reconnect backoff (raft/transport.py): from 50 ms doubling to 1 s, each
# wait drawn in [half, all] of that; a connect to a cut-off node hangs for its timeout.
RECONNECT_BACKOFF_MS = (50.0, 1000.0)
CONNECT_TIMEOUT_MS = 1000.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SimConfig:
    voters: int = 3
    observers: int = 0
    seed: int = 0
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    fetch_max_wait_ms: int = 500
    observer_fetch_timeout_ms: int | None = None  # None: fetch_timeout_ms
    fetch_max_bytes: int | None = None  # None: drawn from the seed (1 batch ... 1 MiB)
    pre_vote: bool = True
    planted_bug: str | None = None
    max_drift_ppm: int = 20_000  # clocks run up to 2% fast or slow
    # A split-off leader still writes a tail of several batches before a successor is
    # elected (~2 s), at half the replication events of a record every 150 ms.
    propose_interval_ms: float = 300.0
    codec_roundtrip: bool = False  # pass every message through encode/decode
    skip_invariants: tuple[str, ...] = ()
    trace_size: int = 60
    network: NetworkConfig = field(default_factory=NetworkConfig)
    disk: DiskConfig = field(default_factory=DiskConfig)
    # Snapshots and FetchSnapshot (with the real core only: a `core_class` given to the
    # Cluster turns them off).
    snapshots: SnapshotConfig = field(default_factory=SnapshotConfig)
    # KIP-853: kraft.version 1, voters from the log, directory ids, reconfiguration
    # faults (raft.sim.faults). Off: today's static quorum, draw for draw.
    dynamic: bool = False
    add_voter_max_lag_records: int = 10
    # Static voters formatted with directory ids (kraft.version 0, as Kafka 3.9 formats
    # them without --standalone): upgradable to 1 by UpdateKRaftVersion.
    directory_ids: bool = False


@dataclass(slots=True)
class _Episode:
    """The truncations one node makes before it next appends records."""

    first_epoch: int
    last_epoch: int
    truncations: int = 0
    multi_epoch: bool = False


class Divergences:
    """Counts the run's divergences.

    A *divergence* is one node cutting a non-empty tail off its log: from its first such
    truncation until it next appends records (a Fetch that matched the leader's log), any
    further truncations belong to the same divergence. A divergence is *multi-epoch* when
    the records it removed were written in two or more epochs, or when it took two or
    more truncations (KIP-595 walks a follower back one epoch per Fetch round, so the
    tail the node held spanned epochs the leader never had).
    """

    def __init__(self) -> None:
        self.total = 0
        self.multi_epoch = 0
        self._open: dict[int, _Episode] = {}  # node id -> divergence not yet resolved

    def on_truncated(self, node_id: int, tails: Sequence[RemovedTail]) -> None:
        episode = self._open.get(node_id)
        for tail in tails:
            if episode is None:
                episode = self._open[node_id] = _Episode(tail.first_epoch, tail.last_epoch)
                self.total += 1
            episode.first_epoch = min(episode.first_epoch, tail.first_epoch)
            episode.last_epoch = max(episode.last_epoch, tail.last_epoch)
            episode.truncations += 1
            if not episode.multi_epoch and (episode.truncations > 1
                                            or episode.first_epoch != episode.last_epoch):
                episode.multi_epoch = True
                self.multi_epoch += 1

    def on_appended(self, node_id: int) -> None:
        self._open.pop(node_id, None)


class SimNode:
    """One node: its disk survives crashes; its core does not."""

    def __init__(self, node_id: int, is_voter: bool, disk: SimDisk, rate_ppm: int,
                 seed: int) -> None:
        self.node_id = node_id
        self.is_voter = is_voter
        self.disk = disk
        self.log: Any = disk.log  # the disk's log, until a wipe replaces it
        self.rate = rate_ppm
        self.core: Any = None
        self.busy = False  # waiting for its fsync
        self.writing: Ready | None = None  # what that fsync makes durable
        self.paused = False  # a stop-the-world pause (GC, SIGSTOP): events queue up
        self.inbox: deque[tuple[int, Any]] = deque()
        self.gen = 0  # bumped by a crash: stale IO and log-start-move events are ignored
        self.tick_gen = 0
        self.tick_at = -1
        self.incarnation = 0
        self.seeds = random.Random(seed)  # one core Random per incarnation
        self.last_state: tuple[str, int, int | None] = ("down", 0, None)
        self.state_machine = StateMachine()
        self.snapshot_policy: SnapshotPolicy | None = None  # set by the cluster
        self.directory_id: Uuid | None = None  # dynamic runs: a new one on each wipe
        self.bootstrapped = is_voter  # formatted with the initial controllers
        self.wall_clock_ms = 0  # how far the wall clock jumped, in all
        self.clock_base_ms = 0  # the offset the core's clock took at this start

    @property
    def up(self) -> bool:
        return self.core is not None

    @property
    def snapshots(self) -> Any:
        """The disk's snapshot store (a wipe replaces it)."""
        return self.disk.snapshots

    def local_ms(self, now_us: int) -> int:
        return now_us * self.rate // (1000 * _RATE_ONE) + self.clock_base_ms

    def global_us(self, local_ms: int) -> int:
        return -(-(local_ms - self.clock_base_ms) * 1000 * _RATE_ONE // self.rate)

    def read_wall_clock(self, now_us: int) -> None:
        """A start reads the wall clock's offset (never below the clock's zero)."""
        self.clock_base_ms = max(self.wall_clock_ms,
                                 -(now_us * self.rate // (1000 * _RATE_ONE)))


class Cluster:
    def __init__(self, config: SimConfig, *, core_class: Any = None,
                 core_config: Any = None) -> None:
        """`core_class`/`core_config` replace `RaftCore`/`RaftConfig` (the simulator's own
        tests run it against a toy core)."""
        self.config = config
        self.rng = random.Random(config.seed)
        self.voter_ids = tuple(range(1, config.voters + 1))
        self.observer_ids = tuple(range(config.voters + 1,
                                        config.voters + config.observers + 1))
        fetch_max_bytes = config.fetch_max_bytes or self.rng.choice((1, 512, 1 << 20))
        self.snapshots_on = config.snapshots.enabled and core_class is None
        self.network = Network(config.network, random.Random(self.rng.getrandbits(64)))
        self.checker = Checker(self.voter_ids, self.observer_ids,
                               skip=config.skip_invariants, dynamic=config.dynamic)
        self.trace = Trace(config.trace_size)
        self.snapshots_taken = 0
        self.snapshot_fetches = 0  # fetched snapshots loaded in place of a log
        self.snapshot_chunks = 0  # FetchSnapshot requests sent
        self.snapshot_resumes = 0  # of which resumed a download after a lost chunk
        self._last_chunk: dict[int, tuple[SnapshotId, int]] = {}
        self.snapshot_chunk_loss = 0.0  # FetchSnapshot answers lost (a fault sets it)
        self.now_us = 0
        self._heap: list[tuple[int, int, int, int, Any, int]] = []
        self._seq = 0
        self.events = 0
        self.faults = 0
        self.divergences = Divergences()
        self._on_elected: list[Callable[[SimNode], None]] = []
        self.workload_on = False
        self.proposals: list[tuple[int, int, int]] = []  # (time_us, epoch, last_offset)
        self._record_seq = 0
        self._codec = _load_codec() if config.codec_roundtrip else None
        self.nodes: dict[int, SimNode] = {}
        from raft.sim.planted import disk_config as planted_disk_config

        disk_config = planted_disk_config(config.planted_bug, config.disk)
        for node_id in self.voter_ids + self.observer_ids:
            disk = SimDisk(disk_config, random.Random(self.rng.getrandbits(64)),
                           self._persist_hook(node_id), self._snapshot_hook(node_id))
            drift = self.rng.randint(-config.max_drift_ppm, config.max_drift_ppm)
            self.nodes[node_id] = SimNode(node_id, node_id in self.voter_ids, disk,
                                          _RATE_ONE + drift, self.rng.getrandbits(64))
        self._workload_rng = random.Random(self.rng.getrandbits(64))
        self.fault_rng = random.Random(self.rng.getrandbits(64))
        # Drawn last, so the streams above are the same with snapshots on or off.
        snapshot_rng = random.Random(self.rng.getrandbits(64))
        # Dynamic runs only: directory ids, and the stream the requests' clients use.
        self.directory_rng = random.Random(config.seed ^ 0x853)
        self.client_rng = random.Random(config.seed ^ 0x8530)
        self._clients: dict[int, Callable[[Any], None]] = {}
        self._vote_keys: dict[tuple[int, int, int], Uuid | None] = {}
        self._next_client_cid = 1
        self.reconfigurations = 0  # voter changes answered NONE
        if config.dynamic or config.directory_ids:
            for node in self.nodes.values():
                node.directory_id = Uuid.random(self.directory_rng)
        chunk_bytes = (config.snapshots.fetch_snapshot_max_bytes
                       or snapshot_rng.choice(SNAPSHOT_CHUNK_BYTES))
        for node in self.nodes.values():
            node.snapshot_policy = SnapshotPolicy(config.snapshots,
                                                  random.Random(snapshot_rng.getrandbits(64)))
        self._chunk_rng = random.Random(snapshot_rng.getrandbits(64))
        self._connection_rng = random.Random(self.rng.getrandbits(64))
        # (time, node, peer, refused): what the shells reported to their cores
        self.peer_reports: list[tuple[int, int, int, bool]] = []
        self.failovers_ms: list[float] = []  # from a leader's crash to the next leader
        self.dead_for_good: set[int] = set()  # crashed at a partial heal: never started
        self.refusing: set[int] = set()  # found their quorum-state corrupt at a start
        self.fault_kinds: Counter[str] = Counter()  # faults injected, by kind
        self._crashed_leader: tuple[int, int] | None = None  # (time, epoch) of the crash
        if core_class is None:
            from raft.core import RaftConfig
            from raft.sim.planted import core_class as planted_core_class

            core_class = planted_core_class(config.planted_bug)
            core_config = RaftConfig(
                voters=self.voter_ids, election_timeout_ms=config.election_timeout_ms,
                fetch_timeout_ms=config.fetch_timeout_ms,
                fetch_max_wait_ms=config.fetch_max_wait_ms, fetch_max_bytes=fetch_max_bytes,
                pre_vote=config.pre_vote, fetch_snapshot_max_bytes=chunk_bytes)
        self.core_class = core_class
        self.raft_config = core_config
        self.observer_raft_config = core_config
        if config.observer_fetch_timeout_ms is not None and core_config is not None:
            self.observer_raft_config = dataclasses.replace(
                core_config, fetch_timeout_ms=config.observer_fetch_timeout_ms)
        if config.dynamic and core_config is not None:
            bootstrap = VoterSet(Voter(ReplicaKey(v, self.nodes[v].directory_id),
                                       listeners_of(v, 1)) for v in self.voter_ids)
            self.raft_config = dataclasses.replace(
                core_config, bootstrap_voters=bootstrap,
                add_voter_max_lag_records=config.add_voter_max_lag_records)
            # Formatted without initial controllers: it knows whom to ask, not who votes;
            # its bootstrap servers name every node, as any may become a voter.
            self.observer_raft_config = dataclasses.replace(
                self.observer_raft_config, bootstrap_voters=VoterSet(()),
                voters=tuple(sorted(self.nodes)),
                add_voter_max_lag_records=config.add_voter_max_lag_records)
        # Only a planted bug (raft.sim.planted) snapshots past what it applied.
        self._snapshot_point = getattr(core_class, "sim_snapshot_point", None)
        for node_id in self.nodes:
            self.start(node_id)

    # ---- the event loop ----------------------------------------------------------------

    def schedule(self, delay_us: int, kind: int, node_id: int = 0, payload: Any = None,
                 gen: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (self.now_us + delay_us, self._seq, kind, node_id,
                                    payload, gen))

    def at_ms(self, when_ms: float, action: Callable[[], None], label: str) -> None:
        """Run `action` (a fault, a heal, a restart...) at simulated time `when_ms`."""
        delay = max(0, int(when_ms * 1000) - self.now_us)
        self.schedule(delay, CALL, 0, (action, label))

    def step(self) -> bool:
        """Handle the next event; False when nothing is left."""
        while self._heap:
            time_us, _, kind, node_id, payload, gen = heapq.heappop(self._heap)
            self.now_us = time_us
            if kind in (TICK, IO, TRIM):  # a crash ends the incarnation that set them
                node = self.nodes[node_id]
                if gen != (node.tick_gen if kind == TICK else node.gen) or not node.up:
                    continue
            self.events += 1
            try:
                try:
                    self._dispatch(time_us, kind, node_id, payload)
                except CrashPoint as point:
                    self._crash_between_steps(point)
            except Exception as exc:  # a violation, or the core raised: keep the trace
                if getattr(exc, "sim_cluster", None) is None:
                    with contextlib.suppress(AttributeError):
                        exc.sim_cluster = self  # type: ignore[attr-defined]
                raise
            return True
        return False

    def _dispatch(self, time_us: int, kind: int, node_id: int, payload: Any) -> None:
        if kind == CALL:
            action, label = payload
            if label:
                self.trace.add(time_us, 0, "fault", label)
            action()
        elif kind == TRIM:
            self._handle(self.nodes[node_id], TRIM, payload)
        elif kind == DELIVER:
            self._deliver(payload)
        elif kind == IO:
            self._complete_io(self.nodes[node_id], payload)
        else:
            self._handle(self.nodes[node_id], kind, payload)

    def run_until(self, predicate: Callable[[], bool], timeout_ms: float) -> bool:
        """Step until `predicate()` holds (checked after each event) or time runs out."""
        deadline = self.now_us + int(timeout_ms * 1000)
        while not predicate():
            if not self._heap or self._heap[0][0] > deadline:
                self.now_us = max(self.now_us, deadline)
                return predicate()
            self.step()
        return True

    def run_for(self, duration_ms: float) -> None:
        self.run_until(lambda: False, duration_ms)

    def in_flight(self) -> list[Envelope]:
        """Messages sent and not yet delivered, in delivery order."""
        return [entry[4] for entry in sorted(self._heap) if entry[2] == DELIVER]

    def drop_in_flight(self, index: int) -> Envelope | None:
        """Lose one in-flight message (the `index`-th in delivery order, modulo)."""
        entries = [entry for entry in sorted(self._heap) if entry[2] == DELIVER]
        if not entries:
            return None
        victim = entries[index % len(entries)]
        self._heap.remove(victim)
        heapq.heapify(self._heap)
        self.trace.add(self.now_us, victim[3], "drop", victim[4])
        return victim[4]  # type: ignore[no-any-return]

    @property
    def now_ms(self) -> float:
        return self.now_us / 1000

    # ---- node life cycle --------------------------------------------------------------

    def start(self, node_id: int) -> None:
        """Start the node (not one left dead for good); one whose quorum-state is corrupt
        refuses to, every time (`refusing`)."""
        node = self.nodes[node_id]
        if node.up or node_id in self.dead_for_good:
            return
        try:
            election = node.disk.quorum_state.load()
        except StorageError as exc:
            self.refusing.add(node_id)
            self.trace.add(self.now_us, node_id, "refuses to start", str(exc))
            return
        node.incarnation += 1
        node.read_wall_clock(self.now_us)
        extra: dict[str, Any] = {"snapshots": node.disk.snapshots} if self.snapshots_on else {}
        if node.directory_id is not None:
            extra["directory_id"] = node.directory_id
        if self.config.dynamic:
            extra["listeners"] = listeners_of(node_id, node.incarnation)
        if self.snapshots_on:
            node.disk.start_at_newer_snapshot()
            self.checker.check_snapshot_at_log_start(node)
        voter_config = node.bootstrapped if self.config.dynamic else node.is_voter
        raft_config = self.raft_config if voter_config else self.observer_raft_config
        node.core = self.core_class(node_id=node_id, config=raft_config, log=node.disk.log,
                             election=election, cluster_id=CLUSTER_ID,
                             rng=random.Random(node.seeds.getrandbits(64)),
                             now_ms=node.local_ms(self.now_us),
                             first_correlation_id=1 + (node.incarnation - 1) * INCARNATION_IDS,
                             **extra)
        node.busy = node.paused = False
        node.tick_at = -1
        if node.incarnation > 1:
            self.checker.on_restart(node)
        if self.snapshots_on:
            self._rebuild_state_machine(node)
        self.trace.add(self.now_us, node_id, "start", node.incarnation)
        self._after_handle(node)
        for voter in self.voter_ids:
            if voter != node_id and not self.nodes[voter].up:
                self._reconnect_later(node_id, voter, 0)

    def crash(self, node_id: int, *, wipe: bool = False, tear: random.Random | None = None
              ) -> None:
        """Kill the node; its disk keeps only what was flushed (nothing if `wipe`). With
        `tear` the crash strikes between the steps of the write in progress, as the
        shell takes them: its quorum-state write is done, its log write torn (see
        `SimDisk.crash`); nothing it was to send has left."""
        node = self.nodes[node_id]
        if not node.up:
            return
        leader = self.leader()
        if leader is node and self._crashed_leader is None:
            self._crashed_leader = (self.now_us, node.core.epoch)
        writing = node.writing
        if tear is not None and writing is not None and writing.election is not None:
            node.disk.quorum_state.persist(writing.election)
        node.core = None
        node.writing = None
        node.gen += 1
        node.tick_gen += 1
        node.busy = node.paused = False
        node.inbox.clear()
        node.disk.crash(tear)
        if wipe:
            node.disk.wipe()
            node.log = node.disk.log
            if self.config.dynamic:  # formatted anew: another replica key, no bootstrap
                node.directory_id = Uuid.random(self.directory_rng)
                node.bootstrapped = False
            self.checker.on_restart(node, wiped=True)
            self.divergences.on_appended(node_id)  # nothing left to reconcile
        self.trace.add(self.now_us, node_id, "crash", "disk wiped" if wipe else "")
        if node.is_voter or self.config.dynamic:
            for other in self.running():
                if self.network.is_up(node_id, other.node_id):  # its FIN reaches them
                    self._report_peer(other.node_id, node_id, refused=False,
                                      delay_us=self.network.latency_us())
                    self._reconnect_later(other.node_id, node_id, 1)

    def _crash_between_steps(self, point: CrashPoint) -> None:
        """An armed crash struck inside a disk operation (`raft.sim.disk_steps`): the
        node dies there, nothing it was about to send has left."""
        node = next(n for n in self.nodes.values() if n.disk.steps is point.steps)
        self.trace.add(self.now_us, node.node_id, "crash between steps", str(point))
        self.crash(node.node_id)

    def reset_connection(self, node_id: int, peer: int, *, refused: bool = False) -> None:
        """Node `node_id`'s connection to voter `peer` is reset while both run (the
        reconnect succeeds); with `refused`, one reconnect is refused by mistake too."""
        self._report_peer(node_id, peer, refused=False, delay_us=0)
        if refused:
            self._report_peer(node_id, peer, refused=True,
                              delay_us=self._reconnect_delay_us(1))

    def _report_peer(self, node_id: int, peer: int, *, refused: bool, delay_us: int) -> None:
        node = self.nodes[node_id]
        incarnation = node.incarnation

        def report() -> None:
            if node.up and node.incarnation == incarnation:
                self._handle(node, PEER, (peer, refused))
        self.schedule(delay_us, CALL, 0, (report, ""))

    def _reconnect_delay_us(self, failures: int) -> int:
        low, high = RECONNECT_BACKOFF_MS
        ceiling = min(high, low * 2 ** max(0, failures - 1))
        return int(ceiling * self._connection_rng.uniform(0.5, 1.0) * 1000)

    def _reconnect_later(self, node_id: int, peer: int, failures: int) -> None:
        """Node `node_id` connects to the down voter `peer` after a backoff, as its
        transport would: refused while `peer` is down and the link is up, hanging for
        the connect timeout while the link is cut, done once `peer` runs again (or
        `node_id` stops)."""
        node, target = self.nodes[node_id], self.nodes[peer]
        incarnation, target_gen = node.incarnation, target.gen
        delay_us = self._reconnect_delay_us(max(1, failures))

        def attempt() -> None:
            if (not node.up or node.incarnation != incarnation or target.up
                    or target.gen != target_gen):
                return
            if not (self.network.is_up(node_id, peer) and self.network.is_up(peer, node_id)):
                self.schedule(int(CONNECT_TIMEOUT_MS * 1000), CALL, 0,
                              (lambda: self._reconnect_later(node_id, peer, failures + 1), ""))
                return
            self._handle(node, PEER, (peer, True))
            self._reconnect_later(node_id, peer, failures + 1)
        self.schedule(delay_us, CALL, 0, (attempt, ""))

    def pause(self, node_id: int) -> None:
        """Stop the node's event loop (its timers and inbox wait) without a crash."""
        node = self.nodes[node_id]
        if node.up:
            node.paused = True
            self.trace.add(self.now_us, node_id, "pause", None)

    def resume(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.up and node.paused:
            node.paused = False
            self.trace.add(self.now_us, node_id, "resume", None)
            if not node.busy:
                self._drain(node)

    def resign(self, node_id: int) -> None:
        """Graceful shutdown's first half: the leader sends EndQuorumEpoch."""
        node = self.nodes[node_id]
        if node.up:
            self._handle(node, CALL, None)

    def propose(self, records: Sequence[bytes] | None = None, *,
                node_id: int | None = None) -> tuple[int, int] | None:
        """Hand records to `node_id`, or by default to the node that leads the highest
        epoch; returns what `core.propose` returned (None when busy or not leading)."""
        leader = self.leader() if node_id is None else self.nodes[node_id]
        if leader is None or not leader.up:
            return None
        if records is None:
            records = (self.next_record(),)
        if leader.busy or leader.paused:
            leader.inbox.append((PROPOSE, tuple(records)))
            return None
        return self._handle(leader, PROPOSE, tuple(records))  # type: ignore[no-any-return]

    def next_record(self) -> bytes:
        """A unique opaque record: raft replicates bytes it does not interpret."""
        from raft.common.uuid import Uuid

        self._record_seq += 1
        return b"sim-record %d " % self._record_seq + Uuid.random(self._workload_rng).to_bytes()

    def start_workload(self, until_ms: float | None = None) -> None:
        """Propose one record every `propose_interval_ms` (jittered) to the leader of the
        highest epoch, and one to every stale leader still running: its clients have not
        heard of the new epoch either, so it writes a tail that must later be cut."""
        self.workload_on = True

        def tick() -> None:
            if not self.workload_on or (until_ms is not None and self.now_ms >= until_ms):
                return
            leader = self.leader()
            self.propose()
            for node in self.nodes.values():
                if node is not leader and node.up and node.core.is_leader:
                    self.propose(node_id=node.node_id)
            gap = self._workload_rng.uniform(0.5, 1.5) * self.config.propose_interval_ms
            self.schedule(int(gap * 1000), CALL, 0, (tick, ""))
        self.schedule(0, CALL, 0, (tick, ""))

    def stop_workload(self) -> None:
        self.workload_on = False

    def when_elected(self, callback: Callable[[SimNode], None]) -> None:
        """Call `callback(node)` once, the moment the next leader is elected: before the
        new leader's first fsync completes, so nothing it sends has left it yet."""
        self._on_elected.append(callback)

    # ---- queries ------------------------------------------------------------------------

    def leader(self) -> SimNode | None:
        best = None
        for node in self.nodes.values():
            if node.up and node.core.is_leader and (
                    best is None or node.core.epoch > best.core.epoch):
                best = node
        return best

    def fault_counts(self) -> dict[str, int]:
        """Faults injected, by kind, and what the wire and the disks made of them."""
        network = self.network
        counts = {**self.fault_kinds,
                  "messages long-delayed": network.long_delayed,
                  "torn writes scanned off": sum(n.disk.torn_writes
                                                 for n in self.nodes.values()),
                  "directory entries lost": sum(n.disk.directory.lost
                                                for n in self.nodes.values()),
                  "nodes refusing to start": len(self.refusing)}
        struck: Counter[str] = Counter()  # crashes between steps, by operation and step
        for node in self.nodes.values():
            struck.update(node.disk.steps.struck)
        counts.update(struck)
        for outcome, count in network.corrupted.items():
            counts[f"corrupted frames {outcome}"] = count
        return {name: count for name, count in counts.items() if count}

    def leader_id(self) -> int | None:
        node = self.leader()
        return node.node_id if node is not None else None

    def running(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.up]

    def committed_offset(self) -> int:
        return len(self.checker.committed)

    def is_committed(self, epoch: int, offset: int) -> bool:
        committed = self.checker.committed
        return offset < len(committed) and committed[offset][0] == epoch

    def all_caught_up(self, node_ids: Sequence[int] | None = None) -> bool:
        """Every listed running node holds the leader's log up to its high watermark."""
        leader = self.leader()
        if leader is None:
            return False
        hw = leader.core.high_watermark or 0
        ids = self.nodes if node_ids is None else node_ids
        return all(self.nodes[i].up and (self.nodes[i].core.high_watermark or 0) >= hw
                   for i in ids)

    def converged(self) -> bool:
        """Cheap test, fit to run after every event: a leader whose high watermark is its
        log end, and every running node at that high watermark and log end."""
        leader = self.leader()
        if leader is None:
            return False
        hw = leader.core.high_watermark or 0
        if hw != leader.log.end_offset:
            return False
        return all((n.core.high_watermark or 0) == hw and n.log.end_offset == hw
                   for n in self.nodes.values() if n.up)

    def run_until_converged(self, timeout_ms: float) -> list[str]:
        """Stop proposing, run until `converged()` or for `timeout_ms`; what still
        differs (`convergence_gaps()`, empty once every node holds the leader's log)."""
        self.stop_workload()
        self.run_until(self.converged, timeout_ms)
        return self.convergence_gaps()

    def convergence_gaps(self) -> list[str]:
        """What keeps the running nodes from one log and one high watermark: each node
        whose high watermark, log end or records differ from the leader's (empty when
        the cluster has converged)."""
        leader = self.leader()
        if leader is None:
            return ["no leader"]
        hw = leader.core.high_watermark or 0
        end = leader.log.end_offset
        gaps = [] if hw == end else [
            f"leader n{leader.node_id} high watermark {hw} below its log end {end}"]
        for node in sorted(self.running(), key=lambda n: n.node_id):
            if node is leader:
                continue
            # Below the later of the two log starts, snapshots stand in for the records
            # (the invariants compare those with the committed history).
            start = max(leader.log.start_offset, node.log.start_offset)
            records = _records(node.log, start)
            reference = _records(leader.log, start)
            node_hw = node.core.high_watermark or 0
            if node_hw != hw or node.log.end_offset != end or records != reference:
                difference = _first_difference(records, reference)
                gaps.append(f"n{node.node_id}: high watermark {node_hw} (leader {hw}), "
                            f"log end {node.log.end_offset} (leader {end}), first "
                            f"differing offset "
                            f"{None if difference is None else start + difference}")
        return gaps

    # ---- driving a node ------------------------------------------------------------------

    def _deliver(self, envelope: Envelope) -> None:
        node = self.nodes.get(envelope.dst)
        if node is None or not node.up or not self.network.is_up(envelope.src, envelope.dst):
            return
        self._handle(node, DELIVER, envelope)

    def _handle(self, node: SimNode, kind: int, payload: Any) -> Any:
        if node.busy or node.paused:
            if kind == TICK:
                node.tick_at = -1  # rescheduled once the fsync completes
            else:
                node.inbox.append((kind, payload))
            return None
        core = node.core
        now_ms = node.local_ms(self.now_us)
        result = None
        if kind == DELIVER:
            self.trace.add(self.now_us, node.node_id, "recv", payload)
            core.step(payload, now_ms)
        elif kind == TICK:
            node.tick_at = -1
            core.tick(now_ms)
        elif kind == PROPOSE:
            result = core.propose(payload, now_ms)
            self.trace.add(self.now_us, node.node_id, "propose", result)
            if result is not None:
                self.proposals.append((self.now_us, result[0], result[1]))
        elif kind == TRIM:
            self._trim(node, payload)
        elif kind == PEER:
            peer, refused = payload
            self.trace.add(self.now_us, node.node_id, "peer", payload)
            self.peer_reports.append((self.now_us, node.node_id, peer, refused))
            handler = getattr(core, "peer_unreachable" if refused else "peer_disconnected",
                              None)
            if handler is not None:  # a toy core (the simulator's own tests) has none
                handler(peer, now_ms)
        else:
            self.trace.add(self.now_us, node.node_id, "resign", None)
            core.resign(now_ms)
        self._after_handle(node)
        return result

    def _after_handle(self, node: SimNode) -> None:
        ready: Ready = node.core.ready()
        removed = node.log.removed
        replaced = getattr(node.log, "replaced", None)
        if replaced and ready.loaded_snapshot is not None:
            tail = _diverged(replaced, ready.loaded_snapshot, self.checker.committed)
            if tail is not None:
                removed.append(tail)
            replaced.clear()
        if removed:
            self.divergences.on_truncated(node.node_id, removed)
            removed.clear()
        elif ready.entries:
            self.divergences.on_appended(node.node_id)
        if ready.truncate_to is not None:
            self.checker.on_truncate(node, ready.truncate_to)
        if self.config.dynamic and ready.entries and node.core.is_leader:
            self._check_voter_changes(node, ready)
        if ready.loaded_snapshot is not None:
            self.checker.on_snapshot_loaded(node, ready.loaded_snapshot)
        for envelope in ready.early_messages:  # before the fsync below, as raft/node.py
            self._send(envelope)
        if ready.election is not None or ready.needs_flush:
            node.busy = True
            node.writing = ready
            self.schedule(node.disk.fsync_latency_us(), IO, node.node_id, ready, node.gen)
            self._check(node)
        else:
            self._complete_io(node, ready)

    def _complete_io(self, node: SimNode, ready: Ready) -> None:
        if ready.election is not None:
            node.disk.quorum_state.persist(ready.election)
        if ready.needs_flush:
            node.log.flush()
        if not ready.is_empty:
            self.trace.add(self.now_us, node.node_id, "ready", ready)
        for envelope in ready.late_messages:
            self._send(envelope)
        if ready.loaded_snapshot is not None and self.snapshots_on:
            self._load_state_machine(node, ready.loaded_snapshot)
        if ready.high_watermark is not None:
            self.checker.on_high_watermark(node, ready.high_watermark)
            if self.snapshots_on:
                self._apply(node, ready.high_watermark)
        node.core.advance(ready)
        node.busy = False
        node.writing = None
        if self.snapshots_on:
            self._maybe_snapshot(node)
        self._check(node)
        self._drain(node)

    # ---- the dynamic quorum (KIP-853) ------------------------------------------------

    def reconfigure(self, message: Any, on_answer: Callable[[Any], None]) -> bool:
        """Hand an AddRaftVoter / RemoveRaftVoter request to the leader, as a tool
        would; `on_answer` gets its answer (nothing comes if the leader crashes first).
        False when no leader runs."""
        leader = self.leader()
        if leader is None:
            return False
        cid = self._next_client_cid
        self._next_client_cid += 1
        self._clients[cid] = on_answer
        self._handle(leader, DELIVER, Envelope(src=-1, dst=leader.node_id,
                                               correlation_id=cid, message=message))
        return True

    def _check_vote_key(self, envelope: Envelope) -> None:
        """A vote granted by a replica other than the key the request named (a disk
        formatted anew since) is a violation."""
        message = envelope.message
        if type(message) is VoteRequest:
            self._vote_keys[(envelope.src, envelope.dst, envelope.correlation_id)] = (
                message.voter_directory_id)
        elif type(message) is VoteResponse and message.vote_granted:
            asked = self._vote_keys.pop((envelope.dst, envelope.src,
                                         envelope.correlation_id), None)
            own = self.nodes[envelope.src].directory_id
            if asked is not None and asked != own:
                self.checker.fail_observer_vote(envelope.src, envelope.dst, asked, own)

    def voter_set(self) -> VoterSet | None:
        """The voter set in force at the leader (None without a leader)."""
        leader = self.leader()
        return None if leader is None else leader.core.voter_set

    def _check_voter_changes(self, node: SimNode, ready: Ready) -> None:
        """The VotersRecords a leader just appended, against KIP-853's rules."""
        core = node.core
        history = core.voter_history
        for batch in ready.entries:
            if batch.epoch != core.epoch:
                continue
            for index, record in enumerate(batch.records):
                change = voters_change_of(record)
                if not isinstance(change, VotersRecord):
                    continue
                offset = batch.base_offset + index
                before = [o for o, _ in history.sets if o < offset]
                self.checker.on_voters_appended(
                    node, offset, previous=history.set_at(offset),
                    previous_offset=before[-1] if before else None,
                    new=VoterSet.from_record(change), nodes=self.nodes,
                    max_lag=self.config.add_voter_max_lag_records)

    # ---- the state machine and its snapshots ----------------------------------------

    def _rebuild_state_machine(self, node: SimNode) -> None:
        """After a (re)start: the snapshot at the log start, then records as the high
        watermark moves (it starts at the log start)."""
        log = node.log
        machine = node.state_machine
        if log.start_offset == 0:
            machine.reset()
            return
        snapshot_id = SnapshotId(log.start_offset, log.start_epoch)
        machine.load(snapshot_id, node.snapshots.snapshots[snapshot_id])
        self.checker.on_applied_state(node, machine.records, machine.epoch,
                                      f"rebuilt from snapshot {_brief_id(snapshot_id)}")

    def _load_state_machine(self, node: SimNode, snapshot_id: SnapshotId) -> None:
        """The core loaded a fetched snapshot in place of its log: the state machine
        reloads from it before it applies records from its end offset on."""
        self.snapshot_fetches += 1
        machine = node.state_machine
        machine.load(snapshot_id, node.snapshots.snapshots[snapshot_id])
        self.checker.on_applied_state(node, machine.records, machine.epoch,
                                      f"loaded snapshot {_brief_id(snapshot_id)}")

    def _apply(self, node: SimNode, high_watermark: int) -> None:
        machine = node.state_machine
        self.checker.check_applicable(node, machine.applied_end, high_watermark)
        machine.apply(node.log, high_watermark)

    def _maybe_snapshot(self, node: SimNode) -> None:
        """Snapshot the applied state when the node's policy says so, then move the log
        start to it (at once, later, or never)."""
        policy = node.snapshot_policy
        machine = node.state_machine
        assert policy is not None
        point = (len(machine.records) if self._snapshot_point is None  # after every event
                 else self._snapshot_point(node.core, machine.applied_end))
        if point < policy.next_at:
            return
        latest = node.snapshots.latest()
        if latest is not None and latest.end_offset >= point:
            return  # it holds that state already (fetched, or from before a crash)
        extra = [(epoch, record) for _, epoch, record
                 in entries_of(node.log, machine.applied_end, point)]
        snapshot_id, data = machine.snapshot(node.core.snapshot_control_records, extra)
        node.snapshots.add(snapshot_id, data)
        self.snapshots_taken += 1
        delay_ms = policy.taken_at(point)
        self.trace.add(self.now_us, node.node_id, "snapshot", (snapshot_id, delay_ms))
        if delay_ms == 0:
            self._trim(node, snapshot_id)  # nothing for a Ready: no event needed
        elif delay_ms is not None:
            self.schedule(int(delay_ms * 1000), TRIM, node.node_id, snapshot_id, node.gen)

    def _trim(self, node: SimNode, snapshot_id: SnapshotId) -> None:
        """Move the log start to a snapshot the node wrote (the core may refuse: a
        snapshot of a newer one loaded since, a restart's high watermark not there yet)."""
        moved = node.core.advance_log_start(snapshot_id)
        self.trace.add(self.now_us, node.node_id, "trim", (snapshot_id, moved))

    def _drain(self, node: SimNode) -> None:
        while node.inbox and not node.busy and not node.paused and node.up:
            kind, payload = node.inbox.popleft()
            self._handle(node, kind, payload)
        if not node.busy and not node.paused and node.up:
            self._reschedule_tick(node)

    def _send(self, envelope: Envelope) -> None:
        if envelope.dst < 0:  # the answer to a tool's request (`reconfigure`)
            callback = self._clients.pop(envelope.correlation_id, None)
            if callback is not None:
                self.trace.add(self.now_us, envelope.src, "answer", envelope.message)
                callback(envelope.message)
            return
        if self.config.dynamic:
            self._check_vote_key(envelope)
        self.checker.on_send(envelope.src, envelope.dst, envelope.message,
                             correlation_id=envelope.correlation_id)
        if isinstance(envelope.message, FetchSnapshotRequest):
            self._count_chunk(envelope.src, envelope.message)
        elif (self.snapshot_chunk_loss and isinstance(envelope.message, FetchSnapshotResponse)
              and self._chunk_rng.random() < self.snapshot_chunk_loss):
            self.trace.add(self.now_us, envelope.dst, "drop", envelope)
            return
        if self.network.corrupts() and not self.network.corrupt(envelope, CLUSTER_ID):
            self.trace.add(self.now_us, envelope.dst, "drop", envelope)
            return
        if self._codec is not None:
            encode, decode = self._codec
            envelope = Envelope(src=envelope.src, dst=envelope.dst,
                                correlation_id=envelope.correlation_id,
                                message=decode(encode(envelope.message)))
        for delay in self.network.delivery_delays_us(envelope.src, envelope.dst):
            self.schedule(delay, DELIVER, envelope.dst, envelope)

    def _reschedule_tick(self, node: SimNode) -> None:
        deadline = node.core.next_deadline_ms()
        if deadline is None:
            return
        when = node.global_us(int(deadline))
        if when <= self.now_us:
            when = self.now_us + 1000  # a deadline already due: tick again 1 ms later
        if when != node.tick_at:
            node.tick_gen += 1
            node.tick_at = when
            self.schedule(when - self.now_us, TICK, node.node_id, None, node.tick_gen)

    def _check(self, node: SimNode) -> None:
        core = node.core
        state = (core.role, core.epoch, core.leader_id)
        if state != node.last_state:
            node.last_state = state
            self.trace.add(self.now_us, node.node_id, "state", state)
            crashed = self._crashed_leader
            if core.is_leader and crashed is not None and core.epoch > crashed[1]:
                self.failovers_ms.append((self.now_us - crashed[0]) / 1000)
                self._crashed_leader = None
            if core.is_leader and self._on_elected:
                callbacks, self._on_elected = self._on_elected, []
                for callback in callbacks:
                    callback(node)
        self.checker.after_event(node, self.nodes.values())

    def _count_chunk(self, node_id: int, request: FetchSnapshotRequest) -> None:
        """Counts FetchSnapshot requests, and resumes: one asking again, past the start,
        for the bytes the node's previous one asked for (that answer was lost; the
        download goes on from the bytes held)."""
        self.snapshot_chunks += 1
        asked = (request.snapshot_id, request.position)
        if request.position > 0 and self._last_chunk.get(node_id) == asked:
            self.snapshot_resumes += 1
        self._last_chunk[node_id] = asked

    def _persist_hook(self, node_id: int) -> Callable[[Any, Any], None]:
        def hook(old: Any, new: Any) -> None:
            self.checker.on_persist(node_id, old, new)
        return hook

    def _snapshot_hook(self, node_id: int) -> Callable[[SnapshotId, bytes], None]:
        def hook(snapshot_id: SnapshotId, data: bytes) -> None:
            self.checker.on_snapshot(node_id, snapshot_id, data)
        return hook


def _load_codec() -> tuple[Callable[[Any], bytes], Callable[[bytes], Any]]:
    """Encode to msgpack bytes and back, as the wire would: catches codec asymmetries."""
    import msgpack

    from raft import messages
    from raft.common.uuid import pack

    def encode(message: Any) -> bytes:
        return pack(messages.encode_message(message))

    def decode(raw: bytes) -> Any:
        api, body = msgpack.unpackb(raw, raw=False)
        return messages.decode_message(api, body)
    return encode, decode


def _records(log: Any, start: int) -> list[tuple[int, bytes]]:
    """(epoch, record) at each offset from `start` (at or above the log start)."""
    return [(epoch, record) for _, epoch, record in entries_of(log, start, log.end_offset)]


def _diverged(replaced: list[tuple[int, int, bytes]], snapshot_id: SnapshotId,
              committed: list[Entry]) -> RemovedTail | None:
    """The tail of a log that a loaded snapshot replaced and that diverged: from its first
    record that is not the committed one (the snapshot holds the committed records below
    its end; a record at or above it is of an older epoch than the snapshot's: see
    `_snapshot_to_fetch` in raft/core/_replication.py) to its end; None when every record
    it dropped was committed."""
    for offset, epoch, record in replaced:
        if (offset >= min(snapshot_id.end_offset, len(committed))
                or committed[offset] != entry_of(epoch, record)):
            return RemovedTail(offset, replaced[-1][0] + 1, epoch, replaced[-1][1])
    return None


def _brief_id(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset}-{snapshot_id.epoch}"


def _first_difference(ours: list[tuple[int, bytes]],
                      theirs: list[tuple[int, bytes]]) -> int | None:
    for offset, (mine, other) in enumerate(zip(ours, theirs, strict=False)):
        if mine != other:
            return offset
    return None if len(ours) == len(theirs) else min(len(ours), len(theirs))
