"""Random fault schedules, dense enough that one seed sees many epochs and logs that
diverge over several of them.

Streams of faults overlap during the fault window (see `_Nemesis`): background
faults of every kind, one starting every 0.5-2.5 s and lasting 0.3-5 s; and a leader
chaser, which aims a fault at each newly elected leader 0.2-2 s after it wins (2.5-6 s
long, enough for the others to notice and elect a successor); and, with crash faults,
`crash-between-steps` every 1-4 s, drawn from its own `Random` so the other two draw as
they did without it. Each fault is injected,
then undone; overlapping cuts compose (`Network.hold`). At `window_ms` everything heals:
every link, disk and clock back to normal, every node running again; or, with
`dead_voters`, all but that many voters (drawn at the heal), which are crashed and never
start again: a partial heal, after which the live majority must still commit.

- network: `partition` (a random split), `isolate-leader`, `one-way` cuts, `lossy` and
  duplicating links, `lossy-snapshots` (FetchSnapshot answers lost: downloads resume
  from the bytes held), `partial` (random links cut), `slow-net`, `leader-minority` (the
  leader and a minority of voters split off: the leader keeps writing a tail only they
  get), `isolate-until-elected` (the same split, healed the moment the majority side has
  elected a newer leader, so the old one comes back with its stale tail),
  `cut-new-leader` (the next leader is cut off the moment it wins) and
  `multi-epoch-tail` (chaser only: four elections in a row that leave a node with an
  uncommitted tail of two epochs, see `_MultiEpochTail`), `reset` (connections to a live
  voter reset, one reconnect refused by mistake now and then: see `_reset`),
  `long-delay` (some messages held for up to four election timeouts: they arrive in an
  epoch long gone), `one-way-link` (one direction of one link cut) and `corrupt-wire`
  (some frames corrupted on the wire: refused by the real decoders, never applied; see
  `raft.sim.network`);
- processes and disks: `crash`, `crash-leader`, `shutdown-leader` (graceful resign, then
  stop), `crash-many`, `pause`, `pause-leader`, `slow-disk`, `crash-tail` (crash the node
  with the longest uncommitted tail), `bounce` (killed and restarted within 0.3 s),
  `wipe-observer` (an observer loses its disk), `torn-write` (a crash between the steps
  of the write in progress: its quorum-state write done, its log write torn or
  corrupted, which recovery scans off the segment bytes; see `Cluster.crash`) and
  `corrupt-quorum-state` (a node crashes and finds its quorum-state corrupt: it refuses
  to start, for good; a voter only in a static quorum, while the voters refusing stay a
  minority); and, in a third stream of its own, `crash-between-steps` (a node's disk
  armed to crash between two steps of a multi-step operation: a snapshot written,
  downloaded or deleted, the log start moved, the log truncated or reset; see
  `raft.sim.disk_steps`);
- clocks: `clock-jump` (a node's wall clock jumps up to a minute forward or back, and
  the node restarts, when it reads the jump: nothing safety-relevant may change).

Voters' disks are never wiped in a static quorum: a voter that forgets its vote can
vote twice in an epoch, which a static quorum cannot survive.

A dynamic run (`SimConfig.dynamic`, KIP-853) adds reconfiguration to every menu, each
request handed to the leader as a tool would (`Cluster.reconfigure`) and retried, as an
operator would, while it is refused for a reason that passes (REQUEST_TIMED_OUT,
NOT_LEADER_OR_FOLLOWER, no leader):
- `add-voter`: a running non-voter (a spare formatted as an observer, or a voter removed
  before) is added once the leader finds it caught up;
- `remove-voter`: a voter is removed (never below three);
- `replace-voter`: a voter's disk is wiped (formatted anew: a new directory id, no
  bootstrap), it restarts, its old key is removed and its new key added;
- `wipe-voter`: a voter's disk is lost in the middle of an election (the first voter
  seen to have voted in an epoch whose leader it does not know yet, within a few
  seconds), and it restarts as an observer with a new directory id a moment later;
- `reconfig-burst`: a removal and an addition requested at the same instant (the
  second must wait for the first to commit).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from raft.messages import AddRaftVoterRequest, RemoveRaftVoterRequest
from raft.sim.cluster import CLUSTER_ID, Cluster, SimNode
from raft.sim.network import Link, isolation_links, partition_links
from raft.voters import VoterHistory, VoterSet

FAULT_KINDS = ("all", "net", "crash", "none")
NET_FAULTS = ("partition", "isolate-leader", "one-way", "lossy", "partial", "slow-net",
              "leader-minority", "isolate-until-elected", "cut-new-leader", "multi-epoch-tail",
              "lossy-snapshots", "reset", "long-delay", "one-way-link", "corrupt-wire")
CRASH_FAULTS = ("crash", "crash-leader", "shutdown-leader", "crash-many", "pause",
                "pause-leader", "slow-disk", "crash-tail", "wipe-observer", "bounce",
                "torn-write", "corrupt-quorum-state", "clock-jump")
RECONFIG_FAULTS = ("add-voter", "remove-voter", "replace-voter", "wipe-voter",
                   "reconfig-burst")
RECONFIG_RETRY_MS = (100.0, 600.0)  # between an operator's attempts
RECONFIG_ATTEMPTS = 30
WIPE_WAIT_MS = 4000.0  # wipe-voter waits this long for an election to strike in
# How often each kind is drawn, relative to 1 for the kinds not listed.
WEIGHTS = {"isolate-leader": 2, "crash-leader": 2, "leader-minority": 3,
           "isolate-until-elected": 3, "crash-tail": 2, "bounce": 3, "multi-epoch-tail": 30,
           "lossy-snapshots": 3, "reset": 2,
           # dynamic runs (KIP-853) only: voter changes, often enough to overlap faults
           "add-voter": 3, "remove-voter": 3, "replace-voter": 3, "reconfig-burst": 2,
           "wipe-voter": 2}
GAP_MS = (500.0, 2500.0)  # between the starts of two background faults
CHASE_DELAY_MS = (200.0, 2000.0)  # from an election to the fault aimed at its winner
DURATION_MS = (300.0, 5000.0)
# Faults aimed at the leader last long enough for the others to notice (a fetch timeout)
# and elect a new one.
LEADER_FAULTS = frozenset({"isolate-leader", "pause-leader", "crash-leader", "crash-tail",
                           "leader-minority", "isolate-until-elected", "cut-new-leader",
                           "multi-epoch-tail"})
CHASER_ONLY = frozenset({"multi-epoch-tail"})  # see `_Nemesis`
GENTLE = frozenset({"lossy", "slow-net", "slow-disk", "bounce",
                    "lossy-snapshots"})  # may overlap a chain
MULTI_EPOCH_DURATION_MS = (8000.0, 12000.0)  # four elections in a row
LEADER_FAULT_DURATION_MS = (2500.0, 6000.0)
LATE_CUT_PROBABILITY = 0.25  # step 3 of multi-epoch-tail cuts W off after LATE_CUT_MS
LATE_CUT_MS = (5.0, 60.0)
BOUNCE_MS = (20.0, 300.0)  # a bounced node is down this long
BOUNCE_VOTER_PROBABILITY = 0.3  # step 3 of multi-epoch-tail bounces a voter
BOUNCE_DELAY_MS = (5.0, 200.0)  # after W's election
POLL_MS = 50.0  # how often `isolate-until-elected` looks for the newer leader
LONG_DELAY_TIMEOUTS = (1.0, 4.0)  # election timeouts a held message may wait, at most
CLOCK_JUMP_MS = (1000.0, 60_000.0)
TEAR_WAIT_MS, TEAR_POLL_MS = 300.0, 0.5  # torn-write looks this long for a write
SPLIT_GAP_MS = (1000.0, 4000.0)  # between the starts of two crash-between-steps faults
SPLIT_STEPS_AHEAD = 10  # the armed crash strikes before one of a node's next 10 steps

Action = Callable[[], None]


def schedule_faults(cluster: Cluster, kind: str, window_ms: float, *,
                    dead_voters: int = 0) -> float:
    """Plan faults in [0, window_ms) and a heal at `window_ms` (leaving `dead_voters`
    voters dead for good); returns the time of the heal (0 when there are no faults)."""
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r}, expected one of {FAULT_KINDS}")
    if kind == "none":
        return 0.0
    menu = {"all": NET_FAULTS + CRASH_FAULTS, "net": NET_FAULTS, "crash": CRASH_FAULTS}[kind]
    if cluster.config.dynamic:
        menu += RECONFIG_FAULTS
    nemesis = _Nemesis(cluster, menu, window_ms)
    nemesis.plan_background()
    nemesis.chase_leaders()
    if "crash" in menu:
        nemesis.plan_split_steps()
    if dead_voters:
        cluster.at_ms(window_ms, lambda: heal_leaving_dead(cluster, dead_voters),
                      f"heal all but {dead_voters} voters")
    else:
        cluster.at_ms(window_ms, lambda: heal_all(cluster), "heal all")
    return window_ms


class _Nemesis:
    """One run's faults, in two overlapping streams: background faults of every kind,
    one every `GAP_MS`; and a leader chaser, which hits each newly elected leader with a
    leader-aimed fault `CHASE_DELAY_MS` after it wins (so epochs keep turning over).

    While a `multi-epoch-tail` chain runs, the chaser waits for its end and background
    faults other than `GENTLE` ones are skipped: a chain needs four elections in a row
    among exactly the nodes it chose, and a crash there would just cancel it."""

    def __init__(self, cluster: Cluster, menu: tuple[str, ...], window_ms: float) -> None:
        self.cluster = cluster
        self.rng = cluster.fault_rng
        self.menu = menu
        self.window_ms = window_ms
        self.chains = 0  # multi-epoch-tail chains in progress

    def plan_background(self) -> None:
        background = [name for name in self.menu if name not in CHASER_ONLY]
        start = self.rng.uniform(*GAP_MS)
        while start < self.window_ms:
            self.plan(self._draw(background), start)
            start += self.rng.uniform(*GAP_MS)

    def chase_leaders(self) -> None:
        """After each election, plan one leader-aimed fault; the next election (or the
        end of a chain) plans the next one."""
        menu = [name for name in self.menu if name in LEADER_FAULTS]
        cluster = self.cluster
        if not menu:
            return

        def on_elected(_leader: SimNode) -> None:
            start = cluster.now_ms + self.rng.uniform(*CHASE_DELAY_MS)
            if start >= self.window_ms:
                return
            name = self._draw(menu)
            if name in CHASER_ONLY:
                self.plan(name, start, on_done=lambda: cluster.when_elected(on_elected))
            else:
                self.plan(name, start)
                cluster.when_elected(on_elected)
        cluster.when_elected(on_elected)

    def plan_split_steps(self) -> None:
        """A third stream: `crash-between-steps` every `SPLIT_GAP_MS`, drawn from its own
        `Random`, so the other two streams draw exactly what they drew without it."""
        rng = random.Random(f"{self.cluster.config.seed}:split-steps")
        start = rng.uniform(*SPLIT_GAP_MS)
        while start < self.window_ms:
            self.plan("crash-between-steps", start, rng=rng)
            start += rng.uniform(*SPLIT_GAP_MS)

    def plan(self, name: str, start: float, on_done: Action | None = None,
             rng: random.Random | None = None) -> None:
        """Schedule fault `name` from `start`, drawn from `rng` (the nemesis's own by
        default); `on_done` runs once a chain is over."""
        rng = rng or self.rng
        duration = (MULTI_EPOCH_DURATION_MS if name == "multi-epoch-tail" else
                    LEADER_FAULT_DURATION_MS if name in LEADER_FAULTS else DURATION_MS)
        end = min(self.window_ms, start + rng.uniform(*duration))
        if name == "multi-epoch-tail":
            chain = _MultiEpochTail(self.cluster, rng, self, on_done)
            inject, undo = chain.inject, chain.undo
        else:
            inject, undo = make_fault(self.cluster, rng, name, end)
        injected = [False]

        def run() -> None:
            if self.chains and name not in GENTLE and name not in CHASER_ONLY:
                return  # skipped: it would only cancel the chain
            injected[0] = True
            self.cluster.faults += 1
            self.cluster.fault_kinds[name] += 1
            inject()

        def end_it() -> None:
            if injected[0] or name in CHASER_ONLY:
                undo()
        self.cluster.at_ms(start, run, name)
        self.cluster.at_ms(end, end_it, f"end {name}")

    def _draw(self, menu: list[str]) -> str:
        return self.rng.choices(menu, [WEIGHTS.get(name, 1) for name in menu])[0]


def heal_all(cluster: Cluster) -> None:
    cluster.network.heal()
    cluster.snapshot_chunk_loss = 0.0
    for node_id, node in cluster.nodes.items():
        node.disk.slowdown = 1.0
        if not node.up:
            cluster.start(node_id)
        elif node.paused:
            cluster.resume(node_id)


def heal_leaving_dead(cluster: Cluster, count: int) -> None:
    """Heal everything but `count` voters, drawn now (the leader among them as often as
    any), which crash and stay down: no fault's undo starts them again. Voters that
    refuse to start (a corrupt quorum-state) are dead already and count."""
    alive = [v for v in cluster.voter_ids if v not in _corrupted(cluster)]
    dead = cluster.fault_rng.sample(alive, max(0, count - (len(cluster.voter_ids)
                                                           - len(alive))))
    for node_id in dead:
        cluster.crash(node_id)
        cluster.dead_for_good.add(node_id)
    heal_all(cluster)


def _corrupted(cluster: Cluster) -> set[int]:
    """The nodes whose quorum-state is corrupt: they refuse every start."""
    return {n for n, node in cluster.nodes.items() if node.disk.quorum_state.corrupted}


def make_fault(cluster: Cluster, rng: random.Random, name: str,
               end_ms: float) -> tuple[Action, Action]:
    """(inject, undo) for the fault `name`; `end_ms` is when `undo` is scheduled."""
    if name in _NETWORK_FAULTS:
        return _NETWORK_FAULTS[name](cluster, rng, end_ms)
    if name in _LINK_FAULTS:
        return _LINK_FAULTS[name](cluster, rng)
    if name in _PROCESS_FAULTS:
        return _PROCESS_FAULTS[name](cluster, rng)
    if name in _RECONFIG_FAULTS:
        return _RECONFIG_FAULTS[name](cluster, rng)
    raise ValueError(f"unknown fault {name!r}")


# ---- network: cut links, restored by the fault's own undo ----------------------------

class _Cuts:
    """The links one fault holds cut (`Network.hold`), released by its undo: a link
    another fault also cut stays cut until that fault is over too."""

    def __init__(self, cluster: Cluster) -> None:
        self.net = cluster.network
        self.held: set[Link] = set()

    def cut(self, links: set[Link]) -> None:
        new = links - self.held
        self.net.hold(new)
        self.held |= new

    def cutting(self, links: Callable[[], set[Link]]) -> Action:
        """An action cutting the links `links()` names when it runs."""
        return lambda: self.cut(links())

    def restore(self) -> None:
        self.net.release(self.held)
        self.held = set()


def _partition(cluster: Cluster, rng: random.Random, _end: float) -> tuple[Action, Action]:
    ids = sorted(cluster.nodes)
    cuts = _Cuts(cluster)
    side = [i for i in ids if rng.random() < 0.5]
    return cuts.cutting(lambda: partition_links(side, [i for i in ids if i not in side])), \
        cuts.restore


def _isolate_leader(cluster: Cluster, rng: random.Random,
                    _end: float) -> tuple[Action, Action]:
    cuts = _Cuts(cluster)
    return cuts.cutting(lambda: isolation_links(_leader_or_random(cluster, rng),
                                                cluster.nodes)), cuts.restore


def _one_way(cluster: Cluster, rng: random.Random, _end: float) -> tuple[Action, Action]:
    cuts = _Cuts(cluster)
    victim, outbound = rng.choice(sorted(cluster.nodes)), rng.random() < 0.5
    return cuts.cutting(lambda: isolation_links(victim, cluster.nodes, inbound=not outbound,
                                                outbound=outbound)), cuts.restore


def _one_way_link(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    """One direction of one link: `src` no longer reaches `dst`, `dst` still reaches
    `src` (so `dst` may never hear the answers to what it sends)."""
    cuts = _Cuts(cluster)
    src, dst = rng.sample(sorted(cluster.nodes), 2) if len(cluster.nodes) > 1 else (1, 1)
    return cuts.cutting(lambda: {(src, dst)} if src != dst else set()), cuts.restore


def _partial(cluster: Cluster, rng: random.Random, _end: float) -> tuple[Action, Action]:
    ids = sorted(cluster.nodes)
    cuts = _Cuts(cluster)
    pairs = [(a, b) for a in ids for b in ids if a < b and rng.random() < 0.4]
    links = {(a, b) for a, b in pairs} | {(b, a) for a, b in pairs}
    return cuts.cutting(lambda: links), cuts.restore


def _leader_side(cluster: Cluster, rng: random.Random, *,
                 all_observers: bool = False) -> list[int]:
    """The leader, as many other voters as still leave it short of a majority, and a
    random half of the observers (or all of them)."""
    leader = _leader_or_random(cluster, rng)
    others = [v for v in cluster.voter_ids if v != leader]
    room = len(cluster.voter_ids) // 2 - 1  # short of a majority
    company = rng.sample(others, rng.randint(0, room)) if room > 0 else []
    observers = [o for o in cluster.observer_ids if all_observers or rng.random() < 0.5]
    return [leader, *company, *observers]


def _split_from(cluster: Cluster, side: list[int]) -> set[Link]:
    return partition_links(side, [n for n in cluster.nodes if n not in side])


def _split_off_leader(cluster: Cluster, rng: random.Random) -> Callable[[], set[Link]]:
    return lambda: _split_from(cluster, _leader_side(cluster, rng))


def _leader_minority(cluster: Cluster, rng: random.Random,
                     _end: float) -> tuple[Action, Action]:
    cuts = _Cuts(cluster)
    return cuts.cutting(_split_off_leader(cluster, rng)), cuts.restore


def _isolate_until_elected(cluster: Cluster, rng: random.Random,
                           end_ms: float) -> tuple[Action, Action]:
    """The leader's minority split off, healed as soon as a newer leader exists."""
    cuts = _Cuts(cluster)
    split = cuts.cutting(_split_off_leader(cluster, rng))

    def inject() -> None:
        leader = cluster.leader()
        old_epoch = leader.core.epoch if leader is not None else -1
        split()

        def poll() -> None:
            newer = cluster.leader()
            if newer is not None and newer.core.epoch > old_epoch:
                cuts.restore()
            elif cluster.now_ms + POLL_MS < end_ms:
                cluster.at_ms(cluster.now_ms + POLL_MS, poll, "")
        cluster.at_ms(cluster.now_ms + POLL_MS, poll, "")
    return inject, cuts.restore


