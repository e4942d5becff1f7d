"""raft.common.gc_pause: the collector off inside, as it was found afterwards; frozen
only after a body that returned."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from raft.common.gc_pause import gc_paused


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    was_enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if was_enabled:
        gc.enable()


def test_collector_is_off_inside_and_on_again_when_it_was_on() -> None:
    gc.enable()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collector_stays_off_when_it_was_off() -> None:
    gc.disable()
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_freeze_leaves_what_was_built_out_of_collections_when_asked() -> None:
    gc.enable()
    gc.unfreeze()
    with gc_paused(freeze=True):
        built: list[list[int]] = [[] for _ in range(100)]
    assert gc.get_freeze_count() >= len(built)
    assert gc.isenabled()


def test_nothing_is_frozen_and_the_collector_is_back_when_the_body_raises() -> None:
    gc.enable()
    gc.unfreeze()
    with pytest.raises(ValueError, match="bad"), gc_paused(freeze=True):
        raise ValueError("bad")
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()
