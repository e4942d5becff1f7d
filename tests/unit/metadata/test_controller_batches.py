"""Writes decided together (`Controller.handle_batch`) and answered at commit
(`metadata.write_queue.WriteQueue`): pure, no clock; hypothesis where the input space is
wide (sequences of writes, commits and leadership losses)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from metadata import records as rec
from metadata.admin import (
    AdminErrorResponse,
    AdminRequest,
    BrokerHeartbeatRequest,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicState,
    DescribeTopicsRequest,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
    RenameTopicRequest,
)
from metadata.controller import Controller, Decision
from metadata.write_queue import WriteQueue
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from tests.support.controller_harness import Harness

NAMES = ("a", "b", "c")
NOT_CONTROLLER = AdminErrorResponse(top_level_error=ErrorCode.NOT_CONTROLLER,
                                    error_message="lost leadership")


def create(name: str, factor: int = 1) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=(CreatableTopic(
        name=name, num_partitions=1, replication_factor=factor),))


def delete(name: str) -> DeleteTopicsRequest:
    return DeleteTopicsRequest(topics=(DeleteTopicState(name=name),))


def requests_strategy() -> st.SearchStrategy[list[AdminRequest]]:
    one = st.one_of(
        st.builds(create, st.sampled_from(NAMES), st.integers(1, 4)),
        st.builds(delete, st.sampled_from(NAMES)),
        st.builds(lambda n: RenameTopicRequest(topic_id=Uuid.random(random.Random(n)),
                                               new_name="x"), st.integers(0, 3)))
    return st.lists(one, min_size=1, max_size=12)


def error_codes(response: object) -> list[int]:
    items = (getattr(response, "topics", None) or getattr(response, "responses", None)
             or [response])
    return [getattr(item, "error_code", -1) for item in items]


def commit(h: Harness, records: tuple[rec.Record, ...], base: int) -> None:
    h.log.extend(enumerate(records, start=base))
    h.commit()


# --- handle_batch ----------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(requests=requests_strategy(), seed=st.integers(0, 2**16), pending=st.booleans())
def test_a_batch_decides_exactly_as_the_same_requests_one_by_one(
        requests: list[AdminRequest], seed: int, pending: bool) -> None:
    """Same records in the same order, same responses, same wait offsets, same view: taking
    writes together changes how they are proposed, never what is decided."""
    together, alone = Harness(seed=seed), Harness(seed=seed)
    if pending:  # an earlier write still in flight: answers may rest on it
        together.create("a", commit=False), alone.create("a", commit=False)
    batch = together.controller.handle_batch(requests, now_ms=0, rng=together.rng,
                                             next_offset=len(together.log))
    decisions = [alone.run(request, commit=False) for request in requests]
    assert batch.base_offset == len(together.log)
    assert batch.records == tuple(r for d in decisions for r in d.records)
    assert batch.outcomes == tuple(decisions)
    assert together.controller.view.content_hash() == alone.controller.view.content_hash()
    assert together.controller.pending_count == alone.controller.pending_count


def test_each_request_in_a_batch_waits_for_its_own_last_record() -> None:
    """Three creates, one batch: each decision's records are its slice of the batch and
    its answer waits for its own last record, not the batch's."""
    h = Harness()
    base = len(h.log)
    batch = h.controller.handle_batch([create("a"), create("b"), create("c")], now_ms=0,
                                      rng=h.rng, next_offset=base)
    assert len(batch.records) == 6  # Topic + Partition each
    decisions = [d for d in batch.outcomes if isinstance(d, Decision)]
    assert [d.base_offset for d in decisions] == [base, base + 2, base + 4]
    assert [d.wait_offset for d in decisions] == [base + 1, base + 3, base + 5]
    assert [d.records for d in decisions] == [batch.records[0:2], batch.records[2:4],
                                              batch.records[4:6]]


def test_a_write_that_rests_on_an_earlier_write_of_its_batch_waits_for_it() -> None:
    """The second create of a name loses to the first in the same batch and its answer
    waits for the winner's records (it rests on them), not NO_OFFSET."""
    h = Harness()
    base = len(h.log)
    batch = h.controller.handle_batch([create("a"), create("a")], now_ms=0, rng=h.rng,
                                      next_offset=base)
    first, second = batch.outcomes
    assert isinstance(first, Decision)
    assert isinstance(second, Decision)
    assert second.response.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS  # type: ignore[union-attr]
    assert second.records == ()
    assert second.wait_offset == first.wait_offset == base + 1


