"""The broker heartbeat loop's wait between attempts (`broker.heartbeat.next_wait_s`).

A broker whose image caught up before its registration was answered sent its one
catch-up heartbeat as the registration: the controller unfences only on a heartbeat
that shows the registration record applied, so with a minute between heartbeats the
broker stayed fenced for that minute. A ready, fenced broker now asks again soon."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.heartbeat import FENCED_POLL_S, RETRY_S, SHUTDOWN_POLL_S, next_wait_s

MINUTE_S = 60.0


def wait(**state: bool) -> float:
    flags = {"registered": True, "answered": True, "ready": True, "fenced": False,
             "want_shut_down": False}
    return next_wait_s(interval_s=MINUTE_S, **{**flags, **state})


def test_a_ready_broker_the_controller_still_fences_asks_again_soon() -> None:
    assert wait(fenced=True) == FENCED_POLL_S


def test_an_unfenced_or_catching_up_broker_heartbeats_once_an_interval() -> None:
    assert wait() == MINUTE_S
    assert wait(ready=False, fenced=True) == MINUTE_S


def test_a_failed_registration_is_tried_again_within_a_second() -> None:
    assert wait(registered=False, ready=False, fenced=True) == RETRY_S


def test_no_controller_answering_is_retried_once_a_second_not_ten_times() -> None:
    """A ready, fenced broker polls fast only while a controller answers: each failed
    attempt logs a line."""
    assert wait(answered=False, fenced=True) == RETRY_S
    assert wait(answered=False) == RETRY_S


def test_a_controlled_shutdown_polls_fastest() -> None:
    assert wait(want_shut_down=True, fenced=True) == SHUTDOWN_POLL_S


@given(st.floats(0.001, 600), st.booleans(), st.booleans(), st.booleans(), st.booleans(),
       st.booleans())
def test_never_longer_than_the_interval_nor_idle(interval_s: float, registered: bool,
                                                answered: bool, ready: bool, fenced: bool,
                                                want_shut_down: bool) -> None:
    waited = next_wait_s(interval_s=interval_s, registered=registered, answered=answered,
                         ready=ready, fenced=fenced, want_shut_down=want_shut_down)
    assert 0 < waited <= max(interval_s, SHUTDOWN_POLL_S)
