"""The replay's tables as Spark views and Parquet, and `kraft replay --sql`, over the
scripted story log (tests/support/synthetic_logs.py) on three nodes with its fault log:
every derived table (and `faults`) is registered and written, the thirteen queries of
docs/replay.md run and answer (the fault queries with exactly the faults that caused the
story's fencings, leader losses and elections), report.json keeps the run's figures for
`--compare`, and the command prints a table, JSON lines, or one error line with exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.synthetic_logs import STORY_START_MS, story_log, write_story_faults
from tests.support.synthetic_logs import write_cluster as write_cluster_files
from tools.cli import main
from tools.replay.availability import availability
from tools.replay.faults import FAULTS, read_faults
from tools.replay.inputs import from_cluster
from tools.replay.job import run_replay
from tools.replay.timeline import node_timeline
from tools.replay.views import (
    BROKER_SESSIONS,
    DERIVED,
    LEADERSHIP,
    PARTITION_AVAILABILITY,
    PARTITION_HISTORY,
    TOPIC_LIFECYCLE,
    QueryError,
    run_query,
)

pytestmark = pytest.mark.spark

DOCS = Path(__file__).resolve().parents[2] / "docs" / "replay.md"
FENCED = "SELECT broker_id, time_ms, duration_ms FROM broker_sessions " \
         "WHERE broker_id = 4 AND event = 'fence'"


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Path:
    batches = story_log()
    return write_cluster_files(tmp_path_factory.mktemp("story") / "c",
                               {1: batches, 2: batches, 3: batches})


@pytest.fixture(scope="module")
def story_views(spark: Any, story: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The story replayed once with its report: the views stay in the shared session."""
    out = tmp_path_factory.mktemp("report")
    faults = read_faults(write_story_faults(story.parent / "faults.jsonl"))
    result = run_replay(spark, from_cluster(story), out_dir=out, faults=faults)
    assert result.passed, result.failed
    return out


def test_every_derived_table_is_a_view_and_a_parquet_file_when_replayed(
        spark: Any, story_views: Path) -> None:
    expected = {"leadership": 3, "broker_sessions": 12, "partition_history": 17,
                "topic_lifecycle": 6, "partition_availability": 4}
    assert set(expected) == set(DERIVED)
    for name, rows in {**expected, "faults": 6}.items():
        assert run_query(spark, f"SELECT * FROM {name}")[1].__len__() == rows, name
        assert spark.read.parquet(str(story_views / f"{name}.parquet")).count() == rows, name
    assert run_query(spark, FENCED)[1] == [(4, STORY_START_MS + 1500, 2000)]


