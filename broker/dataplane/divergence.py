"""Log divergence between a partition's leader and a follower, by leader epochs (Kafka's
KIP-101/KIP-279 rules, which Fetch v12+ answers inline as `diverging_epoch`).

Both sides look epochs up in their own leader-epoch cache: `end_offset_for_epoch(e)`
gives (the largest epoch <= e the log has, the offset where that epoch ends), or
(-1, -1) when the log has no such epoch.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

EpochLookup = Callable[[int], tuple[int, int]]  # epoch -> (largest epoch <= it, its end)


def end_offset_for_epoch(epoch_starts: Sequence[tuple[int, int]], log_end: int,
                         epoch: int) -> tuple[int, int]:
    """A leader-epoch cache's lookup (Kafka's OffsetForLeaderEpoch): over (epoch, first
    offset) pairs in log order, (the largest epoch <= `epoch`, the offset where it ends),
    or (-1, -1) when the log has no such epoch. O(log epochs)."""
    index = bisect.bisect_right(epoch_starts, (epoch, 1 << 63)) - 1
    if index < 0:
        return -1, -1
    if index + 1 < len(epoch_starts):
        return epoch_starts[index][0], epoch_starts[index + 1][1]
    return epoch_starts[index][0], log_end


def diverging_epoch(leader_epochs: EpochLookup, *, log_start: int, fetch_offset: int,
                    last_fetched_epoch: int) -> tuple[int, int] | None:
    """The leader's `diverging_epoch` answer (epoch, end offset) to a follower fetching at
    `fetch_offset` whose last record has `last_fetched_epoch`; None when the follower's
    log may go on from there. A follower whose last epoch ends earlier in the leader's log,
    or is one the leader never had, has diverged. No common epoch at all: truncate to the
    log start (where an epoch the leader does not know is one retention deleted, which is
    no divergence)."""
    if last_fetched_epoch < 0:
        return None
    epoch, end = leader_epochs(last_fetched_epoch)
    if epoch < 0:
        end = log_start
    if (epoch != last_fetched_epoch or end < fetch_offset) and \
            not (epoch < 0 and fetch_offset == log_start):
        return epoch, end
    return None


BELOW_LOG_START, ABOVE_LOG_END, SERVE = "below-log-start", "above-log-end", "serve"


def leader_fetch(leader_epochs: EpochLookup, *, log_start: int, log_end: int,
                 fetch_offset: int, last_fetched_epoch: int, from_follower: bool
                 ) -> str | tuple[int, int]:
    """What a partition leader answers a fetch at `fetch_offset`, in Kafka's order of
    checks: BELOW_LOG_START (OFFSET_OUT_OF_RANGE with the log start: retention or
    DeleteRecords removed it, and a follower resets its log to there); a follower whose
    log diverged gets the diverging epoch (epoch, end offset) and no records;
    ABOVE_LOG_END (OFFSET_OUT_OF_RANGE); else SERVE: records from there. Only a SERVE
    fetch tells where a follower's log matches the leader's (below `fetch_offset`), so
    only then does it count as the follower's progress (high watermark, ISR)."""
    if fetch_offset < log_start:
        return BELOW_LOG_START
    if from_follower:
        diverging = diverging_epoch(leader_epochs, log_start=log_start,
                                    fetch_offset=fetch_offset,
                                    last_fetched_epoch=last_fetched_epoch)
        if diverging is not None:
            return diverging
    return ABOVE_LOG_END if fetch_offset > log_end else SERVE


def truncation_offset(diverging: tuple[int, int], own_epochs: EpochLookup,
                      own_log_end: int) -> int:
    """Where a follower told `diverging` = (epoch E, the leader's end of E) truncates its
    log (KIP-279, as Kafka's fetcher): it has E too: below both ends of E; its largest
    epoch up to E is an earlier one: below its own end of that epoch (its next fetch asks
    again from there); it has none: every record it holds is of a later epoch than any the
    leader has there, so none is kept (0: down to its log start). The leader answered
    with no epoch (-1, its log start): below that.

    Taking the leader's end alone when the follower's own epoch ended earlier keeps
    records of a later epoch the leader never had, at offsets the leader filled in E: the
    follower would be told the same at every fetch and never converge. Each answer makes
    the follower's last epoch agree or move strictly down, so the exchange ends."""
    epoch, leader_end = diverging
    if epoch < 0:
        return max(0, min(leader_end, own_log_end))
    own_epoch, own_end = own_epochs(epoch)
    if own_epoch < 0:
        return 0
    if own_epoch != epoch:
        return max(0, min(own_end, own_log_end))
    return max(0, min(leader_end, own_end, own_log_end))
