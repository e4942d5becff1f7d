"""broker.partition_dir: real files in a temporary log dir (KIP-516 "Deletion",
"Storage: partition metadata file")."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker import partition_dir as pd
from broker.kafka.partitions.segments import RollLimits
from broker.kafka.replication.replica import open_partition_log
from broker.reconcile import (
    Action,
    Assignment,
    CreatePartition,
    DeleteStaged,
    HostedPartition,
    StageForDeletion,
    WriteMetadataFile,
    after_actions,
    reconcile,
)
from raft.common.uuid import ZERO_UUID, Uuid

OLD = Uuid(0x1111 << 64)
NEW = Uuid(0x2222 << 64)
OTHER = Uuid(0x3333 << 64)
DELAY_MS = 60_000
NOW_MS = 1_700_000_000_000


def hosted(topic: str, topic_id: Uuid, partition: int = 0) -> HostedPartition:
    return HostedPartition(topic=topic, topic_id=topic_id, partition=partition,
                           replicas=(4,), leader=4)


def make_partition(log_dir: Path, name: str, topic_id: Uuid | None, data: str = "") -> Path:
    path = log_dir / name
    path.mkdir()
    if topic_id is not None:
        pd.write_partition_metadata(path, topic_id)
    (path / "00000000000000000000.log").write_text(data or f"data of {name}")
    return path


def plan(log_dir: Path, image: dict[str, Uuid], hosts: tuple[HostedPartition, ...] = (),
         now_ms: int = NOW_MS) -> list[Action]:
    local, staged = pd.scan(log_dir)
    return reconcile(local=local, staged=staged,
                     assignment=Assignment(topic_ids=image, hosted=hosts),
                     now_ms=now_ms, delete_delay_ms=DELAY_MS)


def run_to_fixpoint(log_dir: Path, image: dict[str, Uuid],
                    hosts: tuple[HostedPartition, ...] = (), now_ms: int = NOW_MS) -> None:
    pd.apply_actions(log_dir, plan(log_dir, image, hosts, now_ms))
    assert plan(log_dir, image, hosts, now_ms) == []


def tree(log_dir: Path) -> dict[str, str]:
    return {str(p.relative_to(log_dir)): p.read_text() for p in sorted(log_dir.rglob("*"))
            if p.is_file()}


def test_writes_partition_metadata_as_plain_text_when_created(tmp_path: Path) -> None:
    """KIP-516 Storage: partition.metadata is `version: 0` / `topic_id: <base64>`,
    replaced atomically (no temp file left behind)."""
    pd.apply_actions(tmp_path, [CreatePartition(topic="A", partition=0, topic_id=NEW)])
    assert (tmp_path / "A-0" / "partition.metadata").read_text() == \
        f"version: 0\ntopic_id: {NEW}\n"
    assert sorted(p.name for p in (tmp_path / "A-0").iterdir()) == ["partition.metadata"]
    assert pd.read_partition_metadata(tmp_path / "A-0") == NEW


def test_scans_only_partition_directories_when_log_dir_has_other_entries(
        tmp_path: Path) -> None:
    """The raft log, meta.properties and unknown names are never partitions to reconcile;
    a corrupt partition.metadata reads as missing instead of crashing start-up."""
    make_partition(tmp_path, "__cluster_metadata-0", None)
    make_partition(tmp_path, "A-0", NEW)
    make_partition(tmp_path, "B-1", None)
    (make_partition(tmp_path, "C-2", None) / "partition.metadata").write_text("garbage")
    (tmp_path / "notes").mkdir()
    (tmp_path / "meta.properties").write_text("node.id=4\n")
    local, staged = pd.scan(tmp_path)
    assert [(p.dir_name, p.topic_id) for p in local] == [
        ("A-0", NEW), ("B-1", None), ("C-2", None)]
    assert staged == []


def test_stages_old_id_and_creates_new_when_topic_was_recreated(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """KIP-516 "stale state" + "Deletion": WARN with the deletion time, move A-0 to
    deleting/<old id>_0 with its data, create A-0 with the new ID, remove the staged copy
    only once delete.topic.delay.ms has passed."""
    make_partition(tmp_path, "A-0", OLD, data="old records")
    with caplog.at_level(logging.WARNING, logger="broker.partition_dir"):
        run_to_fixpoint(tmp_path, {"A": NEW}, (hosted("A", NEW),))

    assert pd.read_partition_metadata(tmp_path / "A-0") == NEW
    assert not (tmp_path / "A-0" / "00000000000000000000.log").exists()
    staged_dir = tmp_path / "deleting" / f"{OLD}_0"
    assert (staged_dir / "00000000000000000000.log").read_text() == "old records"
    assert pd.read_partition_metadata(staged_dir) == OLD
    warning = next(r for r in caplog.records if r.levelno == logging.WARNING)
    assert warning.delete_at_ms == NOW_MS + DELAY_MS  # type: ignore[attr-defined]
    assert warning.topic_id == str(OLD)  # type: ignore[attr-defined]

    # A restart before the delay still knows the due time: nothing is removed early.
    assert pd.scan(tmp_path)[1][0].due_ms == NOW_MS + DELAY_MS
    run_to_fixpoint(tmp_path, {"A": NEW}, (hosted("A", NEW),), now_ms=NOW_MS + DELAY_MS - 1)
    assert staged_dir.is_dir()
    run_to_fixpoint(tmp_path, {"A": NEW}, (hosted("A", NEW),), now_ms=NOW_MS + DELAY_MS)
    assert not staged_dir.exists()
    assert pd.read_partition_metadata(tmp_path / "A-0") == NEW


def test_stages_data_without_file_and_renames_with_data_when_names_moved(
        tmp_path: Path) -> None:
    """Strays: data without partition.metadata is never adopted by the topic its name
    names (staged with a WARN; the hosted partition starts empty); KIP-516: a renamed
    topic's directory is moved with its data and ID."""
    make_partition(tmp_path, "A-0", None, data="a")
    make_partition(tmp_path, "B-0", OTHER, data="b")
    run_to_fixpoint(tmp_path, {"A": NEW, "C": OTHER}, (hosted("A", NEW), hosted("C", OTHER)))
    assert pd.read_partition_metadata(tmp_path / "A-0") == NEW
    assert not (tmp_path / "A-0" / "00000000000000000000.log").exists()
    assert (tmp_path / "deleting" / f"{ZERO_UUID}_0" / "00000000000000000000.log"
            ).read_text() == "a"
    assert pd.read_partition_metadata(tmp_path / "C-0") == OTHER
    assert (tmp_path / "C-0" / "00000000000000000000.log").read_text() == "b"
    assert not (tmp_path / "B-0").exists()


