"""The chaos run's producer lookup (tools/chaos/final.py `with_producers`): each record read
back is given the producer id and epoch of the batch that holds it, read from the brokers'
partition segment files as a broker writes them, from the longest copy."""

from __future__ import annotations

import struct
from pathlib import Path

from broker.kafka.partitions.segments import segment_name
from broker.partition_dir import write_partition_metadata
from raft.common.kafka.record_batch import encode_batch
from raft.common.uuid import Uuid
from tools.chaos.checker import ReadRecord
from tools.chaos.final import with_producers

TOPIC = Uuid(0xB0B)
OTHER = Uuid(0xCAFE)


def write_copy(log_dir: Path, batches: list[tuple[int, int, int, int]], *,
               topic: str = "orders", topic_id: Uuid = TOPIC) -> None:
    """`topic-0` with (base offset, records, producer id, epoch) batches, two per segment."""
    directory = log_dir / f"{topic}-0"
    directory.mkdir(parents=True)
    write_partition_metadata(directory, topic_id)
    for index in range(0, len(batches), 2):
        data = b""
        for base, count, producer_id, epoch in batches[index:index + 2]:
            batch = bytearray(encode_batch([(None, b"v")] * count, timestamps=[0] * count,
                                           producer_id=producer_id, producer_epoch=epoch,
                                           base_sequence=0 if producer_id >= 0 else -1))
            struct.pack_into(">q", batch, 0, base)
            data += bytes(batch)
        (directory / segment_name(batches[index][0])).write_bytes(data)


def reads(offsets: range, topic_id: Uuid = TOPIC) -> list[ReadRecord]:
    return [ReadRecord(topic_id=str(topic_id), partition=0, offset=o, value=f"v{o}")
            for o in offsets]


def test_each_record_gets_its_batchs_producer_from_the_longest_copy(tmp_path: Path) -> None:
    full = [(0, 2, 7, 0), (2, 3, 7, 0), (5, 1, -1, -1), (6, 2, 7, 1), (8, 1, 9, 4)]
    write_copy(tmp_path / "node-4", full)
    write_copy(tmp_path / "node-5", full[:2])  # a lagging copy: not the one read
    write_copy(tmp_path / "node-6", [(0, 9, 3, 3)], topic="other", topic_id=OTHER)
    found = with_producers(reads(range(10)), {4: tmp_path / "node-4",
                                              5: tmp_path / "node-5",
                                              6: tmp_path / "node-6"}, str(TOPIC))
    assert [r.producer for r in found] == [
        (7, 0), (7, 0), (7, 0), (7, 0), (7, 0), (-1, -1), (7, 1), (7, 1), (9, 4), None]
    assert [r.offset for r in found] == list(range(10))


def test_records_of_a_topic_no_broker_holds_keep_no_producer(tmp_path: Path) -> None:
    write_copy(tmp_path / "node-4", [(0, 2, 7, 0)], topic_id=OTHER)
    found = with_producers(reads(range(2)), {4: tmp_path / "node-4"}, str(TOPIC))
    assert [r.producer for r in found] == [None, None]
