"""One progress display for long work (`kraft sim`, `kraft replay`, `kraft chaos`,
`kraft demo`), on stderr only, so stdout (`--json`) stays clean.

On a terminal it is one line redrawn in place by rich.progress: a spinner, the label and
the current phase, a bar (pulsing when the total is unknown), done/total with its unit,
the rate, named counters, the time elapsed and, with a total, the time left. rich
decides what a terminal is (isatty, FORCE_COLOR, TTY_COMPATIBLE) and measures the rate
over a sliding window. Not on a terminal there is no redraw: with `plain_phases`, one
line per phase (`[replay   12.3s] reading 9 segment(s) of 3 node(s)`); otherwise nothing.

    with ProgressDisplay("sim", total=1000, unit="seeds", rate=True) as display:
        for done, result in enumerate(results, 1):
            display.update(completed=done, violations=failed)

Counters that other threads change (a nemesis, Spark's stage tracker) are read by a
`poll` function, which rich's own refresh thread calls before each redraw: the caller
needs no thread of its own.

The line fits the terminal: before each redraw the optional fields (counters, rate,
elapsed, time left) are dropped, last first, until it does (`columns_that_fit`); the
spinner, the label, the bar and the count stay. While it is shown, stderr goes through
rich, so a log line (tools/logs.py writes to the current sys.stderr) prints above the
progress line instead of splicing into it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text


@dataclass(frozen=True, slots=True)
class Reading:
    """What a poll function reports: the bar's position and total (None: unchanged) and
    counters shown as `name value` (they replace the previous poll's)."""

    completed: float | None = None
    total: float | None = None
    stats: Mapping[str, object] = field(default_factory=dict)


Poll = Callable[[], Reading]


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, int) or value.is_integer() else f"{value:.1f}"


class _Count(ProgressColumn):
    """`12/100 seeds`; without a total, `12 seeds` (or nothing when nothing counts)."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        if task.total is None:
            text = f"{_number(task.completed)} {self.unit}" if task.completed else ""
        else:
            text = f"{_number(task.completed)}/{_number(task.total)} {self.unit}"
        return Text(text.strip(), style="progress.download")


class _Rate(ProgressColumn):
    """Items per second over rich's sliding window (`speed_estimate_period`)."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.speed
        if speed is None:
            return Text("")
        return Text(f"{speed:.1f} {self.unit}/s", style="progress.data.speed")


class _Elapsed(ProgressColumn):
    """Time since the display started (a phase resets the task, not this)."""

    def __init__(self, started: float) -> None:
        super().__init__()
        self.started = started

    def render(self, task: Task) -> Text:
        seconds = int(time.monotonic() - self.started)
        return Text(f"{seconds // 60}:{seconds % 60:02d}", style="progress.elapsed")


def columns_that_fit(width: int, widths: Sequence[int], required: Sequence[bool]
                     ) -> list[int]:
    """Indexes of the columns to show in `width` cells, one cell between two: every
    required one, then the optional ones in order while they fit."""
    used = sum(w + 1 for w, needed in zip(widths, required, strict=True) if needed)
    shown = []
    for index, (cells, needed) in enumerate(zip(widths, required, strict=True)):
        if not needed and used + cells + 1 > width:
            break
        if not needed:
            used += cells + 1
        shown.append(index)
    return shown


class _Live(Progress):
    """rich's Progress that asks the poll function before each redraw and shows the
    columns that fit the terminal's width."""

    poll: Callable[[], None] | None = None
    every_column: tuple[ProgressColumn, ...] = ()
    required: tuple[bool, ...] = ()

    def get_renderables(self) -> Any:
        if self.poll is not None:
            self.poll()
        if self.every_column and self.tasks:
            task = self.tasks[-1]
            widths = [self.console.measure(column(task)).maximum
                      for column in self.every_column]
            self.columns = tuple(self.every_column[i] for i in columns_that_fit(
                self.console.width, widths, self.required))
        return super().get_renderables()


class ProgressDisplay:
    def __init__(self, label: str, *, total: float | None = None, unit: str = "",
                 rate: bool = False, plain_phases: bool = False, poll: Poll | None = None,
                 console: Console | None = None, enabled: bool = True,
                 refresh_per_second: float = 4) -> None:
        self.label = label
        # stderr is looked up when written, so a test's capture of it applies
        self.console = console or Console(stderr=True)
        self.live = enabled and self.console.is_terminal
        self.plain_phases = enabled and plain_phases and not self.live
        self._started = time.monotonic()
        self._poll = poll
        self._stats: dict[str, object] = {}
        self._phase = ""
        columns: list[ProgressColumn] = [
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=24),
            _Count(unit)]
        required = len(columns)
        columns.append(TextColumn("{task.fields[stats]}"))
        if rate:
            columns.append(_Rate(unit))
        columns += [_Elapsed(self._started), TimeRemainingColumn()]
        # stdout is routed above the live line only when it is a terminal too: a piped
        # stdout (JSON) never receives the display, nor is moved to stderr
        self._progress = _Live(*columns, console=self.console, transient=True,
                               refresh_per_second=refresh_per_second,
                               redirect_stdout=self.live and sys.stdout.isatty(),
                               redirect_stderr=self.live, disable=not self.live)
        self._progress.poll = self._apply_poll
        self._progress.every_column = tuple(columns)
        self._progress.required = tuple(i < required for i in range(len(columns)))
        self._task: TaskID = self._progress.add_task(label, total=total, stats="")

    def __enter__(self) -> ProgressDisplay:
        if self.live:
            self._progress.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self.live:
            self._progress.stop()

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    def phase(self, name: str, *, total: float | None = None, poll: Poll | None = None
              ) -> None:
        """A new phase: its name is shown after the label, the bar starts again at 0 of
        `total` (None: a pulsing bar) and `poll` replaces the previous phase's."""
        self._phase = name
        self._poll = poll
        self._stats = {}
        # a new task, not a reset one: rich's reset keeps the old total (a phase may have
        # none) and the rate and time left must not mix two phases' samples
        self._progress.remove_task(self._task)
        self._task = self._progress.add_task(self._description(), total=total, stats="")
        if self.plain_phases:
            self.console.print(f"[{self.label} {self.elapsed_s:6.1f}s] {name}",
                               markup=False, highlight=False, soft_wrap=True)

    def update(self, *, completed: float | None = None, total: float | None = None,
               advance: float | None = None, **stats: object) -> None:
        """Move the bar and set counters (`violations=3` shows `violations 3`)."""
        self._stats.update(stats)
        self._progress.update(self._task, completed=completed, total=total, advance=advance,
                              stats=self._stats_text())

    def _description(self) -> str:
        return f"{self.label}: {self._phase}" if self._phase else self.label

    def _stats_text(self) -> str:
        return ", ".join(f"{name.replace('_', ' ')} {value}"
                         for name, value in self._stats.items())

    def _apply_poll(self) -> None:
        poll = self._poll
        if poll is None:
            return
        try:
            reading = poll()
        except Exception:  # a failed read (Spark stopping) leaves the last one shown
            return
        self._stats = dict(reading.stats)
        try:
            self._progress.update(self._task, completed=reading.completed,
                                  total=reading.total, stats=self._stats_text())
        except KeyError:  # the phase changed meanwhile: its task is gone
            pass
