"""A consumer group on its coordinator: members, rebalance rounds (Kafka's classic group
protocol) and committed offsets. Pure: the time (`now`, seconds) is passed in, nothing
here waits, sleeps or does I/O. `broker.kafka.groups.coordinator` drives it and parks the
requests that must wait.

States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and back to
PreparingRebalance when a member joins, leaves, expires or changes its protocols.

- A round (PreparingRebalance) completes once every member has (re)joined, or at its
  deadline (now + the largest rebalance timeout when it started); members that did not
  rejoin by then are removed. The first round of an Empty group waits
  `group.initial.rebalance.delay.ms` after its first JoinGroup, that long again after
  each new member's (never past its deadline), as Kafka's does: consumers started
  together then share one round instead of one each, with assignments moved between.
  Completion bumps the generation, keeps the leader if it is still there, picks the
  protocol the members vote for among those all support, and answers every parked
  JoinGroup.
- In CompletingRebalance the leader's SyncGroup carries the assignment; everyone parked
  in SyncGroup is answered once it has been stored (`Outcome.store`), and the group is
  Stable. A new round answers the parked SyncGroups REBALANCE_IN_PROGRESS.
- A member is removed once `now` passes its last heartbeat plus its session timeout,
  in every state; only a member parked in JoinGroup or SyncGroup is kept alive (its
  requests wait on us, not on it). A decision made at `now` sees the members as of
  `now` (`delete_error`), not as of the caller's last `tick`.
- Static membership (KIP-345): a JoinGroup with a known `group.instance.id` and no
  member id replaces that instance's member under a new member id; in a Stable group
  with the same protocols that is no rebalance at all. The old member id is fenced
  (FENCED_INSTANCE_ID).

Every operation returns an `Outcome`: the answers due to parked requests (by member id)
and whether the group's metadata must be written to the log.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass, field, replace

from broker.kafka.groups.group_positions import GroupPositions
from broker.kafka.groups.offsets_records import GroupValue, MemberValue, OffsetValue
from raft.common.errors import ErrorCode

log = logging.getLogger(__name__)

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = "Empty", "PreparingRebalance", \
    "CompletingRebalance", "Stable", "Dead"
AWAITING_SYNC = COMPLETING  # the name this module used before


@dataclass(slots=True, eq=False, kw_only=True)
class Member:
    member_id: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_s: float
    rebalance_timeout_s: float
    last_seen: float
    instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    assignment: bytes = b""
    awaiting_join: bool = False  # parked in JoinGroup this round
    awaiting_sync: bool = False  # parked in SyncGroup this generation

    def expired(self, now: float) -> bool:
        return not (self.awaiting_join or self.awaiting_sync) and \
            now > self.last_seen + self.session_timeout_s

    def metadata(self, protocol: str | None) -> bytes:
        return dict(self.protocols).get(protocol or "", b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """What a parked JoinGroup or SyncGroup of `member_id` gets."""

    member_id: str
    error: ErrorCode = ErrorCode.NONE
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    # (member id, instance id, metadata): for the leader's JoinGroup only
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    assignment: bytes = b""


@dataclass(slots=True, kw_only=True)
class Outcome:
    answers: list[Answer] = field(default_factory=list)
    store: bool = False  # the group's metadata must be (re)written

    def add(self, other: Outcome) -> Outcome:
        self.answers += other.answers
        self.store = self.store or other.store
        return self

    def take(self, member_id: str) -> Answer | None:
        """Remove and return the answer addressed to `member_id` (the caller's own)."""
        for index, answer in enumerate(self.answers):
            if answer.member_id == member_id:
                return self.answers.pop(index)
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None
    commit_timestamp: int = 0
    record_offset: int = -1  # where in the offsets partition it was written

    def value(self) -> OffsetValue:
        return OffsetValue(offset=self.offset, leader_epoch=self.leader_epoch,
                           metadata=self.metadata, commit_timestamp=self.commit_timestamp)


@dataclass(slots=True, eq=False, kw_only=True)
class Group:
    group_id: str
    protocol_type: str | None = None
    protocol: str | None = None
    generation: int = 0
    state: str = EMPTY
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    round_deadline: float = math.inf
    delay_until: float = -math.inf  # the first round's initial delay ends (-inf: none)
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    # soft, this generation's: members' positions for ordered delivery (not stored)
    positions: GroupPositions = field(default_factory=GroupPositions)

    # --- JoinGroup ------------------------------------------------------------------

    def join(self, *, member_id: str, instance_id: str | None, protocol_type: str,
             protocols: tuple[tuple[str, bytes], ...], session_timeout_s: float,
             rebalance_timeout_s: float, now: float, new_member_id: str,
             client_id: str = "", client_host: str = "", initial_delay_s: float = 0.0
             ) -> tuple[str, Outcome]:
        """(the member's id, outcome); the outcome holds the caller's own answer when it
        need not wait (`Outcome.take(member_id)`), else it parks until one arrives.
        `initial_delay_s`: group.initial.rebalance.delay.ms, for an Empty group's first
        round."""
        error = self._join_error(member_id, instance_id, protocol_type, protocols)
        if error != ErrorCode.NONE:
            return member_id, Outcome(answers=[Answer(member_id=member_id, error=error)])
        if not self.members:
            self.protocol_type = protocol_type
        if initial_delay_s > 0 and (self.state == EMPTY or now < self.delay_until) and \
                not (member_id and member_id in self.members):
            self.delay_until = now + initial_delay_s  # never past the round's deadline
        if instance_id is not None and not member_id and instance_id in self.static:
            return self._replace_static(
                instance_id, new_member_id, protocols=protocols, now=now,
                session_timeout_s=session_timeout_s, rebalance_timeout_s=rebalance_timeout_s)
        member = self.members.get(member_id) if member_id else None
        if member is None:
            member = Member(member_id=new_member_id, protocols=protocols,
                            session_timeout_s=session_timeout_s,
                            rebalance_timeout_s=rebalance_timeout_s, last_seen=now,
                            instance_id=instance_id, client_id=client_id,
                            client_host=client_host)
            self.members[member.member_id] = member
            if instance_id is not None:
                self.static[instance_id] = member.member_id
            log.info("group member joining", extra={"group": self.group_id,
                                                    "member": member.member_id})
            return member.member_id, self._rejoin(member, now)
        member.session_timeout_s, member.rebalance_timeout_s = \
            session_timeout_s, rebalance_timeout_s
        member.last_seen = now
        unchanged = member.protocols == protocols
        if self.state == COMPLETING and unchanged:
            return member.member_id, Outcome(answers=[self._join_answer(member)])
        if self.state == STABLE and unchanged and member.member_id != self.leader:
            return member.member_id, Outcome(answers=[self._join_answer(member)])
        member.protocols = protocols
        return member.member_id, self._rejoin(member, now)

    def _join_error(self, member_id: str, instance_id: str | None, protocol_type: str,
                    protocols: tuple[tuple[str, bytes], ...]) -> ErrorCode:
        if not protocols or not protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if self.members:
            if protocol_type != self.protocol_type or not self._common_protocols(
                    extra={name for name, _ in protocols}, without=member_id):
                return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if instance_id is not None and member_id:
            known = self.static.get(instance_id)
            if known is not None and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id and member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def _common_protocols(self, *, extra: set[str] | None = None, without: str = ""
                          ) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()
                if m.member_id != without]
        if extra is not None:
            sets.append(extra)
        return set.intersection(*sets) if sets else set()

    def _replace_static(self, instance_id: str, new_member_id: str, *,
                        protocols: tuple[tuple[str, bytes], ...], now: float,
                        session_timeout_s: float, rebalance_timeout_s: float
                        ) -> tuple[str, Outcome]:
        """A static member came back under a new member id: it takes the old one's place
        (and assignment); the old id is fenced."""
        old_id = self.static[instance_id]
        old = self.members.pop(old_id)
        outcome = Outcome()
        if old.awaiting_join or old.awaiting_sync:
            outcome.answers.append(Answer(member_id=old_id, error=ErrorCode.FENCED_INSTANCE_ID))
        member = replace(old, member_id=new_member_id, last_seen=now,
                         session_timeout_s=session_timeout_s,
                         rebalance_timeout_s=rebalance_timeout_s,
                         awaiting_join=False, awaiting_sync=False)
        self.members[new_member_id] = member
        self.static[instance_id] = new_member_id
        if self.leader == old_id:
            self.leader = new_member_id
        log.info("static group member replaced", extra={
            "group": self.group_id, "instance": instance_id, "old_member": old_id,
            "member": new_member_id})
        if self.state == STABLE and old.protocols == protocols:
            outcome.answers.append(self._join_answer(member))
            outcome.store = True  # the new member id must survive a coordinator move
            return new_member_id, outcome
        member.protocols = protocols
        return new_member_id, outcome.add(self._rejoin(member, now))

    def _rejoin(self, member: Member, now: float) -> Outcome:
        outcome = self.start_rebalance(now)
        member.awaiting_join = True
        return outcome.add(self.maybe_complete_join(now))

    def _join_answer(self, member: Member) -> Answer:
        members = tuple((m.member_id, m.instance_id, m.metadata(self.protocol))
                        for m in self.members.values()) \
            if member.member_id == self.leader else ()
        return Answer(member_id=member.member_id, generation=self.generation,
                      protocol_type=self.protocol_type, protocol=self.protocol,
                      leader=self.leader or "", members=members)

    # --- rounds ---------------------------------------------------------------------

    def start_rebalance(self, now: float) -> Outcome:
        """Enter PreparingRebalance (no-op when already there); parked SyncGroups are
        answered REBALANCE_IN_PROGRESS."""
        if self.state == PREPARING:
            return Outcome()
        self.state = PREPARING
        self.round_deadline = now + max(
            (m.rebalance_timeout_s for m in self.members.values()), default=0.0)
        outcome = Outcome()
        for member in self.members.values():
            if member.awaiting_sync:
                member.awaiting_sync = False
                member.last_seen = now
                outcome.answers.append(Answer(member_id=member.member_id,
                                              error=ErrorCode.REBALANCE_IN_PROGRESS))
        log.info("group rebalancing", extra={"group": self.group_id,
                                             "generation": self.generation,
                                             "members": len(self.members)})
        return outcome

    def maybe_complete_join(self, now: float) -> Outcome:
        """Complete the round once every member joined, or at its deadline (dropping
        the members that did not)."""
        if self.state != PREPARING:
            return Outcome()
        late = [m for m in self.members.values() if not m.awaiting_join]
        if now < self.round_deadline and (late or now < self.delay_until):
            return Outcome()
        for member in late:
            self._remove(member.member_id, "did not rejoin in time")
        self.generation += 1
        self.round_deadline, self.delay_until = math.inf, -math.inf
        if not self.members:
            self.state, self.leader, self.protocol = EMPTY, None, None
            log.info("group empty", extra={"group": self.group_id,
                                           "generation": self.generation})
            return Outcome(store=True)
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.protocol = self._vote()
        self.state = COMPLETING
        for member in self.members.values():
            member.awaiting_join = False
            member.last_seen = now
            member.assignment = b""
        log.info("group rebalanced", extra={"group": self.group_id,
                                            "generation": self.generation,
                                            "leader": self.leader,
                                            "members": sorted(self.members)})
        return Outcome(answers=[self._join_answer(m) for m in self.members.values()])

    def _vote(self) -> str | None:
        """Each member votes for its most preferred protocol all members support; the
        most votes win (ties: the leader's preference order)."""
        common = self._common_protocols()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            choice = next((name for name, _ in member.protocols if name in common), None)
            if choice is not None:
                votes[choice] += 1
        if not votes:
            return None
        assert self.leader is not None
        order = [name for name, _ in self.members[self.leader].protocols]
        return max(votes, key=lambda name: (votes[name], -order.index(name)
                                            if name in order else -len(order)))

    def _remove(self, member_id: str, reason: str) -> Member:
        member = self.members.pop(member_id)
        if member.instance_id is not None and self.static.get(member.instance_id) == member_id:
            del self.static[member.instance_id]
        log.info("group member removed", extra={"group": self.group_id, "member": member_id,
                                                "reason": reason})
        return member

    def _after_removal(self, now: float) -> Outcome:
        if self.state == EMPTY:
            return Outcome()
        return self.start_rebalance(now).add(self.maybe_complete_join(now))

    # --- SyncGroup, Heartbeat, LeaveGroup -------------------------------------------

    def _member_error(self, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None and self.static.get(instance_id, member_id) != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def sync(self, *, member_id: str, instance_id: str | None, generation: int,
             assignments: dict[str, bytes], now: float) -> Outcome:
        """The leader's assignments complete the generation: the outcome answers every
        parked SyncGroup (the caller's own included) and asks for the metadata to be
        stored first. Anyone else parks until then (no answer for it)."""
        error = self._member_error(member_id, instance_id)
        if error == ErrorCode.NONE and generation != self.generation:
            error = ErrorCode.ILLEGAL_GENERATION
        if error == ErrorCode.NONE and self.state == PREPARING:
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error != ErrorCode.NONE:
            return Outcome(answers=[Answer(member_id=member_id, error=error)])
        member = self.members[member_id]
        member.last_seen = now
        if self.state == STABLE:
            return Outcome(answers=[self._sync_answer(member)])
        member.awaiting_sync = True
        if member_id != self.leader:
            return Outcome()
        for other in self.members.values():
            other.assignment = assignments.get(other.member_id, b"")
        self.state = STABLE
        log.info("group stable", extra={"group": self.group_id,
                                        "generation": self.generation})
        outcome = Outcome(store=True)
        for other in self.members.values():
            if other.awaiting_sync:
                other.awaiting_sync = False
                other.last_seen = now
                outcome.answers.append(self._sync_answer(other))
        return outcome

    def _sync_answer(self, member: Member) -> Answer:
        return Answer(member_id=member.member_id, generation=self.generation,
                      protocol_type=self.protocol_type, protocol=self.protocol,
                      assignment=member.assignment)

    def store_failed(self, generation: int, now: float) -> Outcome:
        """The metadata of `generation` could not be written: its assignment does not
        hold; the members rejoin."""
        if generation != self.generation or self.state != STABLE:
            return Outcome()
        for member in self.members.values():
            member.assignment = b""
        return self.start_rebalance(now)

    def _current_member_error(self, member_id: str, instance_id: str | None,
                              generation: int, now: float, *, busy: str) -> ErrorCode:
        """A known member (seen now) of the current generation, while the group is not in
        state `busy`: Heartbeat's checks (busy: PREPARING) and a commit's (COMPLETING)."""
        error = self._member_error(member_id, instance_id)
        if error != ErrorCode.NONE:
            return error
        self.members[member_id].last_seen = now
        if generation != self.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if self.state == busy:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def heartbeat(self, *, member_id: str, instance_id: str | None, generation: int,
                  now: float) -> ErrorCode:
        return self._current_member_error(member_id, instance_id, generation, now,
                                          busy=PREPARING)

    def position_error(self, *, member_id: str, generation: int, now: float) -> ErrorCode:
        """May this member exchange positions (ConsumerGroupPosition)? Heartbeat's
        checks, and not before the generation's assignment is out: until then no
        member owns anything whose position would count."""
        error = self.heartbeat(member_id=member_id, instance_id=None,
                               generation=generation, now=now)
        if error == ErrorCode.NONE and self.state == COMPLETING:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return error

    def leave(self, leaving: list[tuple[str, str | None]], now: float
              ) -> tuple[list[ErrorCode], Outcome]:
        """Each (member id, instance id) leaves (by instance id when one is given):
        per-member errors, and the outcome (the rest rebalance)."""
        errors: list[ErrorCode] = []
        outcome = Outcome()
        removed = False
        for member_id, instance_id in leaving:
            target = member_id
            if instance_id is not None:
                known = self.static.get(instance_id)
                if known is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    errors.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                target = known
            if target not in self.members:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            member = self._remove(target, "left the group")
            if member.awaiting_join or member.awaiting_sync:
                outcome.answers.append(Answer(member_id=target,
                                              error=ErrorCode.UNKNOWN_MEMBER_ID))
            errors.append(ErrorCode.NONE)
            removed = True
        if removed:
            outcome.add(self._after_removal(now))
        return errors, outcome

    def tick(self, now: float) -> Outcome:
        """Expire members past their session timeout; complete a round at its
        deadline."""
        outcome = Outcome()
        gone = [m.member_id for m in self.members.values() if m.expired(now)]
        for member_id in gone:
            self._remove(member_id, "session timed out")
        if gone:
            outcome.add(self._after_removal(now))
        return outcome.add(self.maybe_complete_join(now))

    def delete_error(self, now: float) -> tuple[ErrorCode, Outcome]:
        """May DeleteGroups remove the group at `now`? Not while a member is left; a
        member whose session ended by `now` is gone first (the outcome of its removal is
        returned, to deliver), however long ago the caller's last `tick` was: a client
        that waits out a static member's session timeout, as Kafka's per-member timer
        measures it, and then deletes the group must find it empty."""
        outcome = self.tick(now)
        if self.state != EMPTY or self.members:
            return ErrorCode.NON_EMPTY_GROUP, outcome
        return ErrorCode.NONE, outcome

    # --- offsets --------------------------------------------------------------------

    def commit_error(self, *, member_id: str, instance_id: str | None, generation: int,
                     now: float) -> ErrorCode:
        """May this commit be stored? A simple commit (generation < 0, no member id) only
        into an Empty group; otherwise the member and its generation must be current
        (a commit in PreparingRebalance still counts: members commit before they
        rejoin), and not while the generation's assignment is being handed out."""
        if generation < 0 and not member_id and self.state == EMPTY:
            return ErrorCode.NONE
        return self._current_member_error(member_id, instance_id, generation, now,
                                          busy=COMPLETING)

    def apply_offset(self, topic: str, partition: int, committed: CommittedOffset | None
                     ) -> None:
        """An offset record at `committed.record_offset` (None: a tombstone) takes effect
        unless a later record for the same key already did (concurrent commits finish
        replicating in any order; the log's order wins)."""
        key = (topic, partition)
        if committed is None:
            self.offsets.pop(key, None)
            return
        current = self.offsets.get(key)
        if current is None or current.record_offset < committed.record_offset:
            self.offsets[key] = committed

    @property
    def is_empty(self) -> bool:
        """Nothing left to keep: no members, no offsets."""
        return self.state == EMPTY and not self.members and not self.offsets

    # --- the metadata record ----------------------------------------------------------

    def metadata_value(self) -> GroupValue:
        return GroupValue(
            protocol_type=self.protocol_type, protocol=self.protocol,
            generation=self.generation, leader=self.leader,
            members=tuple(MemberValue(
                member_id=m.member_id, instance_id=m.instance_id, client_id=m.client_id,
                client_host=m.client_host,
                session_timeout_ms=round(m.session_timeout_s * 1000),
                rebalance_timeout_ms=round(m.rebalance_timeout_s * 1000),
                subscription=m.metadata(self.protocol), assignment=m.assignment)
                for m in self.members.values()))

    def restore(self, value: GroupValue | None, now: float) -> None:
        """The group as its last metadata record left it (None: deleted, so no
        members); members get a full session timeout from `now` to find us."""
        self.members.clear()
        self.static.clear()
        self.round_deadline = math.inf
        if value is None:
            self.state, self.leader, self.protocol, self.protocol_type = EMPTY, None, None, None
            self.generation = 0
            return
        self.protocol_type, self.protocol = value.protocol_type, value.protocol
        self.generation, self.leader = value.generation, value.leader
        for m in value.members:
            self.members[m.member_id] = Member(
                member_id=m.member_id, instance_id=m.instance_id, client_id=m.client_id,
                client_host=m.client_host,
                protocols=((value.protocol or "", m.subscription),),
                session_timeout_s=m.session_timeout_ms / 1000,
                rebalance_timeout_s=m.rebalance_timeout_ms / 1000, last_seen=now,
                assignment=m.assignment)
            if m.instance_id is not None:
                self.static[m.instance_id] = m.member_id
        self.state = STABLE if self.members else EMPTY
        if self.leader not in self.members:
            self.leader = next(iter(self.members), None)


def commit_error_for(group: Group | None, *, member_id: str, instance_id: str | None,
                     generation: int, now: float) -> ErrorCode:
    """`Group.commit_error`, for a group that may not exist yet: only a simple commit
    (generation < 0) creates one."""
    if group is None:
        return ErrorCode.NONE if generation < 0 else ErrorCode.ILLEGAL_GENERATION
    return group.commit_error(member_id=member_id, instance_id=instance_id,
                              generation=generation, now=now)


def subscribed_topics(protocol_type: str | None, metadata: bytes) -> set[str] | None:
    """The topics of a consumer-protocol subscription (version, topic array, ...);
    None when it cannot be read (callers then assume every topic)."""
    if protocol_type != "consumer":
        return None
    try:
        count = int.from_bytes(metadata[2:6], "big", signed=True)
        position, topics = 6, set()
        for _ in range(count):
            length = int.from_bytes(metadata[position:position + 2], "big", signed=True)
            position += 2
            if length < 0 or position + length > len(metadata):
                return None
            topics.add(metadata[position:position + length].decode())
            position += length
        return topics if count >= 0 and len(metadata) >= 6 else None
    except (UnicodeDecodeError, ValueError):
        return None
