"""`kraft quorum snapshot` output and request name (tools.commands.quorum_snapshot); the
command against real processes is in tests/integration/test_snapshots.py."""

from __future__ import annotations

from metadata.snapshot_writer import WRITE_SNAPSHOT_API
from tools.commands import quorum_snapshot


def test_the_command_asks_for_the_api_the_nodes_serve() -> None:
    """The name is copied, not imported (the writer's module loads trio)."""
    assert quorum_snapshot.WRITE_SNAPSHOT_API == WRITE_SNAPSHOT_API


def test_one_line_names_node_file_offsets_size_and_time() -> None:
    answer = {"node_id": 2, "file": "00000000000000000042-0000000003.checkpoint",
              "end_offset": 42, "epoch": 3, "size_bytes": 5120, "elapsed_ms": 12.34,
              "created": True}
    assert quorum_snapshot.line(answer) == (
        "node 2  00000000000000000042-0000000003.checkpoint  end offset 42  epoch 3  "
        "5120 bytes  12.3 ms")
    assert quorum_snapshot.line({**answer, "created": False}).endswith("12.3 ms  (existing)")


def test_a_failed_node_is_one_line_with_its_error() -> None:
    assert quorum_snapshot.line({"node_id": 4, "error": "not running"}) == \
        "node 4  error: not running"
