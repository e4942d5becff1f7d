"""The redirect-and-retry policy (raft/common/leader_redirect.py), driven over arbitrary
sequences of attempt outcomes with a simulated clock: it never runs past the deadline,
never reports a write that may have reached a leader as failed, follows a leader hint
at once, and never asks an avoided address."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raft.common import leader_redirect
from raft.common.leader_redirect import (
    Answered,
    Backoff,
    Done,
    Failed,
    Lost,
    Outcome,
    Redirected,
    Send,
    Unknown,
    Unsent,
)

ADDRESSES = ("a:1", "b:2", "c:3")
OTHER = "d:4"  # a leader only hints name


@dataclass
class Run:
    sent: list[str]
    outcomes: list[Outcome]
    final: leader_redirect.Decision
    elapsed_s: float
    followed_hints: list[bool]


def outcomes(addresses: tuple[str, ...] = ADDRESSES) -> st.SearchStrategy[Outcome]:
    hint = st.none() | st.sampled_from((*addresses, OTHER))
    return st.one_of(
        st.builds(Answered, st.integers()),
        st.builds(Redirected, hint, st.just("not the leader")),
        st.builds(Unsent, st.just("connection refused")),
        st.builds(Lost, st.just("no answer")),
    )


def drive(script: list[tuple[Outcome, float]], *, is_write: bool, deadline_s: float,
          max_rounds: int | None = None, avoid: frozenset[str] = frozenset(),
          preferred: str | None = None) -> Run:
    """Run one call against `script` (each attempt's outcome and how long it took, capped
    at the time left as the clients cap it); once the script is used up every attempt is
    refused at once. Bounded: the policy must end the call."""
    call = leader_redirect.start(ADDRESSES, is_write=is_write, backoff_s=0.1,
                                 max_rounds=max_rounds, avoid=avoid, preferred=preferred)
    now = 0.0
    sent: list[str] = []
    seen: list[Outcome] = []
    followed: list[bool] = []
    outcome: Outcome | None = None
    for _ in range(10_000):
        call, decision = leader_redirect.decide(call, outcome, deadline_s - now)
        if isinstance(outcome, Redirected) and outcome.hint is not None:
            followed.append(decision == Send(outcome.hint))
        if isinstance(decision, Send):
            assert now < deadline_s, "an attempt started at or after the deadline"
            sent.append(decision.address)
            outcome, took = script.pop(0) if script else (Unsent("refused"), 0.01)
            now = min(now + took, deadline_s)  # not now + (deadline - now): float rounding
            seen.append(outcome)
        elif isinstance(decision, Backoff):
            assert now + decision.seconds < deadline_s, "a pause past the deadline"
            now += decision.seconds
            outcome = None
        else:
            return Run(sent, seen, decision, now, followed)
    raise AssertionError("the call did not end")


scripts = st.lists(st.tuples(outcomes(), st.floats(0.0, 3.0)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(scripts, st.booleans(), st.floats(0.05, 10.0))
def test_a_call_never_runs_past_its_deadline(script: list[tuple[Outcome, float]],
                                             is_write: bool, deadline_s: float) -> None:
    run = drive(script, is_write=is_write, deadline_s=deadline_s)
    assert run.elapsed_s <= deadline_s


@settings(max_examples=300, deadline=None)
@given(scripts, st.floats(0.05, 10.0))
def test_a_write_that_may_have_reached_a_leader_is_never_reported_failed(
        script: list[tuple[Outcome, float]], deadline_s: float) -> None:
    run = drive(script, is_write=True, deadline_s=deadline_s)
    ambiguous = any(isinstance(o, Lost | Redirected) for o in run.outcomes)
    if ambiguous:
        assert not isinstance(run.final, Failed)
        if isinstance(run.final, Done):
            assert run.final.maybe_applied_before
    elif not isinstance(run.final, Done):  # nothing was sent: certainly not applied
        assert isinstance(run.final, Failed)


@settings(max_examples=300, deadline=None)
@given(scripts, st.floats(0.05, 10.0))
def test_a_read_is_never_unknown(script: list[tuple[Outcome, float]],
                                 deadline_s: float) -> None:
    run = drive(script, is_write=False, deadline_s=deadline_s)
    assert not isinstance(run.final, Unknown)
    if isinstance(run.final, Done):
        assert not run.final.maybe_applied_before


@settings(max_examples=300, deadline=None)
@given(scripts, st.booleans())
def test_the_answer_ends_the_call_with_its_value_from_the_address_that_gave_it(
        script: list[tuple[Outcome, float]], is_write: bool) -> None:
    run = drive(script, is_write=is_write, deadline_s=math.inf, max_rounds=5)
    answers = [o for o in run.outcomes if isinstance(o, Answered)]
    if answers:
        assert isinstance(run.final, Done)
        assert run.final.value == answers[0].value
        assert run.final.leader == run.sent[-1]
        assert run.outcomes[-1] is answers[0]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.builds(Redirected, st.sampled_from((*ADDRESSES, OTHER)),
                                    st.just("not the leader")), st.floats(0.0, 0.1)),
                min_size=1, max_size=3), st.booleans())
def test_a_hinted_leader_is_asked_next(script: list[tuple[Outcome, float]],
                                       is_write: bool) -> None:
    """Up to three redirects in a row are followed at once, each to the address it names
    (a hint naming the address that gave it is no hint)."""
    run = drive(list(script), is_write=is_write, deadline_s=60.0, max_rounds=1)
    for index, outcome in enumerate(script):
        assert isinstance(outcome[0], Redirected)
        if outcome[0].hint != run.sent[index]:
            assert run.sent[index + 1] == outcome[0].hint


@settings(max_examples=300, deadline=None)
@given(scripts, st.booleans(), st.sets(st.sampled_from((*ADDRESSES, OTHER))))
def test_an_avoided_address_is_never_asked(script: list[tuple[Outcome, float]],
                                           is_write: bool, avoid: set[str]) -> None:
    run = drive(script, is_write=is_write, deadline_s=20.0, avoid=frozenset(avoid))
    assert not set(run.sent) & avoid


@settings(max_examples=200, deadline=None)
@given(scripts, st.booleans(), st.integers(1, 3))
def test_max_rounds_bounds_a_call_without_deadline(script: list[tuple[Outcome, float]],
                                                   is_write: bool, rounds: int) -> None:
    """Each listed address is asked at most once a round, plus the hints followed."""
    run = drive(script, is_write=is_write, deadline_s=math.inf, max_rounds=rounds)
    redirects = sum(isinstance(o, Redirected) for o in run.outcomes)
    assert len(run.sent) <= rounds * (len(ADDRESSES) + 1) + redirects


def test_the_last_leader_is_asked_first_and_forgotten_once_unreachable() -> None:
    call = leader_redirect.start(ADDRESSES, is_write=False, backoff_s=0.1, preferred="c:3")
    call, decision = leader_redirect.decide(call, None, 5.0)
    assert decision == Send("c:3")
    call, decision = leader_redirect.decide(call, Unsent("refused"), 5.0)
    assert decision == Send("a:1")
    assert call.preferred is None


def test_a_redirect_without_a_hint_moves_on_then_pauses_after_the_round() -> None:
    call = leader_redirect.start(("a:1", "b:2"), is_write=False, backoff_s=0.1)
    call, decision = leader_redirect.decide(call, None, 5.0)
    call, decision = leader_redirect.decide(call, Redirected(None, "electing"), 5.0)
    assert decision == Send("b:2")
    call, decision = leader_redirect.decide(call, Redirected(None, "electing"), 5.0)
    assert decision == Backoff(0.1)
    call, decision = leader_redirect.decide(call, None, 4.9)
    assert decision == Send("a:1")


def test_a_hinted_leader_is_asked_first_in_the_next_round_once_the_hops_ran_out() -> None:
    call = leader_redirect.start(("a:1", "b:2"), is_write=True, backoff_s=0.1)
    call, decision = leader_redirect.decide(call, None, 5.0)
    for _ in range(leader_redirect.MAX_HOPS):  # two nodes naming each other
        other = "b:2" if decision == Send("a:1") else "a:1"
        call, decision = leader_redirect.decide(call, Redirected(other, "not me"), 5.0)
        assert decision == Send(other)
    call, decision = leader_redirect.decide(call, Redirected("d:4", "not me"), 5.0)
    assert not isinstance(decision, Send) or decision.address != "d:4"
    assert call.preferred == "d:4"


def test_giving_up_names_the_problems_seen() -> None:
    call = leader_redirect.start(("a:1",), is_write=True, backoff_s=0.1, max_rounds=1)
    call, decision = leader_redirect.decide(call, None, 5.0)
    call, decision = leader_redirect.decide(call, Lost("a:1: no answer within 1 s"), 5.0)
    assert decision == Unknown(("a:1: no answer within 1 s",))


def test_a_positive_backoff_is_required() -> None:
    with pytest.raises(ValueError, match="backoff_s"):
        leader_redirect.start(ADDRESSES, is_write=False, backoff_s=0)