def test_a_broker_registered_in_a_batch_gets_its_own_record_offset_as_epoch() -> None:
    """The broker epoch is the offset of the broker's RegisterBroker record, wherever it
    falls in the batch."""
    h = Harness()
    base = len(h.log)
    register = RegisterBrokerRequest(broker_id=9, incarnation_id=Uuid.random(h.rng))
    batch = h.controller.handle_batch([create("a"), register], now_ms=0, rng=h.rng,
                                      next_offset=base)
    response = batch.outcomes[1].response  # type: ignore[union-attr]
    assert isinstance(response, RegisterBrokerResponse)
    assert response.broker_epoch == base + 2
    assert isinstance(batch.records[2], rec.RegisterBroker)
    assert batch.records[2].broker_epoch == base + 2


def test_a_request_whose_decision_raises_fails_alone() -> None:
    """A controller bug in one request (here: a read that is no write) is that request's
    outcome; the writes around it are decided and proposed as usual."""
    h = Harness()
    batch = h.controller.handle_batch([create("a"), DescribeTopicsRequest(), create("b")],
                                      now_ms=0, rng=h.rng, next_offset=len(h.log))
    first, failed, last = batch.outcomes
    assert isinstance(failed, TypeError)
    assert isinstance(first, Decision)
    assert isinstance(last, Decision)
    assert error_codes(first.response) == error_codes(last.response) == [ErrorCode.NONE]
    assert batch.records == first.records + last.records
    assert {t.name for t in h.controller.view.topics.values()} == {"a", "b"}


def test_on_committed_reports_a_log_that_differs_from_what_was_proposed() -> None:
    h = Harness()
    h.create("t", commit=False)
    assert h.controller.on_committed(h.log[h.committed:]) is False
    h.committed = len(h.log)
    h.create("u", commit=False)
    other = rec.Topic(name="v", topic_id=Uuid.random(random.Random(5)))
    assert h.controller.on_committed([(h.committed, other)]) is True


# --- WriteQueue -------------------------------------------------------------------------


def test_writes_queued_together_become_one_proposal_and_each_gets_its_own_answer() -> None:
    h = Harness()
    queue: WriteQueue[str] = WriteQueue()
    for name in ("a", "b", "c"):
        queue.submit(name, create(name))
    base = len(h.log)
    proposal = queue.decide(h.controller, now_ms=0, rng=h.rng, next_offset=base)
    assert (proposal.taken, proposal.base_offset, len(proposal.records)) == (3, base, 6)
    assert proposal.last_offset == base + 5
    assert proposal.answers == ()
    assert queue.waiting == 3
    assert queue.queued == 0
    commit(h, proposal.records, base)
    answers = dict(queue.applied(proposal.last_offset))
    assert sorted(answers) == ["a", "b", "c"]
    for name, response in answers.items():
        assert isinstance(response, CreateTopicsResponse)
        assert response.topics[0].name == name
        assert response.topics[0].error_code == ErrorCode.NONE
        assert h.controller.committed.topic_by_name(name).topic_id == response.topics[0].topic_id  # type: ignore[union-attr]


def test_writes_are_answered_in_order_as_the_commit_reaches_each() -> None:
    """The high watermark may stop inside a batch: only the writes below it are answered."""
    h = Harness()
    queue: WriteQueue[str] = WriteQueue()
    queue.submit("a", create("a"))
    queue.submit("b", create("b"))
    base = len(h.log)
    queue.decide(h.controller, now_ms=0, rng=h.rng, next_offset=base)
    assert queue.applied(base) == []  # a's Topic record only
    assert [key for key, _ in queue.applied(base + 1)] == ["a"]
    assert [key for key, _ in queue.applied(base + 3)] == ["b"]


def test_a_write_that_changes_nothing_and_rests_on_nothing_is_answered_at_once() -> None:
    h = Harness()
    h.create("a")
    queue: WriteQueue[str] = WriteQueue()
    queue.submit("again", create("a"))
    proposal = queue.decide(h.controller, now_ms=0, rng=h.rng, next_offset=len(h.log))
    assert proposal.records == ()
    ((key, response),) = proposal.answers
    assert key == "again"
    assert error_codes(response) == [ErrorCode.TOPIC_ALREADY_EXISTS]
    assert queue.waiting == 0


