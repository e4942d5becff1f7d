"""The replay's HTML report of the scripted story log (tests/support/synthetic_logs.py)
with its fault file, rendered without Spark: what the report tests read, with html.parser
and in a headless browser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.synthetic_logs import story_log, story_timeline, write_story_faults
from tools.replay.availability import availability
from tools.replay.axis_html import time_axis_html
from tools.replay.faults import read_faults
from tools.replay.report import render_html
from tools.replay.time_axis import axis


def story_summary() -> dict[str, Any]:
    """A passing replay of three voters holding the whole story (report.json's shape)."""
    nodes = [{"node": n, "role": "voter", "start_offset": 0, "replay_from": 0,
              "end_offset": 37, "lag": 0, "last_epoch": 3, "records": 37, "segments": 1,
              "diverges_at": None, "committed_held": 37} for n in (1, 2, 3)]
    return {"passed": True, "failed": [], "records": 111, "voters": [1, 2, 3],
            "voters_source": "cluster.json", "checks": [], "run": None,
            "analysis": {"nodes": nodes, "committed_end": 37, "leader_timeline": [],
                         "record_types": [], "topic_churn": [], "recreated_names": []}}


def story_report(directory: Path) -> Path:
    """report.html of the story and its faults, in `directory`."""
    timeline = story_timeline(story_log())
    faults = read_faults(write_story_faults(directory / "faults.jsonl"))
    section = time_axis_html(axis(timeline, faults), timeline, availability(timeline))
    page = directory / "report.html"
    page.write_text(render_html(story_summary(), section), encoding="utf-8")
    return page