def test_each_documented_query_runs_and_answers_when_run_on_the_story(
        spark: Any, story_views: Path) -> None:
    queries = re.findall(r"```sql\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)
    assert len(queries) == 13
    for query in queries:
        columns, rows = run_query(spark, query)
        assert columns, query
        assert rows, query
    fencings, leaderless, elections = (run_query(spark, q) for q in queries[-3:])
    # broker, fenced_ms, fault, after_ms: each fencing came from the fault on its broker
    assert [(r[0], r[2], r[3], r[5]) for r in fencings[1]] == [
        (4, 2000, "kill", 500), (5, 1500, "pause", 200), (6, 500, "kill", 100)]
    # orders lost both leaders for 500 ms while broker 6 (their last ISR) was killed
    assert [(r[0], r[1], r[3], r[4], r[5]) for r in leaderless[1]] == [
        ("orders", 0, 500, "kill", 6), ("orders", 1, 500, "kill", 6)]
    # epoch 2 (leader 2) during node 2's partition, epoch 3 (leader 3) during node 3's
    assert [(r[0], r[1], r[3], r[4], r[5]) for r in elections[1]] == [
        ("partition", 2, 300, 1, [2]), ("partition-one-way", 3, 300, 1, [3])]


def test_report_keeps_the_figures_and_draws_the_faults_when_given_them(
        story_views: Path, capsys: pytest.CaptureFixture[str]) -> None:
    figures = json.loads((story_views / "report.json").read_text())["figures"]
    assert (figures["elections"], figures["faults"], figures["elections_during_faults"],
            figures["leaderless_ms"]) == (3, 6, 2, 1000)
    page = (story_views / "report.html").read_text(encoding="utf-8")
    assert page.count('class="ev fault"') == 6
    assert "<h2>Availability per partition</h2>" in page
    assert main(["replay", "--compare", str(story_views), str(story_views), "--json"]) == 0
    compared = json.loads(capsys.readouterr().out)["figures"]
    assert {row["figure"] for row in compared} >= {"elections", "leaderless_ms", "faults"}
    assert all(row["difference"] in (0, None) for row in compared)


def test_a_bad_fault_file_exits_2_naming_its_line_before_any_replay(
        story: Path, capsys: pytest.CaptureFixture[str]) -> None:
    faults = story.parent / "bad-faults.jsonl"
    faults.write_text('{"kind": "kill", "start_ms": "soon"}\n', encoding="utf-8")
    assert main(["replay", "--cluster", str(story), "--faults", str(faults), "--sql",
                 "SELECT * FROM faults"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        f"error: --faults {faults}, line 1: start_ms must be ms since the epoch, not 'soon'"]


def test_a_refused_query_is_a_query_error_naming_spark_s_reason(spark: Any,
                                                                 story_views: Path) -> None:
    with pytest.raises(QueryError, match="UNRESOLVED_COLUMN"):
        run_query(spark, "SELECT no_such_column FROM leadership")


def test_replay_sql_prints_a_table_json_lines_or_exits_2_when_asked(
        spark: Any, story: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--cluster", str(story), "--sql", FENCED]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["broker_id", "time_ms", "duration_ms"]
    assert lines[1].split() == ["4", str(STORY_START_MS + 1500), "2000"]
    assert len(lines) == 2
    assert main(["replay", "--cluster", str(story), "--json", "--sql",
                 "SELECT epoch, leader_id, ended_by FROM leadership ORDER BY epoch"]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [
        {"epoch": 1, "leader_id": 1, "ended_by": "next epoch"},
        {"epoch": 2, "leader_id": 2, "ended_by": "next epoch"},
        {"epoch": 3, "leader_id": 3, "ended_by": "log end"}]
    query_file = story.parent / "fenced.sql"
    query_file.write_text(FENCED, encoding="utf-8")
    assert main(["replay", "--cluster", str(story), "--sql-file", str(query_file)]) == 0
    assert capsys.readouterr().out.splitlines() == lines
    assert main(["replay", "--cluster", str(story), "--sql-file", str(story / "none.sql")]) == 2
    assert "none.sql" in capsys.readouterr().err
    assert main(["replay", "--cluster", str(story), "--sql", "SELEC epoch FROM leadership"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    # stderr without a terminal: one line per phase (docs/operations.md), then the error
    [error] = [line for line in captured.err.splitlines() if not line.startswith("[replay")]
    assert error.startswith("error: bad --sql query: [PARSE_SYNTAX_ERROR]")


def test_the_derived_rows_fit_their_schemas_as_spark_verifies_them(
        spark: Any, story: Path, tmp_path: Path) -> None:
    """`register_views` hands Spark its rows unverified (checking a million rows one by
    one cost a 1M-record replay 6 s): they must fit their schemas as they are built."""
    batches = story_log()
    end = batches[-1].base_offset + len(batches[-1].records)
    timeline = node_timeline(from_cluster(story).node(1), None, end)
    tables = {
        "leadership": (timeline.leadership, LEADERSHIP),
        "broker_sessions": (timeline.broker_sessions, BROKER_SESSIONS),
        "partition_history": (timeline.partition_history, PARTITION_HISTORY),
        "topic_lifecycle": (timeline.topic_lifecycle, TOPIC_LIFECYCLE),
        "partition_availability": (availability(timeline), PARTITION_AVAILABILITY),
        "faults": (read_faults(write_story_faults(tmp_path / "faults.jsonl")), FAULTS)}
    assert set(tables) == {*DERIVED, "faults"}
    for name, (rows, schema) in tables.items():
        assert rows, name
        assert spark.createDataFrame(rows, schema, verifySchema=True).count() == len(rows), name


def test_a_log_written_before_times_gives_null_durations_when_queried(
        spark: Any, story_views: Path, tmp_path: Path) -> None:
    """The same story from old segments: every row is there, its times null, not 0.
    Last in the module: it replaces the story's views with its own."""
    batches = story_log(timed=False)
    root = write_cluster_files(tmp_path / "old", {1: batches, 2: batches, 3: batches})
    assert run_replay(spark, from_cluster(root), views=True).passed
    _, rows = run_query(spark, "SELECT times_known, leaderless_ms, under_replicated_ms, "
                               "under_min_isr_ms FROM partition_availability")
    assert rows == [(False, None, None, None)] * 4
    assert run_query(spark, FENCED)[1] == [(4, None, None)]