def test_a_write_whose_batch_is_lost_is_answered_not_controller_never_success() -> None:
    """Leadership lost before the batch committed: every write still queued or waiting
    gets NOT_CONTROLLER, and nothing is answered twice."""
    h = Harness()
    queue: WriteQueue[str] = WriteQueue()
    queue.submit("a", create("a"))
    queue.decide(h.controller, now_ms=0, rng=h.rng, next_offset=len(h.log))
    queue.submit("b", create("b"))  # arrived after the decision: still queued
    answers = queue.fail(NOT_CONTROLLER)
    assert answers == [("b", NOT_CONTROLLER), ("a", NOT_CONTROLLER)]
    assert queue.applied(10**9) == []
    assert queue.fail(NOT_CONTROLLER) == []


def test_a_decision_that_raises_is_answered_unknown_server_error_and_reported() -> None:
    h = Harness()
    queue: WriteQueue[str] = WriteQueue()
    queue.submit("bug", DescribeTopicsRequest())
    queue.submit("ok", create("a"))
    proposal = queue.decide(h.controller, now_ms=0, rng=h.rng, next_offset=len(h.log))
    assert [key for key, _ in proposal.errors] == ["bug"]
    ((key, response),) = proposal.answers
    assert key == "bug"
    assert isinstance(response, AdminErrorResponse)
    assert response.top_level_error == ErrorCode.UNKNOWN_SERVER_ERROR
    assert len(proposal.records) == 2
    assert queue.waiting == 1


# --- WriteQueue against a leader that may lose its tail ----------------------------------

STEPS = st.lists(st.one_of(
    st.tuples(st.just("submit"), st.sampled_from(NAMES), st.integers(1, 3)),
    st.tuples(st.just("decide"), st.just(""), st.just(0)),
    st.tuples(st.just("commit"), st.just(""), st.integers(0, 8)),
    st.tuples(st.just("heartbeat"), st.just(""), st.integers(1, 3)),
    st.tuples(st.just("lose"), st.just(""), st.just(0))), max_size=40)


@settings(max_examples=200, deadline=None)
@given(steps=STEPS, seed=st.integers(0, 2**16))
def test_every_write_is_answered_once_and_success_only_once_its_records_committed(
        steps: list[tuple[str, str, int]], seed: int) -> None:
    """Writes are submitted, decided into batches, committed a few records at a time (the
    high watermark may stop inside a batch), and leadership may be lost, cutting the
    uncommitted tail. Each write gets exactly one answer; a created topic is answered
    only once its Topic record is committed; after a loss, NOT_CONTROLLER."""
    h = Harness(seed=seed)
    controller: Controller = h.controller
    queue: WriteQueue[int] = WriteQueue()
    answered: dict[int, object] = {}
    keys = iter(range(10**6))
    submitted = 0

    def take(answers: list[tuple[int, object]] | tuple[tuple[int, object], ...]) -> None:
        committed_ids = {r.topic_id for _, r in h.log[:h.committed] if isinstance(r, rec.Topic)}
        for key, response in answers:
            assert key not in answered, "answered twice"
            answered[key] = response
            if isinstance(response, CreateTopicsResponse) and \
                    response.topics[0].error_code == ErrorCode.NONE:
                assert response.topics[0].topic_id in committed_ids, \
                    f"write {key} answered success before its records committed"

    for kind, name, number in steps:
        if kind == "submit":
            queue.submit(next(keys), create(name, number))
            submitted += 1
        elif kind == "heartbeat":
            queue.submit(next(keys), BrokerHeartbeatRequest(
                broker_id=number, broker_epoch=h.epochs[number],
                current_metadata_offset=h.committed - 1))
            submitted += 1
        elif kind == "decide":
            waiting = queue.waiting
            proposal = queue.decide(controller, now_ms=0, rng=h.rng, next_offset=len(h.log))
            assert proposal.base_offset == len(h.log)
            h.log.extend(enumerate(proposal.records, start=proposal.base_offset))
            take(proposal.answers)
            assert queue.waiting == waiting + proposal.taken - len(proposal.answers)
        elif kind == "commit":
            upto = min(len(h.log), h.committed + number)
            assert not controller.on_committed(h.log[h.committed:upto])
            h.committed = upto
            take(queue.applied(upto - 1))
        else:  # leadership lost: the uncommitted tail is cut, a new controller starts
            lost = queue.fail(NOT_CONTROLLER)
            assert all(response is NOT_CONTROLLER for _, response in lost)
            take(lost)
            del h.log[h.committed:]
            controller = h.controller = Controller(controller.committed, now_ms=0)
    take(queue.fail(NOT_CONTROLLER))
    assert len(answered) == submitted
    assert queue.queued == queue.waiting == 0
