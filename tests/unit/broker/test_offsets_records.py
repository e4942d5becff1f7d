"""broker.kafka.groups.offsets_records: Kafka's group -> partition hash, the record format of
__consumer_offsets and its magic v2 batches."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.kafka.groups.offsets_records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_batches,
    decode_key,
    decode_value,
    encode_batch,
    encode_key,
    encode_value,
    java_string_hashcode,
    kafka_abs,
    partition_for,
)
from broker.kafka.partitions.partition_log import split_batches


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0), ("a", 97), ("hello", 99162322), ("Aa", 2112), ("BB", 2112),
    ("polygenelubricants", -(1 << 31)),  # Java's String.hashCode is Integer.MIN_VALUE
    ("\U0001F600", 1772899),  # one code point, two UTF-16 units: 55357 * 31 + 56832
])
def test_java_hashcode_matches_java_when_known_strings_hashed(text: str, expected: int
                                                              ) -> None:
    assert java_string_hashcode(text) == expected


def test_min_value_hash_goes_to_partition_zero_when_kafka_abs_used() -> None:
    """Kafka's Utils.abs maps MIN_VALUE to 0 (Math.abs would stay negative)."""
    assert kafka_abs(-(1 << 31)) == 0
    assert kafka_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50


@given(st.text(), st.integers(min_value=1, max_value=1000))
def test_partition_in_range_and_hash_is_int32_when_any_group_hashed(group: str, n: int
                                                                     ) -> None:
    assert -(1 << 31) <= java_string_hashcode(group) < 1 << 31
    assert 0 <= partition_for(group, n) < n


names = st.text(max_size=20)
offset_keys = st.builds(OffsetKey, group_id=names, topic=names,
                        partition=st.integers(0, 1 << 20))
offset_values = st.builds(OffsetValue, offset=st.integers(-1, 1 << 62),
                          leader_epoch=st.integers(-1, 1 << 30),
                          metadata=st.none() | names, commit_timestamp=st.integers(0, 1 << 50))
members = st.builds(MemberValue, member_id=names, instance_id=st.none() | names,
                    client_id=names, client_host=names,
                    session_timeout_ms=st.integers(1, 1 << 30),
                    rebalance_timeout_ms=st.integers(1, 1 << 30),
                    subscription=st.binary(max_size=40), assignment=st.binary(max_size=40))
group_values = st.builds(GroupValue, protocol_type=st.none() | names,
                         protocol=st.none() | names, generation=st.integers(0, 1 << 30),
                         leader=st.none() | names,
                         members=st.lists(members, max_size=4).map(tuple))


@given(st.one_of(st.tuples(offset_keys, st.none() | offset_values),
                 st.tuples(st.builds(GroupKey, group_id=names), st.none() | group_values)))
def test_key_and_value_round_trip_when_encoded(pair: tuple[object, object]) -> None:
    key, value = pair
    assert isinstance(key, OffsetKey | GroupKey)
    assert value is None or isinstance(value, OffsetValue | GroupValue)
    assert decode_key(encode_key(key)) == key
    assert decode_value(key, encode_value(value)) == value


@given(st.lists(st.tuples(st.binary(min_size=1, max_size=30),
                          st.none() | st.binary(max_size=60)), min_size=1, max_size=20),
       st.integers(0, 1 << 40))
def test_batch_round_trips_and_passes_the_log_check_when_records_encoded(
        records: list[tuple[bytes, bytes | None]], base: int) -> None:
    """What the coordinator appends is a valid magic v2 batch for the partition log
    (framing, CRC32C), and decoding it at any base offset gives back every record."""
    batch = bytearray(encode_batch(records, timestamp_ms=123))
    assert split_batches(bytes(batch)) == [bytes(batch)]
    batch[0:8] = base.to_bytes(8, "big")  # the leader's log stamps the base offset
    decoded = list(decode_batches(bytes(batch) * 2))
    assert decoded == [(base + i, k, v) for i, (k, v) in enumerate(records)] * 2


def test_compressed_batch_skipped_and_truncated_one_refused_when_decoded() -> None:
    batch = bytearray(encode_batch([(b"k", b"v")], timestamp_ms=1))
    batch[22] |= 0x01  # attributes (low byte): gzip
    assert list(decode_batches(bytes(batch))) == []
    with pytest.raises(RecordFormatError):
        list(decode_batches(encode_batch([(b"k", b"v")], timestamp_ms=1)[:-3]))


def test_unknown_key_kind_skipped_and_garbage_refused_when_decoded() -> None:
    import msgpack
    assert decode_key(msgpack.packb([7, "future"])) is None
    with pytest.raises(RecordFormatError):
        decode_key(b"\xc1")
    with pytest.raises(RecordFormatError):
        decode_value(OffsetKey(group_id="g", topic="t", partition=0),
                     msgpack.packb({"offset": "not a number"}))
