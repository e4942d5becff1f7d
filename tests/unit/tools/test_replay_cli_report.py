"""`kraft replay`'s text report (tools/commands/replay.py): a legend line above the checks
names every verdict a line can start with; nodes formatted that never ran are one line
saying there is nothing to replay, exit 0, with no Spark job; a log with a record, or a
node with a snapshot, is replayed."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tools.cli import main
from tools.commands.replay import LEGEND, nothing_to_replay, report_text
from tools.replay.checks import CheckResult
from tools.replay.inputs import NodeInput, ReplayInput

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def _input(*, snapshots: tuple[Path, ...] = ()) -> ReplayInput:
    nodes = tuple(NodeInput(node_id=n, log_dir=Path(f"/n{n}"), segments=(Path(f"/n{n}/0.log"),),
                            checkpoint=None, snapshots=snapshots if n == 1 else ())
                  for n in (1, 2))
    return ReplayInput(nodes=nodes, voters=(1, 2), voters_source="all nodes")


def test_empty_logs_without_snapshots_are_one_line_naming_the_nodes() -> None:
    assert nothing_to_replay(_input(), segment_bytes=0) == (
        "nothing to replay: the metadata logs of node(s) 1, 2 hold no record and no "
        "snapshot (formatted, never run)")


def test_a_log_with_bytes_or_a_node_with_a_snapshot_is_replayed() -> None:
    assert nothing_to_replay(_input(), segment_bytes=1) is None
    assert nothing_to_replay(_input(snapshots=(Path("/n1/5-1.checkpoint"),)),
                             segment_bytes=0) is None


def test_the_legend_comes_first_and_names_every_verdict_shown() -> None:
    checks = [CheckResult(name="log_matching", description="", violations=0),
              CheckResult(name="committed_prefix", description="", violations=2,
                          examples=({"offset": 3},)),
              CheckResult(name="snapshot_valid", description="", violations=0, skipped=True,
                          note="no snapshot checkpoint files")]
    result = SimpleNamespace(checks=checks, record_copies=4, report_path=None,
                             analysis=SimpleNamespace(nodes=[], committed_end=2))
    lines = report_text(result).splitlines()
    assert lines[0] == LEGEND
    verdicts = [lines[n].split()[0] for n in (1, 2, 4)]  # line 3: the failure's example
    assert verdicts == ["ok", "FAIL", "skip"]
    assert all(f"{verdict} = " in LEGEND for verdict in verdicts)


@pytest.mark.parametrize("as_json", [False, True])
def test_replay_of_nodes_that_never_ran_prints_one_line_and_exits_0(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], as_json: bool) -> None:
    logs = [str(tmp_path / f"n{n}") for n in (1, 2)]
    for node_id, log_dir in enumerate(logs, start=1):
        assert main(["format", "--dir", log_dir, "--node-id", str(node_id),
                     "--cluster-id", CLUSTER]) == 0
    capsys.readouterr()
    assert main(["replay", "--logs", *logs, *(["--json"] if as_json else [])]) == 0
    out = capsys.readouterr().out
    line = ("nothing to replay: the metadata logs of node(s) 1, 2 hold no record and no "
            "snapshot (formatted, never run)")
    assert out == (json.dumps({"passed": True, "nothing_to_replay": line}) if as_json
                   else line) + "\n"
