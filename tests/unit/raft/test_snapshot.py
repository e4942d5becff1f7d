"""raft.snapshot: file names, the round trip, every damaged file refused with its name,
the fallback to an older snapshot and the clean-up of partial files."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raft.control_records import SnapshotFooter, SnapshotHeader
from raft.segment import HEADER_BYTES, encode_batch, iter_batches
from raft.snapshot import (
    MAX_END_OFFSET,
    MAX_EPOCH,
    NoValidSnapshotError,
    SnapshotError,
    SnapshotId,
    list_snapshots,
    newest_valid,
    parse_snapshot_name,
    read_snapshot,
    remove_partial_snapshots,
    stream_snapshot,
    write_snapshot,
)
from raft.types import Batch

ID = SnapshotId(end_offset=120, epoch=3)
RECORDS = [f"record-{i}".encode() * (1 + i % 5) for i in range(40)]


def write(directory: Path, snapshot_id: SnapshotId = ID, records: list[bytes] = RECORDS,
          max_batch_bytes: int = 100) -> Path:
    return write_snapshot(directory, snapshot_id, records, last_contained_log_timestamp=77,
                          max_batch_bytes=max_batch_bytes)


def streamed_records(path: Path) -> tuple[SnapshotId, list[bytes]]:
    """`stream_snapshot(path)` read to its end."""
    snapshot_id, batches = stream_snapshot(path)
    return snapshot_id, [record for batch in batches for record in batch]


def handmade(directory: Path, batches: list[Batch], snapshot_id: SnapshotId = ID) -> Path:
    """A file of exactly these batches, under the snapshot's name."""
    path = directory / snapshot_id.file_name
    path.write_bytes(b"".join(encode_batch(b) for b in batches))
    return path


def header_batch(epoch: int = ID.epoch) -> Batch:
    return Batch(base_offset=0, epoch=epoch,
                 records=(SnapshotHeader(last_contained_log_timestamp=0).encode(),))


def footer_batch(base_offset: int, epoch: int = ID.epoch) -> Batch:
    return Batch(base_offset=base_offset, epoch=epoch, records=(SnapshotFooter().encode(),))


# --- names ------------------------------------------------------------------------


def test_name_has_twenty_digit_offset_and_ten_digit_epoch_when_formatted() -> None:
    assert ID.file_name == "00000000000000000120-0000000003.checkpoint"
    assert parse_snapshot_name(ID.file_name) == ID
    assert parse_snapshot_name(Path("/some/dir") / ID.file_name) == ID


@given(st.integers(0, MAX_END_OFFSET), st.integers(0, MAX_EPOCH))
def test_name_parses_back_to_its_id_when_formatted(end_offset: int, epoch: int) -> None:
    snapshot_id = SnapshotId(end_offset, epoch)
    assert parse_snapshot_name(snapshot_id.file_name) == snapshot_id


@pytest.mark.parametrize("name", [
    "00000000000000000120-0000000003.checkpoint.tmp",  # a partial file
    "0000000000000000120-0000000003.checkpoint",  # 19 digits
    "000000000000000000120-0000000003.checkpoint",  # 21 digits
    "00000000000000000120-000000003.checkpoint",  # 9 digits
    "00000000000000000120_0000000003.checkpoint",
    "00000000000000000120-0000000003.snapshot",
    "00000000000000000120.checkpoint",
    "x00000000000000000120-0000000003.checkpoint",
    "-0000000000000000120-0000000003.checkpoint",
    "0000000000000000012a-0000000003.checkpoint",
    "٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠١٢٠-0000000003.checkpoint",  # Arabic-Indic digits are digits too
    "00000000000000000120-0000000003.checkpoint ",
    "",
])
def test_other_names_are_refused_clearly_when_parsed(name: str) -> None:
    with pytest.raises(SnapshotError, match=r"not a snapshot file name \(expected <end offset, "
                                            r"20 digits>-<epoch, 10 digits>\.checkpoint\)"):
        parse_snapshot_name(name)


