"""The per-key order check over merged consumer outputs (tools/client/order_check.py), and
`kraft order-check` over files of --json lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tools.cli import main
from tools.client.order_check import Delivery, check_order, check_outputs


def d(key: str, value: int, ts: float, consumer: int = 0, line: int = 0) -> Delivery:
    return Delivery(key=key, value=value, ts_ms=ts, consumer=consumer, line=line)


def test_in_order_across_consumers_is_ok() -> None:
    report = check_order([("k", 0), ("k", 1), ("k", 2)],
                         [d("k", 0, 10, 0, 0), d("k", 1, 11, 0, 1), d("k", 2, 20, 1, 0)])
    assert report.ok
    assert report.delivered == 3
    assert report.redeliveries == 0


def test_a_lower_value_after_a_higher_one_is_out_of_order() -> None:
    report = check_order([("k", 0), ("k", 1)], [d("k", 1, 10, 0), d("k", 0, 12, 1)])
    assert report.out_of_order_count == 1
    assert not report.ok
    assert "value 0" in report.out_of_order[0]


def test_same_consumer_order_counts_even_within_one_millisecond() -> None:
    report = check_order([], [d("k", 1, 10.0, 0, 0), d("k", 0, 10.0, 0, 1)])
    assert report.out_of_order_count == 1


def test_two_consumers_in_one_millisecond_are_unordered() -> None:
    report = check_order([], [d("k", 1, 10.2, 0), d("k", 0, 10.7, 1)])
    assert report.out_of_order_count == 0


def test_an_earlier_millisecond_still_counts_behind_an_ambiguous_one() -> None:
    # 7 surely before 6 (earlier ms), although 8 and 6 share a millisecond
    report = check_order([], [d("k", 7, 9, 0), d("k", 8, 10, 1), d("k", 6, 10, 2)])
    assert report.out_of_order_count == 1


def test_missing_and_redelivered() -> None:
    report = check_order([("k", 0), ("k", 1), ("j", 0)],
                         [d("k", 0, 1), d("k", 0, 2, line=1), d("k", 2, 3, line=2)])
    assert report.missing == {"j": [0], "k": [1]}
    assert report.redeliveries == 1
    assert report.unacknowledged_delivered == 1  # value 2: its ack was lost, it is stored


@given(st.lists(st.integers(0, 50), max_size=40))
def test_a_shuffle_is_ok_only_when_sorted(values: list[int]) -> None:
    first = list(dict.fromkeys(values))  # first deliveries in order
    deliveries = [d("k", v, i, 0, i) for i, v in enumerate(values)]
    report = check_order([], deliveries)
    assert (report.out_of_order_count == 0) == (first == sorted(first))
    assert report.redeliveries == len(values) - len(first)


def _lines(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("not json\n" + "".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_order_check_verb_passes_in_order_outputs_and_fails_a_reordered_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    produced = _lines(tmp_path / "p.jsonl", [{"key": "k", "value": 0}, {"key": "k", "value": 1}])
    ordered = _lines(tmp_path / "c.jsonl", [{"key": "k", "value": "0", "ts_ms": 1},
                                            {"key": "k", "value": "1", "ts_ms": 2}])
    assert main(["order-check", "--produced", str(produced), "--consumed", str(ordered)]) == 0
    assert capsys.readouterr().out.startswith("ok: 2 delivered, 2 acknowledged, 0 out of order")
    swapped = _lines(tmp_path / "s.jsonl", [{"key": "k", "value": "1", "ts_ms": 1},
                                            {"key": "k", "value": "0", "ts_ms": 2}])
    assert main(["order-check", "--produced", str(produced), "--consumed", str(swapped),
                 "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["ok"], report["out_of_order"], report["missing"]) == (False, 1, 0)


def test_records_without_a_key_must_arrive_in_any_order() -> None:
    produced = [[{"key": "k", "value": "0"}, {"key": None, "value": "unkeyed-p0-0"},
                 {"key": None, "value": "unkeyed-p0-1"}, {"key": "k", "value": "1"}]]
    consumed = [[{"key": None, "value": "unkeyed-p0-1", "ts_ms": 10},
                 {"key": "k", "value": "0", "ts_ms": 11},
                 {"key": None, "value": "unkeyed-p0-0", "ts_ms": 12},
                 {"key": "k", "value": "1", "ts_ms": 13}]]
    assert check_outputs(produced, consumed).ok
    report = check_outputs(produced, [consumed[0][1:]])
    assert report.unkeyed_missing == ["unkeyed-p0-1"]
    assert report.missing_count == 1
    assert not report.ok
