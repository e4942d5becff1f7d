"""EpochCache: Kafka's leader-epoch cache (epoch -> start offset), OffsetsForLeaderEpoch."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raft.log import EpochCache
from raft.types import NO_EPOCH, NO_OFFSET


def _cache() -> EpochCache:
    return EpochCache([(1, 0), (3, 10), (4, 25)])


def test_end_offset_is_next_epoch_start_when_epoch_is_not_latest() -> None:
    """KIP-595 Fetch: a diverging epoch ends where the next higher epoch starts."""
    assert _cache().end_offset_for_epoch(1, 40) == (1, 10)
    assert _cache().end_offset_for_epoch(3, 40) == (3, 25)


def test_end_offset_is_log_end_when_epoch_is_latest_or_above() -> None:
    """OffsetsForLeaderEpoch: the latest epoch ends at the log end offset."""
    assert _cache().end_offset_for_epoch(4, 40) == (4, 40)
    assert _cache().end_offset_for_epoch(9, 40) == (4, 40)


def test_largest_epoch_below_is_used_when_epoch_is_absent() -> None:
    """OffsetsForLeaderEpoch: an unknown epoch answers with the largest epoch below it."""
    assert _cache().end_offset_for_epoch(2, 40) == (1, 10)


def test_undefined_when_epoch_is_below_every_epoch() -> None:
    """OffsetsForLeaderEpoch: (UNDEFINED_EPOCH, UNDEFINED_OFFSET) below the first epoch."""
    assert _cache().end_offset_for_epoch(0, 40) == (NO_EPOCH, NO_OFFSET)
    assert EpochCache().end_offset_for_epoch(5, 0) == (NO_EPOCH, NO_OFFSET)


def test_assign_is_noop_when_epoch_is_latest() -> None:
    """Only the first batch of an epoch sets its start offset."""
    cache = _cache()
    cache.assign(4, 30)
    assert cache.entries() == [(1, 0), (3, 10), (4, 25)]


def test_assign_refuses_when_epoch_or_offset_goes_back() -> None:
    """Epochs and their start offsets only increase along a log (Raft §5.3)."""
    with pytest.raises(ValueError, match="does not follow"):
        _cache().assign(2, 30)
    with pytest.raises(ValueError, match="does not follow"):
        _cache().assign(5, 25)


def test_truncate_from_end_drops_epochs_starting_at_or_after_offset() -> None:
    """Log truncation removes the epoch entries past the new end."""
    cache = _cache()
    cache.truncate_from_end(25)
    assert cache.entries() == [(1, 0), (3, 10)]
    cache.truncate_from_end(11)
    assert cache.entries() == [(1, 0), (3, 10)]
    cache.truncate_from_end(0)
    assert cache.entries() == []


def test_truncate_from_start_moves_holding_epoch_start_when_prefix_removed() -> None:
    """After a snapshot the epoch holding the new log start begins there."""
    cache = _cache()
    cache.truncate_from_start(12)
    assert cache.entries() == [(3, 12), (4, 25)]


def test_epoch_at_finds_holding_epoch_when_offset_is_inside() -> None:
    """An offset belongs to the latest epoch starting at or before it."""
    cache = _cache()
    assert [cache.epoch_at(o) for o in (0, 9, 10, 24, 25, 99)] == [1, 1, 3, 3, 4, 4]
    assert EpochCache([(2, 5)]).epoch_at(4) == NO_EPOCH


@given(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 5)), min_size=1, max_size=30),
       st.integers(0, 100))
def test_end_offset_matches_naive_scan_when_epochs_are_random(
        steps: list[tuple[int, int]], asked: int) -> None:
    """OffsetsForLeaderEpoch agrees with a linear scan over the per-offset epochs."""
    epochs_by_offset: list[int] = []
    cache = EpochCache()
    epoch = 0
    for bump, count in steps:
        epoch += bump
        cache.assign(epoch, len(epochs_by_offset))
        epochs_by_offset += [epoch] * count
    end = len(epochs_by_offset)
    below = [e for e in epochs_by_offset if e <= asked]
    if not below:
        expected = (NO_EPOCH, NO_OFFSET)
    else:
        found = max(below)
        expected = (found, next((o for o, e in enumerate(epochs_by_offset) if e > found), end))
    assert cache.end_offset_for_epoch(asked, end) == expected