@pytest.mark.parametrize(("name", "error"), [
    ("99999999999999999999-0000000003.checkpoint", "end offset 99999999999999999999 outside"),
    ("00000000000000000120-9999999999.checkpoint", "epoch 9999999999 outside"),
])
def test_out_of_range_ids_are_refused_when_parsed(name: str, error: str) -> None:
    with pytest.raises(SnapshotError) as info:
        parse_snapshot_name(Path("/d") / name)
    assert str(info.value).startswith(f"/d/{name}: bad snapshot: not a snapshot file name: ")
    assert error in str(info.value)


def test_ids_order_by_end_offset_then_epoch() -> None:
    assert SnapshotId(10, 5) < SnapshotId(11, 1) < SnapshotId(11, 2)


# --- writing and reading -----------------------------------------------------------


@pytest.mark.parametrize("records", [[], [b""], RECORDS, [b"x" * 1000, b"y", b"z" * 300]])
def test_records_read_back_equal_when_written(tmp_path: Path, records: list[bytes]) -> None:
    path = write(tmp_path, records=records)
    assert path == tmp_path / ID.file_name
    snapshot = read_snapshot(path)
    assert snapshot.records == tuple(records)
    assert (snapshot.snapshot_id, snapshot.path) == (ID, path)
    assert streamed_records(path) == (ID, records)
    assert snapshot.header == SnapshotHeader(last_contained_log_timestamp=77)
    assert os.listdir(tmp_path) == [ID.file_name]  # no temp file left


def test_batches_stay_within_the_bound_when_written(tmp_path: Path) -> None:
    """Batch payloads stay within max_batch_bytes; only a record larger than that alone
    makes a larger batch. Offsets count the file's records from 0, in the snapshot's
    epoch, header first and footer last in batches of their own."""
    records = [*RECORDS, b"big" * 100, *RECORDS]
    data = write(tmp_path, records=records).read_bytes()
    batches = list(iter_batches(data))
    assert [s.batch.base_offset for s in batches] == \
        [0, *(s.batch.base_offset for s in batches[1:-1]), len(records) + 1]
    assert {s.batch.epoch for s in batches} == {ID.epoch}
    assert (len(batches[0].batch.records), len(batches[-1].batch.records)) == (1, 1)
    assert len(batches) > 10
    for stored in batches[1:-1]:
        payload = stored.size - HEADER_BYTES
        assert payload <= 100 or len(stored.batch.records) == 1, stored


def test_existing_snapshot_is_never_replaced_when_written_again(tmp_path: Path) -> None:
    path = write(tmp_path)
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match=ID.file_name):
        write(tmp_path, records=[b"other"])
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == [ID.file_name]


def test_failed_write_leaves_no_file_when_a_record_is_not_bytes(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="must be bytes, not str"):
        write(tmp_path, records=[b"ok", "text"])  # type: ignore[list-item]
    assert os.listdir(tmp_path) == []


# --- damaged files -----------------------------------------------------------------


def small_snapshot(directory: Path) -> tuple[Path, bytes]:
    """Header, three data batches and footer: every byte position in a few hundred."""
    directory.mkdir()
    path = write(directory, records=[b"a" * 20, b"b" * 20, b"c" * 20, b"d"], max_batch_bytes=40)
    return path, path.read_bytes()


def assert_refused(path: Path, limit: int) -> SnapshotError:
    """Refused by `read_snapshot`, and by `stream_snapshot` (read to its end) with the
    same error, whatever batches it handed out first."""
    with pytest.raises(SnapshotError) as info:
        read_snapshot(path)
    assert info.value.path == str(path)
    assert str(info.value).startswith(f"{path}: bad snapshot at byte offset ")
    assert info.value.position is not None
    assert 0 <= info.value.position <= limit
    with pytest.raises(SnapshotError) as streamed:
        streamed_records(path)
    assert str(streamed.value) == str(info.value)
    return info.value


