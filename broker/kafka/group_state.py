"""A consumer group's state on its coordinator: its members and the rebalance rounds
that change them (the classic protocol, in memory). The request handlers that drive it
are `broker.kafka.membership`'s; the broker keeps every group it coordinates in
`BrokerContext.groups`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import trio

log = logging.getLogger(__name__)

EMPTY, PREPARING, AWAITING_SYNC, STABLE = "Empty", "PreparingRebalance", \
    "CompletingRebalance", "Stable"


@dataclass(slots=True, eq=False, kw_only=True)
class Member:
    member_id: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_s: float
    rebalance_timeout_s: float
    last_seen: float
    assignment: bytes = b""


@dataclass(slots=True, eq=False, kw_only=True)
class Group:
    group_id: str
    protocol_type: str = ""
    generation: int = 0
    state: str = EMPTY
    members: dict[str, Member] = field(default_factory=dict)
    joined: set[str] = field(default_factory=set)  # members that joined this round
    leader: str | None = None
    protocol: str | None = None
    round_done: trio.Event = field(default_factory=trio.Event)
    round_deadline: float = 0.0
    sync_done: trio.Event = field(default_factory=trio.Event)

    def start_rebalance(self, now: float) -> None:
        if self.state == PREPARING:
            return
        self.state = PREPARING
        self.joined = set()
        self.round_done = trio.Event()
        self.round_deadline = now + max(
            (m.rebalance_timeout_s for m in self.members.values()), default=0.0)
        log.info("group rebalancing", extra={"group": self.group_id,
                                             "generation": self.generation,
                                             "members": len(self.members)})

    def maybe_complete_join(self, now: float) -> None:
        """Complete the round once everyone joined, or at its deadline."""
        if self.state != PREPARING or not self.joined:
            return
        if not set(self.members) <= self.joined and now < self.round_deadline:
            return
        for member_id in set(self.members) - self.joined:
            del self.members[member_id]
        self.generation += 1
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        common = set.intersection(*({name for name, _ in m.protocols}
                                    for m in self.members.values()))
        leader = self.members[self.leader]
        self.protocol = next((name for name, _ in leader.protocols if name in common), None)
        for member in self.members.values():
            member.assignment = b""
        self.state = AWAITING_SYNC
        self.sync_done = trio.Event()
        self.round_done.set()
        log.info("group rebalanced", extra={"group": self.group_id,
                                            "generation": self.generation,
                                            "leader": self.leader,
                                            "members": sorted(self.members)})

    def expire(self, now: float) -> None:
        gone = [m for m in self.members.values() if now - m.last_seen > m.session_timeout_s
                and m.member_id not in self.joined]
        for member in gone:
            del self.members[member.member_id]
            log.info("group member expired", extra={"group": self.group_id,
                                                    "member": member.member_id})
        if gone:
            self.start_rebalance(now)
