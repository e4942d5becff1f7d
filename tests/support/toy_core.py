"""A deliberately small Raft with `RaftCore`'s interface, used only to test the simulator
itself (its event loop, disk and network models and invariant checkers) independently of
the real core. Pull-based replication as in KIP-595, no pre-vote, no check-quorum; the
leader repeats BeginQuorumEpoch to every node each `heartbeat_ms`, so nodes that missed
the election (and stale leaders) learn of it.

`bug="vote_without_log_check"` grants votes without comparing logs, to prove the
checkers catch a broken election rule.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from raft.messages import (
    BeginQuorumEpochRequest,
    DivergingEpoch,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from raft.types import ElectionState, Envelope, Ready


@dataclass(frozen=True, slots=True, kw_only=True)
class ToyConfig:
    voters: tuple[int, ...]
    nodes: tuple[int, ...] = ()  # everyone told of a new leader (voters and observers)
    election_timeout_ms: int = 1000
    fetch_interval_ms: int = 50
    heartbeat_ms: int = 500
    bug: str | None = None


class ToyCore:
    def __init__(self, *, node_id: int, config: ToyConfig, log: Any,
                 election: ElectionState | None, cluster_id: str, rng: random.Random,
                 now_ms: int, first_correlation_id: int = 1) -> None:
        self.node_id, self.config, self.log, self._rng = node_id, config, log, rng
        self.cluster_id = cluster_id
        self.epoch = election.epoch if election else 0
        self.voted_id = election.voted_id if election else None
        self.leader_id = election.leader_id if election else None
        self.role = "follower" if self.leader_id is not None else "unattached"
        self.high_watermark = 0
        self._votes: set[int] = set()
        self._match: dict[int, int] = {}
        self._out: list[Envelope] = []
        self._election: ElectionState | None = None
        self._entries: list[Any] = []
        self._truncate: int | None = None
        self._hw_dirty = False
        self._corr = 0
        self._fetch_corr = -1
        self._now = now_ms
        self._reset_election_timer(now_ms)
        self._next_fetch = now_ms
        self._next_heartbeat = now_ms

    # ---- properties used by the simulator -------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.role == "leader"

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.config.voters

    # ---- inputs ------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        self._now = now_ms
        if self.role == "leader":
            if now_ms >= self._next_heartbeat:
                self._next_heartbeat = now_ms + self.config.heartbeat_ms
                self._announce()
            return
        if self.is_voter and now_ms >= self._election_deadline:
            self._campaign(now_ms)
        elif not self.is_voter and now_ms >= self._election_deadline:
            self._reset_election_timer(now_ms)  # observers wait to be told of a leader
        elif self.leader_id is not None and now_ms >= self._next_fetch:
            self._next_fetch = now_ms + self.config.fetch_interval_ms
            self._send(self.leader_id, FetchRequest(
                cluster_id=self.cluster_id, replica_id=self.node_id,
                current_leader_epoch=self.epoch,
                fetch_offset=self.log.end_offset, last_fetched_epoch=self.log.last_epoch))
            self._fetch_corr = self._corr  # only its answer counts: the log may change

    def step(self, envelope: Envelope, now_ms: int) -> None:
        self._now = now_ms
        msg, src = envelope.message, envelope.src
        epoch = getattr(msg, "candidate_epoch", None) or getattr(msg, "leader_epoch", None) \
            or getattr(msg, "current_leader_epoch", None)
        if isinstance(msg, FetchResponse):
            epoch = msg.current_leader.leader_epoch
        if epoch is not None and epoch > self.epoch:
            self._become(epoch, None, None, "unattached")
        if isinstance(msg, VoteRequest):
            self._on_vote_request(src, msg, now_ms)
        elif isinstance(msg, VoteResponse):
            if self.role == "candidate" and msg.leader_epoch == self.epoch and msg.vote_granted:
                self._votes.add(src)
                if len(self._votes) * 2 > len(self.config.voters):
                    self._become_leader()
        elif isinstance(msg, BeginQuorumEpochRequest):
            if msg.leader_epoch == self.epoch and self.role != "leader":
                self._become(self.epoch, msg.leader_id, self.voted_id, "follower")
                self._reset_election_timer(now_ms)
        elif isinstance(msg, FetchRequest):
            self._on_fetch(src, envelope.correlation_id, msg)
        elif isinstance(msg, FetchResponse):
            if envelope.correlation_id == self._fetch_corr:
                self._on_fetch_response(src, msg, now_ms)

    def propose(self, records: Sequence[bytes], now_ms: int) -> tuple[int, int] | None:
        if self.role != "leader":
            return None
        batch = self.log.append(self.epoch, records)
        self._entries.append(batch)
        return self.epoch, batch.last_offset

    def resign(self, now_ms: int) -> None:
        if self.role == "leader":
            self._become(self.epoch, None, None, "resigned")

    def ready(self) -> Ready:
        return Ready(election=self._election, truncate_to=self._truncate,
                     entries=tuple(self._entries), messages=tuple(self._out),
                     high_watermark=self.high_watermark if self._hw_dirty else None)

    def advance(self, ready: Ready) -> None:
        self._election, self._truncate, self._entries, self._out = None, None, [], []
        self._hw_dirty = False
        if self.role == "leader":
            self._match[self.node_id] = self.log.flushed_end_offset
            self._update_hw()

    def next_deadline_ms(self) -> int:
        if self.role == "leader":
            return self._next_heartbeat
        if self.leader_id is not None and self.role == "follower":
            return min(self._next_fetch, self._election_deadline)
        return self._election_deadline

    # ---- rules ---------------------------------------------------------------------------
    def _on_vote_request(self, src: int, msg: VoteRequest, now_ms: int) -> None:
        ours = (self.log.last_epoch, self.log.end_offset)
        theirs = (msg.last_offset_epoch, msg.last_offset)
        log_ok = theirs >= ours or self.config.bug == "vote_without_log_check"
        granted = (msg.candidate_epoch == self.epoch and self.is_voter and log_ok
                   and self.voted_id in (None, msg.candidate_id) and self.leader_id is None)
        if granted:
            self._become(self.epoch, None, msg.candidate_id, "voted")
            self._reset_election_timer(now_ms)
        self._send(src, VoteResponse(leader_epoch=self.epoch, vote_granted=granted,
                                     leader_id=-1))

    def _on_fetch(self, src: int, corr: int, msg: FetchRequest) -> None:
        if self.role != "leader" or msg.current_leader_epoch != self.epoch:
            return
        offset, last_epoch = msg.fetch_offset, msg.last_fetched_epoch
        if offset > 0:
            found_epoch, end = self.log.end_offset_for_epoch(last_epoch)
            if found_epoch != last_epoch or end < offset:
                self._reply(src, corr, diverging_epoch=DivergingEpoch(epoch=found_epoch,
                                                                end_offset=end))
                return
        if msg.replica_id in self.config.voters:
            self._match[msg.replica_id] = offset
            self._update_hw()
        self._reply(src, corr, records=tuple(self.log.read(offset, 1 << 16))
                    if offset < self.log.end_offset else ())

    def _reply(self, dst: int, corr: int, **kwargs: Any) -> None:
        from raft.messages import CurrentLeader
        self._out.append(Envelope(src=self.node_id, dst=dst, correlation_id=corr,
                                  message=FetchResponse(
                                      high_watermark=self.high_watermark,
                                      current_leader=CurrentLeader(leader_id=self.node_id,
                                                                   leader_epoch=self.epoch),
                                      **kwargs)))

    def _on_fetch_response(self, src: int, msg: FetchResponse, now_ms: int) -> None:
        if msg.current_leader.leader_epoch != self.epoch:
            return
        if self.leader_id is None and self.role != "leader":
            self._become(self.epoch, src, self.voted_id, "follower")
        if self.leader_id != src:
            return
        self._reset_election_timer(now_ms)
        self._next_fetch = now_ms
        if msg.diverging_epoch is not None:
            # Cut where the logs stop agreeing: the end of the leader's epoch, or of our
            # own largest epoch at or below it, whichever comes first (KIP-595).
            epoch, own_end = self.log.end_offset_for_epoch(msg.diverging_epoch.epoch)
            cut = max(0, min(msg.diverging_epoch.end_offset, self.log.end_offset,
                             own_end if epoch >= 0 else 0))
            self.log.truncate_to(cut)
            self._truncate = cut if self._truncate is None else min(self._truncate, cut)
            return
        batches = [b for b in msg.records if b.base_offset >= self.log.end_offset]
        if batches and batches[0].base_offset == self.log.end_offset:
            self.log.append_batches(batches)
            self._entries.extend(batches)
        hw = min(msg.high_watermark, self.log.end_offset)
        if hw > self.high_watermark:
            self.high_watermark, self._hw_dirty = hw, True

    def _campaign(self, now_ms: int) -> None:
        self._become(self.epoch + 1, None, self.node_id, "candidate")
        self._votes = {self.node_id}
        self._reset_election_timer(now_ms)
        if len(self.config.voters) == 1:
            self._become_leader()
            return
        for voter in self.config.voters:
            if voter != self.node_id:
                self._send(voter, VoteRequest(
                    cluster_id=self.cluster_id, candidate_epoch=self.epoch,
                    candidate_id=self.node_id, last_offset_epoch=self.log.last_epoch,
                    last_offset=self.log.end_offset))

    def _become_leader(self) -> None:
        self._become(self.epoch, self.node_id, self.node_id, "leader")
        self._match = {}
        self.propose((b"leader-change",), self._now)
        self._next_heartbeat = self._now + self.config.heartbeat_ms
        self._announce()

    def _announce(self) -> None:
        for node in self.config.nodes or self.config.voters:
            if node != self.node_id:
                self._send(node, BeginQuorumEpochRequest(
                    cluster_id=self.cluster_id, leader_id=self.node_id,
                    leader_epoch=self.epoch))

    def _update_hw(self) -> None:
        ends = sorted((self._match.get(v, 0) for v in self.config.voters), reverse=True)
        candidate = ends[len(self.config.voters) // 2]
        if candidate > self.high_watermark and candidate > 0 and \
                self.log.epoch_at(candidate - 1) == self.epoch:
            self.high_watermark, self._hw_dirty = candidate, True

    def _become(self, epoch: int, leader: int | None, voted: int | None, role: str) -> None:
        self.epoch, self.leader_id, self.voted_id, self.role = epoch, leader, voted, role
        self._election = ElectionState(epoch=epoch, leader_id=leader, voted_id=voted,
                                       voters=self.config.voters)

    def _reset_election_timer(self, now_ms: int) -> None:
        timeout = self.config.election_timeout_ms
        self._election_deadline = now_ms + timeout + self._rng.randrange(timeout)

    def _send(self, dst: int, message: Any) -> None:
        self._corr += 1
        self._out.append(Envelope(src=self.node_id, dst=dst, correlation_id=self._corr,
                                  message=message))
