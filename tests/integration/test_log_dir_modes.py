"""Multi-process: every file a node's log directory holds is its user's alone (0o600, its
directories 0o700), whatever the umask. `kraft format` with bootstrap users, then a
cluster of 3 voters and 2 brokers on 127.0.0.1 that creates a topic, takes produced
records, writes snapshots and stops gracefully (its last checkpoints); then every log
directory is walked.

The processes run under umask 0o022, as many hosts have it, so a file created with the
default mode would be readable by group and others and the test would see it. Only
processes the cluster object started are killed, by PID."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from broker.kafka.partitions.partition_log import LOG_FILE as PARTITION_LOG_FILE
from raft.common.uuid import Uuid
from tests.support.quorum_support import FAST_SETTINGS, kraft, running_cluster, wait_until

PERMISSIVE_UMASK = 0o022


@contextmanager
def permissive_umask() -> Iterator[None]:
    """The umask the processes started inside inherit."""
    old = os.umask(PERMISSIVE_UMASK)
    try:
        yield
    finally:
        os.umask(old)


def shared_entries(log_dir: Path) -> list[str]:
    """Every file or directory under `log_dir` (itself included) that group or others
    may read, write or enter, with its mode."""
    found = []
    for path in [log_dir, *log_dir.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & 0o077:
            found.append(f"{path.relative_to(log_dir.parent)} {mode:#o}")
    return found


def names_under(log_dir: Path) -> set[str]:
    """The kinds of file present: by suffix for names that start with an offset (a
    segment, a snapshot, a producer-state snapshot), else by name."""
    return {path.suffix if path.name[0].isdigit() else path.name
            for path in log_dir.rglob("*") if path.is_file()}


def test_kraft_format_creates_a_private_log_dir_when_the_umask_is_permissive(
        tmp_path: Path) -> None:
    log_dir = tmp_path / "node-1"
    with permissive_umask():
        formatted = kraft("format", "--dir", str(log_dir), "--node-id", "1",
                          "--cluster-id", str(Uuid.random()), "--initial-controllers",
                          f"1@127.0.0.1:19999:{Uuid.random()}", "--add-scram",
                          "SCRAM-SHA-256=[name=alice,password=alice-secret]")
    assert formatted.returncode == 0, formatted.stderr
    assert {"meta.properties", "bootstrap.records", ".log", ".checkpoint"} <= \
        names_under(log_dir)
    assert shared_entries(log_dir) == []


def test_every_node_log_dir_is_private_after_a_run_when_the_umask_is_permissive(
        tmp_path: Path) -> None:
    settings = {**FAST_SETTINGS, "metadata.log.max.record.bytes.between.snapshots": 512}
    with permissive_umask(), running_cluster(tmp_path / "cluster", settings, voters=3,
                                             brokers=2) as cluster:
        created = kraft("topics", "--cluster", str(cluster.directory), "--create",
                        "--topic", "orders", "--partitions", "2", "--replication-factor", "2")
        assert created.returncode == 0, created.stderr
        brokers = [n for n in cluster.nodes.values() if not n.is_voter]
        bootstrap = ",".join(str(n.client_address) for n in brokers)
        for partition in (0, 1):
            produced = kraft("produce", "--bootstrap-server", bootstrap, "--topic", "orders",
                             "--partition", str(partition), "--acks", "all", "--json",
                             "one", "two", "three")
            assert produced.returncode == 0, produced.stderr
        snapshot = kraft("quorum", "snapshot", "--cluster", str(cluster.directory), "--json")
        assert snapshot.returncode == 0, snapshot.stderr
        assert all(a["path"] for a in json.loads(snapshot.stdout))
        for broker in brokers:  # its image checkpoint is written once it has applied
            wait_until(lambda b=broker: (Path(b.data_dir) / "metadata-image.checkpoint")
                       .exists(), 20, f"broker {broker.id}'s metadata-image.checkpoint")
        assert cluster.stop() == []  # graceful: every node writes its last checkpoints

    for node in cluster.nodes.values():
        log_dir = Path(node.data_dir)
        kinds = names_under(log_dir)
        expected = {"meta.properties", ".lock", "quorum-state", "high-watermark-checkpoint",
                    ".log", ".checkpoint"}
        if not node.is_voter:
            expected |= {"partition.metadata", "metadata-image.checkpoint",
                         ".producer-snapshot"}
            assert list(log_dir.glob(f"orders-*/{PARTITION_LOG_FILE}")), node.id
        assert expected <= kinds, (node.id, sorted(kinds))
        assert shared_entries(log_dir) == [], node.id
