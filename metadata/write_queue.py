"""Admin writes on the active controller, from arrival to answer (pure: no I/O, no clock).

The shell (`metadata.controller_shell`) drives it:

- `submit(key, request)` queues a write; `key` is the shell's handle for the answer.
- `decide(controller, ...)` takes *everything* queued into one proposal: one call of
  `Controller.handle_batch`, so the records of all the writes are one Raft batch (one
  append, one fsync, one replication round), whatever their number. Nothing lingers: the
  shell calls it as soon as the core task can run it, and whatever arrived meanwhile
  (e.g. while the previous batch was being fsynced) is in this one.
- A write that changes nothing and rests on nothing pending is answered at once (in
  `Proposal.answers`); every other one waits for its offset: its own last record, or the
  last pending record its answer was decided against.
- `applied(offset)`: the committed image reached `offset`, holding the controller's
  records as proposed (the shell checks that, see `Controller.on_committed`): every write
  waiting at or below it is answered with its response.
- `fail(response)`: leadership was lost (or what committed is not what was proposed):
  every write still queued or waiting gets `response` (NOT_CONTROLLER), never its
  success: its records may be cut from the log.

Offsets waited for never decrease in decision order (each decision waits for the newest
record at the time), so the waiting writes form a queue.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from metadata import records as rec
from metadata.admin import AdminErrorResponse, AdminRequest, AdminResponse
from metadata.controller import Controller, Decision
from metadata.image import NO_OFFSET
from raft.common.errors import ErrorCode

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal(Generic[K]):
    """What one `decide` took: propose `records` (the first at `base_offset`) as one
    batch; send `answers` now. `errors`: the writes whose decision raised (a controller
    bug), answered UNKNOWN_SERVER_ERROR in `answers`, for the shell to log."""

    records: tuple[rec.Record, ...]
    base_offset: int
    answers: tuple[tuple[K, AdminResponse], ...]
    errors: tuple[tuple[K, Exception], ...]
    taken: int  # writes taken from the queue

    @property
    def last_offset(self) -> int:
        """The offset of the last record; NO_OFFSET when there are none."""
        return self.base_offset + len(self.records) - 1 if self.records else NO_OFFSET


class WriteQueue(Generic[K]):
    def __init__(self) -> None:
        self._queued: list[tuple[K, AdminRequest]] = []
        self._waiting: deque[tuple[int, K, AdminResponse]] = deque()

    @property
    def queued(self) -> int:
        return len(self._queued)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def submit(self, key: K, request: AdminRequest) -> None:
        self._queued.append((key, request))

    def decide(self, controller: Controller, *, now_ms: int, rng: random.Random,
               next_offset: int) -> Proposal[K]:
        """Decide everything queued as one batch whose first record lands at `next_offset`
        (the leader's log end, in the same step of the core task as the append)."""
        taken, self._queued = self._queued, []
        batch = controller.handle_batch([request for _, request in taken], now_ms=now_ms,
                                        rng=rng, next_offset=next_offset)
        answers: list[tuple[K, AdminResponse]] = []
        errors: list[tuple[K, Exception]] = []
        for (key, _), outcome in zip(taken, batch.outcomes, strict=True):
            if isinstance(outcome, Decision) and outcome.response is not None:
                if outcome.wait_offset == NO_OFFSET:
                    answers.append((key, outcome.response))
                else:
                    self._waiting.append((outcome.wait_offset, key, outcome.response))
                continue
            error = outcome if isinstance(outcome, Exception) else TypeError(
                "a write was decided without a response")
            errors.append((key, error))
            answers.append((key, AdminErrorResponse(
                top_level_error=ErrorCode.UNKNOWN_SERVER_ERROR,
                error_message=f"{type(error).__name__}: {error}")))
        return Proposal(records=batch.records, base_offset=batch.base_offset,
                        answers=tuple(answers), errors=tuple(errors), taken=len(taken))

    def applied(self, offset: int) -> list[tuple[K, AdminResponse]]:
        """The committed image holds, as proposed, every record up to `offset`: the
        answers of the writes waiting at or below it."""
        answers = []
        waiting = self._waiting
        while waiting and waiting[0][0] <= offset:
            _, key, response = waiting.popleft()
            answers.append((key, response))
        return answers

    def fail(self, response: AdminResponse) -> list[tuple[K, AdminResponse]]:
        """Every write still queued or waiting, answered with `response`."""
        answers = [(key, response) for key, _ in self._queued]
        answers.extend((key, response) for _, key, _ in self._waiting)
        self._queued = []
        self._waiting.clear()
        return answers

