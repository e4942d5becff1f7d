"""Deliberate bugs, each a subclass of the real `RaftCore` that breaks one rule, so the
simulator can prove its checker finds that kind of bug by itself (`kraft sim
--planted-bug NAME`). They live here, not behind flags in the production rules: the
core only offers the overridable steps the bugs replace.

- `vote_without_log_check`: grants votes without Raft §5.4.1's log comparison.
- `commit_old_epoch_by_count`: commits an older epoch's entries by counting replicas
  (Raft §5.4.2, Figure 8).
- `diverging_hw`: a follower takes the leader's high watermark on a Fetch answer that
  says its log diverges, so it publishes records the leader never committed.
- `hw_counts_observers`: the leader counts observers towards the majority.
- `hw_counts_diverging_voter`: the leader counts a voter whose Fetch diverged towards
  the majority, at its fetch offset (its log is that long, but not the leader's there).
- `vote_not_persisted`: the vote is not written to `quorum-state`, so a restarted voter
  can vote again in the same epoch.
- `truncate_below_hw_allowed`: on divergence a follower truncates to the start of the
  diverging epoch (not to where the logs stop agreeing), and nothing stops it from
  cutting committed records.
- `snapshot_uncommitted`: a node snapshots its log up to the log end, committed or not,
  and `advance_log_start` lets the log start pass the high watermark (KIP-630 allows a
  snapshot of committed records only).

Dynamic quorum (KIP-853; found by `kraft sim --dynamic`):

- `two_voter_changes_at_once`: the leader starts a voter change while the previous
  VotersRecord is uncommitted (and its own safety net is off).
- `voter_change_before_own_epoch_commit`: a new leader changes the voters before a
  record of its own epoch committed (Ongaro's single-server change bug, 2015).
- `add_voter_not_caught_up`: the leader adds a voter without checking that it is a
  caught-up observer.
- `snapshot_voters_at_log_end`: raft's records for a snapshot (the production path,
  `snapshot_control_records`) carry the voter set at the log end, not the one in force
  at the snapshot's end offset.
- `wiped_disk_double_vote`: the old bare-id vote rules: a replica is a voter by its node
  id alone and answers requests meant for another directory id, so a voter whose disk
  was wiped votes again (with an empty log) in the epochs its old disk voted in.

Durability (found by crashes between the steps of disk operations, `raft.sim.disk_steps`):

- `snapshots_deleted_before_log_start`: the snapshots below a new log start are deleted
  before the log-start file says it moved; a crash between the two leaves a log whose
  start has no snapshot.
- `flush_skips_dir_fsync` (in the simulated disk, not the core): the log's flush fsyncs
  its segments but not their directory, so a segment created since the last directory
  fsync vanishes at a crash with the records it was acknowledged for.
- `truncation_rewrites_segment` (in the simulated disk): a truncation rewrites the
  segment it cuts: it unlinks it with the segments after, then writes the records kept
  below the cut to a new file, so a crash between the two loses records the disk had
  acknowledged (the real one shortens the segment in place, `raft.log.DiskLog`).

A planted core may also define `sim_snapshot_point(applied_end) -> int`: where the
simulator's state machine (`raft.sim.cluster`) snapshots, in place of the offset it
applied up to.
"""

from __future__ import annotations

import dataclasses

from raft.common.uuid import Uuid
from raft.core import RaftCore
from raft.core._leader_state import LeaderState, ReplicaProgress
from raft.messages import FetchRequest, FetchResponse
from raft.sim.disk import DiskConfig
from raft.types import NO_EPOCH, ElectionState, Envelope, SnapshotId
from raft.voters import ReplicaKey, VoterSet


class _VoteWithoutLogCheck(RaftCore):
    def is_candidate_log_up_to_date(self, last_offset_epoch: int, last_offset: int) -> bool:
        return True


class _CommitOldEpochByCount(RaftCore):
    def _may_commit_by_counting(self, state: LeaderState, offset: int) -> bool:
        return True


class _DivergingHighWatermark(RaftCore):
    def _on_diverging_fetch_response(self, response: FetchResponse) -> None:
        assert response.diverging_epoch is not None
        self._truncate_to_diverging(response.diverging_epoch)
        self._set_high_watermark(min(response.high_watermark, self._log.end_offset))


