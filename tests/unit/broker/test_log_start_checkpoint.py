"""broker.kafka.partitions.log_start_checkpoint: Kafka's text format, and a damaged file
read as empty with one WARNING naming it (a start then falls back to its first segment)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.kafka.partitions import log_start_checkpoint as checkpoint

_TOPICS = st.text(alphabet="abcXYZ09._-", min_size=1, max_size=12)


@given(st.dictionaries(st.tuples(_TOPICS, st.integers(0, 1000)), st.integers(0, 2**62)))
def test_checkpoint_round_trips(starts: dict[tuple[str, int], int]) -> None:
    assert checkpoint.decode(checkpoint.encode(starts)) == starts


def test_checkpoint_is_kafka_text_format() -> None:
    assert checkpoint.encode({("orders", 3): 42, ("orders", 0): 1500}) == \
        b"0\n2\norders 0 1500\norders 3 42\n"


@pytest.mark.parametrize("data", [b"", b"1\n0\n", b"0\n2\norders 0 1\n", b"0\n1\norders x 1\n",
                                  b"0\n1\norders 0 -4\n", b"\xff\xfe"])
def test_damaged_checkpoint_reads_as_empty_with_one_warning(
        tmp_path: Path, data: bytes, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / checkpoint.CHECKPOINT_FILE).write_bytes(data)
    with caplog.at_level(logging.WARNING):
        assert checkpoint.read(tmp_path) == {}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].__dict__["path"] == str(tmp_path / checkpoint.CHECKPOINT_FILE)


def test_checkpoint_written_is_read_back(tmp_path: Path) -> None:
    assert checkpoint.read(tmp_path) == {}
    checkpoint.write(tmp_path, {("t", 1): 7})
    assert checkpoint.read(tmp_path) == {("t", 1): 7}
