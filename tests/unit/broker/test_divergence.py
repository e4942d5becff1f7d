"""The data plane's divergence rules (broker/dataplane/divergence.py): what a leader
answers a follower's fetch, and where the follower truncates, checked on logs given as
lists of record epochs, and as a property: repeating fetch and truncation always ends
with the follower's log a prefix of the leader's."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.dataplane.divergence import (
    ABOVE_LOG_END,
    BELOW_LOG_START,
    SERVE,
    EpochLookup,
    diverging_epoch,
    leader_fetch,
    truncation_offset,
)


def epochs_of(log: list[int]) -> EpochLookup:
    """end_offset_for_epoch of a log whose record at offset i has epoch log[i]."""
    def lookup(epoch: int) -> tuple[int, int]:
        found = max((e for e in log if e <= epoch), default=-1)
        if found < 0:
            return -1, -1
        later = [i for i, e in enumerate(log) if e > found]
        return found, later[0] if later else len(log)
    return lookup


def converge(leader: list[int], follower: list[int]) -> tuple[list[int], int]:
    """Fetch and truncate until the leader answers records; (follower's log, rounds)."""
    for rounds in range(len(follower) + 2):
        answer = diverging_epoch(epochs_of(leader), log_start=0, fetch_offset=len(follower),
                                 last_fetched_epoch=follower[-1] if follower else -1)
        if answer is None:
            return follower, rounds
        follower = follower[:truncation_offset(answer, epochs_of(follower), len(follower))]
    raise AssertionError(f"no convergence: leader {leader}, follower {follower}")


def test_a_follower_in_step_gets_records() -> None:
    assert diverging_epoch(epochs_of([1, 1, 2]), log_start=0, fetch_offset=3,
                           last_fetched_epoch=2) is None
    assert diverging_epoch(epochs_of([1, 1, 2]), log_start=0, fetch_offset=2,
                           last_fetched_epoch=1) is None


def test_a_follower_with_a_longer_epoch_is_told_where_it_ends() -> None:
    assert diverging_epoch(epochs_of([1, 1, 3]), log_start=0, fetch_offset=3,
                           last_fetched_epoch=1) == (1, 2)


def test_an_epoch_the_leader_never_had_is_answered_with_its_largest_below() -> None:
    assert diverging_epoch(epochs_of([3, 3, 3, 3, 7]), log_start=0, fetch_offset=5,
                           last_fetched_epoch=5) == (3, 4)


def test_a_follower_whose_own_epoch_ended_earlier_truncates_below_it() -> None:
    """Leader: epoch 3 up to offset 4, then 7. Follower: epoch 3 up to 2, then 5 (a leader
    of epoch 5 that lagged). The leader's end of epoch 3 alone (4) would keep the
    follower's epoch-5 records at 2 and 3, and every later fetch would be told the same."""
    leader, follower = [3, 3, 3, 3, 7], [3, 3, 5, 5, 5, 5]
    answer = diverging_epoch(epochs_of(leader), log_start=0, fetch_offset=len(follower),
                             last_fetched_epoch=5)
    assert answer == (3, 4)
    assert truncation_offset(answer, epochs_of(follower), len(follower)) == 2
    assert converge(leader, follower) == ([3, 3], 1)


def test_a_follower_without_the_leaders_epoch_asks_again_from_its_own_end() -> None:
    leader, follower = [2, 2, 4, 4], [1, 1, 1, 3]
    answer = diverging_epoch(epochs_of(leader), log_start=0, fetch_offset=4,
                             last_fetched_epoch=3)
    assert answer == (2, 2)
    assert truncation_offset(answer, epochs_of(follower), 4) == 3  # its epoch 1 ends at 3
    assert converge(leader, follower) == ([], 2)  # then: the leader has no epoch <= 1


def test_a_follower_holding_only_later_epochs_keeps_nothing() -> None:
    assert truncation_offset((1, 1), epochs_of([2]), 1) == 0
    assert converge([1], [2]) == ([], 1)


def test_at_the_log_start_an_epoch_retention_deleted_is_no_divergence() -> None:
    def none(epoch: int) -> tuple[int, int]:
        return -1, -1
    assert diverging_epoch(none, log_start=10, fetch_offset=10, last_fetched_epoch=4) is None
    assert diverging_epoch(none, log_start=10, fetch_offset=12, last_fetched_epoch=4) == \
        (-1, 10)


@st.composite
def two_histories(draw: st.DrawFn) -> tuple[list[int], list[int], int]:
    """A leader's and a follower's log (record epochs) that agree on a common prefix, may
    each hold more records of its last epoch (an epoch has one leader, so those are the
    same records), then go on in epochs of their own (the leader's odd steps above, the
    follower's even ones: no epoch has records at other offsets in the other log).
    Also the length of the prefix they share (same epoch at an offset: same record)."""
    common = sorted(draw(st.lists(st.integers(1, 4), max_size=6)))
    top = common[-1] if common else 0
    same_leader, same_follower = (draw(st.integers(0, 3)), draw(st.integers(0, 3))) \
        if common else (0, 0)
    leader_own = sorted(draw(st.lists(st.sampled_from(range(top + 1, top + 9, 2)),
                                      max_size=5)))
    follower_own = sorted(draw(st.lists(st.sampled_from(range(top + 2, top + 10, 2)),
                                        max_size=5)))
    leader = common + [top] * same_leader + leader_own
    follower = common + [top] * same_follower + follower_own
    return leader, follower, _common_prefix(leader, follower)


def _common_prefix(one: list[int], two: list[int]) -> int:
    pairs = zip(one, two, strict=False)
    return next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(one), len(two)))


@given(two_histories())
def test_fetch_and_truncate_end_with_the_longest_shared_prefix(
        history: tuple[list[int], list[int], int]) -> None:
    """Whatever the two logs, fetch and truncation end, in at most one round per epoch of
    the follower's, with the follower holding exactly the prefix it shares with the
    leader (never less: a record of a common epoch is never cut)."""
    leader, follower, shared = history
    kept, rounds = converge(leader, follower)
    assert kept == leader[:shared]
    assert rounds <= len(set(follower)) + 1


@given(st.lists(st.integers(1, 4), max_size=12).map(sorted), st.integers(0, 14),
       st.integers(-1, 5), st.integers(0, 4), st.booleans())
def test_the_leader_answers_in_kafkas_order_of_checks(
        leader: list[int], offset: int, last_epoch: int, log_start: int,
        from_follower: bool) -> None:
    """Below the log start first (a follower resets there), then a follower's divergence
    (a consumer never diverges), then above the log end; records only past all three."""
    lookup = epochs_of(leader)
    answer = leader_fetch(lookup, log_start=log_start, log_end=len(leader),
                          fetch_offset=offset, last_fetched_epoch=last_epoch,
                          from_follower=from_follower)
    diverging = diverging_epoch(lookup, log_start=log_start, fetch_offset=offset,
                                last_fetched_epoch=last_epoch)
    if offset < log_start:
        assert answer == BELOW_LOG_START
    elif from_follower and diverging is not None:
        assert answer == diverging
    elif offset > len(leader):
        assert answer == ABOVE_LOG_END
    else:
        assert answer == SERVE