def test_refuses_to_overwrite_partition_metadata_when_ids_differ(tmp_path: Path) -> None:
    """KIP-516: a live partition's ID is never silently replaced."""
    make_partition(tmp_path, "A-0", OLD)
    with pytest.raises(pd.PartitionDirError, match="refusing"):
        pd.apply_action(tmp_path, CreatePartition(topic="A", partition=0, topic_id=NEW))
    assert pd.read_partition_metadata(tmp_path / "A-0") == OLD


def test_refuses_to_stage_directory_when_its_id_is_not_the_stale_one(tmp_path: Path) -> None:
    """KIP-516: staging re-checks partition.metadata, so a stale plan never moves live data."""
    make_partition(tmp_path, "A-0", NEW)
    action = StageForDeletion(dir_name="A-0", staged_name=f"{OLD}_0", topic_id=OLD,
                              partition=0, due_ms=NOW_MS, reason="test")
    with pytest.raises(pd.PartitionDirError, match="not staging"):
        pd.apply_action(tmp_path, action)
    assert (tmp_path / "A-0" / "00000000000000000000.log").exists()


def test_finishes_job_when_crash_left_deletion_file_in_live_name(tmp_path: Path) -> None:
    """Crash after deletion.metadata was written but before the move: the restart stages
    it again, with its data."""
    path = make_partition(tmp_path, "A-0", OLD, data="old")
    pd.write_deletion_metadata(path, due_ms=NOW_MS + 5, reason="x", origin="A-0")
    run_to_fixpoint(tmp_path, {"A": NEW}, (hosted("A", NEW),))
    assert (tmp_path / "deleting" / f"{OLD}_0" / "00000000000000000000.log").read_text() \
        == "old"
    assert pd.read_partition_metadata(tmp_path / "A-0") == NEW


def test_writes_file_when_crash_left_only_a_temp_partition_metadata(tmp_path: Path) -> None:
    """Crash between the temp file and the rename: the directory has no partition.metadata,
    its name is known, so the restart writes it (never half a file)."""
    path = tmp_path / "A-0"
    path.mkdir()
    (path / "partition.metadata.tmp").write_text("version: 0\ntopic_")
    assert plan(tmp_path, {"A": NEW}, (hosted("A", NEW),)) == [
        WriteMetadataFile(topic="A", partition=0, topic_id=NEW)]
    run_to_fixpoint(tmp_path, {"A": NEW}, (hosted("A", NEW),))
    assert pd.read_partition_metadata(path) == NEW


