"""The time axis without Spark (tools/replay/time_axis.py, faults.py, compare.py, and the
churn bins of analysis.py): the story log's events on their lanes, a run's figures, the
fault log's lines (and one error per bad line), and two reports compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.synthetic_logs import (
    STORY_FAULTS,
    STORY_START_MS,
    story_log,
    story_timeline,
    write_story_faults,
)
from tools.cli import main
from tools.replay import axis_html
from tools.replay.analysis import CHURN_BINS, topic_churn
from tools.replay.availability import availability
from tools.replay.axis_html import time_axis_html
from tools.replay.compare import REPORT_FILE, compare_runs
from tools.replay.faults import read_faults
from tools.replay.inputs import InputError
from tools.replay.sequential import Aggregates
from tools.replay.time_axis import axis, figures

T0 = STORY_START_MS
STORY_FIGURES = {
    "span_ms": 6000, "elections": 3, "fencings": 3,
    "fenced_ms": 3 * 100 + 2000 + 1500 + 500,  # registrations' waits, then 4, 5 and 6
    "isr_shrinks": 4, "isr_expands": 2, "partitions": 4, "leaderless_ms": 1000,
    "max_leaderless_ms": 500, "partitions_leaderless": 2,
    "under_replicated_ms": 4000, "partitions_under_replicated": 2,
    "under_min_isr_ms": 3000, "partitions_under_min_isr": 2,
}


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


def test_faults_before_the_log_s_tables_are_counted_and_told_when_laid_out() -> None:
    """A log replayed from a snapshot starts after the faults of a run's beginning: the
    page says so, rather than show a quiet log under them."""
    timeline = story_timeline(story_log())
    early = [("kill", 4, False, None, T0 - 5000, T0 - 4000, None),
             ("pause", 5, False, None, T0 + 100, T0 + 200, None)]
    laid = axis(timeline, early)
    assert (laid.log_start, laid.faults_before_log) == ((0, T0), 1)
    assert laid.start_ms == T0 - 5000
    page = time_axis_html(laid, timeline, availability(timeline))
    assert "1 fault(s) began before the log&#x27;s tables do (offset 0" in page
    assert axis(timeline, early[1:]).faults_before_log == 0


def test_a_page_keeps_the_first_events_and_topics_and_says_how_many_it_left_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A long log's page stays readable: at most MAX_PER_LANE events a lane and
    MAX_TOPICS topics, with a note for what is left out."""
    monkeypatch.setattr(axis_html, "MAX_PER_LANE", 2)
    monkeypatch.setattr(axis_html, "MAX_TOPICS", 1)
    timeline = story_timeline(story_log())
    page = time_axis_html(axis(timeline), timeline, availability(timeline))
    assert page.count('class="ev election"') == 2
    assert "elections: the first 2 of 3 events shown" in page
    assert "topics: the first 2 of 6 events shown" in page
    assert page.count("<tr class='topic'") == 1
    assert "the first 1 topics shown; 1 more in topic_lifecycle.parquet" in page


def test_an_untimed_log_places_nothing_and_counts_what_it_left_out() -> None:
    laid = axis(story_timeline(story_log(timed=False)))
    assert laid.events == []
    assert laid.untimed > 0
    assert laid.start_ms is None


def test_figures_sum_the_story_s_elections_fencing_and_availability(tmp_path: Path) -> None:
    timeline = story_timeline(story_log())
    assert figures(timeline, availability(timeline)) == STORY_FIGURES
    faults = read_faults(write_story_faults(tmp_path / "faults.jsonl"))
    with_faults = figures(timeline, availability(timeline), faults)
    # epoch 2 (+1000 ms) in the first partition fault, epoch 3 (+4000 ms) in the second
    assert (with_faults["faults"], with_faults["elections_during_faults"]) == (6, 2)
    untimed = story_timeline(story_log(timed=False))
    blank = figures(untimed, availability(untimed))
    assert blank["span_ms"] is None
    assert blank["leaderless_ms"] is None
    assert blank["elections"] == 3


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


def _report(directory: Path, figures: dict[str, object] | None) -> Path:
    directory.mkdir()
    (directory / REPORT_FILE).write_text(json.dumps({"passed": True, "figures": figures}),
                                         encoding="utf-8")
    return directory


def test_compare_puts_two_runs_side_by_side_with_differences(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _report(tmp_path / "a", STORY_FIGURES)
    b = _report(tmp_path / "b", {**STORY_FIGURES, "elections": 5, "leaderless_ms": None,
                                 "faults": 2})
    rows = {row["figure"]: row for row in compare_runs(a, b)["figures"]}
    assert rows["elections"] == {"figure": "elections", "label": "elections (epochs)",
                                 "a": 3, "b": 5, "difference": 2}
    assert (rows["leaderless_ms"]["b"], rows["leaderless_ms"]["difference"]) == (None, None)
    assert (rows["faults"]["a"], rows["faults"]["b"]) == (None, 2)
    assert main(["replay", "--compare", str(a), str(b)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["figure", str(a), str(b), "B", "-", "A"]
    assert [line.split()[-3:] for line in lines if line.startswith("elections (")] == \
        [["3", "5", "+2"]]
    assert main(["replay", "--compare", str(a), str(b), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == {"a": str(a), "b": str(b)}


@pytest.mark.parametrize(("make", "error"), [
    (lambda d: d / "missing", "no such run directory"),
    (lambda d: d, f"no {REPORT_FILE}"),
    (lambda d: _report(d / "old", None), "no figures"),
])
def test_compare_of_a_run_that_is_not_a_report_exits_2_with_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], make: object, error: str) -> None:
    good = _report(tmp_path / "good", STORY_FIGURES)
    bad = make(tmp_path)  # type: ignore[operator]
    assert main(["replay", "--compare", str(good), str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert error in line
    assert str(bad) in line


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
