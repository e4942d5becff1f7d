"""`kraft format` and `kraft random-uuid` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raft.common.uuid import RESERVED, Uuid
from raft.storage import open_log_dir
from tools.cli import main

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def _format(directory: Path, *extra: str, cluster: str = CLUSTER, node: str = "1") -> int:
    return main(["format", "--dir", str(directory), "--cluster-id", cluster,
                 "--node-id", node, *extra])


def test_format_writes_meta_properties_when_dir_is_new(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """kafka-storage format: a new directory gets cluster.id and node.id."""
    assert _format(tmp_path / "n1") == 0
    assert "Formatted" in capsys.readouterr().out
    meta = open_log_dir(tmp_path / "n1", cluster_id=CLUSTER, node_id=1)
    assert (meta.cluster_id, meta.node_id) == (CLUSTER, 1)


def test_format_refuses_when_dir_belongs_to_another_cluster(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Reformatting a directory of another cluster or node fails with one clear line."""
    assert _format(tmp_path) == 0
    other = str(Uuid.random())
    assert _format(tmp_path, "--ignore-formatted", cluster=other) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert "already formatted for cluster" in err
    assert err.count("\n") == 1
    assert _format(tmp_path, "--ignore-formatted", node="2") == 1


def test_format_succeeds_when_same_format_and_ignore_formatted(tmp_path: Path) -> None:
    """--ignore-formatted: an identical existing format is accepted, as in Kafka."""
    assert _format(tmp_path) == 0
    assert _format(tmp_path) == 1
    assert _format(tmp_path, "--ignore-formatted") == 0


def test_format_is_usage_error_when_cluster_id_is_not_a_uuid(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The cluster ID must be a base64 Uuid; bad input exits 2 and writes nothing."""
    assert _format(tmp_path / "n", cluster="not-a-uuid") == 2
    assert "not-a-uuid" in capsys.readouterr().err
    assert not (tmp_path / "n").exists()


def test_format_reports_json_when_asked(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """--json output is one JSON object on stdout, errors too."""
    assert _format(tmp_path, "--json") == 0
    assert json.loads(capsys.readouterr().out)["formatted"] is True
    assert _format(tmp_path, "--json") == 1
    assert json.loads(capsys.readouterr().out)["exit_code"] == 1


def test_random_uuid_prints_usable_cluster_id_when_called(
        capsys: pytest.CaptureFixture[str]) -> None:
    """kraft random-uuid prints a fresh, non-reserved, flag-safe Uuid."""
    assert main(["random-uuid"]) == 0
    text = capsys.readouterr().out.strip()
    value = Uuid.from_string(text)
    assert value not in RESERVED
    assert not text.startswith("-")
    assert main(["random-uuid", "--json"]) == 0
    assert Uuid.from_string(json.loads(capsys.readouterr().out)["uuid"]) != value
