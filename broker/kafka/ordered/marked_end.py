"""Where a partition marked for deletion ends, as a consumer's deletion gate must see it
(ListOffsets LATEST at its leader: `broker.kafka.partitions.fetch`).

A deletion gate (`broker.kafka.ordered.gates`) holds a partition's newer records until the group
has consumed the marked partition to its end. The high watermark is not that end: a
record above it, on its way to a slow in-sync follower, commits later, and would be
consumed after the gate opened. A marked partition takes no new record once the mark is
in its leader's image (checked under the partition lock, `broker.kafka.partitions.produce`),
so its log end read under that lock is final; it is the answer once the high watermark
reaches it (every record below is then committed: no leader change can cut it), or None
when that takes longer than MARKED_END_WAIT_S or this broker stops leading (the client
asks again).
"""

from __future__ import annotations

import trio

from broker.kafka.partitions.produce import ISR_CHECK_S
from broker.kafka.replication.replica import PartitionState, ReplicaManager

MARKED_END_WAIT_S = 5.0  # below the ordered client's 10 s request timeout


def marked_end_answer(log_end: int, high_watermark: int) -> int | None:
    """ListOffsets LATEST of a marked partition: `log_end` (read under the partition
    lock, after the mark) once the high watermark reached it; None: not yet."""
    return log_end if high_watermark >= log_end else None


async def committed_log_end(replicas: ReplicaManager, state: PartitionState) -> int | None:
    async with state.lock:  # after any append in flight
        end = state.log.log_end_offset
    deadline = trio.current_time() + MARKED_END_WAIT_S
    while True:
        current = replicas.partition_image(state)
        if current is None or current.leader != replicas.broker_id:
            return None
        if state.maybe_advance_high_watermark(current, replicas.broker_id):
            replicas.notify_data()
        answer = marked_end_answer(end, state.high_watermark)
        if answer is not None:
            return answer
        if trio.current_time() >= deadline:
            return None
        with trio.move_on_at(min(deadline, trio.current_time() + ISR_CHECK_S)):
            await state.changed.wait()
