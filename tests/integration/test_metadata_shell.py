"""`kraft metadata-shell` through the real CLI, in a subprocess, on a cluster directory
made by `Cluster.create` (nothing started) whose node-1 log is written with DiskLog, and
on a checkpoint file written with raft.snapshot's writer: one-shot commands, a piped
session, and the errors' exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from metadata import records as rec
from raft.common.uuid import Uuid
from raft.log import DiskLog
from raft.segment import list_segments
from raft.storage import write_high_watermark_checkpoint
from tests.support.checkpoints import flip_byte, write_checkpoint_of_log
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

ORDERS = Uuid.from_string("fmja9INwQxClI4eKGWbfrQ")
INCARNATION = Uuid.from_string("AIoFpsRkQVmDJMmFm4EOdg")


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Broker 4 registered and unfenced, `orders` with two partitions (offsets 0-5,
    committed), then an uncommitted `pending` topic at offset 6."""
    cluster = Cluster.create(tmp_path_factory.mktemp("shell") / "cluster", voters=3,
                             brokers=1)
    with DiskLog.open_metadata_log(cluster.node(1).data_dir) as log:
        log.append(1, [rec.LeaderChange(leader_id=1, voters=(1, 2, 3)).encode(),
                       rec.RegisterBroker(broker_id=4, incarnation_id=INCARNATION,
                                          broker_epoch=1).encode(),
                       rec.UnfenceBroker(broker_id=4, broker_epoch=1).encode()])
        log.append(2, [rec.Topic(name="orders", topic_id=ORDERS).encode(),
                       *(rec.Partition(topic_id=ORDERS, partition=p, replicas=(4,), isr=(4,),
                                       leader=4).encode() for p in (0, 1))])
        log.append(3, [rec.Topic(name="pending", topic_id=Uuid.random()).encode()])
        log.flush()
        write_high_watermark_checkpoint(log.directory, 6)
    return cluster.directory


def shell(source: Path, *args: str, stdin: str | None = None, snapshot: bool = False
          ) -> subprocess.CompletedProcess[str]:
    """`kraft metadata-shell` on a cluster directory, or (`snapshot`) a checkpoint file."""
    return subprocess.run([sys.executable, "-m", "tools.cli", "metadata-shell",
                           "--snapshot" if snapshot else "--cluster", str(source), *args],
                          input=stdin, capture_output=True, text=True, timeout=60)


def test_one_shot_cat_prints_the_committed_partition_as_json(cluster_dir: Path) -> None:
    result = shell(cluster_dir, "--", "cat", "/image/topics/byName/orders/1")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "partition": 1, "replicas": [4], "isr": [4], "leader": 4, "leader_epoch": 0,
        "partition_epoch": 0, "leader_epoch_after_creation": None,
        "leader_epoch_before_deletion": None}
    assert result.stderr.splitlines() == [
        "node 1 (voter): replayed the committed records, offsets below the high-watermark "
        "checkpoint 6 (log end 7); image at offset 5, epoch 2"]


def test_piped_session_runs_each_line_without_a_prompt(cluster_dir: Path) -> None:
    script = ("ls /image/topics/byName\ncd /image/cluster/brokers\nls\ncat 4 nope\n"
              f"cd ../../topics/byId/{ORDERS}\npwd\ncat name\ncat /image/provenance\n")
    result = shell(cluster_dir, stdin=script)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["orders", "4"]  # `pending` is past the committed end
    broker_end = lines.index("}")
    assert json.loads("\n".join(lines[2:broker_end + 1]))["fenced"] is False
    assert lines[broker_end + 1:broker_end + 3] == [f"/image/topics/byId/{ORDERS}", "orders"]
    assert json.loads("\n".join(lines[broker_end + 3:])) == {"offset": 5, "epoch": 2}
    assert result.stderr.splitlines()[1:] == ["cat: nope: no such file or directory"]


def test_one_shot_unknown_path_exits_1_with_one_error_line(cluster_dir: Path) -> None:
    result = shell(cluster_dir, "--", "ls", "/image/topics/byName/pending")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines()[1:] == [
        "ls: /image/topics/byName/pending: no such file or directory"]


def test_unknown_node_and_missing_cluster_exit_2_with_one_line(cluster_dir: Path,
                                                               tmp_path: Path) -> None:
    for result in (shell(cluster_dir, "--node", "9", "--", "pwd"),
                   shell(tmp_path / "absent", "--", "pwd")):
        assert result.returncode == 2
        assert result.stdout == ""
        [line] = result.stderr.splitlines()
        assert line.startswith("error: ")


def test_corrupt_log_exits_2_naming_the_segment(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path / "cluster", voters=1)
    with DiskLog.open_metadata_log(cluster.node(1).data_dir) as log:
        for epoch in (1, 2):
            log.append(epoch, [rec.NoOp().encode()])
        log.flush()
        [segment] = list_segments(log.directory)
    data = bytearray(segment.read_bytes())
    data[len(data) // 2 - 1] ^= 0xFF  # the first of two equal batches: a whole one follows
    segment.write_bytes(bytes(data))
    result = shell(cluster.directory, "--", "pwd")
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {segment}: corrupt log at byte offset 0")


# --- --snapshot: a checkpoint file (tests/support/checkpoints.py) instead of a node's log


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The snapshot of tests/support/checkpoints.py's log below offset 6: broker 4 and
    `orders` with two partitions, in epoch 2."""
    return write_checkpoint_of_log(tmp_path_factory.mktemp("snapshot"), 6)


def test_snapshot_one_shot_shows_its_provenance_end_offset_minus_1(checkpoint: Path) -> None:
    result = shell(checkpoint, "--", "cat", "/image/provenance", snapshot=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"offset": 5, "epoch": 2}
    assert result.stderr.splitlines() == [
        f"snapshot {checkpoint}: the state of the log below offset 6, in 5 records; "
        "image at offset 5, epoch 2"]


def test_snapshot_piped_session_browses_its_image(checkpoint: Path) -> None:
    result = shell(checkpoint, snapshot=True, stdin="ls /image/topics/byName\n"
                   "cd /image/topics/byName/orders\nls\ncat 1\n")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:5] == ["orders", "id", "name", "0", "1"]
    assert json.loads("\n".join(lines[5:]))["partition"] == 1


def test_corrupt_snapshot_exits_2_with_one_line_and_no_shell(checkpoint: Path,
                                                             tmp_path: Path) -> None:
    damaged = tmp_path / checkpoint.name
    damaged.write_bytes(checkpoint.read_bytes())
    flip_byte(damaged, damaged.stat().st_size - 3)  # in the footer batch
    result = shell(damaged, stdin="ls /\n", snapshot=True)
    assert (result.returncode, result.stdout) == (2, "")
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {damaged}: bad snapshot at byte offset ")
    assert "CRC mismatch" in line


def test_snapshot_with_node_or_cluster_is_a_usage_error(checkpoint: Path,
                                                        cluster_dir: Path) -> None:
    for extra in (["--node", "1"], ["--cluster", str(cluster_dir)]):
        result = shell(checkpoint, *extra, "--", "pwd", snapshot=True)
        assert (result.returncode, result.stdout) == (2, "")
        assert "error: " in result.stderr
