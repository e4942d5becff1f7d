"""Kafka's batch codecs (broker.kafka.partitions.compression) and a batch stored in a
topic's codec (batch_rewrite.recompressed, record_policy.in_topic_codec): every codec
round-trips, both snappy framings read, a body that does not decode is one error, and a
re-compressed batch keeps its records, offsets, producer fields and a valid CRC."""

from __future__ import annotations

import struct

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from broker.kafka.partitions import compression
from broker.kafka.partitions.batch_rewrite import batch_records, recompressed
from broker.kafka.partitions.producer_state import read_header
from broker.kafka.partitions.record_policy import in_topic_codec
from raft.common.kafka.record_batch import encode_batch
from tests.support.kafka_support import with_producer

CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4,
          compression.ZSTD]
records_st = st.lists(st.tuples(st.none() | st.binary(max_size=20),
                                st.none() | st.binary(max_size=200)),
                      min_size=1, max_size=20)


@given(st.sampled_from(CODECS), st.binary(max_size=100_000))
def test_every_codec_round_trips(codec: int, body: bytes) -> None:
    assert compression.decompress(codec, compression.compress(codec, body)) == body


def test_snappy_reads_javas_xerial_frames_and_raw_blocks() -> None:
    body = bytes(range(256)) * 300  # more than one 32 KiB xerial block
    framed = compression.compress(compression.SNAPPY, body)
    assert framed.startswith(compression.XERIAL_MAGIC)
    assert compression.decompress(compression.SNAPPY, framed) == body
    raw = bytes(cramjam.snappy.compress_raw(body))
    assert compression.decompress(compression.SNAPPY, raw) == body


@pytest.mark.parametrize("codec", CODECS[1:] + [5])
def test_a_body_that_does_not_decode_is_one_error(codec: int) -> None:
    with pytest.raises(compression.CompressionError):
        compression.decompress(codec, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
                                      b"\x7f\xff\xff\xffnot a body")


@given(records_st, st.sampled_from(CODECS), st.sampled_from(CODECS))
def test_a_recompressed_batch_keeps_its_records_and_header(
        records: list[tuple[bytes | None, bytes | None]], first: int, then: int) -> None:
    plain = with_producer(encode_batch(records, timestamps=list(range(len(records)))),
                          producer_id=7, base_sequence=3)
    batch = recompressed(recompressed(plain, first), then)
    header, original = read_header(batch), read_header(plain)
    assert header.attributes & compression.CODEC_MASK == then
    assert (header.producer_id, header.base_sequence, header.last_offset_delta) == \
        (original.producer_id, original.base_sequence, original.last_offset_delta)
    assert struct.unpack_from(">I", batch, 17)[0] == crc32c(batch[21:])
    assert struct.unpack_from(">i", batch, 8)[0] == len(batch) - 12
    assert batch_records(batch) == batch_records(plain)


def test_a_topic_stores_batches_in_its_codec_or_as_sent() -> None:
    plain = encode_batch([(b"k", b"v" * 500)], timestamps=[1])
    (as_sent,) = in_topic_codec({}, [plain])
    assert as_sent is plain  # producer, the default
    (zstd,) = in_topic_codec({"compression.type": "zstd"}, [plain])
    assert read_header(zstd).attributes & compression.CODEC_MASK == compression.ZSTD
    assert len(zstd) < len(plain)
    (back,) = in_topic_codec({"compression.type": "uncompressed"}, [zstd])
    assert back == plain
