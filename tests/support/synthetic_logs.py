"""Synthetic metadata logs for the replay's tests and benchmark.

`metadata_log` builds a plausible leader log: a LeaderChange opening every epoch, the
metadata topic's ID, broker registrations, then topics created (Topic + Partition
records), partitions changing leader and ISR, topics deleted and their names reused
with new IDs. `write_node` writes batches as segment files with `raft.segment`, exactly
the bytes the on-disk log writes, so the replay reads them as it reads a real run, and
optionally the node's high-watermark checkpoint (`raft.storage`) as a running node does;
without one the replay falls back to the majority rule for what is committed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

from metadata.image import MetadataImage
from metadata.records import (
    FenceBroker,
    LeaderChange,
    MetadataTopic,
    NoOp,
    Partition,
    PartitionChange,
    Record,
    RegisterBroker,
    RemoveTopic,
    RenameTopic,
    Topic,
    TopicConfig,
    UnfenceBroker,
    decode,
)
from raft.common.uuid import Uuid
from raft.segment import encode_batch, segment_name
from raft.storage import write_high_watermark_checkpoint
from raft.types import Batch
from tools.replay import METADATA_DIR
from tools.replay.timeline import TimedRecord, Timeline, timeline


def metadata_log(*, records: int = 200, voters: Sequence[int] = (1, 2, 3),
                 records_per_epoch: int = 60, partitions: int = 3, batch_size: int = 5,
                 max_live: int = 50, seed: int = 0) -> list[Batch]:
    """About `records` records (a few more to finish the last topic), in batches of at
    most `batch_size`, a new epoch (and leader) every `records_per_epoch` records, at
    most `max_live` topics alive at once."""
    rng = random.Random(seed)
    epoch = 1
    out: list[Batch] = []
    pending: list[Record] = [LeaderChange(leader_id=voters[0], voters=tuple(voters)),
                             MetadataTopic(topic_id=Uuid.random(rng))]
    pending += [RegisterBroker(broker_id=b, incarnation_id=Uuid.random(rng), broker_epoch=1)
                for b in voters]
    live: dict[str, Uuid] = {}
    deleted: list[str] = []
    count = len(pending)
    serial = 0
    since_epoch = count

    def flush() -> None:
        nonlocal pending
        for start in range(0, len(pending), batch_size):
            chunk = pending[start:start + batch_size]
            base = out[-1].next_offset if out else 0
            out.append(Batch(base_offset=base, epoch=epoch,
                             records=tuple(r.encode() for r in chunk)))
        pending = []

    while count < records:
        if since_epoch >= records_per_epoch:
            flush()
            epoch += 1
            pending.append(LeaderChange(leader_id=voters[epoch % len(voters)],
                                        voters=tuple(voters)))
            since_epoch = 0
        roll = rng.random()
        new: list[Record]
        if not live or (roll < 0.15 and len(live) < max_live):
            name = deleted.pop() if deleted and rng.random() < 0.5 else f"topic-{serial}"
            serial += 1
            topic_id = Uuid.random(rng)
            live[name] = topic_id
            new = [Topic(name=name, topic_id=topic_id, initial_partition_count=partitions)]
            new += [Partition(topic_id=topic_id, partition=p, replicas=tuple(voters),
                              isr=tuple(voters), leader=voters[p % len(voters)])
                    for p in range(partitions)]
        elif roll < 0.22 and len(live) > 1:
            name = rng.choice(list(live))
            new = [RemoveTopic(topic_id=live.pop(name))]
            deleted.append(name)
        else:
            topic_id = live[rng.choice(list(live))]
            leader = rng.choice(tuple(voters))
            new = [PartitionChange(topic_id=topic_id, partition=rng.randrange(partitions),
                                   leader=leader, isr=tuple(voters))]
        pending += new
        count += len(new)
        since_epoch += len(new)
        if len(pending) >= batch_size:
            flush()
    flush()
    return out


def write_node(log_dir: Path, batches: Sequence[Batch], *, segment_records: int = 1000,
               high_watermark: int | None = None) -> list[Path]:
    """Write `batches` as segment files under `log_dir/__cluster_metadata-0/`, rolling
    to a new segment once one holds `segment_records` records, and the high-watermark
    checkpoint there when `high_watermark` is given."""
    directory = log_dir / METADATA_DIR
    directory.mkdir(parents=True, exist_ok=True)
    if high_watermark is not None:
        write_high_watermark_checkpoint(directory, high_watermark)
    paths: list[Path] = []
    chunk: list[bytes] = []
    base = batches[0].base_offset if batches else 0
    held = 0
    for batch in batches:
        if held >= segment_records:
            paths.append(_write(directory, base, chunk))
            chunk, base, held = [], batch.base_offset, 0
        chunk.append(encode_batch(batch))
        held += len(batch.records)
    if chunk:
        paths.append(_write(directory, base, chunk))
    return paths


def _write(directory: Path, base_offset: int, chunks: Sequence[bytes]) -> Path:
    path = directory / segment_name(base_offset)
    path.write_bytes(b"".join(chunks))
    return path


def write_cluster(root: Path, logs: dict[int, Sequence[Batch]], *,
                  voters: Sequence[int] | None = None, segment_records: int = 1000,
                  high_watermarks: dict[int, int] | None = None) -> Path:
    """The launcher's layout: `root/cluster.json` and `root/node-N/data/` per node;
    `high_watermarks`: node -> its high-watermark checkpoint (others write none)."""
    root.mkdir(parents=True, exist_ok=True)
    chosen = sorted(logs) if voters is None else list(voters)
    (root / "cluster.json").write_text(json.dumps({"voters": chosen}), encoding="utf-8")
    for node_id, batches in logs.items():
        log_dir = root / f"node-{node_id}" / "data"
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / "meta.properties").write_text(f"version=1\nnode.id={node_id}\n",
                                                 encoding="utf-8")
        write_node(log_dir, batches, segment_records=segment_records,
                   high_watermark=(high_watermarks or {}).get(node_id))
    return root


def replace_record(batches: Sequence[Batch], offset: int, record: Record,
                   *, epoch: int | None = None) -> list[Batch]:
    """A copy of `batches` with the record at `offset` replaced (the batch re-encoded,
    so its CRC is valid: the damage is in the content, not the bytes)."""
    out = []
    for batch in batches:
        if batch.base_offset <= offset <= batch.last_offset:
            records = list(batch.records)
            records[offset - batch.base_offset] = record.encode()
            batch = Batch(base_offset=batch.base_offset,
                          epoch=batch.epoch if epoch is None else epoch,
                          records=tuple(records))
        out.append(batch)
    return out


STORY_START_MS = 1_700_000_000_000
STORY_TOPIC = Uuid.from_bits(0x5EED_0001, 0x0A)
STORY_OTHER = Uuid.from_bits(0x5EED_0001, 0x0B)


def _story() -> list[tuple[int, int, list[Record]]]:
    """(epoch, ms after STORY_START_MS, records) of each batch of `story_log`."""
    a, b, replicas = STORY_TOPIC, STORY_OTHER, (4, 5, 6)

    def both(**change: object) -> list[Record]:
        return [PartitionChange(topic_id=a, partition=p, **change)  # type: ignore[arg-type]
                for p in (0, 1)]

    return [
        (1, 0, [LeaderChange(leader_id=1, voters=(1, 2, 3)),
                MetadataTopic(topic_id=Uuid.from_bits(0x5EED_0001, 0x01)),
                *(RegisterBroker(broker_id=n, incarnation_id=Uuid.from_bits(0x5EED_0002, n),
                                 broker_epoch=n - 2) for n in replicas)]),
        (1, 100, [UnfenceBroker(broker_id=n, broker_epoch=n - 2) for n in replicas]),
        (1, 200, [Topic(name="orders", topic_id=a, initial_partition_count=2),
                  Partition(topic_id=a, partition=0, replicas=replicas, isr=replicas, leader=4),
                  Partition(topic_id=a, partition=1, replicas=(5, 6, 4), isr=(5, 6, 4),
                            leader=5)]),
        (1, 300, [TopicConfig(topic_id=a, key="min.insync.replicas", value="2")]),
        (2, 1000, [LeaderChange(leader_id=2, voters=(1, 2, 3))]),
        (2, 1500, [FenceBroker(broker_id=4, broker_epoch=2),
                   PartitionChange(topic_id=a, partition=0, leader=5, isr=(5, 6)),
                   PartitionChange(topic_id=a, partition=1, isr=(5, 6))]),
        (2, 2000, [FenceBroker(broker_id=5, broker_epoch=3), *both(leader=6, isr=(6,))]),
        (2, 2500, [FenceBroker(broker_id=6, broker_epoch=4), *both(leader=-1)]),
        (2, 3000, [UnfenceBroker(broker_id=6, broker_epoch=4), *both(leader=6)]),
        (2, 3500, [UnfenceBroker(broker_id=4, broker_epoch=2),
                   UnfenceBroker(broker_id=5, broker_epoch=3), *both(isr=(6, 4, 5))]),
        (3, 4000, [LeaderChange(leader_id=3, voters=(1, 2, 3))]),
        (3, 4200, [RenameTopic(topic_id=a, new_name="payments")]),
        (3, 4500, [Topic(name="audit", topic_id=b, initial_partition_count=1),
                   Partition(topic_id=b, partition=0, replicas=replicas, isr=replicas,
                             leader=4)]),
        (3, 4600, [Partition(topic_id=a, partition=2, replicas=replicas, isr=replicas,
                             leader=4)]),
        (3, 5000, [RemoveTopic(topic_id=a)]),
        (3, 6000, [NoOp()]),
    ]


def story_log(*, timed: bool = True) -> list[Batch]:
    """A scripted log with known times: brokers 4-6 registered and unfenced; `orders`
    (2 partitions, min.insync.replicas=2) loses brokers 4, 5 and 6 one by one (under
    its ISR minimum from +2000 ms, leaderless from +2500 to +3000 ms) and gets them back
    at +3500 ms; three epochs; `orders` renamed `payments`, grown to 3 partitions and
    deleted at +5000 ms; `audit` lives to the log end at +6000 ms. `timed=False`: the
    same batches as a log written before batches were timed."""
    out: list[Batch] = []
    for epoch, at_ms, records in _story():
        base = out[-1].next_offset if out else 0
        out.append(Batch(base_offset=base, epoch=epoch,
                         records=tuple(r.encode() for r in records),
                         append_time_ms=STORY_START_MS + at_ms if timed else None))
    return out


def story_timeline(batches: list[Batch]) -> Timeline:
    """The time-axis tables of a story log's batches (all committed), without Spark."""
    records = [TimedRecord(batch.base_offset + index, batch.epoch, batch.append_time_ms,
                           decode(data))
               for batch in batches for index, data in enumerate(batch.records)]
    return timeline(records, MetadataImage())


# (kind, target, ms after STORY_START_MS it started, healed): the faults that "caused" the
# story: each fencing follows a fault on its broker within a second of its end, each
# election falls inside a partition fault, and orders loses its leaders during a kill of
# broker 6; the slow disk matches nothing.
STORY_FAULTS = (("partition", 2, 800, 1100), ("kill", 4, 1000, 1400),
                ("pause", 5, 1800, 1950), ("kill", 6, 2400, 2900),
                ("partition-one-way", 3, 3800, 4100), ("slow-disk", 1, 5200, 5500))


def write_story_faults(path: Path) -> Path:
    """STORY_FAULTS as `kraft chaos` writes its fault log (tools/chaos/nemesis.py)."""
    path.write_text("".join(json.dumps({
        "kind": kind, "target": target, "leader": False,
        "amount": 100 if kind == "slow-disk" else None, "start_ms": STORY_START_MS + start,
        "end_ms": STORY_START_MS + end, "error": None}) + "\n"
        for kind, target, start, end in STORY_FAULTS), encoding="utf-8")
    return path