def test_every_truncation_is_refused_naming_the_file(tmp_path: Path) -> None:
    source, data = small_snapshot(tmp_path / "source")
    assert len(list(iter_batches(data))) == 5
    reasons = set()
    for length in range(len(data)):
        directory = tmp_path / f"cut-{length}"
        directory.mkdir()
        path = directory / source.name
        path.write_bytes(data[:length])
        reasons.add(assert_refused(path, length).reason)
    assert {r.split(":")[0] for r in reasons} == {
        "empty file", "truncated", "the last batch holds no SnapshotFooter",
        "no snapshot footer after the header (cut short at a batch boundary?)"}
    assert "the last batch holds no SnapshotFooter: 2 records" in reasons


@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_every_flipped_byte_is_refused_naming_the_file(tmp_path: Path, mask: int) -> None:
    """Each is found in the batch that holds it; past the header fields it checks
    (offsets, epoch, count, length), by that batch's CRC."""
    source, data = small_snapshot(tmp_path / "source")
    starts = [stored.position for stored in iter_batches(data)]
    path = tmp_path / source.name
    for position in range(len(data)):
        damaged = bytearray(data)
        damaged[position] ^= mask
        path.write_bytes(bytes(damaged))
        error = assert_refused(path, len(data))
        batch_start = max(s for s in starts if s <= position)
        assert error.position == batch_start, (position, error)
        if position >= batch_start + 20:
            assert error.reason.startswith("CRC mismatch"), (position, error)


def test_missing_footer_is_refused(tmp_path: Path) -> None:
    path = handmade(tmp_path, [header_batch(), Batch(base_offset=1, epoch=3, records=(b"r",))])
    error = assert_refused(path, path.stat().st_size)
    assert error.reason == "the last batch holds no SnapshotFooter: record is not a map: int"


def test_missing_header_is_refused(tmp_path: Path) -> None:
    path = handmade(tmp_path, [Batch(base_offset=0, epoch=3, records=(b"r",)),
                               footer_batch(1)])
    assert assert_refused(path, 0).reason.startswith("the first batch holds no SnapshotHeader")


@pytest.mark.parametrize(("extra", "reason"), [
    (encode_batch(Batch(base_offset=3, epoch=3, records=(SnapshotFooter().encode(),
                                                          SnapshotFooter().encode()))),
     "the last batch holds no SnapshotFooter: 2 records"),
    (encode_batch(Batch(base_offset=3, epoch=3, records=(header_batch().records[0],))),
     "the last batch holds no SnapshotFooter: a SnapshotHeader"),
    (b"\x00" * 7, "truncated: 7 bytes of an incomplete batch at the end"),
])
def test_anything_after_the_footer_is_refused(tmp_path: Path, extra: bytes,
                                              reason: str) -> None:
    path = handmade(tmp_path, [header_batch(), Batch(base_offset=1, epoch=3, records=(b"r",)),
                               footer_batch(2)])
    path.write_bytes(path.read_bytes() + extra)
    assert assert_refused(path, path.stat().st_size).reason == reason


def test_batch_of_another_epoch_is_refused(tmp_path: Path) -> None:
    """A file renamed to another epoch is caught: every batch carries the snapshot's."""
    renamed = write(tmp_path).rename(tmp_path / SnapshotId(ID.end_offset, ID.epoch + 1).file_name)
    assert assert_refused(renamed, 0).reason == "batch epoch 3, but the file name says epoch 4"


def test_gap_in_offsets_is_refused(tmp_path: Path) -> None:
    path = handmade(tmp_path, [header_batch(), Batch(base_offset=2, epoch=3, records=(b"r",)),
                               footer_batch(3)])
    assert assert_refused(path, path.stat().st_size).reason == "batch base offset 2, expected 1"


def test_file_with_a_wrong_name_is_refused_when_read(tmp_path: Path) -> None:
    path = write(tmp_path)
    wrong = path.rename(tmp_path / "newest.checkpoint")
    with pytest.raises(SnapshotError, match=r"newest\.checkpoint: bad snapshot: not a "):
        read_snapshot(wrong)


# --- a directory of snapshots ----------------------------------------------------------


