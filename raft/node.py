"""The Trio shell around `raft.core.RaftCore`: sockets, timers, fsync, publication.

One task (`_core_loop`) owns the core; every other task talks to it through one bounded
memory channel (the inbox). Each turn of the loop:

1. takes one event (a message, a call from another task, a voter's connection lost or
   refused as the transport reports it, or the core's next deadline), then drains
   whatever else is already queued, stepping the core for each;
2. proposes what `propose_soon` queued meanwhile, as one batch; `ready()`; persists
   quorum-state (fsync, in a worker thread), sends a leader's early messages, flushes
   the log (fsync: a voter's in this task, an observer's in a worker thread, see
   `_flush`; a broker-only node's beside the loop, see `_flush_lazily`). Events that
   arrive during those fsyncs wait in the inbox and are all handled in the next turn,
   so their appends share the next fsync (group commit);
3. sends the other messages (never blocking: written at once when the connection is
   idle, else bounded per-connection queues that drop when full), publishes newly
   committed batches to the commit listeners, `advance(ready)`.

Hooks for the layers above (metadata controller, brokers):

- `node.add_api_handler(api, handler)`: `async handler(body, cluster_id) -> body` serves an
  extra msgpack api on this node's listener (admin requests, broker registration). The
  response frame echoes the request's api and correlation_id. Raise `ApiError` to answer
  `{"error_code": ..., "error_message": ...}`.
- `await node.propose_and_wait(records) -> (epoch, last_offset)`: appends through this
  node's core and returns once the records are committed; raises `NotLeaderError` (with
  `leader_id` and `leader_address`) if this node is not the leader or loses leadership
  before the records commit (they may still commit later: callers retry idempotently).
- `node.propose_soon(records, on_done)`: the same without waiting; `on_done` gets
  `(epoch, last_offset)` or the error, in the core task. Proposals of one turn share a
  batch.
- `await node.decide_and_propose(decide)`: the same, but `decide(now_ms, log_end_offset)`
  runs in the core task and its records are proposed in that same step (the metadata
  controller decides against its pending view and needs the exact offsets).
- `node.add_commit_listener(callback)`: `callback(batch)` is called in offset order with
  each newly committed `Batch` (cut at the high watermark) as the high watermark advances,
  starting from `publish_from` after every start (a replay of the committed log: from 0,
  or from the end offset of the snapshot the layers above started from). It runs in
  the core task: it must be quick and must not block (hand the batch to a channel); an
  exception it raises stops the node, loudly. Add listeners before `run()`.
- `node.add_high_watermark_listener(callback)`: `callback(high_watermark)` is called in
  the core task each time the published high watermark advances, once the commit
  listeners have had every batch below it; also when there was none to hand them (a
  start from a snapshot that ends at the high watermark). Quick, like a commit listener.
- `node.add_leader_high_watermark_listener(callback)`: `callback(offset)` in the core
  task when the leader's high watermark as this node heard it rose. A follower's own
  high watermark stops at its log end; a catching-up broker compares against this one.
- `node.add_snapshot_listener(callback)`: `await callback(snapshot_id)` in the core task
  when a snapshot fetched from the leader (FetchSnapshot) replaced the log, before any
  record after it is published: the layers above reload their state from that snapshot.
- `await node.advance_log_start(snapshot_id)`: after a snapshot of committed records was
  written, start the log there (segments and older snapshots below it are deleted).
- `node.add_ready_observer(callback)`: `callback(ready, now_ms)` in the core task after
  each turn's Ready was persisted, sent and published (metrics: `tools.metrics` reads the
  role, epoch, offsets and appended batches from it and the node). It must be quick; an
  exception it raises is logged and the observer dropped, never stopping the node.
- `node.add_background_task(fn)`: `await fn()` runs beside the node (e.g. the
  controller's broker-session timer), cancelled when the node stops.
- `node.set_request_gate(gate)`: every request arriving on this node's listener (a
  Raft RPC, DescribeQuorum or an api above) passes `gate(api)` first, in the
  connection's task; a refusal is answered with its error code (a Raft request in its
  response's shape) and nothing of the request reaches the core or a handler.
- `await node.serve_api(api, body, cluster_id)`: the answer this node's listener gives
  to one request, for another listener of the node (a broker's status port) to serve too.
- `await node.checkpoint_high_watermark()`: the high-watermark checkpoint written now,
  e.g. before a snapshot, so no snapshot ever ends above the checkpoint on disk.
- `node.leader_id`, `node.leader_address`, `node.is_leader`, `node.high_watermark`,
  `node.leader_high_watermark`, `node.epoch`, `node.first_published_offset`, `node.role`,
  `node.log_end_offset`, `node.log_end_epoch`.

High-watermark checkpoint: a node whose log has a `directory` (a `DiskLog`) keeps
`<directory>/high-watermark-checkpoint` (`raft.storage`) so tools such as `kraft replay`
can tell committed records from a tail that was merely replicated (Raft §5.4.2). It only
ever holds a high watermark this node published, i.e. after the records below it were
flushed here, and never moves back (a restarted node starts from HW 0 and catches up).
It is written in a worker thread, beside the core loop, at most once per
`HW_CHECKPOINT_INTERVAL_S` while the HW advances, and once more on a graceful stop;
a failed write is a log-dir failure like any other.

A broken invariant (`raft.core.RaftInvariantError`, raised by the core in the core task,
also inside a `call`) stops the node at once: from the raise on nothing is sent,
acknowledged or published (no response, Fetch answer, commit acknowledgement or high
watermark), one ERROR names the invariant, and `run()` raises the error (in an exception
group). Waiters in `propose_and_wait`/`call` are not woken: they are cancelled with the
node's tasks. `kraft node` exits with code 3 and never rebuilds such a node.

The logger `raft.node.messages` at DEBUG traces every message in and out.

Test-only (chaos): `fault_file` names a `raft.fault_injection` JSON file that can slow
every fsync (`fsync_delay_ms`) and skew this node's clock (`clock_rate`); None: off.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from raft import messages
from raft.common.connection_limits import ACCEPT_WARNING_INTERVAL_S, RateLimit, out_of_descriptors
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from raft.core import RaftConfig, RaftCore, RaftInvariantError
from raft.fault_injection import FaultInjection
from raft.snapshot_store import SnapshotStore
from raft.storage import read_high_watermark_checkpoint, write_high_watermark_checkpoint
from raft.transport import Address, Connection, Frame, ProtocolError, Transport
from raft.types import Batch, ElectionState, Envelope, RaftLog, Ready, SnapshotId

log = logging.getLogger(__name__)

ApiHandler = Callable[[Any, str], Awaitable[Any]]
# api -> None to serve it, or (error code, why) to refuse it; reads the caller from the
# connection's session (`raft.common.session.current_session`)
RequestGate = Callable[[str], "tuple[ErrorCode, str] | None"]
CommitListener = Callable[[Batch], None]
DESCRIBE_QUORUM = "DescribeQuorumRequest"
HW_CHECKPOINT_INTERVAL_S = 1.0
LAZY_FLUSH_INTERVAL_S = 1.0  # a broker-only node's log flush (`observer_flushes`)
INBOX_SIZE = 1024
COALESCED_BATCH_BYTES = 64 * 1024  # proposals of one turn share a batch until this size
PUBLISH_BYTES_PER_TURN = 64 * 1024  # committed batches handed to the listeners per turn
MAX_EVENTS_PER_TURN = 1024
MAX_ROUTES_PER_CONNECTION = 4096
SHUTDOWN_DRAIN_S = 1.0
trace = logging.getLogger("raft.node.messages")  # every message in and out, at DEBUG


class NotLeaderError(Exception):
    """This node is not (or stopped being) the leader; try `leader_id` at `leader_address`."""

    def __init__(self, leader_id: int | None, leader_address: Address | None) -> None:
        where = f" at {leader_address[0]}:{leader_address[1]}" if leader_address else ""
        super().__init__(f"not the leader; leader is {leader_id}{where}"
                         if leader_id is not None else "not the leader; no leader known")
        self.leader_id = leader_id
        self.leader_address = leader_address


class ApiError(Exception):
    """Raised by an api handler: answered as `{error_code, error_message}`."""

    def __init__(self, error_code: int, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.error_code = int(error_code)
        self.fields = fields


@dataclass(eq=False)
class _Call:
    """Run `fn(now_ms)` in the core task; the caller waits on `done`."""

    fn: Callable[[int], Any]
    done: trio.Event = field(default_factory=trio.Event)
    result: Any = None
    error: BaseException | None = None


ProposalCallback = Callable[[tuple[int, int] | Exception], None]


@dataclass(eq=False, slots=True)
class _Waiter:
    """A proposal waiting for its commit: `on_done` gets (epoch, last offset) once its
    records committed, or the error (NotLeaderError, LogDirFailure) that ended the wait."""

    on_done: ProposalCallback
    epoch: int = 0
    last_offset: int = -1  # set once proposed

    def settle(self, error: Exception | None = None) -> None:
        self.on_done(error if error is not None else (self.epoch, self.last_offset))


class _Outcome:
    """A `ProposalCallback` that a task can wait on."""

    def __init__(self) -> None:
        self._done = trio.Event()
        self._result: tuple[int, int] | Exception | None = None

    def __call__(self, result: tuple[int, int] | Exception) -> None:
        self._result = result
        self._done.set()

    async def wait(self) -> tuple[int, int]:
        await self._done.wait()
        assert self._result is not None
        if isinstance(self._result, Exception):
            raise self._result
        return self._result


class _Shutdown:
    pass


_PROPOSALS_QUEUED = object()  # inbox item: wake the core task, proposals wait in `_queued`


@dataclass(frozen=True, slots=True)
class _PeerDown:
    """From the transport: the connection to voter `node_id` closed, or (`refused`) a
    connect to it was refused."""

    node_id: int
    refused: bool


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


class RaftNode:
    """One quorum member (voter) or observer. `write_election` persists quorum-state
    atomically with fsync, in a worker thread.

    `observer_flushes`: whether the node, while an observer, flushes its log before its
    next Fetch, as a voter always does (Kafka's followers-always-flush, on for a node
    with the controller role). A leader counts a voter's fetch offset as durable, and an
    observer added as a voter (KIP-853) counts from its last Fetch on. False suits a
    broker-only node, which is never added: its log, a copy of records the voters hold,
    is flushed beside the core loop at most every `LAZY_FLUSH_INTERVAL_S`
    (`_flush_lazily`); a crash may cost it a tail, fetched again after the restart."""

    def __init__(self, *, node_id: int, cluster_id: str, voters: dict[int, Address],
                 config: RaftConfig, log: RaftLog, election: ElectionState | None,
                 write_election: Callable[[ElectionState], None],
                 listen: Address | None = None,
                 listeners: list[trio.SocketListener] | None = None,
                 max_frame_bytes: int = 100 * 1024 * 1024, send_queue_size: int = 256,
                 rng: random.Random | None = None,
                 fault_file: str | os.PathLike[str] | None = None,
                 publish_from: int = 0, snapshots: SnapshotStore | None = None,
                 directory_id: Uuid | None = None, observer_flushes: bool = True) -> None:
        if not log.start_offset <= publish_from <= log.end_offset:  # never skip records
            raise ValueError(f"publish_from {publish_from} outside the log "
                             f"[{log.start_offset}, {log.end_offset}]")
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.voters = dict(voters)
        self.directory_id = directory_id  # KIP-853: this replica's key is (id, directory)
        self._known_voter_set: Any = None  # the core's voter set last turned into peers
        self._config = config
        self._log = log
        self._snapshots = snapshots
        self._snapshot_listeners: list[Callable[[SnapshotId], Awaitable[None]]] = []
        self._initial_election = election
        self._write_election = write_election
        self._rng = rng or random.Random()
        self._core: RaftCore | None = None
        self._inbox_send, self._inbox_recv = trio.open_memory_channel[Any](INBOX_SIZE)
        self._handlers: dict[str, ApiHandler] = {}
        self._listeners: list[CommitListener] = []
        self._hw_listeners: list[Callable[[int], None]] = []
        self._leader_hw_listeners: list[Callable[[int], None]] = []
        self._ready_observers: list[Callable[[Ready, int], None]] = []
        self._background: list[Callable[[], Awaitable[None]]] = []
        self._waiters: deque[_Waiter] = deque()  # proposed, in offset order
        self._queued: deque[tuple[list[bytes], _Waiter]] = deque()  # to propose this turn
        self._queued_wake_sent = False
        self._routes: dict[tuple[int, int], int] = {}  # (src, correlation id) -> conn id
        # per connection, in arrival order (a dict used as an ordered set)
        self._conn_routes: dict[int, dict[tuple[int, int], None]] = {}
        self._published = publish_from  # next offset to hand to commit listeners
        self._publish_to = publish_from  # the high watermark to publish up to (flushed here)
        self._hw_announced = True  # the HW listeners heard of `_publish_to` (once reached)
        self._first_published = publish_from
        # The high-watermark checkpoint (see the module docstring); None: a MemoryLog.
        directory = getattr(log, "directory", None)
        self._hw_checkpoint_dir = Path(directory) if directory is not None else None
        self._hw_published = 0  # the last HW the listeners heard of
        self._hw_checkpointed = 0
        self._hw_advanced = trio.Event()
        self._hw_checkpoint_lock = trio.Lock()  # one writer of the file at a time
        self._observer_flushes = observer_flushes
        self._lazy_flush_due = trio.Event()
        self._lazy_flush_lock = trio.Lock()
        self._clock_offset_s = 0.0
        self._faults = FaultInjection(fault_file) if fault_file else None
        self._clock_real_s = 0.0  # with faults: the trio time of the last now_ms reading
        self._clock_virtual_s = 0.0  # ... and the node's clock then (rate-skewed)
        self._stopping = False
        self._log_dir_failure: LogDirFailure | None = None  # the first one, the one logged
        self._stop_at: float | None = None  # trio time by which a resigning node exits
        self._handover_pending: set[int] = set()  # voters yet to answer EndQuorumEpoch
        self._last_state: tuple[Any, ...] = ()
        self.started = trio.Event()
        self.transport = Transport(
            node_id=node_id, peers=self.voters, handler=self._on_frame, listen=listen,
            listeners=listeners, on_close=self._forget_routes, on_peer_down=self._peer_down,
            max_frame_bytes=max_frame_bytes, queue_size=send_queue_size, rng=self._rng)

    # -- hooks --------------------------------------------------------------------------

    def add_api_handler(self, api: str, handler: ApiHandler) -> None:
        if api in messages.CLASS_BY_API or api == DESCRIBE_QUORUM or api in self._handlers:
            raise ValueError(f"api {api!r} is already served")
        self._handlers[api] = handler

    def set_request_gate(self, gate: RequestGate) -> None:
        def refused(conn: Connection, frame: Frame) -> bool:
            """In the connection's task, before anything else reads the frame: True when
            the gate refused (and this answered) the request."""
            refusal = gate(frame["api"])
            if refusal is not None:
                self._refuse(conn, frame["api"], frame["correlation_id"], *refusal)
            return refusal is not None
        self.transport.refused = refused

    def add_commit_listener(self, callback: CommitListener) -> None:
        self._listeners.append(callback)

    def add_high_watermark_listener(self, callback: Callable[[int], None]) -> None:
        self._hw_listeners.append(callback)

    def add_leader_high_watermark_listener(self, callback: Callable[[int], None]) -> None:
        """`callback(offset)` when the leader's high watermark as this node heard it rose
        (see `leader_high_watermark`)."""
        self._leader_hw_listeners.append(callback)

    def add_ready_observer(self, callback: Callable[[Ready, int], None]) -> None:
        """`callback(ready, now_ms)` after each turn's Ready was handled (see the module
        docstring): observation only, for metrics."""
        self._ready_observers.append(callback)

    def add_snapshot_listener(self, callback: Callable[[SnapshotId], Awaitable[None]]
                              ) -> None:
        """`await callback(snapshot_id)` when a snapshot fetched from the leader replaced
        this node's log: the state machine reloads from it; commit listeners then get
        the records from its end offset on."""
        self._snapshot_listeners.append(callback)

    async def advance_log_start(self, snapshot_id: SnapshotId) -> bool:
        """Start the log at a snapshot of committed records this node holds, deleting the
        segments and snapshots below it (`RaftCore.advance_log_start`)."""
        advanced: bool = await self.call(lambda now: self.core.advance_log_start(snapshot_id))
        return advanced

    def add_background_task(self, fn: Callable[[], Awaitable[None]]) -> None:
        """`await fn()` runs beside the node once it listens, until it stops (cancelled).
        Add before `run()`."""
        self._background.append(fn)

    async def propose_and_wait(self, records: Sequence[bytes]) -> tuple[int, int]:
        outcome = _Outcome()
        self.propose_soon(records, outcome)
        return await outcome.wait()

    def propose_soon(self, records: Sequence[bytes], on_done: ProposalCallback) -> None:
        """Propose without waiting: `on_done((epoch, last_offset))` runs in the core task
        once the records committed, `on_done(error)` if they may not have (see
        `propose_and_wait`); it must be quick and must not raise. Proposals made during
        one turn of the core task are appended as one batch (up to
        `COALESCED_BATCH_BYTES`, as Kafka's raft client accumulates them), so concurrent
        callers share a batch, its fsync and its Fetch round."""
        if not records:
            raise ValueError("propose needs at least one record")
        self._queued.append((list(records), _Waiter(on_done)))
        if not self._queued_wake_sent:
            self._queued_wake_sent = True
            try:
                self._inbox_send.send_nowait(_PROPOSALS_QUEUED)
            except trio.WouldBlock:
                pass  # a full inbox: the core task is busy, and drains `_queued` each turn

    async def decide_and_propose(self, decide: Callable[[int, int], Sequence[bytes]]
                                 ) -> tuple[int, int] | None:
        """Run `decide(now_ms, log_end_offset)` in the core task and propose what it returns
        in the same step, so the records land exactly at `log_end_offset` (the controller
        puts offsets in records, e.g. a broker epoch); then wait for their commit like
        `propose_and_wait`. None (at once) when `decide` returns no records. Raises
        NotLeaderError when this node is not the leader, before `decide` runs."""
        outcome = _Outcome()

        def run(now: int) -> bool:
            if not self.is_leader:
                raise NotLeaderError(self.leader_id, self.leader_address)
            records = list(decide(now, self._log.end_offset))
            if records:
                self._propose(records, now, outcome)
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

    async def shutdown(self) -> None:
        """Graceful stop: a leader resigns (EndQuorumEpoch), queues drain (bounded)."""
        await self._inbox_send.send(_Shutdown())

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
        """The leader's high watermark as last heard (None before any answer). A
        follower's `high_watermark` stops at its own log end; this one does not, so a
        catching-up node knows how far it still has to go."""
        return self._core.leader_high_watermark if self._core else None

    @property
    def role(self) -> str | None:
        """The core's quorum state (`raft.core.Role`'s value); None before `run()`."""
        return str(self._core.role) if self._core else None

    @property
    def log_end_offset(self) -> int:
        return self._log.end_offset

    @property
    def log_end_epoch(self) -> int:
        """The epoch of the last record in the log (the snapshot's at an empty log)."""
        return self._log.last_epoch

    @property
    def first_published_offset(self) -> int:
        """The first offset commit listeners get after this start (`publish_from`)."""
        return self._first_published

    @property
    def port(self) -> int | None:
        return self.transport.port

    def now_ms(self) -> int:
        """Monotonic milliseconds that read like wall-clock time (for DescribeQuorum)."""
        if self._faults is None:
            return int((trio.current_time() + self._clock_offset_s) * 1000)
        real = trio.current_time()
        self._clock_virtual_s += (real - self._clock_real_s) * self._faults.clock_rate
        self._clock_real_s = real
        self._faults.poll(real)  # a new rate applies from this reading on
        return int(self._clock_virtual_s * 1000)

    # -- running ------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[int | None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Serve until `shutdown()`; reports the bound listener port once listening."""
        self._clock_offset_s = time.time() - trio.current_time()
        self._clock_real_s = trio.current_time()
        self._clock_virtual_s = self._clock_real_s + self._clock_offset_s
        await self.transport.bind()  # a busy port fails here, as a plain OSError
        try:
            self._core = RaftCore(node_id=self.node_id, config=self._config, log=self._log,
                                  election=self._initial_election,
                                  cluster_id=self.cluster_id, rng=self._rng,
                                  now_ms=self.now_ms(), snapshots=self._snapshots,
                                  directory_id=self.directory_id,
                                  # not the last run's: late replies to those must match none
                                  first_correlation_id=1 + self._rng.randrange(1 << 30))
        except RaftInvariantError as exc:
            self._invariant_broken(exc)
            raise
        async with trio.open_nursery() as nursery:
            port = await nursery.start(self.transport.serve)
            log.info("node started", extra={"node": self.node_id, "port": port,
                                            "epoch": self.epoch,
                                            "log_end_offset": self._log.end_offset})
            self.started.set()
            task_status.started(port)
            for background in self._background:
                nursery.start_soon(background)
            if self._hw_checkpoint_dir is not None:
                self._hw_checkpointed = read_high_watermark_checkpoint(
                    self._hw_checkpoint_dir) or 0
                nursery.start_soon(self._checkpoint_high_watermark_every)
            if not self._observer_flushes:
                nursery.start_soon(self._flush_lazily)
            try:
                await self._core_loop()
                await self.checkpoint_high_watermark()  # graceful stop: the final HW
            except OSError as exc:
                raise self._log_dir_failed(exc) from exc
            except RaftInvariantError as exc:  # the nursery cancels every task at once
                self._invariant_broken(exc)
                raise
            await self.transport.drain(SHUTDOWN_DRAIN_S)
            nursery.cancel_scope.cancel()
        log.info("node stopped", extra={"node": self.node_id})

    def _log_dir_failed(self, exc: OSError) -> LogDirFailure:
        """Stop on a storage error: nothing after it was sent or acknowledged. One failure,
        one ERROR: the paths that meet the same full disk (the core loop's write, the lazy
        flush's worker thread, which cancelling cannot stop, the checkpoint) each raise
        to stop the node, but only the first is logged."""
        directory = str(getattr(self._log, "directory", None) or exc.filename or "?")
        failure = LogDirFailure(directory, exc)
        if self._log_dir_failure is None:
            self._log_dir_failure = failure
            log.error("log directory failed, node stopped accepting writes",
                      extra={"node": self.node_id, "dir": directory, "error": str(exc)})
        for waiter in [*self._waiters, *(waiter for _, waiter in self._queued)]:
            waiter.settle(self._log_dir_failure)
        self._waiters.clear()
        self._queued.clear()
        return failure

    def _invariant_broken(self, exc: RaftInvariantError) -> None:
        """Stop on a broken invariant. Called in the core task before the error leaves
        `run()`'s nursery, which cancels every other task before it can run again: what
        the core produced since the last hand-over is never sent, acknowledged or
        published. Waiters are not woken (they are cancelled with the node)."""
        self._stopping = True
        log.error("raft invariant broken, node stopped: %s", exc, extra={"node": self.node_id})

    def _to_trio_time(self, deadline_ms: int) -> float:
        if self._faults is None:
            return deadline_ms / 1000 - self._clock_offset_s
        ahead_s = deadline_ms / 1000 - self._clock_virtual_s  # node time left, at last read
        return self._clock_real_s + max(0.0, ahead_s) / self._faults.clock_rate

    def snapshot_control_records(self, end_offset: int) -> list[bytes]:
        """What a snapshot ending at `end_offset` must hold of raft's own state (the
        voter set and kraft.version, KIP-853); written first by the snapshot writer."""
        return self.core.snapshot_control_records(end_offset)

    def _learn_voter_addresses(self) -> None:
        """KIP-853: a voter named by a VotersRecord and not configured becomes a peer at
        its first endpoint, before anything is sent to it."""
        voters = self.core.voter_set
        if voters is self._known_voter_set:
            return
        self._known_voter_set = voters
        for voter in voters:
            if voter.key.id == self.node_id or voter.key.id in self.voters:
                continue
            endpoint = next(iter(voter.endpoints), None)
            if endpoint is not None:
                self.voters[voter.key.id] = (endpoint.host, endpoint.port)
                self.transport.add_peer(voter.key.id, (endpoint.host, endpoint.port))

    def _peer_down(self, node_id: int, refused: bool) -> None:
        """The transport lost (or could not open) its connection to a voter: an input to
        the core like a message, which decides what it means (`RaftCore.peer_unreachable`
        and `peer_disconnected`). Dropped when the inbox is full: the timeouts remain."""
        try:
            self._inbox_send.send_nowait(_PeerDown(node_id, refused))
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            log.debug("inbox full, peer loss not reported", extra={"dst": node_id})

    async def _core_loop(self) -> None:
        core = self.core
        await self._process_ready()  # e.g. a restarted leader-to-be persisting its state
        while not self._stopping:
            item = None
            wake_at = self._to_trio_time(core.next_deadline_ms())
            if self._stop_at is not None:
                wake_at = min(wake_at, self._stop_at)
            if self._published < min(self._publish_to, self._log.end_offset):
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
            self._propose_queued(now)
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
        if self._faults is not None and self._faults.fsync_delay_ms and \
                (ready.election is not None or ready.needs_flush):
            await trio.sleep(self._faults.fsync_delay_ms / 1000)  # test-only slow disk
        if ready.election is not None:
            await trio.to_thread.run_sync(self._write_election, ready.election)
        self._send_all(ready.early_messages)  # the leader's records, while it flushes
        if ready.needs_flush:
            if self.core.is_voter or self._observer_flushes:
                await self._flush(early_sent=bool(ready.early_messages))
            else:
                self._lazy_flush_due.set()
        self._send_all(ready.late_messages)
        if ready.loaded_snapshot is not None:
            for snapshot_listener in self._snapshot_listeners:
                await snapshot_listener(ready.loaded_snapshot)
            self._published = ready.loaded_snapshot.end_offset
        if ready.high_watermark is not None:
            # Not core.high_watermark later: a follower raises it before the flush
            # that makes the records below it durable here.
            self._publish_to = ready.high_watermark
            self._hw_announced = False
        self._publish_some()
        if ready.leader_high_watermark is not None:
            for leader_hw_listener in self._leader_hw_listeners:
                leader_hw_listener(ready.leader_high_watermark)
        core.advance(ready)
        self._settle_waiters()
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
        serving meanwhile (a broker-only node skips this: `_flush_lazily`)."""
        if not self.core.is_voter:
            await trio.to_thread.run_sync(self._log.flush)
            return
        if early_sent and self.transport.pending():
            await trio.lowlevel.checkpoint()
            await trio.lowlevel.checkpoint()
        self._log.flush()

    async def _flush_lazily(self) -> None:
        """The log flush of a node that skips it before fetching (`observer_flushes`):
        its fsyncs run in a worker thread while the core loop goes on appending and
        fetching, at most one per `LAZY_FLUSH_INTERVAL_S`."""
        try:
            while True:
                await self._lazy_flush_due.wait()
                self._lazy_flush_due = trio.Event()
                await self._sync_log_beside()
                await trio.sleep(LAZY_FLUSH_INTERVAL_S)
        except OSError as exc:
            raise self._log_dir_failed(exc) from exc

    async def _sync_log_beside(self) -> None:
        """fsync the log as it is now in a worker thread while the core loop goes on
        (`RaftLog.begin_flush`); one at a time."""
        async with self._lazy_flush_lock:
            sync = self._log.begin_flush()
            await trio.to_thread.run_sync(sync.run)
            self._log.finish_flush(sync)
        self._hw_advanced.set()  # the checkpoint may rise to what is durable now

    def _send_all(self, envelopes: tuple[Envelope, ...]) -> None:
        for envelope in envelopes:
            self._send(envelope)

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

    # -- proposals and commits ----------------------------------------------------------

    def _propose(self, records: list[bytes], now: int, on_done: ProposalCallback) -> None:
        core = self.core
        result = core.propose(records, now) if core.is_leader else None
        if result is None:
            raise NotLeaderError(self.leader_id, self.leader_address)
        self._waiters.append(_Waiter(on_done, *result))

    def _propose_queued(self, now: int) -> None:
        """Propose what `propose_soon` queued, consecutive proposals as one batch."""
        self._queued_wake_sent = False
        queued = self._queued
        if not queued:
            return
        if not self.core.is_leader:
            error = NotLeaderError(self.leader_id, self.leader_address)
            for _, waiter in queued:
                waiter.settle(error)
            queued.clear()
            return
        while queued:
            records: list[bytes] = []
            group: list[tuple[int, _Waiter]] = []  # (its record count, its waiter)
            size = 0
            while queued and size < COALESCED_BATCH_BYTES:
                more, waiter = queued.popleft()
                records.extend(more)
                size += sum(map(len, more))
                group.append((len(more), waiter))
            result = self.core.propose(records, now)
            assert result is not None  # a leader's
            epoch, last_offset = result
            offset = last_offset - len(records)
            for count, waiter in group:
                offset += count
                waiter.epoch, waiter.last_offset = epoch, offset
                self._waiters.append(waiter)

    def _settle_waiters(self) -> None:
        core = self.core
        hw = core.high_watermark
        while self._waiters and self._waiters[0].last_offset < hw:
            waiter = self._waiters.popleft()
            if self._log.end_offset <= waiter.last_offset or \
                    self._log.epoch_at(waiter.last_offset) != waiter.epoch:
                waiter.settle(NotLeaderError(self.leader_id, self.leader_address))
            else:
                waiter.settle()
        if self._waiters and (not core.is_leader or core.epoch != self._waiters[0].epoch):
            error = NotLeaderError(self.leader_id, self.leader_address)
            for waiter in self._waiters:
                waiter.settle(error)
            self._waiters.clear()

    def _publish_some(self) -> None:
        """Hand the commit listeners the next committed batches, at most about
        `PUBLISH_BYTES_PER_TURN` of them, then tell the HW listeners how far they got. A
        long backlog (a restart replaying a long log: seconds of decoding in the layers
        above) is spread over turns, so the node keeps voting and answering meanwhile;
        the loop does not wait for input while some is left."""
        target = self._publish_to
        if self._published < target:
            self._publish(target, PUBLISH_BYTES_PER_TURN)
        elif self._hw_announced:
            return
        reached = self._published if self._published < target else target
        if reached > self._hw_published or not self._hw_announced and reached == target:
            for hw_listener in self._hw_listeners:
                hw_listener(reached)
            self._hw_published = reached
            self._hw_advanced.set()
        self._hw_announced = reached == target

    def _publish(self, high_watermark: int, max_bytes: int) -> None:
        """The batches from `_published` on (about `max_bytes`, at least one), cut at
        `high_watermark`, to the commit listeners."""
        for batch in self._log.read(self._published, max_bytes):
            if batch.base_offset >= high_watermark:
                return
            start = self._published - batch.base_offset
            end = min(batch.next_offset, high_watermark) - batch.base_offset
            if start > 0 or end < len(batch.records):
                batch = Batch(base_offset=self._published, epoch=batch.epoch,
                              records=batch.records[start:end])
            for listener in self._listeners:
                listener(batch)
            self._published = batch.next_offset

    async def _checkpoint_high_watermark_every(self) -> None:
        """Coalesced: one write per advance, then at most one per interval. A process
        out of file descriptors (EMFILE, ENFILE) is no log-directory failure: the
        checkpoint is tried again next interval, with a WARNING at most every
        `ACCEPT_WARNING_INTERVAL_S`; any other OSError stops the node."""
        warning = RateLimit(ACCEPT_WARNING_INTERVAL_S)
        while True:
            await self._hw_advanced.wait()
            self._hw_advanced = trio.Event()
            try:
                await self._checkpoint_high_watermark()
            except OSError as exc:
                if not out_of_descriptors(exc):
                    raise self._log_dir_failed(exc) from exc
                self._hw_advanced.set()  # the next interval tries again
                if warning.due(trio.current_time()):
                    log.warning("out of file descriptors, high-watermark checkpoint "
                                "postponed", extra={"node": self.node_id, "error": str(exc),
                                                    "suppressed": warning.take_suppressed()})
            await trio.sleep(HW_CHECKPOINT_INTERVAL_S)

    async def checkpoint_high_watermark(self) -> None:
        """Write the high-watermark checkpoint now (the last high watermark published),
        unless it already holds it; OSError when the write fails. A node that flushes
        lazily (`observer_flushes`) flushes its log first, so the checkpoint covers all
        it published (a snapshot never ends above it)."""
        if not self._observer_flushes:
            await self._sync_log_beside()
        await self._checkpoint_high_watermark()

    async def _checkpoint_high_watermark(self) -> None:
        if self._hw_checkpoint_dir is None:
            return
        async with self._hw_checkpoint_lock:
            # What was published is flushed here, unless the log flushes lazily
            # (`observer_flushes`): then what is durable bounds it.
            offset = min(self._hw_published, self._log.flushed_end_offset)
            if offset <= self._hw_checkpointed:
                return
            await trio.to_thread.run_sync(write_high_watermark_checkpoint,
                                          self._hw_checkpoint_dir, offset)
            self._hw_checkpointed = offset

    # -- messages in and out ------------------------------------------------------------

    def _frame(self, api: str, correlation_id: int, body: Any) -> Frame:
        return {"api": api, "version": 0, "correlation_id": correlation_id,
                "cluster_id": self.cluster_id, "body": body, "src": self.node_id}

    def _send(self, envelope: Envelope) -> None:
        api, body = messages.encode_message(envelope.message)
        if trace.isEnabledFor(logging.DEBUG):
            trace.debug("send", extra={"dst": envelope.dst, "cid": envelope.correlation_id,
                                       "detail": repr(envelope.message)[:500]})
        frame = self._frame(api, envelope.correlation_id, body)
        if messages.is_response(envelope.message):
            key = (envelope.dst, envelope.correlation_id)
            conn_id = self._routes.pop(key, None)
            if conn_id is not None:
                self._conn_routes.get(conn_id, {}).pop(key, None)
                self.transport.send_on(conn_id, frame)
        else:
            self.transport.send_to_peer(envelope.dst, frame)

    def _forget_routes(self, conn: Connection) -> None:
        for key in self._conn_routes.pop(conn.conn_id, {}):
            if self._routes.get(key) == conn.conn_id:  # not re-mapped by a new connection
                del self._routes[key]

    def _remember_route(self, src: int, correlation_id: int, conn: Connection) -> None:
        keys = self._conn_routes.setdefault(conn.conn_id, {})
        if len(keys) >= MAX_ROUTES_PER_CONNECTION:  # bounded: forget the oldest request,
            oldest = next(iter(keys))  # which the core superseded or will never answer
            del keys[oldest]
            self._routes.pop(oldest, None)
        self._routes[(src, correlation_id)] = conn.conn_id
        keys[(src, correlation_id)] = None

    async def _on_frame(self, conn: Connection, frame: Frame) -> None:
        """Runs in the connection's reader task: decode, then hand over to the core task."""
        api, correlation_id, body = frame["api"], frame["correlation_id"], frame["body"]
        if conn.node_id is not None:  # our outbound connection: a response to our request
            message = self._decode(api, body)
            if not messages.is_response(message):
                raise ProtocolError(f"{api} received where only responses are expected")
            await self._inbox_send.send(Envelope(src=conn.node_id, dst=self.node_id,
                                                 correlation_id=correlation_id,
                                                 message=message))
            return
        if api in self._handlers or api == DESCRIBE_QUORUM:
            reply = await self._serve_api(api, body, frame["cluster_id"])
            self.transport.send_on(conn.conn_id, self._frame(api, correlation_id, reply))
            return
        message = self._decode(api, body)
        if not messages.is_request(message):
            raise ProtocolError(f"unsolicited {api}")
        claimed = frame.get("src")
        src = claimed if type(claimed) is int and claimed >= 0 else -conn.conn_id
        self._remember_route(src, correlation_id, conn)
        await self._inbox_send.send(Envelope(src=src, dst=self.node_id,
                                             correlation_id=correlation_id, message=message))

    def _refuse(self, conn: Connection, api: str, correlation_id: int, code: ErrorCode,
                why: str) -> None:
        trace.debug("refused", extra={"api": api, "peer": conn.peer, "reason": why})
        response = messages.refusal(api, code, why)
        reply_api, body = response or (api, {"error_code": int(code), "error_message": why})
        self.transport.send_on(conn.conn_id, self._frame(reply_api, correlation_id, body))

    @staticmethod
    def _decode(api: str, body: Any) -> Any:
        try:
            return messages.decode_message(api, body)
        except messages.MessageError as exc:
            raise ProtocolError(f"malformed {api!r:.60}: {exc}") from None

    async def serve_api(self, api: str, body: Any, cluster_id: Any) -> Any:
        """The answer this node's listener gives to `api`; an error body when it serves
        no such api."""
        if api not in self._handlers and api != DESCRIBE_QUORUM:
            return {"error_code": int(ErrorCode.INVALID_REQUEST),
                    "error_message": f"node {self.node_id} serves no {api!r:.60} api"}
        return await self._serve_api(api, body, cluster_id)

    async def _serve_api(self, api: str, body: Any, cluster_id: Any) -> Any:
        if cluster_id not in (None, "", self.cluster_id):  # tools may not know it yet
            return {"error_code": int(ErrorCode.INCONSISTENT_CLUSTER_ID),
                    "error_message": f"cluster id {cluster_id!r:.40} is not {self.cluster_id}"}
        try:
            if api == DESCRIBE_QUORUM:
                return await self.call(self._describe_quorum)
            return await self._handlers[api](body, cluster_id)
        except ApiError as exc:
            return {"error_code": exc.error_code, "error_message": str(exc), **exc.fields}
        except NotLeaderError as exc:
            return self.not_leader_body(exc)
        except LogDirFailure as exc:  # logged once where it happened; the caller retries
            return {"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "error_message": str(exc)}
        except Exception as exc:  # a handler bug must not take the quorum member down
            log.exception("api handler failed", extra={"api": api})
            return {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR),
                    "error_message": f"{type(exc).__name__}: {exc}"}

    @staticmethod
    def not_leader_body(exc: NotLeaderError) -> dict[str, Any]:
        address = exc.leader_address
        return {"error_code": int(ErrorCode.NOT_LEADER_OR_FOLLOWER), "error_message": str(exc),
                "leader_id": -1 if exc.leader_id is None else exc.leader_id,
                "leader_address": f"{address[0]}:{address[1]}" if address else None}

    def _describe_quorum(self, now: int) -> dict[str, Any]:
        """DescribeQuorum; a non-leader also names the leader's address so tools follow."""
        response = self.core.describe_quorum(now)
        _, body = messages.encode_message(response)
        address = self.leader_address
        body["leader_address"] = f"{address[0]}:{address[1]}" if address else None
        body["node_id"] = self.node_id
        body["cluster_id"] = self.cluster_id
        body["is_leader"] = self.is_leader
        return body
