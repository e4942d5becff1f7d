"""The log dir's `replication-offset-checkpoint`, as Kafka's: the high watermark of every
partition this broker has open, in the format of `log-start-offset-checkpoint`
(broker.kafka.partitions.log_start_checkpoint: version, count, `topic partition offset`).

Written atomically every `INTERVAL_S` while a high watermark moved (Kafka's
`replica.high.watermark.checkpoint.interval.ms` is 5 s), and once more when the broker
stops gracefully. A leader's high watermark is below every in-sync replica's durable log
end and a follower's below its own, so the records below a checkpointed value are
committed: `kraft replay` compares the replicas there (tools.replay.partition_checks).
A broker killed between two writes leaves an older, lower value: never a higher one.
The broker itself does not read it back (after a restart a leader's high watermark
follows its ISR again, a follower's its leader's).
"""

from __future__ import annotations

import trio

from broker.kafka.partitions import log_start_checkpoint
from broker.kafka.replication.replica import ReplicaManager
from broker.reconcile import parse_partition_dir_name

CHECKPOINT_FILE = "replication-offset-checkpoint"
INTERVAL_S = 1.0


def high_watermarks(replicas: ReplicaManager) -> dict[tuple[str, int], int]:
    """(topic name, partition) -> high watermark of each open partition, named as its
    directory is."""
    marks = {}
    for state in replicas.open_states():
        key = parse_partition_dir_name(state.log.directory.name)
        if key is not None:
            marks[key] = state.high_watermark
    return marks


async def write_high_watermarks(replicas: ReplicaManager) -> None:
    """Write the checkpoint now (the stop task)."""
    await _write(replicas, high_watermarks(replicas))


async def _write(replicas: ReplicaManager, marks: dict[tuple[str, int], int]) -> None:
    await trio.to_thread.run_sync(log_start_checkpoint.write, replicas.log_dir, marks,
                                  CHECKPOINT_FILE)


async def high_watermark_loop(replicas: ReplicaManager) -> None:
    written: dict[tuple[str, int], int] | None = None
    while True:
        await trio.sleep(INTERVAL_S)
        marks = high_watermarks(replicas)
        if marks != written:
            await _write(replicas, marks)
            written = marks
