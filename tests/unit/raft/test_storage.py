"""raft.storage: quorum-state written atomically, meta.properties, formatted-dir checks."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from raft.storage import (
    HIGH_WATERMARK_CHECKPOINT,
    META_PROPERTIES,
    QUORUM_STATE,
    MetaProperties,
    StorageError,
    check_quorum_state_voters,
    format_log_dir,
    open_log_dir,
    read_high_watermark_checkpoint,
    read_meta_properties,
    read_quorum_state,
    write_high_watermark_checkpoint,
    write_quorum_state,
)
from raft.types import ElectionState

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def test_quorum_state_round_trips_when_written_and_read(tmp_path: Path) -> None:
    """KIP-595 quorum-state: what was persisted is what a restarted node reads."""
    state = ElectionState(epoch=7, leader_id=2, voted_id=2, voters=(1, 2, 3))
    write_quorum_state(tmp_path, state)
    assert read_quorum_state(tmp_path) == state
    write_quorum_state(tmp_path, ElectionState(epoch=8))
    assert read_quorum_state(tmp_path) == ElectionState(epoch=8)
    assert [p.name for p in tmp_path.iterdir()] == [QUORUM_STATE]  # no temp file left


def test_quorum_state_is_none_when_file_is_missing(tmp_path: Path) -> None:
    """A node that never voted starts Unattached at epoch 0."""
    assert read_quorum_state(tmp_path) is None


@pytest.mark.parametrize("content", ["{\"epoch\": ", "[1, 2]", "{\"leader_id\": 1}",
                                     "{\"epoch\": \"x\"}"])
def test_quorum_state_read_fails_clearly_when_file_is_corrupt(tmp_path: Path,
                                                              content: str) -> None:
    """A damaged quorum-state is an error naming the file, never a silent epoch 0."""
    (tmp_path / QUORUM_STATE).write_text(content)
    with pytest.raises(StorageError, match="corrupt quorum-state"):
        read_quorum_state(tmp_path)


def test_quorum_state_read_fails_naming_both_sets_when_voters_differ(tmp_path: Path) -> None:
    """A static quorum: a state file written under another voter set refuses the start,
    in one message naming the configured set, the persisted set and the file."""
    write_quorum_state(tmp_path, ElectionState(epoch=4, leader_id=2, voters=(1, 2)))
    with pytest.raises(StorageError) as raised:
        read_quorum_state(tmp_path, voters={3: ("h", 1), 1: ("h", 2), 2: ("h", 3)})
    message = str(raised.value)
    assert message == (f"configured voter set [1, 2, 3] is different from the voter set "
                       f"[1, 2] read from the state file {tmp_path / QUORUM_STATE}; "
                       "check that controller.quorum.voters is up to date")
    assert "\n" not in message


@pytest.mark.parametrize("content", [
    "{\"epoch\": 4, \"leader_id\": 2, \"voted_id\": null, \"voters\": [3, 1, 2]}",
    "{\"epoch\": 4, \"leader_id\": 2, \"voted_id\": null, \"voters\": []}",
    "{\"epoch\": 4, \"leader_id\": 2, \"voted_id\": null}",  # no voters recorded
])
def test_quorum_state_read_passes_when_voters_match_or_are_not_recorded(
        tmp_path: Path, content: str) -> None:
    """The order of the ids does not matter; a state file without voters is accepted."""
    (tmp_path / QUORUM_STATE).write_text(content)
    state = read_quorum_state(tmp_path, voters=[1, 2, 3])
    assert state is not None
    assert (state.epoch, state.leader_id) == (4, 2)


def test_quorum_state_voters_check_passes_when_file_is_missing(tmp_path: Path) -> None:
    """A fresh node has no quorum-state to disagree with."""
    assert read_quorum_state(tmp_path, voters=[1, 2, 3]) is None


def test_quorum_state_voters_check_reports_sets_not_order_or_duplicates() -> None:
    state = ElectionState(epoch=1, voters=(2, 1))
    check_quorum_state_voters(state, (1, 2), "qs")
    with pytest.raises(StorageError, match=r"configured voter set \[1\] is different from "
                                           r"the voter set \[1, 2\] read from the state "
                                           r"file qs;"):
        check_quorum_state_voters(state, (1, 1), "qs")


def test_quorum_state_keeps_old_content_when_temp_file_was_left_by_crash(
        tmp_path: Path) -> None:
    """Atomic replace: a half-written temp file from a crash does not affect the state."""
    write_quorum_state(tmp_path, ElectionState(epoch=3, voted_id=1))
    (tmp_path / (QUORUM_STATE + ".tmp")).write_text("{\"ep")
    assert read_quorum_state(tmp_path) == ElectionState(epoch=3, voted_id=1)


def test_meta_properties_are_kafka_style_lines_when_formatted(tmp_path: Path) -> None:
    """meta.properties holds version, cluster.id, node.id and (KIP-853) a directory.id
    new on every format as key=value lines."""
    assert format_log_dir(tmp_path / "n1", cluster_id=CLUSTER, node_id=1)
    assert format_log_dir(tmp_path / "n2", cluster_id=CLUSTER, node_id=1)
    lines = (tmp_path / "n1" / META_PROPERTIES).read_text().splitlines()
    assert {"version=1", f"cluster.id={CLUSTER}", "node.id=1"} <= set(lines)
    meta = read_meta_properties(tmp_path / "n1")
    assert meta is not None
    assert meta == MetaProperties(cluster_id=CLUSTER, node_id=1,
                                  directory_id=meta.directory_id)
    assert f"directory.id={meta.directory_id}" in lines
    other = read_meta_properties(tmp_path / "n2")
    assert other is not None
    assert other.directory_id not in (None, meta.directory_id)


def test_format_refuses_when_dir_is_formatted_for_another_cluster_or_node(
        tmp_path: Path) -> None:
    """kafka-storage format: never reformat a directory that belongs to another node."""
    format_log_dir(tmp_path, cluster_id=CLUSTER, node_id=1)
    with pytest.raises(StorageError, match="already formatted for cluster"):
        format_log_dir(tmp_path, cluster_id="other", node_id=1, ignore_formatted=True)
    with pytest.raises(StorageError, match="node 1, not cluster"):
        format_log_dir(tmp_path, cluster_id=CLUSTER, node_id=2, ignore_formatted=True)
    with pytest.raises(StorageError, match="--ignore-formatted"):
        format_log_dir(tmp_path, cluster_id=CLUSTER, node_id=1)
    assert not format_log_dir(tmp_path, cluster_id=CLUSTER, node_id=1, ignore_formatted=True)


def test_open_log_dir_fails_when_unformatted_or_missing(tmp_path: Path) -> None:
    """A node refuses to start on a directory `kraft format` never prepared."""
    with pytest.raises(StorageError, match="does not exist"):
        open_log_dir(tmp_path / "absent")
    with pytest.raises(StorageError, match="not formatted"):
        open_log_dir(tmp_path)


def test_open_log_dir_fails_when_cluster_or_node_differs(tmp_path: Path) -> None:
    """A directory formatted for another cluster or node is never used (KIP-631 style)."""
    format_log_dir(tmp_path, cluster_id=CLUSTER, node_id=3)
    assert open_log_dir(tmp_path, CLUSTER, 3).node_id == 3
    with pytest.raises(StorageError, match="formatted for cluster"):
        open_log_dir(tmp_path, cluster_id="another", node_id=3)
    with pytest.raises(StorageError, match="formatted for node 3"):
        open_log_dir(tmp_path, cluster_id=CLUSTER, node_id=4)


@pytest.mark.parametrize(("text", "error"), [
    ("version=1\nnode.id=1\n", "missing cluster.id"),
    ("version=1\ncluster.id=x\nnode.id=one\n", "invalid literal"),
    ("version=2\ncluster.id=x\nnode.id=1\n", "unsupported version"),
    ("version=1\ngarbage\n", "expected key=value"),
])
def test_meta_properties_read_fails_clearly_when_content_is_bad(
        tmp_path: Path, text: str, error: str) -> None:
    """A damaged meta.properties is reported with the file name and the reason."""
    (tmp_path / META_PROPERTIES).write_text(text)
    with pytest.raises(StorageError, match=error) as info:
        read_meta_properties(tmp_path)
    assert META_PROPERTIES in str(info.value)


def test_high_watermark_checkpoint_round_trips_when_written_and_read(tmp_path: Path) -> None:
    """The high-watermark checkpoint: the offset written is the offset read, as text."""
    assert read_high_watermark_checkpoint(tmp_path) is None
    write_high_watermark_checkpoint(tmp_path, 42)
    assert read_high_watermark_checkpoint(tmp_path) == 42
    assert (tmp_path / HIGH_WATERMARK_CHECKPOINT).read_text() == "version: 0\noffset: 42\n"
    write_high_watermark_checkpoint(tmp_path, 43)
    assert read_high_watermark_checkpoint(tmp_path) == 43


@pytest.mark.parametrize("text", ["", "garbage", "version: 0\n", "version: 0\noffset: -1\n",
                                  "version: 9\noffset: 5\n", "version: 0\noffset: five\n"])
def test_high_watermark_checkpoint_reads_none_when_the_file_is_unparsable(
        tmp_path: Path, text: str) -> None:
    """A damaged checkpoint is no information, never a crash (tools only read it)."""
    (tmp_path / HIGH_WATERMARK_CHECKPOINT).write_text(text)
    assert read_high_watermark_checkpoint(tmp_path) is None
    (tmp_path / HIGH_WATERMARK_CHECKPOINT).write_bytes(b"\xff\xfe")
    assert read_high_watermark_checkpoint(tmp_path) is None


def test_high_watermark_checkpoint_read_out_of_descriptors_raises(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """EMFILE says nothing about the file: a None there would let the checkpointer take
    0 for what is on disk and later write a lower value over it."""
    write_high_watermark_checkpoint(tmp_path, 42)

    def out_of_descriptors(self: Path, encoding: str | None = None) -> str:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(Path, "read_text", out_of_descriptors)
    with pytest.raises(OSError, match="Too many open files"):
        read_high_watermark_checkpoint(tmp_path)
