"""The CLI as someone who runs Kafka meets it: a formatted directory every verb can read
(`kraft format`, `kraft storage info`, `kraft dump-log`), the log directory's lock,
`kraft quorum describe` laid out as kafka-metadata-quorum.sh 3.9, `--version`,
`--log-level` checked, and `kraft replay` without Java."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from raft.storage import LogDirLockedError, lock_log_dir, read_meta_properties
from tools.cli import main
from tools.commands import quorum
from tools.commands.replay import java_problem

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def _format(directory: Path) -> int:
    return main(["format", "--dir", str(directory), "--cluster-id", CLUSTER, "--node-id", "1"])


def test_format_lays_out_a_directory_that_dump_log_and_storage_info_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node = tmp_path / "n1"
    assert _format(node) == 0
    assert (node / "__cluster_metadata-0" / "00000000000000000000.log").is_file()
    capsys.readouterr()
    assert main(["dump-log", "--dir", str(node)]) == 0
    assert "Dumping" in capsys.readouterr().out
    assert main(["storage", "info", "--dir", str(node), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["cluster_id"], info["node_id"], info["locked_by_pid"]) == (CLUSTER, 1, None)
    directory = read_meta_properties(node).directory_id  # type: ignore[union-attr]
    assert directory is not None
    assert info["directory_id"] == directory
    assert info["metadata_log"]["log_end_offset"] == 0
    assert main(["storage", "info", "--dir", str(node)]) == 0
    assert f"Found metadata: {{cluster.id={CLUSTER}, node.id=1, directory.id={directory}, " \
        "version=1}" in capsys.readouterr().out
    assert main(["storage", "info", "--dir", str(tmp_path / "none")]) == 1


def test_format_reads_the_node_config(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(f"process.roles=controller\nnode.id=7\nlog.dirs={tmp_path / 'd'}\n"
                      "controller.quorum.voters=7@127.0.0.1:1\n"
                      "listeners=CONTROLLER://127.0.0.1:1\n")
    assert main(["format", "-c", str(config), "-t", CLUSTER]) == 0
    assert "node.id=7" in (tmp_path / "d" / "meta.properties").read_text()


def test_a_locked_directory_is_refused_naming_the_holder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """flock locks belong to an open file: a second open in this process conflicts too."""
    assert _format(tmp_path) == 0
    lock = lock_log_dir(tmp_path)
    try:
        with pytest.raises(LogDirLockedError) as caught:
            lock_log_dir(tmp_path)
        assert caught.value.pid == os.getpid()
        capsys.readouterr()
        assert main(["format", "--dir", str(tmp_path), "--cluster-id", CLUSTER,
                     "--node-id", "1", "--ignore-formatted"]) == 2
        err = capsys.readouterr().err
        assert f"in use by another process (pid {os.getpid()}" in err
        assert err.count("\n") == 1
    finally:
        lock.release()
    lock_log_dir(tmp_path).release()  # free again


STATE = {"leader_id": 2, "leader_epoch": 3, "high_watermark": 10,
         "leader_address": "127.0.0.1:2", "cluster_id": CLUSTER,
         "voters": [{"replica_id": r, "log_end_offset": 10 - r % 2,
                     "last_fetch_timestamp": 1000 + r, "last_caught_up_timestamp": 900 + r}
                    for r in (1, 2, 3)],
         "observers": [{"replica_id": 5, "log_end_offset": 8, "last_fetch_timestamp": 990,
                        "last_caught_up_timestamp": -1},
                       {"replica_id": 4, "log_end_offset": 10, "last_fetch_timestamp": 995,
                        "last_caught_up_timestamp": 995}]}


def test_replication_lists_the_leader_first_then_voters_then_observers() -> None:
    rows = quorum.replication_view(STATE)
    assert [(r["NodeId"], r["Status"]) for r in rows] == [
        (2, "Leader"), (1, "Follower"), (3, "Follower"), (4, "Observer"), (5, "Observer")]
    assert [r["Lag"] for r in rows] == [0, 1, 1, 0, 2]
    human = quorum.humanize_rows(rows, now_ms=1010)
    assert human[0]["LastFetchTimestamp"] == "8 ms ago"
    assert human[4]["LastCaughtUpTimestamp"] == "unknown"


def test_status_lists_voters_with_endpoints_and_human_lag_time() -> None:
    view = quorum.status_view(STATE, "", 5000, {2: ["CONTROLLER://127.0.0.1:2"]})
    assert view["CurrentVoters"] == [{"id": 1, "endpoints": []},
                                     {"id": 2, "endpoints": ["CONTROLLER://127.0.0.1:2"]},
                                     {"id": 3, "endpoints": []}]
    assert view["CurrentObservers"] == [{"id": 5}, {"id": 4}]
    text = quorum.status_text(view, human_readable=True)
    assert 'CurrentVoters:        [{"id": 1, "endpoints": []}' in text
    assert "MaxFollowerLagTimeMs: 1 ms" in text
    assert "KRaftVersion" not in view  # a broker's answer (Kafka's) carries none


def test_voter_endpoints_without_a_cluster_are_the_addresses_the_leader_dials() -> None:
    state = {**STATE, "voter_addresses": {1: "127.0.0.1:1", 2: "127.0.0.1:2",
                                          3: "127.0.0.1:3"}}
    endpoints = quorum.voter_endpoints(argparse.Namespace(cluster=None), state)
    assert endpoints == {n: [f"CONTROLLER://127.0.0.1:{n}"] for n in (1, 2, 3)}


def test_status_shows_the_kraft_version_the_leader_answered() -> None:
    view = quorum.status_view({**STATE, "kraft_version": 1}, "", 5000)
    assert view["KRaftVersion"] == 1
    assert "KRaftVersion:         1" in quorum.status_text(view)


def test_version_and_log_level(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--version"])
    assert caught.value.code == 0
    assert capsys.readouterr().out.startswith("kraft ")
    assert main(["--log-level", "verbose", "random-uuid"]) == 2
    err = capsys.readouterr().err
    assert "--log-level: expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL" in err
    assert "Traceback" not in err
    assert main(["--log-level", "debug", "random-uuid"]) == 0


def test_replay_without_java_is_one_line_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from pyspark.sql import SparkSession

    # An earlier replay test in this process may have left its session active (and a
    # running JVM needs no Java check): this is a fresh process's view.
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert java_problem() == "no java on the PATH and JAVA_HOME is not set"
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert "is not an executable" in (java_problem() or "")
    assert _format(tmp_path / "n1") == 0
    capsys.readouterr()
    assert main(["replay", "--logs", str(tmp_path / "n1")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: kraft replay needs Java 17 for Spark")
    assert err.count("\n") == 1
