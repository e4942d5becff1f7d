"""`kraft format`'s dynamic-quorum flags (KIP-853, kafka-storage.sh's): --initial-controllers
and --standalone write the bootstrap checkpoint (KRaftVersionRecord(1) + VotersRecord),
--no-initial-controllers and no flag write none; every format a new directory.id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raft.common.uuid import Uuid
from raft.log import METADATA_PARTITION_DIR
from raft.snapshot import read_snapshot
from raft.storage import read_meta_properties
from raft.voters import BOOTSTRAP_SNAPSHOT_ID, read_bootstrap_voters
from tools.cli import main

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
DIRS = {n: str(Uuid.random()) for n in (1, 2, 3)}
CONTROLLERS = ",".join(f"{n}@127.0.0.1:{9090 + n}:{d}" for n, d in DIRS.items())


def _format(directory: Path, *extra: str, node: str = "1") -> int:
    return main(["format", "--dir", str(directory), "--cluster-id", CLUSTER,
                 "--node-id", node, *extra])


def test_initial_controllers_write_bootstrap_checkpoint_and_this_directory_id(
        tmp_path: Path) -> None:
    assert _format(tmp_path, "--initial-controllers", CONTROLLERS, node="2") == 0
    meta = read_meta_properties(tmp_path)
    assert meta is not None
    assert meta.directory_id == DIRS[2]
    partition = tmp_path / METADATA_PARTITION_DIR
    assert (partition / "00000000000000000000-0000000000.checkpoint").is_file()
    voters = read_bootstrap_voters(partition)
    assert voters is not None
    assert voters.ids == (1, 2, 3)
    assert str(voters.directory_of(3)) == DIRS[3]
    voter = voters.voter(1)
    assert voter is not None
    assert (voter.endpoints[0].host, voter.endpoints[0].port) == ("127.0.0.1", 9091)
    snapshot = read_snapshot(partition / BOOTSTRAP_SNAPSHOT_ID.file_name)
    assert len(snapshot.records) == 2


def test_no_checkpoint_when_no_initial_controllers_or_static(tmp_path: Path) -> None:
    assert _format(tmp_path / "a", "--no-initial-controllers") == 0
    assert _format(tmp_path / "b") == 0
    for name in ("a", "b"):
        assert read_bootstrap_voters(tmp_path / name / METADATA_PARTITION_DIR) is None
        meta = read_meta_properties(tmp_path / name)
        assert meta is not None
        assert meta.directory_id is not None


def test_standalone_writes_this_controller_alone_when_config_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "node.toml"
    config.write_text(f'"node.id" = 5\n"process.roles" = "controller"\n'
                      f'"controller.quorum.voters" = "5@127.0.0.1:19095"\n'
                      f'"listeners" = "CONTROLLER://127.0.0.1:19095"\n'
                      f'"log.dirs" = "{tmp_path / "data"}"\n')
    assert main(["format", "--config", str(config), "--cluster-id", CLUSTER, "--standalone",
                 "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    voters = read_bootstrap_voters(tmp_path / "data" / METADATA_PARTITION_DIR)
    assert voters is not None
    assert voters.ids == (5,)
    assert str(voters.directory_of(5)) == printed["directory_id"]


@pytest.mark.parametrize("extra", [["--initial-controllers", "1@127.0.0.1:9091"],
                                   ["--initial-controllers", CONTROLLERS.replace("1@", "7@")],
                                   ["--standalone"],
                                   ["--standalone", "--no-initial-controllers"]])
def test_format_refuses_with_one_line_when_quorum_flags_bad(
        tmp_path: Path, extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert _format(tmp_path, *extra) == 2
    assert not (tmp_path / "meta.properties").exists()
    assert capsys.readouterr().err.strip()
