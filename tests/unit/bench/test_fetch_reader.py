"""The broker bench's in-place reader of a Fetch v13 response finds the bytes kio decodes
as the records, and refuses an error code or a response of another shape."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.broker_bench import fetched_records, next_offset
from raft.common.kafka.codec import build, encode_response, response_class
from tools.cluster import ClusterError

FETCH_V13 = response_class(1, 13)


def _frame(partitions: list[dict[str, Any]], *, error: int = 0, topics: int = 1) -> memoryview:
    response = build(FETCH_V13, {
        "throttle_time_ms": 7, "error_code": error, "session_id": 3,
        "responses": [{"topic_id": uuid.UUID(int=5), "partitions": partitions}] * topics})
    return memoryview(encode_response(12345, response))[4:]  # after the size prefix


def _partition(records: bytes, **fields: Any) -> dict[str, Any]:
    return {"partition_index": 0, "error_code": 0, "high_watermark": 1 << 40,
            "last_stable_offset": 1 << 40, "log_start_offset": 300,
            "aborted_transactions": [], "records": records, **fields}


@given(records=st.binary(max_size=3000), high_watermark=st.integers(0, (1 << 63) - 1),
       preferred=st.integers(-1, 1 << 30))
def test_the_records_are_the_bytes_kio_decodes(records: bytes, high_watermark: int,
                                               preferred: int) -> None:
    frame = _frame([_partition(records, high_watermark=high_watermark,
                               preferred_read_replica=preferred)])
    assert bytes(fetched_records(frame)) == records


def test_tagged_fields_after_the_records_are_not_taken_for_records() -> None:
    records = bytes(range(200))
    frame = _frame([_partition(records, current_leader={"leader_id": 2, "leader_epoch": 9},
                               diverging_epoch={"epoch": 4, "end_offset": 80})])
    assert bytes(fetched_records(frame)) == records


@pytest.mark.parametrize(("frame", "says"), [
    (lambda: _frame([_partition(b"")], error=3), "error 3"),
    (lambda: _frame([_partition(b"", error_code=6)]), "error 6"),
    (lambda: _frame([_partition(b""), _partition(b"")]), "2 partitions"),
    (lambda: _frame([_partition(b"")], topics=2), "2 topics"),
    (lambda: _frame([_partition(b"", aborted_transactions=[
        {"producer_id": 1, "first_offset": 0}])]), "aborted"),
])
def test_an_error_or_another_shape_is_refused(frame: Any, says: str) -> None:
    with pytest.raises(ClusterError, match=says):
        fetched_records(frame())


def test_next_offset_is_after_the_last_batch() -> None:
    def batch(base: int, last_delta: int, size: int) -> bytes:
        # leader epoch, magic, CRC, attributes; then the last offset delta
        body = bytes(11) + last_delta.to_bytes(4, "big") + bytes(size - 15)
        return base.to_bytes(8, "big") + len(body).to_bytes(4, "big") + body

    assert next_offset(batch(10, 4, 60) + batch(15, 2, 40)) == 18
    assert next_offset(memoryview(batch(0, 0, 61))) == 1
