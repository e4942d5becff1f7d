"""The route table of Raft answers (raft/routes.py): one answer per request, bounded per
connection, forgotten with its connection unless a newer one re-mapped the key."""

from __future__ import annotations

import pytest

from raft import routes
from raft.routes import RouteTable


def test_an_answer_goes_back_once_on_the_connection_its_request_came_on() -> None:
    table = RouteTable()
    table.remember((2, 7), conn_id=11)
    assert table.take((2, 7)) == 11
    assert table.take((2, 7)) is None


def test_a_closed_connection_forgets_only_the_routes_still_its_own() -> None:
    table = RouteTable()
    table.remember((2, 7), conn_id=11)
    table.remember((3, 1), conn_id=11)
    table.remember((2, 7), conn_id=12)  # the peer reconnected and asked again
    table.forget_connection(11)
    assert table.take((3, 1)) is None
    assert table.take((2, 7)) == 12


def test_each_connection_keeps_at_most_its_newest_routes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routes, "MAX_ROUTES_PER_CONNECTION", 3)
    table = RouteTable()
    for correlation_id in range(5):
        table.remember((2, correlation_id), conn_id=11)
    table.remember((2, 0), conn_id=12)
    assert len(table) == 4
    assert [table.take((2, c)) for c in range(5)] == [12, None, 11, 11, 11]
