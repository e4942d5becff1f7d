"""Multi-process: snapshots on a cluster of 3 voters and 1 broker on 127.0.0.1 with a tiny
`metadata.log.max.record.bytes.between.snapshots`. Every node writes snapshots while
topics are created, each whole and equal to the replay of that node's log up to its end
offset; `kraft quorum snapshot` writes one now; a node whose newest snapshot is corrupt
restarts from an older one (a WARNING naming the file) and reaches the controller's
image; with no valid snapshot it exits non-zero naming the files.

One cluster serves the module (starting one costs seconds); every test leaves it running
with every node up. Only processes the cluster object started are killed, by PID."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from raft.snapshot import list_snapshots, read_snapshot
from raft.storage import read_high_watermark_checkpoint
from tests.support.quorum_support import (
    FAST_SETTINGS,
    create_topic_with,
    kraft,
    log_events,
    running_cluster,
    wait_until,
)
from tests.support.snapshot_support import (
    corrupt,
    image_of,
    log_records,
    partition_dir,
    replayed,
)
from tools.admin_client import AdminClient
from tools.cluster import Cluster
from tools.commands.quorum_snapshot import request_snapshot

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SETTINGS = {**FAST_SETTINGS, "metadata.log.max.record.bytes.between.snapshots": 600,
            "broker.heartbeat.interval.ms": 200, "broker.session.timeout.ms": 1500}
BROKER = 4
LINE = re.compile(r"node (\d+)  (\d{20}-\d{10}\.checkpoint)  end offset (\d+)  epoch (\d+)  "
                  r"(\d+) bytes  \d+\.\d ms(  \(existing\))?")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("snapshots") / "cluster", SETTINGS) as cluster:
        yield cluster


def create_topics(cluster: Cluster, names: list[str]) -> None:
    admin = AdminClient(cluster.controller_addresses(), cluster_id=cluster.cluster_id)
    for name in names:
        create_topic_with(admin, name, 2, 1)


def create_until(cluster: Cluster, condition: Callable[[], bool], what: str,
                 prefix: str) -> None:
    """Create topics until `condition` holds (bounded). Snapshots are counted, not
    timed: a slow disk lets one write cover several intervals."""
    deadline, topic = time.monotonic() + 30, 0
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        create_topics(cluster, [f"{prefix}-{topic}"])
        topic += 1


def snapshots_of(cluster: Cluster, node_id: int) -> list[Path]:
    """The node's snapshot files, newest first."""
    return [f.path for f in list_snapshots(partition_dir(cluster.node(node_id).data_dir))]


def leader_dir(cluster: Cluster) -> Path:
    return partition_dir(cluster.node(cluster.describe()["leader_id"]).data_dir)


def test_every_node_writes_snapshots_that_replay_like_its_log_while_topics_are_created(
        cluster: Cluster) -> None:
    before = {n: len(snapshots_of(cluster, n)) for n in cluster.nodes}

    def every_node_wrote_three() -> bool:
        return all(len(snapshots_of(cluster, n)) >= before[n] + 3 for n in cluster.nodes)

    create_until(cluster, every_node_wrote_three, "every node to write 3 more snapshots",
                 "churn")
    for node_id in cluster.nodes:
        directory = partition_dir(cluster.node(node_id).data_dir)
        epochs = {o: e for o, e, _ in log_records(directory)}
        checkpoint = read_high_watermark_checkpoint(directory)
        assert checkpoint is not None
        for path in snapshots_of(cluster, node_id):
            snapshot = read_snapshot(path)  # whole: every CRC, the header, the footer
            end = snapshot.snapshot_id.end_offset
            assert end <= checkpoint, f"{path} ends above the checkpoint {checkpoint}"
            assert snapshot.snapshot_id.epoch == epochs[end - 1]
            assert image_of(path).content_hash() == replayed(directory, end).content_hash()