def test_finishes_removal_when_crash_interrupted_deleting_staged_dir(tmp_path: Path) -> None:
    """KIP-516 "Deletion": deletion.metadata is removed last, so a half-removed staged
    directory is still due and the restart removes the rest."""
    staged_dir = tmp_path / "deleting" / f"{OLD}_0"
    staged_dir.mkdir(parents=True)
    pd.write_deletion_metadata(staged_dir, due_ms=NOW_MS, reason="x", origin="A-0")
    assert plan(tmp_path, {}) == [DeleteStaged(staged_name=f"{OLD}_0", due_ms=NOW_MS)]
    empty_dir = tmp_path / "deleting" / f"{OTHER}_0"
    empty_dir.mkdir()  # crashed after deletion.metadata went, before rmdir
    run_to_fixpoint(tmp_path, {})
    assert list((tmp_path / "deleting").iterdir()) == []


# --- crash at any point between actions ------------------------------------------------

IDS = [OLD, NEW, OTHER, Uuid(0x4444 << 64)]
NAMES = ["A", "B", "C"]


@settings(max_examples=60)
@given(st.data())
def test_reaches_same_end_state_when_crashing_after_any_prefix_of_actions(
        data: st.DataObject) -> None:
    """KIP-516 "Deletion", crash safety: apply a prefix of the actions (a crash), then scan
    and reconcile again: the disk ends exactly as if nothing had crashed, and no file of a
    live partition was lost."""
    names = data.draw(st.lists(st.sampled_from(NAMES), unique=True))
    ids = data.draw(st.lists(st.sampled_from(IDS), unique=True, min_size=len(names),
                             max_size=len(names)))
    image = dict(zip(names, ids, strict=True))
    hosts = tuple(hosted(n, image[n], p) for n in names for p in (0, 1)
                  if data.draw(st.booleans()))
    dirs = data.draw(st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 1)),
                              unique=True, max_size=5))
    local_ids = [data.draw(st.one_of(st.none(), st.sampled_from(IDS))) for _ in dirs]
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        full, crashed = Path(a), Path(b)
        for root in (full, crashed):
            for (name, p), topic_id in zip(dirs, local_ids, strict=True):
                make_partition(root, f"{name}-{p}", topic_id)
        live_data = {text for path, text in tree(full).items() if path.endswith(".log")
                     and _is_kept(path.split("/")[0], local_ids, dirs, image, hosts)}

        actions = plan(full, image, hosts)
        pd.apply_actions(full, actions)
        prefix = data.draw(st.integers(0, len(actions)))
        pd.apply_actions(crashed, plan(crashed, image, hosts)[:prefix])
        pd.apply_actions(crashed, plan(crashed, image, hosts))

        assert tree(crashed) == tree(full)
        assert plan(crashed, image, hosts) == []
        kept = {text for path, text in tree(full).items()
                if path.endswith(".log") and not path.startswith("deleting")}
        assert live_data <= kept | _staged_duplicates(full)


@settings(max_examples=60)
@given(st.data())
def test_kept_view_of_the_log_dir_matches_a_scan_after_every_pass(data: st.DataObject) -> None:
    """The broker keeps `after_actions`' view between passes instead of scanning: through
    images that create, rename, delete and recreate topics, and staged directories falling
    due, the view decides as a scan would and equals a scan after each pass."""
    def draw_image() -> tuple[dict[str, Uuid], tuple[HostedPartition, ...]]:
        names = data.draw(st.lists(st.sampled_from(NAMES), unique=True))
        ids = data.draw(st.lists(st.sampled_from(IDS), unique=True, min_size=len(names),
                                 max_size=len(names)))
        image = dict(zip(names, ids, strict=True))
        return image, tuple(hosted(n, image[n], p) for n in names for p in (0, 1)
                            if data.draw(st.booleans()))

    dirs = data.draw(st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 1)),
                              unique=True, max_size=4))
    with tempfile.TemporaryDirectory() as temp:
        log_dir = Path(temp)
        for name, p in dirs:
            make_partition(log_dir, f"{name}-{p}",
                           data.draw(st.one_of(st.none(), st.sampled_from(IDS))))
        view = pd.scan(log_dir)
        now_ms = NOW_MS
        for _ in range(4):
            image, hosts = draw_image()
            actions = reconcile(local=view[0], staged=view[1],
                                assignment=Assignment(topic_ids=image, hosted=hosts),
                                now_ms=now_ms, delete_delay_ms=DELAY_MS)
            assert actions == plan(log_dir, image, hosts, now_ms)
            pd.apply_actions(log_dir, actions)
            view = after_actions(*view, actions)
            assert view == pd.scan(log_dir)
            now_ms += data.draw(st.sampled_from([0, DELAY_MS]))


