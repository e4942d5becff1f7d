"""The job's scan cut in pieces (`tools.replay.pieces`) on local[2]: a sound log's pieces
fold into one scan; a log whose pieces cannot be folded (a topic ID taken again after
the seam) is scanned again whole, and its violation is reported once, where it is."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from metadata import records as rec
from raft.common.uuid import Uuid
from raft.types import Batch
from tests.support.synthetic_logs import metadata_log, replace_record
from tools.replay.job import ReplayResult
from tools.replay.sequential import decode_record

pytestmark = pytest.mark.spark

Replay = Callable[..., ReplayResult]  # the `replay` fixture (conftest: 100-record segments)
AGAIN = "scanning again in one piece"
TOPIC, PARTITION_CHANGE = int(rec.RecordType.TOPIC), int(rec.RecordType.PARTITION_CHANGE)


def _log() -> list[Batch]:
    """Six segments, cut in two pieces of three on local[2]."""
    return metadata_log(records=600, batch_size=5, records_per_epoch=150, max_live=6,
                        seed=11)


def test_a_sound_log_is_scanned_in_pieces_that_fold(replay: Replay,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tools.replay.load"):
        result = replay(dict.fromkeys((1, 2, 3), _log()), analysis=True)
    assert result.passed, result.failed
    assert AGAIN not in caplog.messages
    assert result.analysis.committed_end == _log()[-1].next_offset


def test_a_topic_id_taken_again_after_the_seam_is_found_by_a_second_whole_scan(
        replay: Replay, caplog: pytest.LogCaptureFixture) -> None:
    batches = _log()
    kinds = [(b.base_offset + i, *decode_record(r)[:2]) for b in batches
             for i, r in enumerate(b.records)]
    first_id = next(fields["topic_id"] for _, kind, fields in kinds if kind == TOPIC)
    offset = next(o for o, kind, _ in kinds if o > 450 and kind == PARTITION_CHANGE)
    planted = replace_record(batches, offset, rec.Topic(name="taken-again",
                                                        topic_id=Uuid.from_bytes(first_id)))
    with caplog.at_level(logging.INFO, logger="tools.replay.load"):
        result = replay(dict.fromkeys((1, 2, 3), planted))
    assert AGAIN in caplog.messages
    check = result.check("topic_ids_valid")
    assert check.violations == 1
    assert [e["offset"] for e in check.examples] == [offset]
    assert result.failed == ["topic_ids_valid"]

