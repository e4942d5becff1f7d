"""`tools/metadata_shell/source.py`: a node's log in a cluster directory (written with the
real DiskLog; nothing is started) replayed into the image the shell shows."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from metadata import records as rec
from raft.common.uuid import Uuid
from raft.log import METADATA_PARTITION_DIR, DiskLog
from raft.segment import list_segments
from raft.storage import write_high_watermark_checkpoint
from tools.cluster import Cluster
from tools.errors import CommandError
from tools.metadata_shell.source import load_node_image

ORDERS = Uuid.from_string("fmja9INwQxClI4eKGWbfrQ")
PENDING = Uuid.from_string("vS74fSS5RByP4NQw-tYbkQ")


def write_log(data_dir: str, *, committed_end: int | None) -> Path:
    """Offsets 0-2 in epoch 1 (LeaderChange, Topic orders, its partition), then offset 3
    in epoch 2 (Topic pending); the checkpoint, if any, says where the committed ones end."""
    with DiskLog.open_metadata_log(data_dir) as log:
        log.append(1, [rec.LeaderChange(leader_id=1, voters=(1, 2, 3)).encode(),
                       rec.Topic(name="orders", topic_id=ORDERS).encode(),
                       rec.Partition(topic_id=ORDERS, partition=0, replicas=(4,), isr=(4,),
                                     leader=4).encode()])
        log.append(2, [rec.Topic(name="pending", topic_id=PENDING).encode()])
        log.flush()
        if committed_end is not None:
            write_high_watermark_checkpoint(log.directory, committed_end)
        return log.directory


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    return Cluster.create(tmp_path / "cluster", voters=3, brokers=1)


def test_replays_up_to_the_high_watermark_checkpoint(cluster: Cluster) -> None:
    write_log(cluster.node(1).data_dir, committed_end=3)
    loaded = load_node_image(cluster.directory, None)
    assert sorted(loaded.image.topic_ids_by_name) == ["orders"]  # offset 3 is not committed
    assert (loaded.provenance.offset, loaded.provenance.epoch) == (2, 1)
    assert loaded.header.startswith("node 1 (voter): replayed the committed records")
    assert "high-watermark checkpoint 3 (log end 4)" in loaded.header
    assert loaded.warnings == ()


def test_replays_the_whole_log_without_a_checkpoint_and_says_so(cluster: Cluster) -> None:
    write_log(cluster.node(1).data_dir, committed_end=None)
    loaded = load_node_image(cluster.directory, None)
    assert sorted(loaded.image.topic_ids_by_name) == ["orders", "pending"]
    assert (loaded.provenance.offset, loaded.provenance.epoch) == (3, 2)
    assert "replayed the whole log" in loaded.header
    assert "no high-watermark checkpoint" in loaded.header


def test_a_checkpoint_past_the_log_end_replays_the_whole_log(cluster: Cluster) -> None:
    write_log(cluster.node(1).data_dir, committed_end=9)
    loaded = load_node_image(cluster.directory, None)
    assert loaded.image.last_applied_offset == 3
    assert "checkpoint 9 is past the log end" in loaded.header


def test_node_picks_the_log_and_a_node_that_never_ran_is_empty(cluster: Cluster) -> None:
    write_log(cluster.node(1).data_dir, committed_end=3)
    loaded = load_node_image(cluster.directory, 4)
    assert loaded.image.last_applied_offset == -1
    assert (loaded.provenance.offset, loaded.provenance.epoch) == (-1, -1)
    assert loaded.header.startswith("node 4 (observer): replayed the whole log, offsets below 0")


def test_torn_tail_is_left_out_with_a_warning(cluster: Cluster) -> None:
    partition_dir = write_log(cluster.node(1).data_dir, committed_end=None)
    [segment] = list_segments(partition_dir)
    segment.write_bytes(segment.read_bytes()[:-3])
    loaded = load_node_image(cluster.directory, 1)
    assert loaded.image.last_applied_offset == 2
    [warning] = loaded.warnings
    assert warning.startswith(f"warning: {segment}: torn tail at byte offset ")


def test_moved_cluster_directory_is_read_where_it_now_is(cluster: Cluster,
                                                         tmp_path: Path) -> None:
    write_log(cluster.node(1).data_dir, committed_end=3)
    moved = tmp_path / "moved"
    shutil.move(cluster.directory, moved)  # cluster.json still names the old paths
    assert sorted(load_node_image(moved, None).image.topic_ids_by_name) == ["orders"]


def test_bad_input_is_one_message_with_exit_code_2(cluster: Cluster, tmp_path: Path) -> None:
    cases = [(tmp_path / "absent", None, "no such cluster directory"),
             (tmp_path, None, "no cluster.json"),
             (cluster.directory, 9, "no node 9 in")]
    for directory, node, message in cases:
        with pytest.raises(CommandError, match=message) as caught:
            load_node_image(directory, node)
        assert caught.value.exit_code == 2


def test_corrupt_log_names_file_and_byte_offset_with_exit_code_2(cluster: Cluster) -> None:
    partition_dir = write_log(cluster.node(1).data_dir, committed_end=3)
    assert partition_dir.name == METADATA_PARTITION_DIR
    [segment] = list_segments(partition_dir)
    data = bytearray(segment.read_bytes())
    data[30] ^= 0x40  # inside the first batch, with a whole batch after it
    segment.write_bytes(bytes(data))
    expected = re.escape(f"{segment}: corrupt log at byte offset 0")
    with pytest.raises(CommandError, match=expected) as caught:
        load_node_image(cluster.directory, None)
    assert caught.value.exit_code == 2
