"""Quorum math of the leader (Raft §5.3 commit rule, KIP-595 check-quorum) against naive
oracles, for any number of voters and any progress."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from raft.core._leader_state import LeaderState

voter_sets = st.integers(min_value=1, max_value=7).map(lambda n: tuple(range(1, n + 1)))


def leader_of(voters: tuple[int, ...], now_ms: int = 0) -> LeaderState:
    return LeaderState(epoch=3, leader_id=1, voted_id=1, node_id=1, voters=voters,
                       epoch_start_offset=0, became_leader_ms=now_ms)


@given(voter_sets.flatmap(lambda vs: st.tuples(
    st.just(vs), st.lists(st.integers(0, 50), min_size=len(vs), max_size=len(vs)),
    st.lists(st.integers(0, 50), max_size=3))))
def test_majority_end_offset_matches_oracle_when_progress_is_arbitrary(
        case: tuple[tuple[int, ...], list[int], list[int]]) -> None:
    """Raft §5.3: the largest offset held by a majority of voters (the leader counting its
    flushed end); observers never count."""
    voters, ends, observer_ends = case
    state = leader_of(voters)
    for voter, end in zip(voters[1:], ends[1:], strict=True):
        state.update_replica(voter, end, 1, 100)
    for index, end in enumerate(observer_ends):
        state.update_replica(100 + index, 1000 + end, 1, 100)
    held = [ends[0], *ends[1:]]
    oracle = max(o for o in range(0, 51)
                 if sum(e >= o for e in held) > len(voters) // 2)
    assert state.majority_end_offset(ends[0]) == oracle


@given(voter_sets.flatmap(lambda vs: st.tuples(
    st.just(vs), st.lists(st.integers(-1, 5000), min_size=len(vs), max_size=len(vs)))),
    st.integers(0, 8000))
def test_check_quorum_deadline_matches_oracle_when_fetch_times_vary(
        case: tuple[tuple[int, ...], list[int]], now_ms: int) -> None:
    """KIP-595 check-quorum (Kafka's timer: 1.5 fetch timeouts): the leader keeps its
    place while a majority (itself included) fetched within 3000 ms; never-fetched
    voters count from the start of the epoch."""
    voters, times = case
    state = leader_of(voters, now_ms=1000)
    for voter, t in zip(voters[1:], times[1:], strict=True):
        if t >= 0:
            state.update_replica(voter, 0, t, 0)
    deadline = state.check_quorum_deadline_ms(2000)
    if len(voters) == 1:
        assert deadline is None
        return
    last = [max(t, 1000) if t >= 0 else 1000 for t in times[1:]]
    alive = 1 + sum(now_ms - t < 3000 for t in last)
    assert deadline is not None
    assert (now_ms < deadline) == (alive > len(voters) // 2)


def test_diverging_fetch_is_not_contact_when_check_quorum_counts() -> None:
    """A voter whose Fetch diverged is not following yet: check-quorum does not count
    it (nor does the high watermark)."""
    state = leader_of((1, 2, 3), now_ms=1000)
    before = state.check_quorum_deadline_ms(2000)
    state.update_replica(2, None, 2500, 10)
    state.update_replica(3, None, 2600, 10)
    assert state.check_quorum_deadline_ms(2000) == before == 1000 + 3000
    assert state.majority_end_offset(10) == 0
    state.update_replica(2, 10, 2700, 10)
    assert state.check_quorum_deadline_ms(2000) == 2700 + 3000
