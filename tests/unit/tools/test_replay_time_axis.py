"""The time axis without Spark (tools/replay/time_axis.py, faults.py, and the churn bins
of analysis.py): the story log's events on their lanes, the fault log's lines (and one
error per bad line), and the churn plot's bins."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.synthetic_logs import (
    STORY_FAULTS,
    STORY_START_MS,
    story_log,
    story_timeline,
    write_story_faults,
)
from tools.replay.analysis import CHURN_BINS, topic_churn
from tools.replay.faults import read_faults
from tools.replay.inputs import InputError
from tools.replay.sequential import Aggregates
from tools.replay.time_axis import axis

T0 = STORY_START_MS


def test_events_sit_on_their_lanes_at_their_times_when_laid_out(tmp_path: Path) -> None:
    timeline = story_timeline(story_log())
    faults = read_faults(write_story_faults(tmp_path / "faults.jsonl"))
    laid = axis(timeline, faults)
    assert (laid.start_ms, laid.end_ms, laid.untimed) == (T0, T0 + 6000, 0)
    assert laid.lanes[:2] == ["chaos faults", "elections"]
    by_kind: dict[str, list[tuple[int, int | None]]] = {}
    for event in laid.events:
        by_kind.setdefault(event.kind, []).append(
            (event.start_ms - T0, None if event.end_ms is None else event.end_ms - T0))
    assert by_kind["fault"] == [(start, end) for _, _, start, end in STORY_FAULTS]
    assert by_kind["election"] == [(0, None), (1000, None), (4000, None)]
    assert by_kind["leaderless"] == [(2500, 3000), (2500, 3000)]
    assert sorted(by_kind["fenced"]) == [(0, 100)] * 3 + [(1500, 3500), (2000, 3500),
                                                          (2500, 3000)]
    assert [e.label for e in laid.events if e.kind == "fault"][1] == "kill node 4"
    assert "slow-disk (100) node 1" in [e.label for e in laid.events if e.kind == "fault"]


def test_an_untimed_log_places_nothing_and_counts_what_it_left_out() -> None:
    laid = axis(story_timeline(story_log(timed=False)))
    assert laid.events == []
    assert laid.untimed > 0
    assert laid.start_ms is None


@pytest.mark.parametrize(("line", "error"), [
    ('{"target": 4, "start_ms": 1}', "kind must be a non-empty string"),
    ('{"kind": "kill", "target": "four", "start_ms": 1}', "target must be a node id"),
    ('{"kind": "kill", "start_ms": -1}', "start_ms must be ms since the epoch"),
    ('{"kind": "kill", "start_ms": 5, "end_ms": 4}', "end_ms must be null or"),
    ('{"kind": "kill", "start_ms": 5, "amount": "x"}', "amount must be a number"),
    ('{"kind": "kill", "start_ms": 5, "leader": 1}', "leader must be true or false"),
    ("[1, 2]", "not a JSON object"),
    ("{", "line 2: Expecting property name"),
])
def test_a_bad_fault_line_is_one_error_naming_the_line(tmp_path: Path, line: str,
                                                       error: str) -> None:
    path = tmp_path / "faults.jsonl"
    path.write_text('{"kind": "pause", "target": 5, "start_ms": 10}\n' + line + "\n",
                    encoding="utf-8")
    with pytest.raises(InputError, match=f"--faults {path}, line 2: .*{error}"
                       if "line 2" not in error else f"--faults {path}, {error}"):
        read_faults(path)


def test_fault_lines_may_leave_out_what_is_unknown_when_read(tmp_path: Path) -> None:
    path = tmp_path / "faults.jsonl"
    path.write_text('{"kind": "clock", "target": 2, "start_ms": 20, "amount": 1.5}\n\n'
                    '{"kind": "kill", "target": null, "start_ms": 10, "end_ms": 12, '
                    '"leader": true, "error": "no leader"}\n', encoding="utf-8")
    assert read_faults(path) == [("kill", None, True, None, 10, 12, "no leader"),
                                 ("clock", 2, False, 1.5, 20, None, None)]
    with pytest.raises(InputError, match="unreadable"):
        read_faults(tmp_path / "none.jsonl")


def test_churn_bins_cover_the_offsets_where_topics_came_and_went() -> None:
    aggregates = Aggregates()
    aggregates.topic_offsets.extend([900, 905, 990])
    aggregates.remove_offsets.extend([950, 999])
    bins = topic_churn(aggregates, end_offset=100_000)
    assert bins[0]["bin_start"] == 900
    assert bins[-1]["bin_end"] >= 1000
    assert bins[-1]["bin_start"] <= 999
    assert len(bins) <= CHURN_BINS
    assert sum(b["created"] for b in bins) == 3
    assert sum(b["removed"] for b in bins) == 2
    assert bins[-1]["live_after"] == 1
    assert [b for b in bins if b["bin_start"] <= 950 < b["bin_end"]][0]["removed"] == 1