def test_quorum_snapshot_writes_one_now_on_every_node(cluster: Cluster) -> None:
    newest_before = {n: snapshots_of(cluster, n)[:1] for n in cluster.nodes}
    last = cluster.append(1)["last_offset"]  # the leader's image holds it once answered
    result = kraft("quorum", "snapshot", "--cluster", str(cluster.directory), "--json")
    assert result.returncode == 0, result.stderr
    answers = {a["node_id"]: a for a in json.loads(result.stdout)}
    assert sorted(answers) == sorted(cluster.nodes)
    for node_id, answer in answers.items():
        path = Path(answer["path"])
        assert path.parent == partition_dir(cluster.node(node_id).data_dir)
        snapshot = read_snapshot(path)
        assert (snapshot.snapshot_id.end_offset, snapshot.snapshot_id.epoch,
                path.stat().st_size) == (answer["end_offset"], answer["epoch"],
                                         answer["size_bytes"])
        assert [path] != newest_before[node_id] or not answer["created"]
    leader = cluster.describe()["leader_id"]
    assert answers[leader]["end_offset"] > last

    text = kraft("quorum", "snapshot", "--cluster", str(cluster.directory), "--node", "2")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert len(lines) == 1
    match = LINE.fullmatch(lines[0])
    assert match is not None, lines[0]
    assert match[1] == "2"
    assert (partition_dir(cluster.node(2).data_dir) / match[2]).exists()


def follower(cluster: Cluster) -> int:
    return next(n for n in cluster.voter_ids if n != cluster.describe()["leader_id"])


@pytest.mark.parametrize("which", ["broker", "voter"])
def test_node_restarts_from_an_older_snapshot_when_its_newest_is_corrupt(
        cluster: Cluster, which: str) -> None:
    node_id = BROKER if which == "broker" else follower(cluster)
    create_until(cluster, lambda: len(snapshots_of(cluster, node_id)) >= 2,
                 f"node {node_id} to hold two snapshots", f"{which}-before")
    cluster.stop_node(node_id)
    newest, older = snapshots_of(cluster, node_id)[:2]
    corrupt(newest)
    cluster.start_node(node_id)

    def started_from_older() -> list[dict[str, Any]]:
        return [e for e in log_events(cluster, node_id)
                if e.get("msg") == "loaded snapshot" and e.get("file") == str(older)]
    wait_until(started_from_older, 20, f"node {node_id} to load {older.name}")
    assert cluster.is_running(node_id)
    warnings = [e["msg"] for e in log_events(cluster, node_id) if e.get("level") == "WARNING"]
    assert any(str(newest) in w and "bad snapshot" in w for w in warnings), warnings

    cluster.wait_for_brokers(20)  # a restarted broker registers again
    create_topics(cluster, [f"{which}-after"])  # the restarted node replays this too
    if which == "broker":
        status = wait_until(lambda: hosting(cluster, "broker-after"), 20,
                            "the broker to apply the new topic")
        offset, image_hash = status["applied_offset"], status["image_hash"]
    else:
        answer = wait_until(lambda: snapshot_holding(cluster, node_id, "voter-after"), 20,
                            f"node {node_id} to apply the new topic")
        offset, image_hash = answer["end_offset"] - 1, image_of(answer["path"]).content_hash()
    assert image_hash == replayed(leader_dir(cluster), offset + 1).content_hash()


def hosting(cluster: Cluster, topic: str) -> dict[str, Any] | None:
    """The broker's status once it hosts `topic`."""
    status = cluster.broker_status(BROKER)
    hosted = {h["topic"] for h in status["hosted"]} if status else set()
    return status if topic in hosted else None


def snapshot_holding(cluster: Cluster, node_id: int, topic: str) -> dict[str, Any] | None:
    """The node's answer to WriteSnapshot once its image holds `topic`."""
    answer = request_snapshot(cluster, cluster.node(node_id), 10.0)
    if "error" in answer or image_of(Path(answer["path"])).topic_by_name(topic) is None:
        return None
    return answer


def test_node_without_a_valid_snapshot_exits_naming_the_files(cluster: Cluster) -> None:
    create_until(cluster, lambda: len(snapshots_of(cluster, BROKER)) >= 2,
                 "two broker snapshots", "exit")
    cluster.stop_node(BROKER)
    paths = snapshots_of(cluster, BROKER)
    for path in paths:
        corrupt(path)
    pid = cluster.start_node(BROKER)
    wait_until(lambda: not cluster.is_running(BROKER), 20, "the broker to exit")
    assert cluster.exit_codes[pid] == 2
    errors = [line for line in cluster.node(BROKER).log_path.read_text().splitlines()
              if line.startswith("error: cannot start: ")]
    assert len(errors) == 1
    for path in paths:
        assert str(path) in errors[0]
    for path in paths:  # a full replay of its log brings the node back
        path.unlink()
    cluster.start_node(BROKER)
    wait_until(lambda: cluster.broker_status(BROKER), 20, "the broker to answer again")
