"""The replay's progress (tools/replay/progress.py) against a fake Spark status tracker:
phase names and stage/task counts on a terminal, one plain line per phase without."""

from __future__ import annotations

import io
import re
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from tools.replay.progress import Progress

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass
class _StageInfo:
    numCompletedTasks: int  # noqa: N815 (Spark's names)
    numTasks: int  # noqa: N815


class _Tracker:
    def __init__(self) -> None:
        self.stages: dict[int, _StageInfo] = {}

    def getActiveStageIds(self) -> list[int]:  # noqa: N802
        return list(self.stages)

    def getStageInfo(self, stage_id: int) -> _StageInfo | None:  # noqa: N802
        return self.stages.get(stage_id)


class _Context:
    def __init__(self, tracker: _Tracker) -> None:
        self.tracker = tracker

    def statusTracker(self) -> _Tracker:  # noqa: N802
        return self.tracker


class _Spark:
    def __init__(self, tracker: _Tracker) -> None:
        self.sparkContext: Any = _Context(tracker)  # noqa: N815


def test_a_terminal_shows_the_phase_and_each_running_stage_tasks() -> None:
    tracker = _Tracker()
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160)
    with Progress(_Spark(tracker), console=console, refresh_per_second=50) as progress:
        progress.phase("reading 9 segment(s) of 3 node(s)")
        tracker.stages = {4: _StageInfo(1, 3), 5: _StageInfo(0, 2)}
        time.sleep(0.15)
    text = _ANSI.sub("", out.getvalue())
    assert "replay: reading 9 segment(s) of 3 node(s)" in text
    assert "1/5 tasks" in text
    assert "stage 4 1/3, stage 5 0/2" in text


def test_without_a_terminal_each_phase_is_one_plain_line() -> None:
    tracker = _Tracker()
    tracker.stages = {1: _StageInfo(0, 2)}
    out = io.StringIO()
    with Progress(_Spark(tracker), console=Console(file=out)) as progress:
        progress.phase("reading 2 snapshot file(s)")
        progress.phase("comparing the nodes' batches")
        time.sleep(0.05)
    lines = out.getvalue().splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
        "reading 2 snapshot file(s)", "comparing the nodes' batches"]
    assert all(line.startswith("[replay ") for line in lines)