def test_listing_is_newest_first_and_skips_other_files(tmp_path: Path) -> None:
    ids = [SnapshotId(5, 1), SnapshotId(300, 2), SnapshotId(300, 1), SnapshotId(40, 9)]
    for snapshot_id in ids:
        write(tmp_path, snapshot_id)
    for other in ["00000000000000000000.log", "quorum-state.tmp", "high-watermark-checkpoint",
                  SnapshotId(999, 9).file_name + ".tmp"]:
        (tmp_path / other).write_bytes(b"x")
    listed = list_snapshots(tmp_path)
    assert [s.snapshot_id for s in listed] == sorted(ids, reverse=True)
    assert [s.path for s in listed] == [tmp_path / i.file_name for i in sorted(ids, reverse=True)]


def test_listing_refuses_a_checkpoint_file_with_a_wrong_name(tmp_path: Path) -> None:
    write(tmp_path)
    (tmp_path / "latest.checkpoint").write_bytes(b"")
    with pytest.raises(SnapshotError, match="latest.checkpoint: bad snapshot: not a snapshot"):
        list_snapshots(tmp_path)


def test_partial_files_are_removed_and_nothing_else_when_removed(tmp_path: Path) -> None:
    write(tmp_path)
    partial = tmp_path / (SnapshotId(500, 3).file_name + ".tmp")
    partial.write_bytes(b"half a snapshot")
    (tmp_path / "quorum-state.tmp").write_bytes(b"{")
    assert remove_partial_snapshots(tmp_path) == [partial]
    assert sorted(os.listdir(tmp_path)) == [ID.file_name, "quorum-state.tmp"]
    assert remove_partial_snapshots(tmp_path) == []


def test_newest_is_loaded_and_partial_files_removed_when_opened(tmp_path: Path) -> None:
    write(tmp_path, SnapshotId(10, 1), [b"old"])
    write(tmp_path, SnapshotId(20, 2), [b"new"])
    (tmp_path / (SnapshotId(30, 2).file_name + ".tmp")).write_bytes(b"cut")
    snapshot = newest_valid(tmp_path, read_snapshot)
    assert snapshot is not None
    assert (snapshot.snapshot_id, snapshot.records) == (SnapshotId(20, 2), (b"new",))
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_snapshots_above_the_limit_are_passed_over_unread_when_opened(
        tmp_path: Path) -> None:
    """The caller cannot prove their records committed: not read, so not even a
    corrupt one is an error."""
    write(tmp_path, SnapshotId(10, 1), [b"old"])
    write(tmp_path, SnapshotId(20, 2), [b"new"]).write_bytes(b"corrupt")
    snapshot = newest_valid(tmp_path, read_snapshot, max_end_offset=19)
    assert snapshot is not None
    assert snapshot.snapshot_id == SnapshotId(10, 1)
    assert newest_valid(tmp_path, read_snapshot, max_end_offset=9) is None


def test_no_snapshot_is_none_when_opened(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    assert newest_valid(tmp_path, read_snapshot) is None


def test_older_snapshot_is_loaded_when_the_newest_is_corrupt(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write(tmp_path, SnapshotId(10, 1), [b"old"])
    newest = write(tmp_path, SnapshotId(20, 2), [b"new"])
    data = bytearray(newest.read_bytes())
    data[-3] ^= 0x40
    newest.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="raft.snapshot"):
        snapshot = newest_valid(tmp_path, read_snapshot)
    assert snapshot is not None
    assert (snapshot.snapshot_id, snapshot.records) == (SnapshotId(10, 1), (b"old",))
    assert f"{newest}: bad snapshot at byte offset" in caplog.text
    assert "trying an older snapshot" in caplog.text


def test_no_valid_snapshot_names_every_file_when_all_are_corrupt(tmp_path: Path) -> None:
    paths = [write(tmp_path, SnapshotId(n, 1), [b"r"]) for n in (10, 20)]
    for path in paths:
        path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(NoValidSnapshotError) as info:
        newest_valid(tmp_path, read_snapshot)
    message = str(info.value)
    assert message.startswith(f"{tmp_path}: bad snapshot: none of its 2 snapshot(s) is valid: ")
    assert [f.path for f in info.value.failures] == [str(p) for p in reversed(paths)]
    for path in paths:
        assert f"{path}: bad snapshot at byte offset" in message
