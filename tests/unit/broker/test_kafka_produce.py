"""broker.kafka.partitions.produce / fetch / admin_api through the dispatcher: idempotent producers'
errors, Produce v13 by topic ID, acks=0 failures, transactions refused, producer-ID
blocks, ListOffsets by timestamp and MAX_TIMESTAMP, DeleteTopics naming both."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema

from broker import partition_dir
from broker.kafka.partitions import produce as produce_module
from broker.kafka.partitions.partition_log import record_timestamps, split_batches
from broker.kafka.partitions.produce import (
    PRODUCER_ID_BLOCK_BITS,
    next_producer_id,
    producer_id_block,
)
from broker.kafka.partitions.producer_state import read_header
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import ConnectionClosed, build
from raft.common.kafka.wire_client import encode_request
from tests.support.kafka_support import (
    BROKER,
    OLD_TOPIC_ID,
    TOPIC_ID,
    image_with_topic,
    record_batch,
    with_producer,
)
from tests.unit.broker.test_kafka_listener import make_dispatcher, roundtrip
from tools.commands.produce import encode_batch

KNOWN = uuid.UUID(bytes=TOPIC_ID.to_bytes())


def produce(version: int, records: bytes, *, acks: int = 1, topic_id: uuid.UUID | None = None,
            name: str = "A", transactional_id: str | None = None) -> Any:
    topic: dict[str, Any] = {"topic_id": topic_id} if version >= 13 else {"name": name}
    return build(load_request_schema(0, version), {
        "acks": acks, "timeout": 5000, "transactional_id": transactional_id,
        "topic_data": [{**topic, "partition_data": [{"index": 0, "records": records}]}]})


def answer(response: Any) -> tuple[ErrorCode, int]:
    part = response.responses[0].partition_responses[0]
    return part.error_code, int(part.base_offset)


async def test_keyless_records_of_a_compacted_topic_are_each_named_when_refused(
        tmp_path: Path) -> None:
    """INVALID_RECORD with each keyless record's index in record_errors, as Kafka's: a
    client fails just those records with INVALID_RECORD and the rest of the batch with
    _INVALID_DIFFERENT_RECORD (librdkafka's 0011_produce_batch counts them); nothing of
    the batch is stored."""
    image = image_with_topic(configs={"cleanup.policy": "compact,delete"})
    dispatcher = make_dispatcher(tmp_path, image)
    batch = encode_batch([b"a", b"b", b"c", b"d"], keys=[None, b"k", None, b"k"])
    part = (await roundtrip(dispatcher, produce(9, batch))).responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.INVALID_RECORD
    assert [e.batch_index for e in part.record_errors] == [0, 2]
    keyed = encode_batch([b"e"], keys=[b"k"])
    assert answer(await roundtrip(dispatcher, produce(9, keyed))) == (ErrorCode.NONE, 0)


async def test_idempotent_errors_and_duplicates_answered_as_kafka(tmp_path: Path) -> None:
    """A retry of any of the last 5 batches gets its original offset; a gap is
    OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch INVALID_PRODUCER_EPOCH; nothing of a
    refused batch is stored."""
    dispatcher = make_dispatcher(tmp_path)
    for seq in range(3):
        batch = with_producer(record_batch([b"v", b"w"]), 41, 2 * seq, epoch=1)
        assert answer(await roundtrip(dispatcher, produce(9, batch))) == (ErrorCode.NONE,
                                                                          2 * seq)
    retry = with_producer(record_batch([b"v", b"w"]), 41, 2, epoch=1)
    assert answer(await roundtrip(dispatcher, produce(13, retry, topic_id=KNOWN))) == \
        (ErrorCode.NONE, 2)
    gap = with_producer(record_batch([b"g"]), 41, 7, epoch=1)
    assert answer(await roundtrip(dispatcher, produce(9, gap)))[0] == \
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    stale = with_producer(record_batch([b"s"]), 41, 6, epoch=0)
    assert answer(await roundtrip(dispatcher, produce(9, stale)))[0] == \
        ErrorCode.INVALID_PRODUCER_EPOCH
    following = with_producer(record_batch([b"n"]), 41, 6, epoch=1)
    assert answer(await roundtrip(dispatcher, produce(9, following))) == (ErrorCode.NONE, 6)


@pytest.mark.parametrize("version", [10, 11, 12])
async def test_produce_by_name_when_versions_ten_to_twelve(tmp_path: Path,
                                                           version: int) -> None:
    dispatcher = make_dispatcher(tmp_path)
    assert answer(await roundtrip(dispatcher, produce(version, record_batch([b"x"])))) == \
        (ErrorCode.NONE, 0)


async def test_produce_v13_by_topic_id_and_unknown_ids_refused(tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path)
    assert answer(await roundtrip(dispatcher, produce(13, record_batch([b"x"]),
                                                      topic_id=KNOWN))) == (ErrorCode.NONE, 0)
    for topic_id in (uuid.UUID(bytes=OLD_TOPIC_ID.to_bytes()), uuid.UUID(int=0)):
        response = await roundtrip(dispatcher, produce(13, record_batch([b"y"]),
                                                       topic_id=topic_id))
        assert answer(response) == (ErrorCode.UNKNOWN_TOPIC_ID, -1)
        assert response.responses[0].topic_id == (topic_id if topic_id.int else None)


async def test_produce_v13_fenced_when_partition_directory_holds_another_id(
        tmp_path: Path) -> None:
    """The same topic-ID fencing as Fetch: a directory of another incarnation of the
    topic is never appended to as this one."""
    dispatcher = make_dispatcher(tmp_path)
    partition_dir.write_partition_metadata(tmp_path / "A-0", OLD_TOPIC_ID)
    response = await roundtrip(dispatcher, produce(13, record_batch([b"x"]), topic_id=KNOWN))
    assert answer(response)[0] == ErrorCode.INCONSISTENT_TOPIC_ID


async def test_acks_zero_failure_closes_the_connection(tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path)
    unknown = produce(9, record_batch([b"x"]), acks=0, name="nope")
    with pytest.raises(ConnectionClosed):
        await dispatcher.handle_frame(encode_request(unknown)[4:])
    fine = produce(9, record_batch([b"x"]), acks=0)
    assert await dispatcher.handle_frame(encode_request(fine)[4:]) is None


async def test_transactional_producers_refused_with_a_fatal_error(tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path)
    init = build(load_request_schema(22, 4), {"transactional_id": "tx",
                                              "transaction_timeout": 60000,
                                              "producer_id": -1, "producer_epoch": -1})
    assert (await roundtrip(dispatcher, init)).error_code == \
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    find = build(load_request_schema(10, 3), {"key": "tx", "key_type": 1})
    assert (await roundtrip(dispatcher, find)).error_code == \
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    group = build(load_request_schema(10, 3), {"key": "g", "key_type": 0})
    assert produce_module.refuse_transaction_coordinator(group) is None  # groups' own
    transactional = produce(9, record_batch([b"x"]), transactional_id="tx")
    assert answer(await roundtrip(dispatcher, transactional))[0] == \
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


async def test_producer_ids_come_from_this_incarnations_block(tmp_path: Path) -> None:
    """Unique cluster-wide: the block of broker epoch E is [E * 2**24, (E + 1) * 2**24),
    disjoint from every other registration's (each has its own metadata offset)."""
    dispatcher = make_dispatcher(tmp_path)
    context = dispatcher.context
    init = build(load_request_schema(22, 4), {"transactional_id": None,
                                              "transaction_timeout": 60000,
                                              "producer_id": -1, "producer_epoch": -1})
    unregistered = await roundtrip(dispatcher, init)
    assert unregistered.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    context.broker_epoch = lambda: 5
    ids = [int((await roundtrip(dispatcher, init)).producer_id) for _ in range(3)]
    assert ids == [5 << PRODUCER_ID_BLOCK_BITS, (5 << PRODUCER_ID_BLOCK_BITS) + 1,
                   (5 << PRODUCER_ID_BLOCK_BITS) + 2]
    context.broker_epoch = lambda: 6  # a new registration starts its own block
    assert next_producer_id(context) == (ErrorCode.NONE, 6 << PRODUCER_ID_BLOCK_BITS)
    context.producer_ids_issued = (6, 1 << PRODUCER_ID_BLOCK_BITS)
    assert next_producer_id(context)[0] == ErrorCode.UNKNOWN_SERVER_ERROR
    blocks = [producer_id_block(e) for e in (0, 1, 2)]
    assert all(a.stop <= b.start for a, b in zip(blocks, blocks[1:], strict=False))


async def list_offsets(dispatcher: Any, timestamp: int) -> tuple[int, int, int]:
    request = build(load_request_schema(2, 7), {"replica_id": -1, "topics": [{
        "name": "A", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]})
    part = (await roundtrip(dispatcher, request)).topics[0].partitions[0]
    assert part.error_code == ErrorCode.NONE
    return int(part.offset), int(part.timestamp), int(part.leader_epoch)


async def test_list_offsets_by_timestamp_per_record_and_max_timestamp(tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path)
    await roundtrip(dispatcher, produce(9, record_batch([b"a", b"b", b"c"],
                                                        timestamps=[100, 300, 200])))
    assert await list_offsets(dispatcher, 150) == (1, 300, 0)
    assert await list_offsets(dispatcher, 301) == (-1, -1, -1)  # none: not the log end
    assert await list_offsets(dispatcher, -3) == (1, 300, 0)  # MAX_TIMESTAMP
    assert await list_offsets(dispatcher, -1) == (3, -1, 0)
    assert await list_offsets(dispatcher, -2) == (0, -1, 0)


async def test_list_offsets_hides_records_above_the_high_watermark(tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path, image_with_topic(replicas=(BROKER, 5)))
    await roundtrip(dispatcher, produce(9, record_batch([b"a"], timestamps=[50])))
    assert await list_offsets(dispatcher, -1) == (0, -1, 0)  # not replicated yet
    assert await list_offsets(dispatcher, 10) == (-1, -1, -1)
    assert await list_offsets(dispatcher, -3) == (-1, -1, -1)


async def test_delete_topics_naming_both_name_and_id_is_an_invalid_request(
        tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path)
    request = build(load_request_schema(20, 6), {"timeout": 1000, "topics": [
        {"name": "A", "topic_id": KNOWN}, {"name": None, "topic_id": uuid.UUID(int=0)},
        {"name": "A", "topic_id": uuid.UUID(int=0)}]})
    both, neither, by_name = (await roundtrip(dispatcher, request)).responses
    assert both.error_code == neither.error_code == ErrorCode.INVALID_REQUEST
    assert "both" in (both.error_message or "")
    assert by_name.error_code == ErrorCode.NOT_CONTROLLER  # forwarded (no controller here)
    assert by_name.name == "A"


def test_kraft_produce_batch_is_a_valid_idempotent_batch() -> None:
    """`kraft produce`'s encoder: a batch the broker accepts, with the producer's id,
    epoch and base sequence, one offset per value."""
    batch = encode_batch([b"a", b"bc"], producer_id=9, producer_epoch=2, base_sequence=0,
                         timestamp_ms=77)
    (only,) = split_batches(batch)
    header = read_header(only)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 2, 0)
    assert (header.last_offset_delta, header.max_timestamp) == (1, 77)
    assert record_timestamps(only) == [(0, 77), (1, 77)]