def _cut_new_leader(cluster: Cluster, rng: random.Random,
                    _end: float) -> tuple[Action, Action]:
    """The next leader elected is cut off from everyone but at most one other node the
    moment it wins: its LeaderChange record (and whatever tail it held) stays with it."""
    cuts = _Cuts(cluster)
    keep_one = rng.random() < 0.5
    active = [False]  # no cut once the fault is over, even if no leader was elected

    def isolate(leader: SimNode) -> None:
        if not active[0]:
            return
        others = [n for n in sorted(cluster.nodes) if n != leader.node_id]
        spared = [rng.choice(others)] if keep_one and others else []
        cuts.cut(isolation_links(leader.node_id, [n for n in others if n not in spared]))

    def inject() -> None:
        active[0] = True
        cluster.when_elected(isolate)

    def undo() -> None:
        active[0] = False
        cuts.restore()
    return inject, undo


class _MultiEpochTail:
    """Raft's way to log tails of several uncommitted epochs, step by step as leaders are
    elected (each step waits for the next election; the fault's end undoes all):

    1. the leader L, a minority C of voters and the observers are split off: L writes a
       tail only they get;
    2. the majority side elects M: M and as many others S as leave a bare majority of
       voters outside are split off from everyone else, and L's split heals: M's
       LeaderChange reaches S at most;
    3. L's side, whose logs are the longest of the rest, wins: the winner W is cut off
       from all nodes but one observer, the moment it wins or a few fetch rounds later
       (its tail now spans two epochs; so does the observer's once it fetched from W);
       then M's group rejoins the rest; sometimes a voter that may have voted for W
       restarts a moment later;
    4. the next leader (M's group holds the highest last epoch) commits over W's tail,
       and W's links heal half a second after it is elected.
    """

    def __init__(self, cluster: Cluster, rng: random.Random, nemesis: _Nemesis,
                 on_done: Action | None = None) -> None:
        self.cluster = cluster
        self.rng = rng
        self.nemesis = nemesis
        self.on_done = on_done  # called once, when the fault is over
        self.split = _Cuts(cluster)  # step 1, healed in step 2
        self.group = _Cuts(cluster)  # step 2, healed in step 3
        self.winner = _Cuts(cluster)  # step 3, healed in step 4
        self.tail_side: list[int] = []
        self.group_members: list[int] = []
        self.active = False

    def inject(self) -> None:
        cluster = self.cluster
        if cluster.leader() is None:  # nobody writes a tail: nothing to start from
            self.undo()
            return
        self.active = True
        self.nemesis.chains += 1
        self.tail_side = _leader_side(cluster, self.rng)
        self.split.cut(_split_from(cluster, self.tail_side))
        cluster.when_elected(self._isolate_majority_leader)

    def _isolate_majority_leader(self, leader: SimNode) -> None:
        if not self.active:
            return
        cluster, rng = self.cluster, self.rng
        rest = [v for v in cluster.voter_ids
                if v not in self.tail_side and v != leader.node_id]
        if leader.node_id in self.tail_side or _most_up_to_date(
                cluster, self.tail_side) <= _most_up_to_date(cluster, rest):
            self.undo()  # L's side holds no more up-to-date log: it could not win step 3
            return
        # M's group gets all voters but a bare majority: L's side and the voters left
        # are exactly a majority (so L's side wins step 3 with all their votes), and
        # without W they are one short (so step 4's leader comes from M's group).
        voters = len(cluster.voter_ids)
        spared = rng.sample(rest, min(len(rest), max(0, voters - 1 - (voters // 2 + 1))))
        group = [leader.node_id, *spared]
        self.group_members = group
        self.split.restore()
        self.group.cut(_split_from(cluster, group))
        cluster.when_elected(self._isolate_winner)

    def _isolate_winner(self, leader: SimNode) -> None:
        if not self.active:
            return
        cluster = self.cluster
        others = [n for n in sorted(cluster.nodes) if n != leader.node_id]
        if cluster.observer_ids:
            # (In a dynamic run an observer id may have become a voter, even W.)
            spared = self.rng.choice(cluster.observer_ids)
            if spared in others:
                others.remove(spared)
        links = isolation_links(leader.node_id, others)
        if self.rng.random() < LATE_CUT_PROBABILITY:
            # A few fetch rounds first: W may copy L's tail to a majority, not yet its
            # own LeaderChange (Raft's Figure 8: not committed, whatever the count),
            # while M's group, whose last epoch beats that tail, is still away.
            delay = self.rng.uniform(*LATE_CUT_MS)
            cluster.at_ms(cluster.now_ms + delay, lambda: self._cut_winner(links), "")
        else:
            self._cut_winner(links)
        if self.rng.random() < BOUNCE_VOTER_PROBABILITY:
            self._bounce_a_voter_of(leader)
        epoch = leader.core.epoch
        cluster.when_elected(lambda newer: self._heal_winner(newer, epoch))

    def _bounce_a_voter_of(self, winner: SimNode) -> None:
        """A voter outside M's group (it may have voted for W) restarts a moment after
        W's election, before M's group, still an epoch behind, campaigns for W's epoch:
        it must still know whom it voted for."""
        voters = [v for v in self.cluster.voter_ids
                  if v != winner.node_id and v not in self.group_members]
        if voters:
            victim = self.rng.choice(voters)
            when = self.cluster.now_ms + self.rng.uniform(*BOUNCE_DELAY_MS)
            down_ms = self.rng.uniform(*BOUNCE_MS)
            self.cluster.at_ms(when, lambda: _bounce_now(self.cluster, victim, down_ms),
                               f"bounce n{victim}")

    def _cut_winner(self, links: set[Link]) -> None:
        if self.active:
            self.winner.cut(links)
            self.group.restore()

    def _heal_winner(self, leader: SimNode, winner_epoch: int) -> None:
        if not self.active:
            return
        if leader.core.epoch <= winner_epoch:  # an older epoch's late winner: wait on
            self.cluster.when_elected(lambda newer: self._heal_winner(newer, winner_epoch))
            return
        self.cluster.at_ms(self.cluster.now_ms + 500, self.undo, "heal multi-epoch-tail")

    def undo(self) -> None:
        if self.active:
            self.active = False
            self.nemesis.chains -= 1
        for cuts in (self.split, self.group, self.winner):
            cuts.restore()
        done, self.on_done = self.on_done, None
        if done is not None:
            done()


def _most_up_to_date(cluster: Cluster, node_ids: list[int]) -> tuple[int, int]:
    """The best (last epoch, log end) among the voters listed (Raft §5.4.1's order)."""
    return max(((cluster.nodes[n].log.last_epoch, cluster.nodes[n].log.end_offset)
                for n in node_ids if n in cluster.voter_ids), default=(-1, -1))


_NETWORK_FAULTS: dict[str, Callable[[Cluster, random.Random, float],
                                    tuple[Action, Action]]] = {
    "partition": _partition,
    "isolate-leader": _isolate_leader,
    "one-way": _one_way,
    "one-way-link": lambda c, r, _end: _one_way_link(c, r),
    "partial": _partial,
    "leader-minority": _leader_minority,
    "isolate-until-elected": _isolate_until_elected,
    "cut-new-leader": _cut_new_leader,
}


# ---- links: loss, duplication, latency ----------------------------------------------

def _lossy(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    net = cluster.network
    loss, dup = rng.uniform(0.05, 0.5), rng.uniform(0.0, 0.2)

    def lossy() -> None:
        net.loss_probability, net.duplicate_probability = loss, dup

    def clean() -> None:
        net.loss_probability = net.config.loss_probability
        net.duplicate_probability = net.config.duplicate_probability
    return lossy, clean


def _long_delay(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    net = cluster.network
    probability = rng.uniform(0.02, 0.2)
    max_ms = rng.uniform(*LONG_DELAY_TIMEOUTS) * cluster.config.election_timeout_ms

    def hold() -> None:
        net.long_delay_probability, net.long_delay_max_ms = probability, max_ms

    def release() -> None:
        net.long_delay_probability = net.long_delay_max_ms = 0.0
    return hold, release


def _corrupt_wire(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    net = cluster.network
    probability = rng.uniform(0.02, 0.2)

    def corrupt() -> None:
        net.corruption_probability = probability

    def clean() -> None:
        net.corruption_probability = 0.0
    return corrupt, clean


def _lossy_snapshots(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    loss = rng.uniform(0.2, 0.7)

    def lossy() -> None:
        cluster.snapshot_chunk_loss = loss

    def clean() -> None:
        cluster.snapshot_chunk_loss = 0.0
    return lossy, clean


def _slow_net(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    net = cluster.network
    factor = rng.uniform(10, 150)  # messages take ~30 ms to over a second

    def congest() -> None:
        net.slowdown = factor

    def clear() -> None:
        net.slowdown = 1.0
    return congest, clear


def _slow_disk(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    victim, factor = rng.choice(sorted(cluster.nodes)), rng.uniform(20, 300)

    def slow() -> None:
        cluster.nodes[victim].disk.slowdown = factor

    def fast() -> None:
        cluster.nodes[victim].disk.slowdown = 1.0
    return slow, fast


def _reset(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    """Connections to a running voter (the leader, half the time) are reset while it
    runs: some running nodes hear their connection to it was lost (the reconnect then
    succeeds), and half the time one of them also has a reconnect refused by mistake (a
    firewall's REJECT). That node asks for pre-votes, which the others refuse while
    they hear from the leader: no epoch may move because of it."""
    refuse = rng.random() < 0.5

    def reset() -> None:
        voters = [v for v in cluster.voter_ids if cluster.nodes[v].up]
        if not voters:
            return
        leader = cluster.leader_id()
        peer = leader if leader is not None and rng.random() < 0.5 else rng.choice(voters)
        hit = [n.node_id for n in cluster.running() if n.node_id != peer
               and rng.random() < 0.5]
        refused = rng.choice(hit) if hit and refuse else None
        for node_id in hit:
            cluster.reset_connection(node_id, peer, refused=node_id == refused)
    return reset, lambda: None


_LINK_FAULTS: dict[str, Callable[[Cluster, random.Random], tuple[Action, Action]]] = {
    "reset": _reset,
    "lossy": _lossy,
    "long-delay": _long_delay,
    "corrupt-wire": _corrupt_wire,
    "lossy-snapshots": _lossy_snapshots,
    "slow-net": _slow_net,
    "slow-disk": _slow_disk,
}


# ---- processes: crashes and pauses, each undone for its own victims -------------------

class _Victims:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.ids: list[int] = []

    def restart(self) -> None:
        for node_id in self.ids:
            self.cluster.start(node_id)

    def resume(self) -> None:
        for node_id in self.ids:
            self.cluster.resume(node_id)


def _crash(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    victims = _Victims(cluster)
    victims.ids.append(rng.choice(sorted(cluster.nodes)))
    return lambda: cluster.crash(victims.ids[0]), victims.restart


def _crash_many(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    ids = sorted(cluster.nodes)
    victims = _Victims(cluster)
    victims.ids.extend(rng.sample(ids, rng.randint(2, len(ids))) if len(ids) > 1 else ids)

    def crash_many() -> None:
        for victim in victims.ids:
            cluster.crash(victim)
    return crash_many, victims.restart


def _crash_leader(cluster: Cluster, rng: random.Random, *,
                  graceful: bool = False) -> tuple[Action, Action]:
    victims = _Victims(cluster)
    over = [False]  # the stop that follows a resignation never outlives the fault

    def crash_leader() -> None:
        victim = _leader_or_random(cluster, rng)
        victims.ids.append(victim)
        if graceful:
            cluster.resign(victim)
            cluster.at_ms(cluster.now_ms + 30, lambda: stop(victim), f"stop n{victim}")
        else:
            cluster.crash(victim)

    def stop(victim: int) -> None:
        if not over[0]:
            cluster.crash(victim)

    def restart() -> None:
        over[0] = True
        victims.restart()
    return crash_leader, restart


def _crash_tail(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    """Crash the running node holding the most records past the committed offset."""
    victims = _Victims(cluster)

    def crash_tail() -> None:
        committed = cluster.committed_offset()
        tails = [(n.log.end_offset - committed, rng.random(), n.node_id)
                 for n in cluster.running() if n.log.end_offset > committed]
        victim = max(tails)[2] if tails else _leader_or_random(cluster, rng)
        victims.ids.append(victim)
        cluster.crash(victim)
    return crash_tail, victims.restart


def _wipe_observer(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    """An observer's disk is replaced: it comes back empty and fetches everything."""
    victims = _Victims(cluster)
    if not cluster.observer_ids:
        return _crash(cluster, rng)
    victims.ids.append(rng.choice(cluster.observer_ids))
    if not cluster.config.dynamic:
        return lambda: cluster.crash(victims.ids[0], wipe=True), victims.restart

    def wipe_a_non_voter() -> None:
        # A dynamic run's observer ids may be voters now; its voters may be observers.
        # A down node's log counts too: a voter set only it holds (appended, not yet
        # replicated) is in force again when it restarts.
        voters = {k.id for voter_set in _latest_sets(cluster) for k in voter_set.keys()}
        spares = [n for n in sorted(cluster.nodes) if n not in voters]
        if spares and not _change_waiting(cluster, AddRaftVoterRequest):
            victims.ids[0] = rng.choice(spares)
            cluster.crash(victims.ids[0], wipe=True)
        else:
            victims.ids.clear()
    return wipe_a_non_voter, victims.restart


def _torn_write(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    """Crash a node in the middle of a write (the first seen waiting for its fsync
    within `TEAR_WAIT_MS`, else any): its quorum-state write is done, its log write
    torn or corrupted, and recovery scans that off."""
    victims = _Victims(cluster)
    deadline = [0.0]
    over = [False]  # no crash once the fault is over: nothing would restart its victim

    def tear() -> None:
        running = cluster.running()
        writing = [n.node_id for n in running if n.busy]
        if over[0]:
            return
        if not writing and running and cluster.now_ms < deadline[0]:
            cluster.at_ms(cluster.now_ms + TEAR_POLL_MS, tear, "")
            return
        if running:
            victim = rng.choice(writing or [n.node_id for n in running])
            victims.ids.append(victim)
            cluster.crash(victim, tear=rng)

    def start() -> None:
        deadline[0] = cluster.now_ms + TEAR_WAIT_MS
        tear()

    def restart() -> None:
        over[0] = True
        victims.restart()
    return start, restart


def _crash_between_steps(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    """Arm a running node's disk to crash before one of its next few steps of a
    multi-step operation (a snapshot written, downloaded or deleted, the log start
    moved, the log truncated or reset: `raft.sim.disk_steps`); the node dies there,
    and restarts at the fault's end (disarmed, if it never struck)."""
    victims = _Victims(cluster)

    def arm() -> None:
        running = cluster.running()
        if running:
            victim = rng.choice(running)
            victims.ids.append(victim.node_id)
            victim.disk.steps.arm(rng.randrange(SPLIT_STEPS_AHEAD))

    def restart() -> None:
        for node_id in victims.ids:
            cluster.nodes[node_id].disk.steps.disarm()
        victims.restart()
    return arm, restart


def _corrupt_quorum_state(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    """A node crashes and its quorum-state is found corrupt: it refuses every start
    since (it may have voted in an epoch it can no longer tell). A voter only in a static
    quorum, while the voters refusing stay short of half of them, so a majority can
    still be elected; in a dynamic one, whose voter sets move, only a node no node's
    voter set names, while every node is running or corrupt already (a down or wiped
    node's set is unknown)."""
    victims = _Victims(cluster)

    def corrupt() -> None:
        corrupted = _corrupted(cluster)
        if cluster.config.dynamic:
            running = cluster.running()
            if (len(running) + len(corrupted) < len(cluster.nodes)
                    or any(not node.core.voter_set.keys() for node in running)
                    or _change_waiting(cluster, AddRaftVoterRequest)):
                return  # a down or wiped node's voter set is unknown: it may name anyone
            voters = {key.id for node in running for key in node.core.voter_set.keys()}
            room = 0
        else:
            voters = set(cluster.voter_ids)
            room = (len(voters) - 1) // 2 - len(corrupted & voters)
        candidates = [n for n in sorted(cluster.nodes) if n not in corrupted
                      and (n not in voters or room > 0)]
        if not candidates:
            return
        victim = rng.choice(candidates)
        victims.ids.append(victim)
        cluster.crash(victim)
        cluster.nodes[victim].disk.quorum_state.corrupt()
    return corrupt, victims.restart


def _clock_jump(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    """A node's wall clock jumps forward or back; the node restarts at once, which is
    when the shell reads it (`RaftNode.now_ms`)."""
    victim = rng.choice(sorted(cluster.nodes))
    jump_ms = int(rng.choice((-1, 1)) * rng.uniform(*CLOCK_JUMP_MS))
    down_ms = rng.uniform(*BOUNCE_MS)

    def jump() -> None:
        cluster.nodes[victim].wall_clock_ms += jump_ms
        _bounce_now(cluster, victim, down_ms)
    return jump, lambda: None


def _bounce(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    """A node killed and at once restarted by its supervisor: down for a moment only,
    long enough to forget what it never wrote to disk."""
    victim = rng.choice(sorted(cluster.nodes))
    down_ms = rng.uniform(*BOUNCE_MS)
    return lambda: _bounce_now(cluster, victim, down_ms), lambda: None


def _bounce_now(cluster: Cluster, victim: int, down_ms: float) -> None:
    if cluster.nodes[victim].up:
        cluster.crash(victim)
        cluster.at_ms(cluster.now_ms + down_ms, lambda: cluster.start(victim),
                      f"restart n{victim}")


def _pause(cluster: Cluster, rng: random.Random, *,
           leader: bool = False) -> tuple[Action, Action]:
    victims = _Victims(cluster)

    def pause() -> None:
        victim = (_leader_or_random(cluster, rng) if leader
                  else rng.choice(sorted(cluster.nodes)))
        victims.ids.append(victim)
        cluster.pause(victim)
    return pause, victims.resume


_PROCESS_FAULTS: dict[str, Callable[[Cluster, random.Random], tuple[Action, Action]]] = {
    "crash": _crash,
    "crash-many": _crash_many,
    "bounce": _bounce,
    "crash-leader": _crash_leader,
    "shutdown-leader": lambda c, r: _crash_leader(c, r, graceful=True),
    "crash-tail": _crash_tail,
    "wipe-observer": _wipe_observer,
    "torn-write": _torn_write,
    "crash-between-steps": _crash_between_steps,
    "corrupt-quorum-state": _corrupt_quorum_state,
    "clock-jump": _clock_jump,
    "pause": _pause,
    "pause-leader": lambda c, r: _pause(c, r, leader=True),
}


def _leader_or_random(cluster: Cluster, rng: random.Random) -> int:
    leader = cluster.leader_id()
    return leader if leader is not None else rng.choice(sorted(cluster.nodes))


# ---- the dynamic quorum (KIP-853): voter changes as an operator makes them ------------

_RETRYABLE = frozenset({"REQUEST_TIMED_OUT", "NOT_LEADER_OR_FOLLOWER"})


class _Operator:
    """Sends one voter change to the leader, retrying a refusal that passes."""

    def __init__(self, cluster: Cluster, rng: random.Random, label: str,
                 make: Callable[[], Any | None],
                 then: Callable[[], None] | None = None) -> None:
        self.cluster, self.rng, self.label = cluster, rng, label
        self.make, self.then = make, then
        self.attempts = 0

    def attempt(self) -> None:
        self.attempts += 1
        message = self.make()
        if message is None:
            return  # nothing to do any more (the node went away, too few voters...)
        if not self.cluster.reconfigure(message, self.answered):
            self.retry()

    def answered(self, answer: Any) -> None:
        if answer.error_code == 0:
            self.cluster.reconfigurations += 1
            if self.then is not None:
                self.then()
        elif answer.error_code.name in _RETRYABLE:
            self.retry()

    def retry(self) -> None:
        if self.attempts < RECONFIG_ATTEMPTS:
            delay = self.rng.uniform(*RECONFIG_RETRY_MS)
            self.cluster.at_ms(self.cluster.now_ms + delay, self.attempt, "")


def _voters(cluster: Cluster) -> Any | None:
    return cluster.voter_set()


def _add_request(cluster: Cluster, node_id: int, directory_id: Any) -> Any | None:
    node = cluster.nodes[node_id]
    voters = _voters(cluster)
    if voters is None or not node.up:
        # An operator adds a node it sees running (Kafka's leader asks it for its
        # ApiVersions first): a voter that is down for good would stall the new set.
        return _NOT_NOW
    if node_id in voters.id_set or node.directory_id != directory_id:
        return None
    return AddRaftVoterRequest(cluster_id=CLUSTER_ID, voter_id=node_id,
                               voter_directory_id=directory_id)


def _remove_request(cluster: Cluster, node_id: int, directory_id: Any,
                    floor: int = 1) -> Any | None:
    voters = _voters(cluster)
    if voters is None:
        return _NOT_NOW
    if voters.voter(node_id) is None or len(voters) <= floor:
        return None
    if any(key.id != node_id for key in _lost_keys(cluster)):
        # An operator replaces a lost disk before shrinking the set: fewer voters with
        # that key among them might leave no majority that can ever vote.
        return None
    return RemoveRaftVoterRequest(cluster_id=CLUSTER_ID, voter_id=node_id,
                                  voter_directory_id=directory_id)


class _NotNow:
    """A request that cannot be made now (no leader, the node to add is down): retried."""


_NOT_NOW = _NotNow()


def _operate(cluster: Cluster, rng: random.Random, label: str,
             make: Callable[[], Any | None], then: Callable[[], None] | None = None) -> None:
    def made() -> Any | None:
        message = make()
        if message is _NOT_NOW:
            operator.retry()
            return None
        return message
    operator = _Operator(cluster, rng, label, made, then)
    operator.attempt()


def _add_voter(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    def inject() -> None:
        voters = cluster.voter_set()
        if voters is None:
            return
        spares = [n for n in sorted(cluster.nodes)
                  if n not in voters.id_set and cluster.nodes[n].up]
        if not spares:
            return
        node_id = rng.choice(spares)
        directory_id = cluster.nodes[node_id].directory_id
        _operate(cluster, rng, f"add n{node_id}",
                 lambda: _add_request(cluster, node_id, directory_id))
    return inject, lambda: None


def _remove_voter(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    def inject() -> None:
        voters = cluster.voter_set()
        if voters is None or len(voters) <= 1:  # the last voter is never removed
            return
        victim = rng.choice(voters.keys())
        _operate(cluster, rng, f"remove n{victim.id}",
                 lambda: _remove_request(cluster, victim.id, victim.directory_id))
    return inject, lambda: None


def _wipe_voter_now(cluster: Cluster, rng: random.Random, *, replace: bool,
                    victim: Any = None) -> None:
    voters = cluster.voter_set()
    if voters is None and victim is None:
        return
    keys = voters.keys() if voters is not None else (victim,)
    if _lost_keys(cluster):
        return  # one lost disk at a time: two could leave no majority that can vote
    victim = victim if victim is not None else rng.choice(keys)
    if _change_waiting(cluster, RemoveRaftVoterRequest) or any(
            len(voters) <= 2 and voters.voter(victim.id) is not None
            for voters in _latest_sets(cluster)):
        # In a set of two a lost key leaves no majority that can ever vote: no operator
        # would wipe there, and nothing could be elected after the heal.
        return
    node = cluster.nodes[victim.id]
    cluster.crash(victim.id, wipe=True)
    cluster.at_ms(cluster.now_ms + rng.uniform(*BOUNCE_MS),
                  lambda: cluster.start(victim.id), f"restart n{victim.id} (new disk)")
    if not replace:
        return
    new_directory = node.directory_id

    def add_new_key() -> None:
        _operate(cluster, rng, f"add n{victim.id} (new key)",
                 lambda: _add_request(cluster, victim.id, new_directory))
    _operate(cluster, rng, f"remove n{victim.id} (old key)",
             lambda: _remove_request(cluster, victim.id, victim.directory_id, floor=2),
             add_new_key)


def _change_waiting(cluster: Cluster, kind: type) -> bool:
    """Whether a voter change of `kind` waits in a paused or busy leader's inbox: a
    removal may shrink the set below a majority that can vote after a wipe, an addition
    name a key whose disk is gone, or a node corrupted for good."""
    return any(isinstance(getattr(payload, "message", None), kind)
               for node in cluster.nodes.values() for _, payload in node.inbox)


def _latest_sets(cluster: Cluster) -> list[Any]:
    """Each node's latest voter set: a running node's in force, a down node's latest
    VotersRecord on its disk (a crashed leader may hold a removal nobody else has, and
    stands with that set when it comes back)."""
    sets = []
    for node in cluster.nodes.values():
        if node.up:
            sets.append(node.core.voter_set)
            continue
        history, log = VoterHistory(VoterSet(())), node.log
        offset = log.start_offset
        while offset < log.end_offset and (batches := log.read(offset, 1 << 20)):
            for batch in batches:
                history.on_records(batch.base_offset, batch.records)
                offset = batch.next_offset
        if history.latest_offset is not None:
            sets.append(history.latest)
    return sets


def _lost_keys(cluster: Cluster) -> set[Any]:
    """Voter keys whose disk is gone, in any running node's voter set (committed or
    not: an uncommitted set may still win an election)."""
    lost = set()
    for node in cluster.running():
        for key in node.core.voter_set.keys():
            if cluster.nodes[key.id].directory_id != key.directory_id:
                lost.add(key)
    return lost


def _replace_voter(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    return (lambda: _wipe_voter_now(cluster, rng, replace=True)), lambda: None


def _wipe_voter(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    deadline = [0.0]

    def poll() -> None:
        voters = cluster.voter_set()
        voted = [] if voters is None else [
            k for k in voters.keys() if cluster.nodes[k.id].up
            and cluster.nodes[k.id].directory_id == k.directory_id
            and cluster.nodes[k.id].core.role == "voted"]
        if voted or cluster.now_ms >= deadline[0]:
            _wipe_voter_now(cluster, rng, replace=False,
                            victim=rng.choice(voted) if voted else None)
        else:
            cluster.at_ms(cluster.now_ms + POLL_MS / 5, poll, "")

    def inject() -> None:
        deadline[0] = cluster.now_ms + WIPE_WAIT_MS
        poll()
    return inject, lambda: None


def _reconfig_burst(cluster: Cluster, rng: random.Random) -> tuple[Action, Action]:
    remove, _ = _remove_voter(cluster, rng)
    add, _ = _add_voter(cluster, rng)

    def burst() -> None:
        remove()
        add()
    return burst, lambda: None


_RECONFIG_FAULTS: dict[str, Callable[[Cluster, random.Random], tuple[Action, Action]]] = {
    "add-voter": _add_voter,
    "remove-voter": _remove_voter,
    "replace-voter": _replace_voter,
    "wipe-voter": _wipe_voter,
    "reconfig-burst": _reconfig_burst,
}
