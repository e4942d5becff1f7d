"""tools.commands.delete_records: kafka-delete-records.sh's offset file, and its lines."""

from __future__ import annotations

import pytest

from raft.common.errors import ErrorCode
from tools.commands.delete_records import Deletion, parse_offsets, result_line


def test_offset_file_as_kafka_writes_it() -> None:
    text = ('{"partitions": [{"topic": "orders", "partition": 0, "offset": 42}, '
            '{"topic": "orders", "partition": 1, "offset": -1}], "version": 1}')
    assert parse_offsets(text) == [Deletion("orders", 0, 42), Deletion("orders", 1, -1)]


@pytest.mark.parametrize(("text", "named"), [
    ("{", "not JSON"),
    ("[]", '"partitions"'),
    ('{"partitions": []}', '"partitions"'),
    ('{"partitions": [{"topic": "t", "partition": 0}]}', "partitions[0]"),
    ('{"partitions": [{"topic": "t", "partition": -1, "offset": 0}]}', "partitions[0]"),
    ('{"partitions": [{"topic": "t", "partition": 0, "offset": -2}]}', "partitions[0]"),
    ('{"partitions": [{"topic": "t", "partition": 0, "offset": true}]}', "partitions[0]"),
    ('{"partitions": [{"topic": "t", "partition": 0, "offset": 1}, '
     '{"topic": "t", "partition": 0, "offset": 2}]}', "more than once"),
])
def test_bad_offset_file_is_one_error_naming_what_is_wrong(text: str, named: str) -> None:
    with pytest.raises(ValueError, match=named.replace("[", r"\[").replace("]", r"\]")):
        parse_offsets(text)


def test_result_lines_as_kafka_delete_records_prints_them() -> None:
    assert result_line(Deletion("t", 3, 5), 0, 5) == "partition: t-3\tlow_watermark: 5"
    assert result_line(Deletion("t", 3, 9), int(ErrorCode.OFFSET_OUT_OF_RANGE), -1) == \
        "partition: t-3\terror: OFFSET_OUT_OF_RANGE"
