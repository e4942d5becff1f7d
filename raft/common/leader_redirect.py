"""The one rule for sending a request to a quorum's leader: whom to ask next, when to
pause, and what the caller may conclude. Pure: no I/O, no clock (the time left is an
input), so the blocking client (`tools/admin_client.py`) and the async one
(`metadata/controller_client.py`) decide alike.

An attempt ends in one of four outcomes:

- `Answered`: a node decided the request (success or a refusal): done, with its answer;
- `Redirected`: NOT_CONTROLLER / NOT_LEADER_OR_FOLLOWER, with the leader's address when
  the node knows it: that address is asked next (a few hops in a row at most, so two
  nodes naming each other during an election cannot hold the caller);
- `Unsent`: nothing left this client (connection refused, TLS handshake failed): safe to
  try the next address;
- `Lost`: the request was sent, then no answer came (timeout, closed connection, an
  unreadable reply).

A write that was `Lost`, or `Redirected` (the node may have proposed it and then lost
the lead: a lost proposal is answered NOT_CONTROLLER, yet a new leader may commit it),
may have been applied: from then on the call never ends `Failed`, only `Unknown` or with
a later answer (flagged `maybe_applied_before`). A read is never ambiguous.

Addresses are tried in order, the last known leader first; after a round without an
answer the caller pauses `backoff_s` and starts another, until the time is up or
`max_rounds` rounds were tried. An address in `avoid` is never asked.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

A = TypeVar("A", bound=Hashable)  # an address: "host:port", or (host, port)

MAX_HOPS = 3  # redirects followed in a row before the next listed address is tried


# -- outcomes of one attempt --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answered:
    value: Any


@dataclass(frozen=True, slots=True)
class Redirected(Generic[A]):
    hint: A | None  # the leader's address, when the node named one
    problem: str


@dataclass(frozen=True, slots=True)
class Unsent:
    problem: str


@dataclass(frozen=True, slots=True)
class Lost:
    problem: str


Outcome = Answered | Redirected[Any] | Unsent | Lost


# -- decisions ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send(Generic[A]):
    address: A


@dataclass(frozen=True, slots=True)
class Backoff:
    seconds: float


@dataclass(frozen=True, slots=True)
class Done(Generic[A]):
    value: Any
    leader: A  # the address that answered: ask it first next time
    maybe_applied_before: bool  # an earlier attempt of this write may have been applied


@dataclass(frozen=True, slots=True)
class Unknown:
    """A write may have been applied; no answer says whether."""
    problems: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Failed:
    """Certainly not applied: every attempt was refused before it was sent, or a read."""
    problems: tuple[str, ...]


Decision = Send[Any] | Backoff | Done[Any] | Unknown | Failed


@dataclass(frozen=True, slots=True)
class Call(Generic[A]):
    """One request's progress; `decide` returns the next one."""
    addresses: tuple[A, ...]
    is_write: bool
    backoff_s: float
    max_rounds: int | None = None
    avoid: frozenset[A] = frozenset()
    preferred: A | None = None  # the last leader heard of: first in the next round
    rounds: int = 0  # rounds started
    queue: tuple[A, ...] = ()  # this round's addresses not yet asked
    current: A | None = None
    hops: int = 0
    maybe_applied: bool = False
    problems: tuple[str, ...] = field(default=())


def start(addresses: Iterable[A], *, is_write: bool, backoff_s: float,
          preferred: A | None = None, max_rounds: int | None = None,
          avoid: Iterable[A] = ()) -> Call[A]:
    """A call before its first attempt; `decide(call, None, time_left_s)` gives it."""
    if backoff_s <= 0:
        raise ValueError("backoff_s must be positive (a round without answers must pause)")
    return Call(addresses=tuple(dict.fromkeys(addresses)), is_write=is_write,
                backoff_s=backoff_s, max_rounds=max_rounds, avoid=frozenset(avoid),
                preferred=preferred)


def decide(call: Call[A], outcome: Outcome | None, time_left_s: float
           ) -> tuple[Call[A], Decision]:
    """The next step after `outcome` of the attempt at `call.current` (None: the call
    starts, or its backoff ended). `time_left_s`: until the caller's deadline (a call
    without one passes `math.inf` and is bounded by `max_rounds`)."""
    if isinstance(outcome, Answered):
        assert call.current is not None
        return call, Done(outcome.value, call.current, call.maybe_applied)
    if isinstance(outcome, Redirected):
        call = replace(call, maybe_applied=call.maybe_applied or call.is_write,
                       problems=call.problems + (outcome.problem,))
        hint = outcome.hint
        if hint is not None and hint != call.current:
            call = replace(call, preferred=hint)
            if hint in call.avoid:
                call = replace(call, problems=call.problems + (
                    f"{hint}: avoided (leader unreachable)",))
            elif call.hops < MAX_HOPS and time_left_s > 0:
                return replace(call, current=hint, hops=call.hops + 1,
                               queue=tuple(a for a in call.queue if a != hint)), Send(hint)
    elif isinstance(outcome, Lost | Unsent):
        lost = isinstance(outcome, Lost)
        call = replace(call, maybe_applied=call.maybe_applied or (lost and call.is_write),
                       problems=call.problems + (outcome.problem,),
                       preferred=None if call.preferred == call.current else call.preferred)
    elif outcome is None and call.rounds > 0 and call.queue:
        raise ValueError("a call's round is under way: pass the last attempt's outcome")
    return _next_address(call, time_left_s, new_round=outcome is None)


def _next_address(call: Call[A], time_left_s: float, *, new_round: bool
                  ) -> tuple[Call[A], Decision]:
    if time_left_s <= 0:
        return call, _give_up(call)
    if new_round:
        first = (call.preferred,) if call.preferred is not None else ()
        call = replace(call, rounds=call.rounds + 1, queue=tuple(
            a for a in dict.fromkeys(first + call.addresses) if a not in call.avoid))
    if call.queue:
        address, rest = call.queue[0], call.queue[1:]
        return replace(call, queue=rest, current=address, hops=0), Send(address)
    if call.max_rounds is not None and call.rounds >= call.max_rounds:
        return call, _give_up(call)
    if time_left_s <= call.backoff_s:  # another round could not start before the deadline
        return call, _give_up(call)
    return replace(call, current=None), Backoff(call.backoff_s)


def _give_up(call: Call[Any]) -> Unknown | Failed:
    return Unknown(call.problems) if call.maybe_applied else Failed(call.problems)
