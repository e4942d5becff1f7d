"""`metadata.fast_records` against the strict codec (`metadata.records.decode`): the same
record for every record type, the same RecordError (type and message) for bytes that are
truncated, mistyped, of an unknown record type or no msgpack at all; partition images
shared by every record that ends alike, and the same results past the cache's bound.
`MetadataDelta.apply_records` against `apply_bytes_reference`, record by record, with
the garbage collector left as it was found, also when a record raises."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import msgpack
import pytest
from hypothesis import given, reject
from hypothesis import strategies as st

from metadata import fast_records
from metadata import records as rec
from metadata.delta import MetadataDelta
from metadata.fast_records import MAX_CACHED_TAILS, TOPIC_ID, PartitionDecoder
from metadata.image import MetadataImage
from raft.common.uuid import Uuid
from tests.support.codec_mutations import mutations
from tests.support.metadata_strategies import TOPIC_IDS, metadata_logs
from tests.support.record_strategies import (
    ANY_RECORD,
    EDGE_VALUES,
    INT64,
    JUNK,
    PARTITION_FIELDS,
    UUIDS,
)

INT64S = st.integers(-INT64, INT64 - 1)
UNKNOWN_TYPES = st.integers(-INT64, (1 << 64) - 1).filter(lambda t: t not in rec.RECORD_CLASSES)


def outcome(decode: Callable[[bytes], rec.Record], data: bytes) -> tuple[str, Any]:
    try:
        return "ok", decode(data)
    except rec.RecordError as exc:
        return type(exc).__name__, str(exc)


def fast(data: bytes) -> rec.Record:
    return fast_records.decode(data, PartitionDecoder())  # a cold cache: the decode itself


@st.composite
def partitions(draw: st.DrawFn) -> rec.Partition:
    """A Partition record in the common shape (no leader-epoch maps or reassignment),
    64-bit ints anywhere."""
    return rec.Partition(
        topic_id=draw(UUIDS), partition=draw(INT64S),
        replicas=tuple(draw(st.lists(INT64S, max_size=4))),
        isr=tuple(draw(st.lists(INT64S, max_size=4))), leader=draw(INT64S),
        leader_epoch=draw(INT64S), partition_epoch=draw(INT64S))


@st.composite
def broken(draw: st.DrawFn) -> bytes:
    """A record's bytes made invalid: truncated, a field of a wrong type, an unknown
    record type, a map of junk for a known type, or bytes that are no msgpack map."""
    record = draw(ANY_RECORD | partitions())
    body = record.to_dict()
    data = record.encode()
    kind = draw(st.sampled_from(["truncate", "mutate", "unknown", "junk", "bytes"]))
    if kind == "truncate":
        return data[:draw(st.integers(0, len(data) - 1))]
    if kind == "mutate":
        _, _, body = draw(mutations(body))
    elif kind == "unknown":
        body["type"] = draw(UNKNOWN_TYPES)
    elif kind == "junk":
        names = [*body, "future"]
        body.update(draw(st.dictionaries(st.sampled_from(names), JUNK, max_size=4)))
    else:
        return draw(st.binary(max_size=40))
    try:
        return bytes(msgpack.packb(body, use_bin_type=True))
    except OverflowError:  # junk beyond msgpack's 64 bits: no bytes can hold it
        reject()


@given(ANY_RECORD | partitions())
def test_decode_equals_the_strict_codec_when_a_record_of_any_type_is_valid(
        record: rec.Record) -> None:
    data = record.encode()
    assert fast(data) == rec.decode(data) == record


@given(broken())
def test_decode_raises_what_the_strict_codec_raises_when_bytes_are_invalid(
        data: bytes) -> None:
    assert outcome(fast, data) == outcome(rec.decode, data)


@pytest.mark.parametrize("field", PARTITION_FIELDS)
@pytest.mark.parametrize("value", EDGE_VALUES, ids=repr)
def test_decode_raises_what_the_strict_codec_raises_when_a_partition_field_is_an_edge(
        field: str, value: Any) -> None:
    body = rec.Partition(topic_id=TOPIC_IDS[0], partition=1, replicas=(2, 1), isr=(2,),
                         leader=2, leader_epoch=4, partition_epoch=5).to_dict()
    body[field] = value  # in its place: the bytes keep the common shape's prefix
    data = msgpack.packb(body, use_bin_type=True)
    assert outcome(fast, data) == outcome(rec.decode, data)


@given(st.lists(partitions() | broken(), min_size=1, max_size=30), st.data())
def test_a_warm_decoder_decodes_as_a_cold_one_when_records_share_tails(
        items: list[rec.Partition | bytes], data: st.DataObject) -> None:
    """Every record again under other topic IDs: the tail's cached image (or its
    refusal) stands for the whole record."""
    decoder = PartitionDecoder()
    for item in items:
        encoded = item.encode() if isinstance(item, rec.Partition) else item
        for topic_id in data.draw(st.lists(UUIDS, min_size=1, max_size=3)):
            again = (encoded[:TOPIC_ID.start] + topic_id.to_bytes() + encoded[TOPIC_ID.stop:]
                     if encoded.startswith(fast_records.PARTITION_PREFIX) else encoded)
            assert outcome(lambda d: fast_records.decode(d, decoder), again) == \
                outcome(rec.decode, again)


def test_records_that_end_alike_share_one_partition_image() -> None:
    decoder = PartitionDecoder()
    first, second = (rec.Partition(topic_id=t, partition=3, replicas=(1, 2, 3), isr=(1, 2),
                                   leader=1).encode() for t in TOPIC_IDS[:2])
    image = decoder.image(first)
    assert image is not None
    assert decoder.image(second) is image
    assert (image.partition, image.replicas, image.isr, image.leader) == (3, (1, 2, 3),
                                                                         (1, 2), 1)
    body = rec.decode(first).to_dict()
    del body["partition_epoch"]
    body["future"] = 0  # nine keys, but not the nine: the strict codec's to refuse
    unknown = msgpack.packb(body, use_bin_type=True)
    assert unknown.startswith(fast_records.PARTITION_PREFIX)
    assert decoder.image(unknown) is None
    with pytest.raises(rec.RecordError, match="unknown field"):
        fast_records.decode(unknown, decoder)


def test_decode_is_unchanged_when_more_tails_than_the_cache_keeps_pass() -> None:
    decoder = PartitionDecoder()
    records = [rec.Partition(topic_id=TOPIC_IDS[0], partition=p, replicas=(1,), isr=(),
                             leader=1) for p in range(MAX_CACHED_TAILS + 10)]
    for record in records + records[:20]:
        assert fast_records.decode(record.encode(), decoder) == record


@contextmanager
def collector(enabled: bool) -> Iterator[None]:
    was_enabled = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        yield
    finally:
        (gc.enable if was_enabled else gc.disable)()


@pytest.mark.parametrize("enabled", [True, False])
@given(metadata_logs(max_steps=20), st.data())
def test_apply_records_equals_the_reference_and_leaves_the_collector_as_found(
        enabled: bool, log: list[tuple[int, bytes]], data: st.DataObject) -> None:
    records = [item for _, item in log]
    for _ in range(data.draw(st.integers(0, 3))):
        records.insert(data.draw(st.integers(0, len(records))), data.draw(broken()))
    base = data.draw(st.integers(0, 5))
    bulk, plain = MetadataDelta(MetadataImage.empty()), MetadataDelta(MetadataImage.empty())
    with collector(enabled):
        bulk.apply_records(records, base)
        assert gc.isenabled() is enabled
    for offset, item in enumerate(records, start=base):
        plain.apply_bytes_reference(item, offset)
    assert bulk.last_applied_offset == plain.last_applied_offset
    one, other = bulk.build(), plain.build()
    assert (one.content_hash(), one.anomalies) == (other.content_hash(), other.anomalies)


def test_apply_records_turns_the_collector_back_on_when_a_record_raises() -> None:
    delta = MetadataDelta(MetadataImage.empty())
    topic = rec.Topic(name="a", topic_id=Uuid(7)).encode()
    with collector(True):
        delta.apply_records([topic], 5)
        with pytest.raises(ValueError, match="not after the last applied offset"):
            delta.apply_records([topic], 5)  # offsets going backwards: a caller bug
        assert gc.isenabled()