class _HighWatermarkCountsObservers(RaftCore):
    def _replicated_end_offset(self, state: LeaderState) -> int:
        ends = [self._log.flushed_end_offset]
        ends += [p.end_offset for v, p in state.voter_progress.items() if v != self._node_id]
        ends += [p.end_offset for p in state.observer_progress.values()]
        ends.sort(reverse=True)
        return ends[len(state.voters) // 2]  # a "majority" of voters' size, from anyone


class _HighWatermarkCountsDivergingVoter(RaftCore):
    def _respond_early(self, request: Envelope, message: object) -> None:
        super()._respond_early(request, message)
        state = self._state
        if (isinstance(message, FetchResponse) and message.diverging_epoch is not None
                and isinstance(state, LeaderState)):
            progress = state.voter_progress.get(request.src)
            if progress is not None:  # the real leader leaves a diverging voter's end alone
                fetch: FetchRequest = request.message
                progress.end_offset = fetch.fetch_offset
                self._maybe_advance_high_watermark(state)


class _VoteNotPersisted(RaftCore):
    def _election_state(self, epoch: int, leader_id: int | None, voted_id: int | None,
                        voted_directory_id: Uuid | None = None) -> ElectionState:
        return super()._election_state(epoch, leader_id, None)


class _TruncateBelowHighWatermark(RaftCore):
    def _check_truncation(self, offset: int) -> None:
        pass

    def _on_diverging_fetch_response(self, response: FetchResponse) -> None:
        diverging = response.diverging_epoch
        assert diverging is not None
        epoch, _ = self._log.end_offset_for_epoch(diverging.epoch)
        before, start = self._log.end_offset_for_epoch(epoch - 1)  # where `epoch` starts
        offset = self._log.start_offset if NO_EPOCH in (epoch, before) else start
        if offset < self._log.end_offset:
            self._truncate(offset)


class _SnapshotUncommitted(RaftCore):
    def sim_snapshot_point(self, applied_end: int) -> int:
        return max(applied_end, self._log.end_offset)

    def advance_log_start(self, snapshot_id: SnapshotId) -> bool:
        # The real check bounds the new start by the high watermark; this one by the log
        # end only.
        high_watermark = self._high_watermark
        self._high_watermark = max(high_watermark, self._log.end_offset)
        try:
            return super().advance_log_start(snapshot_id)
        finally:
            self._high_watermark = high_watermark


class _SnapshotsDeletedBeforeLogStart(RaftCore):
    def advance_log_start(self, snapshot_id: SnapshotId) -> bool:
        log = self._log
        if (self._snapshots.size(snapshot_id) is not None
                and log.start_offset < snapshot_id.end_offset
                <= min(self._high_watermark, log.end_offset)):
            self._snapshots.delete_before(snapshot_id.end_offset)  # before the log start
        return super().advance_log_start(snapshot_id)


class _TwoVoterChangesAtOnce(RaftCore):
    def _change_blocked(self, state: LeaderState) -> str | None:
        return None

    def _check_voter_change(self, state: LeaderState, new: VoterSet) -> None:
        pass


class _VoterChangeBeforeOwnEpochCommit(RaftCore):
    def _change_blocked(self, state: LeaderState) -> str | None:
        latest = self._history.latest_offset
        if state.pending_change is not None or (latest is not None
                                                and latest >= self._high_watermark):
            return "a voter change is in progress"
        return None


class _AddVoterNotCaughtUp(RaftCore):
    def _is_caught_up(self, progress: ReplicaProgress | None, key: ReplicaKey,
                      now_ms: int) -> bool:
        return True


class _SnapshotVotersAtLogEnd(RaftCore):
    def snapshot_control_records(self, end_offset: int) -> list[bytes]:
        return super().snapshot_control_records(self._log.end_offset)


class _WipedDiskDoubleVote(RaftCore):
    def _is_addressed_key(self, directory_id: Uuid | None) -> bool:
        return True

    def _apply_voter_set(self) -> None:
        super()._apply_voter_set()
        self._is_voter = self._node_id in self._voter_set


_CLASSES: dict[str, type[RaftCore]] = {
    "vote_without_log_check": _VoteWithoutLogCheck,
    "commit_old_epoch_by_count": _CommitOldEpochByCount,
    "diverging_hw": _DivergingHighWatermark,
    "hw_counts_observers": _HighWatermarkCountsObservers,
    "hw_counts_diverging_voter": _HighWatermarkCountsDivergingVoter,
    "vote_not_persisted": _VoteNotPersisted,
    "truncate_below_hw_allowed": _TruncateBelowHighWatermark,
    "snapshot_uncommitted": _SnapshotUncommitted,
    "two_voter_changes_at_once": _TwoVoterChangesAtOnce,
    "voter_change_before_own_epoch_commit": _VoterChangeBeforeOwnEpochCommit,
    "add_voter_not_caught_up": _AddVoterNotCaughtUp,
    "wiped_disk_double_vote": _WipedDiskDoubleVote,
    "snapshot_voters_at_log_end": _SnapshotVotersAtLogEnd,
    "snapshots_deleted_before_log_start": _SnapshotsDeletedBeforeLogStart,
}
# Bugs of the simulated disk's code, which models the real disk code's steps.
_DISK_BUGS: dict[str, dict[str, bool]] = {
    "flush_skips_dir_fsync": {"flush_syncs_dir": False},
    "truncation_rewrites_segment": {"cut_keeps_segment": False},
}
PLANTED_BUGS: tuple[str, ...] = (*_CLASSES, *_DISK_BUGS)


def disk_config(bug: str | None, config: DiskConfig) -> DiskConfig:
    """The disk `config` with the disk bug `bug` planted, if it is one."""
    return dataclasses.replace(config, **_DISK_BUGS.get(bug or "", {}))


def core_class(bug: str | None) -> type[RaftCore]:
    """The real core for None, else the core with that bug planted."""
    if bug is None or bug in _DISK_BUGS:
        return RaftCore
    try:
        return _CLASSES[bug]
    except KeyError:
        raise ValueError(f"unknown planted bug {bug!r}; one of "
                         f"{', '.join(PLANTED_BUGS)}") from None
