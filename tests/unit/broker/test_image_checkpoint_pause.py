"""broker.server.checkpoint_pause_s: the image checkpoint is written once a second while
writes are quick, and takes at most CHECKPOINT_SHARE of the time when the image is large
enough that hashing it is slow (a million partitions: ~0.3 s a hash)."""

from __future__ import annotations

import pytest

from broker.server import CHECKPOINT_INTERVAL_S, CHECKPOINT_SHARE, checkpoint_pause_s


@pytest.mark.parametrize("write_s", [0.0, 0.01, CHECKPOINT_INTERVAL_S * CHECKPOINT_SHARE])
def test_pause_is_the_interval_when_a_write_is_quick(write_s: float) -> None:
    assert checkpoint_pause_s(write_s) == CHECKPOINT_INTERVAL_S


@pytest.mark.parametrize("write_s", [0.3, 2.0])
def test_writes_take_at_most_their_share_of_the_time_when_they_are_slow(
        write_s: float) -> None:
    pause = checkpoint_pause_s(write_s)
    assert pause > CHECKPOINT_INTERVAL_S
    assert write_s / (write_s + pause) <= CHECKPOINT_SHARE
