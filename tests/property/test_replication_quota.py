"""The replication quota's decision (broker.kafka.partitions.replication_quota) against
its promises: a sender that sends only while not over the quota never sends more than
the limit allows over any stretch of the window, a quota over its limit frees itself
once the window has passed, and the rate is Kafka's (bytes over the samples' span, at
least SAMPLES - 1 samples more than it spans while it spans fewer)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.kafka.partitions.replication_quota import (
    SAMPLE_MS,
    SAMPLES,
    Window,
    caught_up,
    follower_holds_back,
    is_exceeded,
    is_throttled,
    leader_holds_back,
    observed_rate,
    recorded,
)

CHUNK = 64 * 1024  # the largest send in these schedules

# (ms since the previous attempt, bytes the attempt would send)
SCHEDULE = st.lists(st.tuples(st.integers(0, 700), st.integers(0, CHUNK)),
                    min_size=1, max_size=400)


def throttled_sends(schedule: list[tuple[int, int]], limit: int) -> list[tuple[int, int]]:
    """(time, bytes) of each attempt made while not over the quota, as a leader serves."""
    window, now, sent = Window(), 0, []
    for gap, nbytes in schedule:
        now += gap
        if not is_exceeded(window, limit, now):
            window = recorded(window, nbytes, now)
            sent.append((now, nbytes))
    return sent


@settings(max_examples=300, deadline=None)
@given(SCHEDULE, st.integers(1, 4 * CHUNK))
def test_no_stretch_of_the_window_carries_more_than_the_limit_allows(
        schedule: list[tuple[int, int]], limit: int) -> None:
    """Whatever lies within SAMPLES - 1 samples of a send was in the window when it was
    allowed, so at most the limit times the whole window, plus that one send."""
    sent = throttled_sends(schedule, limit)
    span = (SAMPLES - 1) * SAMPLE_MS
    allowed = limit * SAMPLES * SAMPLE_MS / 1000 + CHUNK
    for end, _ in sent:
        assert sum(b for t, b in sent if end - span <= t <= end) <= allowed


@settings(max_examples=300, deadline=None)
@given(SCHEDULE, st.integers(0, 4 * CHUNK))
def test_a_quiet_window_is_never_over_the_quota(schedule: list[tuple[int, int]],
                                                limit: int) -> None:
    window, now = Window(), 0
    for gap, nbytes in schedule:
        now += gap
        window = recorded(window, nbytes, now)
    assert not is_exceeded(window, limit, now + SAMPLES * SAMPLE_MS)
    assert len(window.samples) <= SAMPLES


@given(st.integers(1, CHUNK), st.integers(0, SAMPLE_MS - 1))
def test_a_first_sample_counts_samples_minus_one_more_whole_samples(nbytes: int,
                                                                   age_ms: int) -> None:
    window = recorded(Window(), nbytes, 0)
    assert observed_rate(window, age_ms) == nbytes * 1000 / (
        age_ms + (SAMPLES - 1) * SAMPLE_MS)


def test_none_is_unlimited_and_zero_stops_after_the_first_bytes() -> None:
    busy = recorded(Window(), 10**12, 0)
    assert not is_exceeded(busy, None, 0)
    assert not is_exceeded(Window(), 0, 0)
    assert is_exceeded(busy, 0, 1)


def test_throttled_replicas_name_a_partition_on_this_broker_or_every_one() -> None:
    assert is_throttled("*", 3, 7)
    assert is_throttled("0:5,3:7", 3, 7)
    assert not is_throttled("3:5,0:7", 3, 7)
    assert (is_throttled("", 0, 7), is_throttled(None, 0, 7)) == (False, False)


def test_a_follower_is_in_sync_once_it_reaches_the_leaders_high_watermark() -> None:
    assert (caught_up(10, 10), caught_up(9, 10), caught_up(10, None)) == (True, False, False)


@given(st.booleans(), st.booleans(), st.booleans(), st.integers(0, 10),
       st.none() | st.integers(0, 10))
def test_only_a_throttled_replica_outside_the_isr_and_behind_is_held_back_over_quota(
        throttled: bool, in_isr: bool, exceeded: bool, log_end: int,
        leader_hw: int | None) -> None:
    """Kafka's shouldLeaderThrottle / shouldFollowerThrottle, and never an ISR member: the
    high watermark waits for it, so holding it back would hold acks=all produces (a
    follower whose fetcher restarts on a leader change does not know its lag yet)."""
    leader = leader_holds_back(throttled=throttled, in_isr=in_isr, exceeded=exceeded)
    follower = follower_holds_back(throttled=throttled, in_isr=in_isr, exceeded=exceeded,
                                   log_end=log_end, leader_high_watermark=leader_hw)
    assert leader == (throttled and exceeded and not in_isr)
    assert follower == (leader and not caught_up(log_end, leader_hw))
