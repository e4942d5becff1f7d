"""A child Python process killed mid-run: it runs a script with this repository on its
path and reports on stdout; the parent reads each line it prints until it has seen
enough, SIGKILLs it by its PID and then reads what it printed before the kill landed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_until_killed(script: str, args: list[str], feed: Callable[[str], None],
                     stop: Callable[[str], bool]) -> None:
    """Run `script` (`python -c`) with `args`; pass each line it prints to `feed`, and
    SIGKILL it once `stop` (asked after each line is fed) says so; every whole line it
    printed is fed (not one the kill cut short), and it must not have exited on its own
    before."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", script, *args],
                             stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert child.stdout is not None
        while True:
            line = child.stdout.readline()
            assert line, f"child exited early with {child.poll()}"
            feed(line)
            if stop(line):
                break
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        if child.stdout is not None:
            for line in child.stdout:  # printed before the kill landed
                if line.endswith("\n"):  # else cut by it: under PYTHONUNBUFFERED a
                    feed(line)  # print is one write per piece
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL
