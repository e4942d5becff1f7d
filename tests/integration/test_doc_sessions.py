"""Every `console` session of README.md and docs/*.md, run as written against real
processes: each `$ kraft ...` line in a fresh directory (its `/tmp/` paths moved there),
its output checked line by line and its exit code as the session shows it
(tests/support/doc_sessions.py). A session that stops working fails here. Every node a
session started is SIGKILLed by PID at the end, whatever happened."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_sessions import Session, expand, match, relocate, sessions
from tests.support.secure_cluster import kill_recorded

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SESSIONS = [s for page in PAGES for s in sessions(page)]
COMMAND_TIMEOUT_S = 300  # the replay starts Spark on a shared 2-core host


def test_the_readme_has_a_session() -> None:
    assert any(s.path.name == "README.md" for s in SESSIONS)


@pytest.mark.parametrize("session", SESSIONS, ids=lambda s: s.name)
def test_session_runs_as_written(session: Session, tmp_path: Path) -> None:
    bindings: dict[str, str] = {}
    try:
        for step in session.steps:
            command = relocate(expand(step.command, bindings), tmp_path)
            program, *args = shlex.split(command)
            assert program == "kraft", f"line {step.line}: only kraft commands run"
            done = subprocess.run([sys.executable, "-m", "tools.cli", *args],
                                  capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
            output = done.stdout + done.stderr
            assert (done.returncode != 0) == step.expects_failure, \
                f"line {step.line}: {command} exited {done.returncode}:\n{output}"
            expected = [relocate(line, tmp_path) for line in step.expected]
            found = match(expected, output, bindings)
            assert not isinstance(found, str), f"line {step.line}: {found}\n{output}"
            bindings = found
    finally:
        for cluster_dir in tmp_path.iterdir():
            kill_recorded(cluster_dir)
