"""`kraft node` on a damaged log directory (hostile input): a corrupt batch in the
middle of the metadata log is a one-line start-up error naming the segment file and the
byte offset, exit 2, no traceback; a torn tail alone is cut off and the node starts. A
quorum-state written under another voter set is a one-line start-up error, exit 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from raft.log import DiskLog
from raft.segment import encode_batch
from raft.storage import QUORUM_STATE, write_quorum_state
from raft.types import ElectionState
from tests.support.quorum_support import FAST_SETTINGS
from tools.cluster import Cluster


def write_log(data_dir: str, batches: int) -> tuple[Path, list[int]]:
    """`batches` one-record batches in the metadata log; its segment and batch positions."""
    positions = []
    with DiskLog.open_metadata_log(data_dir) as disk_log:
        position = 0
        for i in range(batches):
            batch = disk_log.append(1, [f"record-{i}".encode() * 4])
            positions.append(position)
            position += len(encode_batch(batch))
        disk_log.flush()
        [segment] = disk_log.segment_paths
    return segment, positions


def start_node(config: str) -> subprocess.CompletedProcess[str]:
    """Runs `kraft node` in the foreground: it must exit by itself (bounded)."""
    return subprocess.run([sys.executable, "-m", "tools.cli", "node", "--config", config],
                          capture_output=True, text=True, timeout=30)


def test_corrupt_batch_in_the_middle_of_the_log_is_one_error_line(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path / "cluster", voters=1, settings=FAST_SETTINGS)
    node = cluster.node(1)
    segment, positions = write_log(node.data_dir, 10)
    damaged = positions[4]
    with segment.open("r+b") as f:  # flip a byte in the records of batch 4 of 10
        f.seek(positions[5] - 3)
        byte = f.read(1)
        f.seek(positions[5] - 3)
        f.write(bytes([byte[0] ^ 0xFF]))

    size = segment.stat().st_size
    result = start_node(node.config)

    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert str(segment) in lines[0]
    assert f"byte offset {damaged}" in lines[0]
    assert segment.stat().st_size == size  # a corrupt log is never truncated


def test_torn_tail_is_cut_off_and_the_node_starts(tmp_path: Path) -> None:
    """The contrast: damage in the last batch only is a torn write, recovered silently."""
    cluster = Cluster.create(tmp_path / "cluster", voters=1, settings=FAST_SETTINGS)
    node = cluster.node(1)
    segment, positions = write_log(node.data_dir, 5)
    with segment.open("r+b") as f:
        f.truncate(segment.stat().st_size - 3)
    try:
        cluster.start()
        cluster.wait_for_leader(15)
        assert cluster.is_running(1)
    finally:
        cluster.kill_all_started()
    with DiskLog.open_metadata_log(node.data_dir) as disk_log:
        records = [r for b in disk_log.read(0, 1 << 30) for r in b.records]
    assert [f"record-{i}".encode() * 4 for i in range(4)] == records[:4]


def test_quorum_state_of_another_voter_set_is_one_error_line(tmp_path: Path) -> None:
    """The quorum is static: a node whose quorum-state names other voters than its
    configuration refuses to start, naming both sets and the file, and leaves the file."""
    cluster = Cluster.create(tmp_path / "cluster", voters=1, settings=FAST_SETTINGS)
    node = cluster.node(1)
    state_file = Path(node.data_dir) / QUORUM_STATE
    write_quorum_state(node.data_dir, ElectionState(epoch=5, leader_id=2, voters=(1, 2, 3)))
    content = state_file.read_bytes()

    result = start_node(node.config)

    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [f"error: configured voter set [1] is different from the voter set "
                     f"[1, 2, 3] read from the state file {state_file}; check that "
                     "controller.quorum.voters is up to date"], result.stderr
    assert state_file.read_bytes() == content
