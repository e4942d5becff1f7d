"""A metadata log of millions of records for the replay's scale benchmark, made fast.

`scale_batches` yields the batches of a log shaped as `synthetic_logs.metadata_log`'s (a
LeaderChange opening every epoch, the metadata topic's ID, broker registrations, topics
created with their Partition records, partitions changing leader, topics deleted and
their names reused) without holding the log: ten million records are ~800 MB of
segments. Every record is `metadata.records`' encoding. The records that differ only by
their topic ID (Partition, PartitionChange, RemoveTopic) are encoded once per shape
with a placeholder ID and the topic's 16 bytes put in its place (`_Template`), so the
generator spends ~1 us a record instead of the encoder's ~15 us; Topic records, one a
topic, are encoded whole. `write_log` appends the batches through `raft.log.DiskLog`, the
node's own log, and fsyncs once at the end.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from pathlib import Path

from metadata.records import (
    LeaderChange,
    MetadataTopic,
    Partition,
    PartitionChange,
    Record,
    RegisterBroker,
    RemoveTopic,
    Topic,
)
from raft.common.uuid import Uuid
from raft.log import DiskLog
from raft.types import Batch

PLACEHOLDER = Uuid.from_bytes(b"\xa5" * 16)


class _Template:
    """One record's encoding split around its topic ID, to encode the same record of
    another topic by putting that topic's 16 bytes between the halves."""

    def __init__(self, record: Record) -> None:
        encoded = record.encode()
        at = encoded.index(PLACEHOLDER.to_bytes())
        self.head, self.tail = encoded[:at], encoded[at + 16:]

    def encode(self, topic_id: bytes) -> bytes:
        return self.head + topic_id + self.tail


def scale_batches(records: int, *, voters: Sequence[int] = (1, 2, 3), batch_size: int = 20,
                  records_per_epoch: int = 50_000, partitions: int = 3, max_live: int = 500,
                  seed: int = 1) -> Iterator[Batch]:
    """About `records` records (a few more to finish the last topic) in batches of
    `batch_size`, a new epoch every `records_per_epoch` records, at most `max_live`
    topics alive at once."""
    rng = random.Random(seed)
    voters = tuple(voters)
    created = [_Template(Partition(topic_id=PLACEHOLDER, partition=p, replicas=voters,
                                   isr=voters, leader=voters[p % len(voters)]))
               for p in range(partitions)]
    changes = [[_Template(PartitionChange(topic_id=PLACEHOLDER, partition=p, leader=leader,
                                          isr=voters)) for leader in voters]
               for p in range(partitions)]
    removed = _Template(RemoveTopic(topic_id=PLACEHOLDER))
    epoch, offset, serial = 1, 0, 0
    pending: list[bytes] = [LeaderChange(leader_id=voters[0], voters=voters).encode(),
                            MetadataTopic(topic_id=Uuid.random(rng)).encode()]
    pending += [RegisterBroker(broker_id=b, incarnation_id=Uuid.random(rng),
                               broker_epoch=1).encode() for b in voters]
    live: dict[str, bytes] = {}
    names: list[str] = []  # the live names, for a uniform choice
    deleted: list[str] = []
    since_epoch = len(pending)
    while offset + len(pending) < records:
        if since_epoch >= records_per_epoch:
            while pending:
                yield Batch(base_offset=offset, epoch=epoch, records=tuple(pending[:batch_size]))
                offset += len(pending[:batch_size])
                del pending[:batch_size]
            epoch += 1
            pending.append(LeaderChange(leader_id=voters[epoch % len(voters)],
                                        voters=voters).encode())
            since_epoch = 0
        roll = rng.random()
        before = len(pending)
        if not live or (roll < 0.15 and len(live) < max_live):
            name = deleted.pop() if deleted and rng.random() < 0.5 else f"topic-{serial}"
            serial += 1
            topic_id = Uuid.random(rng)
            live[name] = raw = topic_id.to_bytes()
            names.append(name)
            pending.append(Topic(name=name, topic_id=topic_id,
                                 initial_partition_count=partitions).encode())
            pending += [template.encode(raw) for template in created]
        elif roll < 0.22 and len(live) > 1:
            index = rng.randrange(len(names))
            name = names[index]
            names[index] = names[-1]
            names.pop()
            pending.append(removed.encode(live.pop(name)))
            deleted.append(name)
        else:
            raw = live[names[rng.randrange(len(names))]]
            pending.append(changes[rng.randrange(partitions)][rng.randrange(len(voters))]
                           .encode(raw))
        since_epoch += len(pending) - before
        while len(pending) >= batch_size:
            yield Batch(base_offset=offset, epoch=epoch, records=tuple(pending[:batch_size]))
            offset += batch_size
            del pending[:batch_size]
    if pending:
        yield Batch(base_offset=offset, epoch=epoch, records=tuple(pending))


def write_log(log_dir: Path, batches: Iterator[Batch], *, segment_bytes: int = 64 << 20,
              chunk: int = 1000) -> int:
    """Append `batches` to the DiskLog of `log_dir` (its `__cluster_metadata-0`), `chunk`
    batches a call, fsync at the end; returns the log's end offset."""
    with DiskLog.open_metadata_log(log_dir, segment_bytes=segment_bytes) as log:
        group: list[Batch] = []
        for batch in batches:
            group.append(batch)
            if len(group) == chunk:
                log.append_batches(group)
                group = []
        if group:
            log.append_batches(group)
        log.flush()
        return log.end_offset
