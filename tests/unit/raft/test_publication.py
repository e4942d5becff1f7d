"""What the loop publishes (raft/publication.py): committed batches cut at the high
watermark, in bounded steps, each followed by the high watermark the listeners reached."""

from __future__ import annotations

import pytest

from raft import publication
from raft.log import MemoryLog
from raft.publication import Publisher
from raft.types import Batch


def published(log: MemoryLog, publish_from: int = 0) -> tuple[Publisher, list[Batch], list[int]]:
    publisher = Publisher(log, publish_from)
    batches: list[Batch] = []
    high_watermarks: list[int] = []
    publisher.commit_listeners.append(batches.append)
    publisher.high_watermark_listeners.append(high_watermarks.append)
    return publisher, batches, high_watermarks


def test_batches_are_cut_at_the_high_watermark_and_the_rest_follows_later() -> None:
    log = MemoryLog()
    log.append(1, [b"a", b"b", b"c"])
    publisher, batches, high_watermarks = published(log)
    publisher.publish_to(2)
    publisher.publish_some()
    assert batches == [Batch(base_offset=0, epoch=1, records=(b"a", b"b"))]
    assert high_watermarks == [2]
    publisher.publish_to(3)
    publisher.publish_some()
    assert batches[1] == Batch(base_offset=2, epoch=1, records=(b"c",))
    assert high_watermarks == [2, 3]
    publisher.publish_some()  # nothing new: nobody hears anything
    assert (len(batches), high_watermarks) == (2, [2, 3])


def test_a_backlog_is_published_a_bounded_step_at_a_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(publication, "PUBLISH_BYTES_PER_TURN", 1)
    log = MemoryLog()
    for i in range(3):
        log.append(1, [b"r%d" % i])
    publisher, batches, high_watermarks = published(log)
    publisher.publish_to(3)
    steps = 0
    while publisher.has_backlog:
        publisher.publish_some()
        steps += 1
    assert steps == 3
    assert [b.base_offset for b in batches] == [0, 1, 2]
    assert high_watermarks == [1, 2, 3]


def test_a_start_from_a_snapshot_at_the_high_watermark_is_still_announced() -> None:
    log = MemoryLog()
    publisher, batches, high_watermarks = published(log)
    publisher.publish_to(0)
    publisher.publish_some()
    assert (batches, high_watermarks) == ([], [0])


def test_publishing_from_outside_the_log_is_refused() -> None:
    with pytest.raises(ValueError, match="publish_from 1 outside the log"):
        Publisher(MemoryLog(), 1)
