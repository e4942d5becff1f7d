"""The replay's progress on stderr (tools/progress.py): the current phase and, from
Spark's status tracker, each running stage's finished and total tasks, the bar following
their sum. On a terminal the line is redrawn in place; otherwise each phase is printed
once (`[replay   12.3s] reading 9 segment(s) of 3 node(s)`)."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from rich.console import Console

from tools.progress import ProgressDisplay, Reading


class Progress:
    def __init__(self, spark: Any, console: Console | None = None, enabled: bool = True,
                 refresh_per_second: float = 2) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self.display = ProgressDisplay("replay", unit="tasks", plain_phases=True,
                                       console=console, enabled=enabled,
                                       refresh_per_second=refresh_per_second)

    def __enter__(self) -> Progress:
        self.display.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.display.__exit__(kind, exc, trace)

    def phase(self, name: str) -> None:
        self.display.phase(name, poll=self._stages if self.display.live else None)

    def _stages(self) -> Reading:
        """Read by the display's refresh thread (a py4j call per active stage)."""
        stats: dict[str, object] = {}
        done = total = 0
        for stage_id in sorted(self._tracker.getActiveStageIds()):
            info = self._tracker.getStageInfo(stage_id)
            if info is not None:
                stats[f"stage {stage_id}"] = f"{info.numCompletedTasks}/{info.numTasks}"
                done += info.numCompletedTasks
                total += info.numTasks
        if not total:  # between stages: no bar position to report
            return Reading(stats=stats)
        return Reading(completed=done, total=total, stats=stats)
