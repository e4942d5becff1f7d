"""A topic's record policy on produce (broker/kafka/partitions/record_policy.py):
max.message.bytes, the CreateTime bounds around the broker's clock (every record, not
only the batch's first and largest), and LogAppendTime's stamp, which a consumer's CRC
check still accepts."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.kafka.partitions.partition_log import split_batches
from broker.kafka.partitions.producer_state import read_header
from broker.kafka.partitions.record_policy import (
    LOG_APPEND_TIME_FLAG,
    refusal,
    stamp_log_append_time,
)
from raft.common.errors import ErrorCode
from tests.support.kafka_support import record_batch

NOW = 1_700_000_000_000


def test_a_batch_larger_than_max_message_bytes_is_refused() -> None:
    batch = record_batch([b"x" * 100])
    assert refusal({"max.message.bytes": str(len(batch))}, [batch], NOW) is None
    refused = refusal({"max.message.bytes": str(len(batch) - 1)}, [batch], NOW)
    assert refused is not None
    assert refused[0] == ErrorCode.MESSAGE_TOO_LARGE


@given(offsets=st.lists(st.integers(-10_000, 10_000), min_size=1, max_size=5),
       before=st.integers(0, 5_000), after=st.integers(0, 5_000))
def test_every_records_timestamp_is_held_to_the_bounds(offsets: list[int], before: int,
                                                       after: int) -> None:
    batch = record_batch([b"v"] * len(offsets), timestamps=[NOW + o for o in offsets])
    configs = {"message.timestamp.before.max.ms": str(before),
               "message.timestamp.after.max.ms": str(after)}
    refused = refusal(configs, [batch], NOW)
    inside = all(-before <= o <= after for o in offsets)
    assert (refused is None) == inside
    if refused is not None:
        assert refused[0] == ErrorCode.INVALID_TIMESTAMP


def test_the_deprecated_difference_bounds_both_ways() -> None:
    configs = {"message.timestamp.difference.max.ms": "1000"}
    for stamp, ok in ((NOW - 1000, True), (NOW + 1000, True), (NOW - 1001, False),
                      (NOW + 1001, False)):
        assert (refusal(configs, [record_batch([b"v"], base_timestamp=stamp)], NOW)
                is None) == ok


def test_log_append_time_topics_refuse_no_timestamp() -> None:
    configs = {"message.timestamp.type": "LogAppendTime",
               "message.timestamp.before.max.ms": "0"}
    assert refusal(configs, [record_batch([b"v"], base_timestamp=0)], NOW) is None


@pytest.mark.parametrize("count", [1, 3])
def test_the_stamp_marks_the_batch_and_keeps_it_valid(count: int) -> None:
    batch = record_batch([b"v"] * count, base_timestamp=5)
    stamped = stamp_log_append_time(batch, NOW)
    assert split_batches(stamped) == [stamped]  # framing and CRC32C still check out
    header = read_header(stamped)
    assert header.attributes & LOG_APPEND_TIME_FLAG
    assert header.max_timestamp == NOW
    assert stamped[61:] == batch[61:]  # the records keep their own
    assert struct.unpack_from(">q", stamped, 27) == (5,)