def _is_kept(dir_name: str, local_ids: list[Uuid | None], dirs: list[tuple[str, int]],
             image: dict[str, Uuid], hosts: tuple[HostedPartition, ...]) -> bool:
    """Data the image says this broker keeps: a live ID proven by partition.metadata, of a
    partition hosted here (data without the file is a stray)."""
    topic, _, number = dir_name.rpartition("-")
    topic_id = local_ids[dirs.index((topic, int(number)))]
    return any(h.topic_id == topic_id and h.partition == int(number) for h in hosts)


def _staged_duplicates(log_dir: Path) -> set[str]:
    """Data of second copies of a live partition, staged on purpose (see reconcile)."""
    staged = log_dir / "deleting"
    if not staged.is_dir():
        return set()
    return {p.read_text() for p in staged.rglob("*.log")
            if "second copy" in (p.parent / pd.DELETION_METADATA).read_text()}


def test_new_partitions_share_one_log_dir_fsync_before_any_metadata_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of CreatePartition actions: every directory is made, the log dir is fsynced
    once, and only then is any partition.metadata written, so none exists before its
    directory's entry is durable. The files themselves are not fsynced: a new directory
    holds no data until its log is opened (`sync_partition_metadata`)."""
    events: list[str] = []
    real_fsync_dir, real_write = pd.fsync_dir, pd.write_partition_metadata

    def fsync_dir(path: Path) -> None:
        events.append("fsync log dir" if path == tmp_path else "fsync other")
        real_fsync_dir(path)

    def write_partition_metadata(path: Path, topic_id: Uuid, *, durable: bool = True) -> None:
        assert "fsync log dir" in events, f"{path.name} written before the log dir fsync"
        events.append(f"write {path.name}" + (" durably" if durable else ""))
        real_write(path, topic_id, durable=durable)

    monkeypatch.setattr(pd, "fsync_dir", fsync_dir)
    monkeypatch.setattr(pd, "write_partition_metadata", write_partition_metadata)
    actions: list[Action] = [CreatePartition(topic="A", partition=p, topic_id=NEW)
                             for p in range(5)]
    pd.apply_actions(tmp_path, actions)
    assert events == ["fsync log dir"] + [f"write A-{p}" for p in range(5)]
    assert all(pd.read_partition_metadata(tmp_path / f"A-{p}") == NEW for p in range(5))


def test_completion_writes_partition_metadata_durably_and_staging_keeps_the_data(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file-less directory holding data is staged (a stray) and the hosted partition's
    new directory gets its file in place (no data yet); a file-less empty one, cut short
    by a crash, is completed with the durable write (temp file, fsync, rename)."""
    durable: list[bool] = []
    real_write = pd.write_partition_metadata

    def write_partition_metadata(path: Path, topic_id: Uuid, **kwargs: bool) -> None:
        durable.append(kwargs.get("durable", True))
        real_write(path, topic_id, **kwargs)

    make_partition(tmp_path, "A-0", None, "old data")
    (tmp_path / "B-0").mkdir()
    monkeypatch.setattr(pd, "write_partition_metadata", write_partition_metadata)
    run_to_fixpoint(tmp_path, {"A": NEW, "B": OTHER}, (hosted("A", NEW), hosted("B", OTHER)))
    assert durable == [True, False]  # B-0 completed first, then A-0 created anew
    assert pd.read_partition_metadata(tmp_path / "A-0") == NEW
    assert pd.read_partition_metadata(tmp_path / "B-0") == OTHER
    assert (tmp_path / "deleting" / f"{ZERO_UUID}_0" / "00000000000000000000.log"
            ).read_text() == "old data"


def test_opening_a_partition_log_makes_its_partition_metadata_durable_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first data of a new partition never lands before its topic ID is durable."""
    pd.apply_actions(tmp_path, [CreatePartition(topic="A", partition=0, topic_id=NEW)])
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    open_partition_log(tmp_path / "A-0", RollLimits()).close()
    partition = tmp_path / "A-0"
    assert synced[:2] == [str(partition / pd.PARTITION_METADATA), str(partition)]
