"""tools/progress.py: the live line on a (fake) terminal, plain phase lines or nothing
without one, and never a byte on stdout."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console

from tools.progress import ProgressDisplay, Reading

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=140), out


def _plain() -> tuple[Console, io.StringIO]:
    out = io.StringIO()  # not a terminal: StringIO.isatty() is False
    return Console(file=out, width=140), out


def _frames(raw: str) -> list[str]:
    """The lines drawn, escape codes removed (each redraw starts with a carriage return)."""
    return [line.strip() for line in re.split(r"[\r\n]", _ANSI.sub("", raw)) if line.strip()]


def test_a_terminal_gets_a_redrawn_bar_with_counts_rate_and_counters() -> None:
    console, out = _terminal()
    with ProgressDisplay("sim", total=40, unit="seeds", rate=True, console=console,
                         refresh_per_second=50) as display:
        assert display.live
        for done in range(1, 41):
            display.update(completed=done, violations=0)
            time.sleep(0.005)
        time.sleep(0.05)
    raw = out.getvalue()
    assert "\r" in raw  # redrawn in place, not one line per update
    frames = _frames(raw)
    last = [f for f in frames if "40/40 seeds" in f]
    assert last, frames[-5:]
    assert "violations 0" in last[-1]
    assert "sim" in last[-1]
    assert re.search(r"\d+\.\d seeds/s", raw)


def test_a_poll_is_read_by_the_redraw_and_a_phase_starts_a_new_bar() -> None:
    console, out = _terminal()
    calls = []

    def poll() -> Reading:
        calls.append(1)
        return Reading(completed=3, total=10, stats={"faults": 2, "operations": 17})

    with ProgressDisplay("chaos", unit="s", console=console, refresh_per_second=50) as display:
        display.phase("workload and faults", total=10, poll=poll)
        time.sleep(0.15)
        display.phase("checking the history")  # no total: a pulsing bar, no count
        time.sleep(0.1)
    assert calls
    frames = _frames(out.getvalue())
    assert any("chaos: workload and faults" in f and "3/10 s" in f
               and "faults 2, operations 17" in f for f in frames), frames[-5:]
    checking = [f for f in frames if "chaos: checking the history" in f]
    assert checking
    assert all("/10" not in f and "faults" not in f for f in checking)


def test_a_failing_poll_leaves_the_display_running() -> None:
    console, out = _terminal()

    def poll() -> Reading:
        raise RuntimeError("the JVM is gone")

    with ProgressDisplay("replay", console=console, refresh_per_second=50) as display:
        display.phase("loading", poll=poll)
        time.sleep(0.1)
    assert "replay: loading" in "\n".join(_frames(out.getvalue()))


def test_without_a_terminal_only_plain_phase_lines_are_written() -> None:
    console, out = _plain()
    with ProgressDisplay("replay", console=console, plain_phases=True,
                         poll=lambda: Reading(stats={"stage 1": "1/2 tasks"})) as display:
        assert not display.live
        display.phase("reading 3 segment(s) of 3 node(s)")
        display.update(completed=5, tasks=3)
        display.phase("comparing the nodes' batches")
        time.sleep(0.05)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert re.fullmatch(r"\[replay +\d+\.\ds\] reading 3 segment\(s\) of 3 node\(s\)",
                        lines[0])
    assert lines[1].endswith("] comparing the nodes' batches")
    assert "\r" not in out.getvalue()
    assert "\x1b" not in out.getvalue()


def test_without_a_terminal_and_without_plain_phases_nothing_is_written() -> None:
    console, out = _plain()
    with ProgressDisplay("sim", total=3, unit="seeds", console=console) as display:
        display.phase("sweep", total=3)
        for done in range(1, 4):
            display.update(completed=done, violations=0)
    assert out.getvalue() == ""


def test_the_default_console_writes_to_stderr_never_stdout(
        capsys: pytest.CaptureFixture[str]) -> None:
    with ProgressDisplay("replay", plain_phases=True) as display:  # captured: no terminal
        display.phase("analysis")
        display.update(completed=1)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().endswith("] analysis")


def test_a_disabled_display_writes_nothing_even_on_a_terminal() -> None:
    console, out = _terminal()
    with ProgressDisplay("sim", total=2, console=console, enabled=False,
                         plain_phases=True) as display:
        display.phase("sweep")
        display.update(completed=2)
    assert out.getvalue() == ""
