"""The pure rules of `kraft consumer-groups`: where a reset puts each partition's offset
(Kafka's: clamped into the log, a shift needs a committed offset), and the parsing of
its topic and time arguments."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tools.client.groups_admin import ResetError, ResetSpec, reset_offsets
from tools.commands.consumer_groups import parse_datetime, parse_topic, table
from tools.errors import CommandError

TP = ("orders", 0)
KINDS = ("earliest", "latest", "current", "offset", "shift", "datetime")


@st.composite
def partitions(draw: st.DrawFn) -> tuple[int, int, int | None, int | None]:
    start = draw(st.integers(0, 1_000))
    end = draw(st.integers(start, start + 1_000))
    committed = draw(st.none() | st.integers(0, 3_000))
    by_time = draw(st.none() | st.integers(start, end))
    return start, end, committed, by_time


@given(partitions(), st.sampled_from(KINDS), st.integers(-5_000, 5_000))
def test_every_target_lands_inside_the_log(
        log: tuple[int, int, int | None, int | None], kind: str, value: int) -> None:
    start, end, committed, by_time = log
    spec = ResetSpec(kind, value)
    committed_map = {} if committed is None else {TP: committed}
    if kind == "shift" and committed is None:
        with pytest.raises(ResetError, match="no committed offset"):
            reset_offsets(spec, [TP], committed_map, {TP: start}, {TP: end})
        return
    (new,) = reset_offsets(spec, [TP], committed_map, {TP: start}, {TP: end},
                           {} if by_time is None else {TP: by_time}).values()
    assert start <= new <= end
    expected = {"earliest": start, "latest": end,
                "current": end if committed is None else committed,
                "offset": value, "shift": (committed or 0) + value,
                "datetime": end if by_time is None else by_time}[kind]
    assert new == min(max(expected, start), end)


def test_topic_arguments_as_kafka_writes_them() -> None:
    assert parse_topic("orders") == ("orders", None)
    assert parse_topic("orders:2,0,2") == ("orders", [0, 2])
    for bad in (":1", "orders:x", "orders:1,"):
        with pytest.raises(CommandError):
            parse_topic(bad)


def test_datetimes_with_and_without_a_zone() -> None:
    assert parse_datetime("2026-01-02T03:04:05.678Z") == 1767323045678
    assert parse_datetime("2026-01-02T04:04:05.678+01:00") == 1767323045678
    with pytest.raises(CommandError, match="expected YYYY-MM-DDTHH:mm:SS.sss"):
        parse_datetime("yesterday")


def test_tables_pad_columns_and_show_none_as_a_dash() -> None:
    assert table(["GROUP", "LAG"], [["billing", None], ["g", 12345]]) == [
        "GROUP   LAG", "billing -", "g       12345"]
