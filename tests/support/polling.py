"""Waiting, in trio tests, for state that offers no event to wait on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio


async def eventually(predicate: Callable[[], Any], interval_s: float = 0.01) -> Any:
    """Poll `predicate` every `interval_s` until it is truthy; its value. The test's
    fail_after bounds it."""
    while True:
        if value := predicate():
            return value
        await trio.sleep(interval_s)
