"""The packaging extras (pyproject.toml): without [replay] or [chaos] the verbs that need
them print one line naming the extra and exit 2, and the verbs of a plain
`pip install .` import none of pyspark, matplotlib or the Kafka clients.

A module is hidden from a subprocess by `sys.modules[name] = None`, which makes its
import raise ImportError as a missing package does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPLAY = ("pyspark", "matplotlib")
CHAOS = ("kafka", "confluent_kafka")


def _kraft_without(hidden: tuple[str, ...], *argv: str,
                   cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    code = ("import sys\n"
            f"for name in {hidden!r}:\n"
            "    sys.modules[name] = None\n"
            "from tools.cli import main\n"
            f"sys.exit(main({list(argv)!r}))\n")
    root = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=cwd or root)


def _one_line(done: subprocess.CompletedProcess[str], extra: str, command: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"error: {command} needs the [{extra}] extra: pip install 'kraft-py[{extra}]'"]
    assert done.stdout == ""


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """A formatted node directory (a valid replay input)."""
    directory = tmp_path / "node-1"
    done = subprocess.run([sys.executable, "-m", "tools.cli", "format", "--dir",
                           str(directory), "--node-id", "1", "--cluster-id",
                           "MkU3OEVBNTcwNTJENDM2Qg"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return directory


@pytest.mark.parametrize("hidden", ["pyspark", "matplotlib"])
def test_replay_without_the_replay_extra_says_which_extra_and_exits_2(
        hidden: str, logs: Path, tmp_path: Path) -> None:
    done = _kraft_without((hidden,), "replay", "--logs", str(logs), "--out",
                          str(tmp_path / "report"))
    _one_line(done, "replay", "kraft replay")
    assert not (tmp_path / "report").exists()


def test_replay_without_matplotlib_needs_it_only_for_a_report(tmp_path: Path) -> None:
    """matplotlib only draws the report's plots: without --out the extra check passes
    and the next check (the input) answers."""
    done = _kraft_without(("matplotlib",), "replay", "--logs", str(tmp_path / "missing"))
    assert done.returncode == 2
    assert "[replay] extra" not in done.stderr
    assert "missing" in done.stderr


def test_replay_with_json_reports_the_missing_extra_as_json(logs: Path) -> None:
    done = _kraft_without(("pyspark",), "replay", "--logs", str(logs), "--json")
    assert done.returncode == 2
    assert '"exit_code": 2' in done.stdout
    assert "[replay] extra" in done.stdout


@pytest.mark.parametrize("hidden", CHAOS)
def test_chaos_without_the_chaos_extra_exits_2_before_any_cluster_starts(
        hidden: str, tmp_path: Path) -> None:
    directory = tmp_path / "chaos"
    done = _kraft_without((hidden,), "chaos", "--cluster", str(directory), "--duration",
                          "5", "--seed", "1", "--skip-replay")
    _one_line(done, "chaos", "kraft chaos")
    assert not directory.exists()


def test_chaos_without_the_replay_extra_asks_for_it_or_skip_replay(tmp_path: Path) -> None:
    directory = tmp_path / "chaos"
    done = _kraft_without(REPLAY, "chaos", "--cluster", str(directory), "--duration", "5",
                          "--seed", "1")
    _one_line(done, "replay", "kraft chaos (without --skip-replay)")
    assert not directory.exists()


def test_demo_without_the_replay_extra_asks_for_it_or_skip_replay(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    done = _kraft_without(REPLAY, "demo", "--cluster", str(directory))
    _one_line(done, "replay", "kraft demo (without --skip-replay)")
    assert not directory.exists()


@pytest.mark.parametrize("verb", ["node", "quorum", "topics", "format", "dump-log",
                                  "storage", "sim", "replay", "chaos", "demo"])
def test_every_verb_parses_its_help_without_the_extras(verb: str) -> None:
    """The verbs' modules import nothing of the extras at import time (replay, chaos and
    demo import them only when they run)."""
    done = _kraft_without(REPLAY + CHAOS, verb, "--help")
    assert done.returncode == 0, done.stderr
    assert "usage: kraft" in done.stdout


def test_the_core_command_modules_import_without_the_extras() -> None:
    """What `kraft node`, `kraft quorum` and `kraft topics` load (the node's server, the
    brokers' Kafka listener, the cluster launcher) with every extra's module hidden; and
    none of them is imported on the way."""
    code = ("import sys\n"
            f"for name in {REPLAY + CHAOS!r}:\n"
            "    sys.modules[name] = None\n"
            "import importlib\n"
            "for module in ('tools.commands.node', 'tools.commands.quorum',\n"
            "               'tools.commands.topics', 'tools.server', 'tools.cluster',\n"
            "               'broker.kafka.listener', 'tools.progress'):\n"
            "    importlib.import_module(module)\n"
            f"loaded = [n for n in {REPLAY + CHAOS!r} if sys.modules.get(n) is not None]\n"
            "assert not loaded, loaded\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
