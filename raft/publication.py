"""What `raft.node.RaftNode` publishes of the committed log, in its core task.

Commit listeners get each newly committed `Batch` in offset order, cut at the high
watermark, from `publish_from` on after every start (a replay of the committed log:
from 0, or from the end of the snapshot the layers above started from). High-watermark
listeners then hear how far the commit listeners got, each time that advances (also
when there was no batch to hand them: a start from a snapshot ending at the high
watermark). The high watermark published is the one the Ready carried, never the core's
later one: a follower raises that before the flush that makes the records below it
durable here.

A long backlog (a restart replaying a long log: seconds of decoding in the layers above)
is spread over turns, about `PUBLISH_BYTES_PER_TURN` each, so the node keeps voting and
answering meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable

from raft.types import Batch, RaftLog

PUBLISH_BYTES_PER_TURN = 64 * 1024  # committed batches handed to the listeners per turn

CommitListener = Callable[[Batch], None]


class Publisher:
    def __init__(self, log: RaftLog, publish_from: int) -> None:
        if not log.start_offset <= publish_from <= log.end_offset:  # never skip records
            raise ValueError(f"publish_from {publish_from} outside the log "
                             f"[{log.start_offset}, {log.end_offset}]")
        self._log = log
        self.commit_listeners: list[CommitListener] = []
        self.high_watermark_listeners: list[Callable[[int], None]] = []
        self._published = publish_from  # next offset to hand to commit listeners
        self._publish_to = publish_from  # the high watermark to publish up to
        self._announced = True  # the HW listeners heard of `_publish_to` (once reached)
        self._hw_published = 0  # the last HW the listeners heard of

    @property
    def has_backlog(self) -> bool:
        """Committed records are left to publish: the loop must not wait for input."""
        return self._published < min(self._publish_to, self._log.end_offset)

    def restart_at_snapshot(self, end_offset: int) -> None:
        """A snapshot fetched from the leader replaced the log up to `end_offset`."""
        self._published = end_offset

    def publish_to(self, high_watermark: int) -> None:
        self._publish_to = high_watermark
        self._announced = False

    def publish_some(self) -> None:
        """The next committed batches to the commit listeners (about
        `PUBLISH_BYTES_PER_TURN`), then how far they got to the HW listeners."""
        target = self._publish_to
        if self._published < target:
            self._publish(target, PUBLISH_BYTES_PER_TURN)
        elif self._announced:
            return
        reached = self._published if self._published < target else target
        if reached > self._hw_published or not self._announced and reached == target:
            for listener in self.high_watermark_listeners:
                listener(reached)
            self._hw_published = reached
        self._announced = reached == target

    def _publish(self, high_watermark: int, max_bytes: int) -> None:
        for batch in self._log.read(self._published, max_bytes):
            if batch.base_offset >= high_watermark:
                return
            start = self._published - batch.base_offset
            end = min(batch.next_offset, high_watermark) - batch.base_offset
            if start > 0 or end < len(batch.records):
                batch = batch.records_between(self._published,
                                              min(batch.next_offset, high_watermark))
            for listener in self.commit_listeners:
                listener(batch)
            self._published = batch.next_offset
