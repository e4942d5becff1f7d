"""The Trio loop around `raft.core.RaftCore`: inbox -> step -> persist -> send -> publish
-> advance, over an injected `Transport` (`raft.transport_protocol`: TCP in production,
`tests.support.memory_transport` in tests), `Clock` (`raft.clock`) and log.

One task (`_core_loop`) owns the core; every other task talks to it through one bounded
memory channel (the inbox). Each turn of the loop:

1. takes one event (a message, a call from another task, a voter's connection lost or
   refused as the transport reports it, or the core's next deadline), then drains
   whatever else is already queued, stepping the core for each;
2. proposes what `propose_soon` queued meanwhile, as one batch; `ready()`; persists
   quorum-state (fsync, in a worker thread), sends a leader's early messages, flushes
   the log (fsync: a voter's in this task, an observer's in a worker thread, see
   `_flush`). Events that arrive during those fsyncs wait in the inbox and are all
   handled in the next turn, so their appends share the next fsync (group commit);
3. sends the other messages (never blocking), publishes newly committed batches to the
   commit listeners, `advance(ready)`, settles the proposals that committed.

What is not the loop lives beside it, composed by `tools.server.build`: the RPC host
that routes frames in and serves the apis of the layers above (`raft.rpc_host`), the
high-watermark checkpoint and a broker's lazy flush (`raft.hw_checkpoint`,
`raft.lazy_flush`), metrics (`tools.metrics`, a ready observer).

The loop accepts proposals (`propose_and_wait`, `propose_soon`, `decide_and_propose`,
`raft.proposals`), functions to run in the core task (`call`) and `shutdown`. It
publishes, in the core task, to listeners that must be quick and must not block (add
them before `run()`): committed batches and high watermarks (`add_commit_listener`,
`add_high_watermark_listener`, `raft.publication`; a commit listener's exception stops
the node, loudly), the leader's high watermark as heard here (a follower's own stops at
its log end), a snapshot fetched from the leader that replaced the log (awaited before
any record after it is published), and each turn's Ready once handled (an observer's
exception drops it, never the node). `add_background_task(fn)` runs beside the loop
until the node stops; `add_stop_task(fn)` once the loop stopped gracefully (an OSError
is a log-dir failure).

A broken invariant (`raft.core.RaftInvariantError`, raised in the core task, also inside
a `call`) stops the node at once: from the raise on nothing is sent, acknowledged or
published, one ERROR names the invariant, and `run()` raises the error (in an exception
group). Waiters are not woken: they are cancelled with the node's tasks. `kraft node`
exits with code 3 and never rebuilds such a node.

Raft messages go in and out through `raft.message_wire` (traced at DEBUG by the logger
`raft.node.messages`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from raft import messages
from raft.clock import Clock, TrioClock
from raft.common.uuid import Uuid
from raft.control_records import Endpoint
from raft.core import RaftConfig, RaftCore, RaftInvariantError
from raft.message_wire import MessageWire, trace
from raft.proposals import Outcome, ProposalCallback, Proposals
from raft.publication import CommitListener, Publisher
from raft.snapshot_store import SnapshotStore
from raft.transport_protocol import Address, Frame, Link, Transport
from raft.types import ElectionState, Envelope, RaftLog, Ready, SnapshotId
from raft.voters import Voter

log = logging.getLogger(__name__)

# (a snapshot fetched from the leader, its records): the state machine reloads from it
SnapshotListener = Callable[[SnapshotId, tuple[bytes, ...]], Awaitable[None]]
INBOX_SIZE = 1024
MAX_EVENTS_PER_TURN = 1024
SHUTDOWN_DRAIN_S = 1.0


class NotLeaderError(Exception):
    """This node is not (or stopped being) the leader; try `leader_id` at `leader_address`."""

    def __init__(self, leader_id: int | None, leader_address: Address | None) -> None:
        where = f" at {leader_address[0]}:{leader_address[1]}" if leader_address else ""
        super().__init__(f"not the leader; leader is {leader_id}{where}"
                         if leader_id is not None else "not the leader; no leader known")
        self.leader_id = leader_id
        self.leader_address = leader_address


class LogDirFailure(Exception):
    """A write or fsync of the log directory failed (e.g. ENOSPC): the node stops, as
    Kafka does on a log-dir failure, having acknowledged only what was durable. Recovery
    on the next start cuts any torn tail (`kraft node` rebuilds the node in place once the
    directory takes writes again)."""

    def __init__(self, directory: str, error: OSError) -> None:
        super().__init__(f"log directory {directory} failed: {error.strerror or error}"
                         " (node stopped accepting writes)")
        self.directory = directory
        self.error = error


@dataclass(eq=False)
class _Call:
    """Run `fn(now_ms)` in the core task; the caller waits on `done`."""

    fn: Callable[[int], Any]
    done: trio.Event = field(default_factory=trio.Event)
    result: Any = None
    error: BaseException | None = None


class _Shutdown:
    pass


_PROPOSALS_QUEUED = object()  # inbox item: wake the core task for `propose_soon`


@dataclass(frozen=True, slots=True)
class _PeerDown:
    """From the transport: the connection to voter `node_id` closed, or (`refused`) a
    connect to it was refused."""

    node_id: int
    refused: bool


class RaftNode:
    """One quorum member (voter) or observer. `write_election` persists quorum-state
    atomically with fsync, in a worker thread; `before_fsync` (test-only, `kraft chaos`)
    is awaited before the fsyncs of a turn.

    `observer_flushes`: whether the node, while an observer, flushes its log before its
    next Fetch, as a voter always does (Kafka's followers-always-flush, on for a node
    with the controller role). A leader counts a voter's fetch offset as durable, and an
    observer added as a voter (KIP-853) counts from its last Fetch on. False suits a
    broker-only node, which is never added: its log, a copy of records the voters hold,
    is flushed beside the loop (`raft.lazy_flush`); a crash may cost it a tail, fetched
    again after the restart.

    `listeners`: the controller endpoints this node advertises now (KIP-853). A voter of
    a dynamic quorum whose entry in the voter set names others (it restarted on a new
    port) has the leader update it (UpdateRaftVoter, `raft.core`)."""

    def __init__(self, *, node_id: int, cluster_id: str, voters: dict[int, Address],
                 config: RaftConfig, log: RaftLog, election: ElectionState | None,
                 write_election: Callable[[ElectionState], None], transport: Transport,
                 clock: Clock | None = None,
                 before_fsync: Callable[[], Awaitable[None]] | None = None,
                 rng: random.Random | None = None,
                 publish_from: int = 0, snapshots: SnapshotStore | None = None,
                 directory_id: Uuid | None = None, observer_flushes: bool = True,
                 listeners: tuple[Endpoint, ...] = ()) -> None:
        self._publisher = Publisher(log, publish_from)
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.voters = dict(voters)
        self.directory_id = directory_id  # KIP-853: this replica's key is (id, directory)
        self.listeners = listeners
        self.transport = transport
        self.wire = MessageWire(transport, node_id, cluster_id)
        self.log = log
        self._known_voter_set: Any = None  # the core's voter set last turned into peers
        self._config = config
        self._snapshots = snapshots
        self._initial_election = election
        self._write_election = write_election
        self._clock = clock or TrioClock()
        self._before_fsync = before_fsync
        self._rng = rng or random.Random()
        self.observer_flushes = observer_flushes
        self._core: RaftCore | None = None
        self._inbox_send, self._inbox_recv = trio.open_memory_channel[Any](INBOX_SIZE)
        self._leader_hw_listeners: list[Callable[[int], None]] = []
        self._snapshot_listeners: list[SnapshotListener] = []
        self._ready_observers: list[Callable[[Ready, int], None]] = []
        self._background: list[Callable[[], Awaitable[None]]] = []
        self._stop_tasks: list[Callable[[], Awaitable[None]]] = []
        self._proposals = Proposals()
        self._first_published = publish_from
        self._stopping = False
        self._log_dir_failure: LogDirFailure | None = None  # the first one, the one logged
        self._stop_at: float | None = None  # trio time by which a resigning node exits
        self._handover_pending: set[int] = set()  # voters yet to answer EndQuorumEpoch
        self._last_state: tuple[Any, ...] = ()
        self.started = trio.Event()

    # -- what the loop publishes --------------------------------------------------------

    def add_commit_listener(self, callback: CommitListener) -> None:
        self._publisher.commit_listeners.append(callback)

    def add_high_watermark_listener(self, callback: Callable[[int], None]) -> None:
        self._publisher.high_watermark_listeners.append(callback)

    def add_leader_high_watermark_listener(self, callback: Callable[[int], None]) -> None:
        self._leader_hw_listeners.append(callback)

    def add_ready_observer(self, callback: Callable[[Ready, int], None]) -> None:
        self._ready_observers.append(callback)

    def add_snapshot_listener(self, callback: SnapshotListener) -> None:
        """`callback(snapshot_id, records)` once a snapshot fetched from the leader
        replaced the log (`records`: its records, checked whole)."""
        self._snapshot_listeners.append(callback)

    def add_background_task(self, fn: Callable[[], Awaitable[None]]) -> None:
        self._background.append(fn)

    def add_stop_task(self, fn: Callable[[], Awaitable[None]]) -> None:
        self._stop_tasks.append(fn)

    # -- what the loop accepts ----------------------------------------------------------

    async def propose_and_wait(self, records: Sequence[bytes]) -> tuple[int, int]:
        """Append through this node's core; `(epoch, last_offset)` once the records
        committed, else the error (`raft.proposals`)."""
        outcome = Outcome()
        self.propose_soon(records, outcome)
        return await outcome.wait()

    def propose_soon(self, records: Sequence[bytes], on_done: ProposalCallback) -> None:
        """Propose without waiting: `on_done` runs in the core task once the records
        settled; it must be quick and must not raise. Proposals of one turn share a
        batch."""
        if self._proposals.queue(records, on_done):
            try:
                self._inbox_send.send_nowait(_PROPOSALS_QUEUED)
            except trio.WouldBlock:
                pass  # a full inbox: the core task is busy, and proposes each turn

    async def decide_and_propose(self, decide: Callable[[int, int], Sequence[bytes]]
                                 ) -> tuple[int, int] | None:
        """Run `decide(now_ms, log_end_offset)` in the core task and propose what it returns
        in the same step, so the records land exactly at `log_end_offset` (the controller
        puts offsets in records, e.g. a broker epoch); then wait for their commit like
        `propose_and_wait`. None (at once) when `decide` returns no records. Raises
        NotLeaderError when this node is not the leader, before `decide` runs."""
        outcome = Outcome()

        def run(now: int) -> bool:
            if not self.is_leader:
                raise self.not_leader()
            records = list(decide(now, self.log.end_offset))
            if records and not self._proposals.propose_now(self.core, records, now, outcome):
                raise self.not_leader()
            return bool(records)

        if not await self.call(run):
            return None
        return await outcome.wait()

    async def call(self, fn: Callable[[int], Any]) -> Any:
        """Run `fn(now_ms)` in the core task (the only place the core may be touched)."""
        item = _Call(fn)
        await self._inbox_send.send(item)
        await item.done.wait()
        if item.error is not None:
            raise item.error
        return item.result

    async def advance_log_start(self, snapshot_id: SnapshotId) -> bool:
        """Start the log at a snapshot of committed records this node holds, deleting the
        segments and snapshots below it (`RaftCore.advance_log_start`)."""
        advanced: bool = await self.call(lambda now: self.core.advance_log_start(snapshot_id))
        return advanced

    def snapshot_control_records(self, end_offset: int) -> list[bytes]:
        """What a snapshot ending at `end_offset` must hold of raft's own state (the
        voter set and kraft.version, KIP-853); written first by the snapshot writer."""
        return self.core.snapshot_control_records(end_offset)

    async def shutdown(self) -> None:
        """Graceful stop: a leader resigns (EndQuorumEpoch), queues drain (bounded)."""
        await self._inbox_send.send(_Shutdown())

    # -- state --------------------------------------------------------------------------

    @property
    def core(self) -> RaftCore:
        if self._core is None:
            raise RuntimeError("the node is not running")
        return self._core

    @property
    def leader_id(self) -> int | None:
        return self._core.leader_id if self._core else None

    @property
    def leader_address(self) -> Address | None:
        leader = self.leader_id
        return self.voters.get(leader) if leader is not None else None

    def not_leader(self) -> NotLeaderError:
        return NotLeaderError(self.leader_id, self.leader_address)

    @property
    def is_leader(self) -> bool:
        return bool(self._core and self._core.is_leader)

    @property
    def epoch(self) -> int:
        return self._core.epoch if self._core else 0

    @property
    def high_watermark(self) -> int:
        return self._core.high_watermark if self._core else 0

    @property
    def leader_high_watermark(self) -> int | None:
        """The leader's high watermark as last heard (None before any answer)."""
        return self._core.leader_high_watermark if self._core else None

    @property
    def role(self) -> str | None:
        """The core's quorum state (`raft.core.Role`'s value); None before `run()`."""
        return str(self._core.role) if self._core else None

    @property
    def log_end_offset(self) -> int:
        return self.log.end_offset

    @property
    def log_end_epoch(self) -> int:
        """The epoch of the last record in the log (the snapshot's at an empty log)."""
        return self.log.last_epoch

    @property
    def first_published_offset(self) -> int:
        """The first offset commit listeners get after this start (`publish_from`)."""
        return self._first_published

    @property
    def port(self) -> int | None:
        return self.transport.port

    def now_ms(self) -> int:
        """Monotonic milliseconds that read like wall-clock time (for DescribeQuorum)."""
        return self._clock.now_ms()

    # -- running ------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[int | None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Serve until `shutdown()`; reports the bound listener port once listening."""
        self._clock.start()
        await self.transport.bind()  # a busy port fails here, as a plain OSError
        try:
            self._core = RaftCore(node_id=self.node_id, config=self._config, log=self.log,
                                  election=self._initial_election,
                                  cluster_id=self.cluster_id, rng=self._rng,
                                  now_ms=self.now_ms(), snapshots=self._snapshots,
                                  directory_id=self.directory_id,
                                  listeners=self.listeners,
                                  # not the last run's: late replies to those must match none
                                  first_correlation_id=1 + self._rng.randrange(1 << 30))
        except RaftInvariantError as exc:
            self._invariant_broken(exc)
            raise
        async with trio.open_nursery() as nursery:
            port = await nursery.start(self.transport.serve)
            log.info("node started", extra={"node": self.node_id, "port": port,
                                            "epoch": self.epoch,
                                            "log_end_offset": self.log.end_offset})
            self.started.set()
            task_status.started(port)
            for background in self._background:
                nursery.start_soon(background)
            try:
                await self._core_loop()
                for stop_task in self._stop_tasks:
                    await stop_task()  # e.g. the final high-watermark checkpoint
            except OSError as exc:
                raise self.log_dir_failed(exc) from exc
            except RaftInvariantError as exc:  # the nursery cancels every task at once
                self._invariant_broken(exc)
                raise
            await self.transport.drain(SHUTDOWN_DRAIN_S)
            nursery.cancel_scope.cancel()
        log.info("node stopped", extra={"node": self.node_id})

    def log_dir_failed(self, exc: OSError) -> LogDirFailure:
        """Stop on a storage error: nothing after it was sent or acknowledged. One failure,
        one ERROR: the paths that meet the same full disk (the loop's write, the lazy
        flush's worker thread, which cancelling cannot stop, the checkpoint) each raise
        to stop the node, but only the first is logged."""
        directory = str(getattr(self.log, "directory", None) or exc.filename or "?")
        failure = LogDirFailure(directory, exc)
        if self._log_dir_failure is None:
            self._log_dir_failure = failure
            log.error("log directory failed, node stopped accepting writes",
                      extra={"node": self.node_id, "dir": directory, "error": str(exc)})
        self._proposals.fail_all(self._log_dir_failure)
        return failure

    def _invariant_broken(self, exc: RaftInvariantError) -> None:
        """Stop on a broken invariant. Called in the core task before the error leaves
        `run()`'s nursery, which cancels every other task before it can run again: what
        the core produced since the last hand-over is never sent, acknowledged or
        published. Waiters are not woken (they are cancelled with the node)."""
        self._stopping = True
        log.error("raft invariant broken, node stopped: %s", exc, extra={"node": self.node_id})

    async def _core_loop(self) -> None:
        core = self.core
        await self._process_ready()  # e.g. a restarted leader-to-be persisting its state
        while not self._stopping:
            item = None
            wake_at = self._clock.trio_time_at(core.next_deadline_ms())
            if self._stop_at is not None:
                wake_at = min(wake_at, self._stop_at)
            if self._publisher.has_backlog:
                await trio.lowlevel.checkpoint()  # more to publish: only what is queued
                try:
                    item = self._inbox_recv.receive_nowait()
                except trio.WouldBlock:
                    pass
            else:
                with trio.move_on_at(wake_at):
                    item = await self._inbox_recv.receive()
            now = self.now_ms()
            handled = 0
            while item is not None:
                if item is not _PROPOSALS_QUEUED:  # those: at the turn's end
                    self._dispatch(item, now)
                handled += 1
                if handled >= MAX_EVENTS_PER_TURN:
                    break
                try:
                    item = self._inbox_recv.receive_nowait()
                except trio.WouldBlock:
                    item = None
            self._proposals.propose_queued(core, now, self.not_leader)
            core.tick(now)
            await self._process_ready()
            if self._stop_at is not None and (not self._handover_pending
                                              or trio.current_time() >= self._stop_at):
                self._stopping = True

    def _dispatch(self, item: Any, now: int) -> None:
        core = self.core
        if isinstance(item, Envelope):
            if trace.isEnabledFor(logging.DEBUG):
                trace.debug("receive", extra={"src": item.src, "cid": item.correlation_id,
                                              "detail": repr(item.message)[:500]})
            core.step(item, now)
            if isinstance(item.message, messages.EndQuorumEpochResponse):
                self._handover_pending.discard(item.src)
        elif isinstance(item, _Call):
            try:
                item.result = item.fn(now)
            except OSError as exc:  # a failed log write stops the node (see run)
                item.error = exc
                item.done.set()
                raise
            except RaftInvariantError:  # the core is broken: stop the node (see run)
                raise
            except Exception as exc:  # handed back to the caller, not raised here
                item.error = exc
            item.done.set()
        elif isinstance(item, _PeerDown):
            if item.refused:
                core.peer_unreachable(item.node_id, now)
            else:
                core.peer_disconnected(item.node_id, now)
        elif isinstance(item, _Shutdown):
            if core.is_leader and len(self.voters) > 1:
                # Stay up (bounded) until the voters have the EndQuorumEpoch, so a
                # successor campaigns at once instead of after a fetch timeout.
                log.info("resigning before shutdown", extra={"epoch": core.epoch})
                core.resign(now)
                self._handover_pending = {v for v in self.voters if v != self.node_id
                                          and self.transport.is_connected(v)}
                grace_s = min(self._config.request_timeout_ms, 2000) / 1000
                self._stop_at = trio.current_time() + grace_s
            else:
                self._stopping = True
        else:
            raise AssertionError(f"unexpected inbox item {item!r}")

    async def _process_ready(self) -> None:
        """Persist the election, send the early messages, flush, send the rest, publish,
        then advance."""
        core = self.core
        self._learn_voter_addresses()
        ready: Ready = core.ready()
        if self._before_fsync is not None and (ready.election is not None
                                               or ready.needs_flush):
            await self._before_fsync()  # test-only slow disk
        if ready.election is not None:
            await trio.to_thread.run_sync(self._write_election, ready.election)
        self._send_all(ready.early_messages)  # the leader's records, while it flushes
        if ready.needs_flush and (core.is_voter or self.observer_flushes):
            await self._flush(early_sent=bool(ready.early_messages))
        self._send_all(ready.late_messages)
        if ready.loaded_snapshot is not None:
            for snapshot_listener in self._snapshot_listeners:
                await snapshot_listener(ready.loaded_snapshot, core.loaded_snapshot_records)
            self._publisher.restart_at_snapshot(ready.loaded_snapshot.end_offset)
        if ready.high_watermark is not None:
            self._publisher.publish_to(ready.high_watermark)
        self._publisher.publish_some()
        if ready.leader_high_watermark is not None:
            for leader_hw_listener in self._leader_hw_listeners:
                leader_hw_listener(ready.leader_high_watermark)
        core.advance(ready)
        self._proposals.settle(core, self.log, self.not_leader)
        self._log_state_change()
        if self._ready_observers:
            self._observe(ready)

    async def _flush(self, *, early_sent: bool) -> None:
        """fsync the log. A voter's fsync is on every commit's path, and handing it to a
        worker thread and back cost more than the fsync itself (100-400 us each way on 2
        busy cores, traced): a voter flushes in the core task, as Kafka's raft thread
        does. Its early messages were written as they were sent, unless a connection's
        writer was busy: then two schedule points let the writers run first (within one
        batch trio may run this task before them). An observer's fsync counts toward
        no commit: it flushes in a worker thread, so the rest of its process keeps
        serving meanwhile (a broker-only node skips this: `raft.lazy_flush`)."""
        if not self.core.is_voter:
            await trio.to_thread.run_sync(self.log.flush)
            return
        if early_sent and self.transport.pending():
            await trio.lowlevel.checkpoint()
            await trio.lowlevel.checkpoint()
        self.log.flush()

    def _observe(self, ready: Ready) -> None:
        now = self.now_ms()
        for observer in list(self._ready_observers):
            try:
                observer(ready, now)
            except Exception:  # a metrics bug must not take the quorum member down
                log.exception("ready observer failed, dropped", extra={"node": self.node_id})
                self._ready_observers.remove(observer)

    def _log_state_change(self) -> None:
        core = self.core
        state = (core.role, core.epoch, core.leader_id)
        if state != self._last_state:
            self._last_state = state
            log.info("quorum state", extra={"node": self.node_id, "role": str(core.role),
                                            "epoch": core.epoch, "leader": core.leader_id})

    # -- messages in and out ------------------------------------------------------------

    def _send_all(self, envelopes: tuple[Envelope, ...]) -> None:
        for envelope in envelopes:
            self.wire.send(envelope)

    async def receive_frame(self, conn: Link, frame: Frame) -> None:
        """A Raft message, in the connection's task: decode, then hand over to the core
        task (ProtocolError for anything else)."""
        await self._inbox_send.send(self.wire.envelope(conn, frame))

    def peer_down(self, node_id: int, refused: bool) -> None:
        """The transport lost (or could not open) its connection to a voter: an input to
        the core like a message, which decides what it means (`RaftCore.peer_unreachable`
        and `peer_disconnected`). Dropped when the inbox is full: the timeouts remain."""
        try:
            self._inbox_send.send_nowait(_PeerDown(node_id, refused))
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            log.debug("inbox full, peer loss not reported", extra={"dst": node_id})

    def _learn_voter_addresses(self) -> None:
        """KIP-853: a voter named by a VotersRecord and not configured becomes a peer at
        its first endpoint, before anything is sent to it; a configured voter moves there
        once the set names other endpoints for it than the bootstrap checkpoint did (it
        restarted on a new port). Until then the configured address stands for it (a
        route of its own, e.g. `kraft chaos`'s proxy)."""
        voters = self.core.voter_set
        if voters is self._known_voter_set:
            return
        self._known_voter_set = voters
        for voter in voters:
            endpoint = next(iter(voter.endpoints), None)
            if voter.key.id == self.node_id or endpoint is None:
                continue
            if voter.key.id in self.voters and not self._moved(voter):
                continue
            address = (endpoint.host, endpoint.port)
            if self.voters.get(voter.key.id) != address:
                self.voters[voter.key.id] = address
                self.transport.add_peer(voter.key.id, address)

    def _moved(self, voter: Voter) -> bool:
        """Whether `voter`'s endpoints differ from those the bootstrap checkpoint gave it
        (False without one: nothing says where it started)."""
        bootstrap = self._config.bootstrap_voters
        first = bootstrap.voter(voter.key.id) if bootstrap is not None else None
        return first is not None and first.endpoints != voter.endpoints
