"""The progress line on an 80-column terminal (tools/progress.py): optional fields are
dropped, last first, until the line fits, never the bar or the count; and a log line
written while it shows lands on a line of its own, above it."""

from __future__ import annotations

import io
import logging
import re

import pytest
from rich.console import Console

from tools.logs import configure_logging
from tools.progress import ProgressDisplay, columns_that_fit

REQUIRED = [True, True, True, True, False, False, False]


def test_optional_columns_go_last_first_until_the_line_fits() -> None:
    widths = [1, 10, 24, 8, 20, 5, 4]  # spinner, label, bar, count, stats, elapsed, left
    assert columns_that_fit(200, widths, REQUIRED) == [0, 1, 2, 3, 4, 5, 6]
    assert columns_that_fit(74, widths, REQUIRED) == [0, 1, 2, 3, 4, 5]
    assert columns_that_fit(60, widths, REQUIRED) == [0, 1, 2, 3]
    assert columns_that_fit(10, widths, REQUIRED) == [0, 1, 2, 3]  # never the bar


def _terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=80, color_system=None), out


def test_a_long_line_keeps_its_bar_and_count_and_is_not_cut() -> None:
    console, out = _terminal()
    with ProgressDisplay("chaos", total=10, unit="ops", rate=True, console=console) as shown:
        shown.phase("workload and faults", total=10)
        shown.update(completed=3, faults_injected=12, operations=4567, errors=0,
                     violations_so_far="none yet")
    frames = [f for f in re.split(r"[\r\n]", out.getvalue()) if "3/10 ops" in f]
    assert frames, out.getvalue()
    assert all("━" in f and "…" not in f for f in frames)


def test_a_log_line_prints_above_the_progress_line(monkeypatch: pytest.MonkeyPatch) -> None:
    console, out = _terminal()
    configure_logging("text", "WARNING")
    with ProgressDisplay("sim", total=5, unit="seeds", console=console) as shown:
        shown.update(completed=2)
        logging.getLogger("test").warning("a seed failed to start")
        shown.update(completed=3)
    (line,) = [f for f in re.split(r"[\r\n]", out.getvalue()) if "a seed failed" in f]
    assert "seeds" not in line
