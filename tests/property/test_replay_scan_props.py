"""The replay scan follows only the topics a batch may resize (`sequential.resize_topics`):
on any metadata log cut into batches of any size it finds exactly what it finds when it
follows every topic a partition record names, as it did before (violations, counts,
claims, aggregates). The logs (`tests.support.metadata_strategies`) hold KIP-253 counts,
marks and removals, records naming dead or malformed topics, and undecodable bytes."""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.metadata_strategies import metadata_logs
from tools.replay import sequential
from tools.replay.sequential import NodeScan, ScanResult, decode_batch


def _every_partition_topic(kinds: list[int], maps: list[Any],
                           _: dict[bytes, Any]) -> set[bytes]:
    return {fields["topic_id"] for kind, fields in zip(kinds, maps, strict=True)
            if kind in (7, 8, 17, 18) and isinstance(fields.get("topic_id"), bytes)}


def _scan(records: list[bytes], cuts: list[int]) -> ScanResult:
    scan = NodeScan(analysis=True)
    start = 0
    for seq, end in enumerate([*sorted(set(cuts)), len(records)]):
        if end > start:
            scan.batch(seq, start, 1, records[start:end])
            start = end
    return scan.result()


def _outputs(result: ScanResult) -> tuple[Any, ...]:
    return (result.violations, {k: list(v) for k, v in result.marks.items()}, result.claims,
            result.first_topic_batch, result.metadata_topic_batch, result.aggregates)


@settings(max_examples=300, deadline=None)
@given(metadata_logs(max_steps=40), st.lists(st.integers(0, 120), max_size=30))
def test_following_only_resizable_topics_finds_what_following_all_finds(
        log: list[tuple[int, bytes]], cuts: list[int]) -> None:
    records = [data for _, data in log]
    cuts = [c for c in cuts if c < len(records)]
    fast = _scan(records, cuts)
    with mock.patch.object(sequential, "resize_topics", _every_partition_topic):
        followed_all = _scan(records, cuts)
    assert _outputs(fast) == _outputs(followed_all)


@settings(max_examples=200, deadline=None)
@given(metadata_logs(max_steps=20))
def test_decode_batch_judges_each_record_as_decode_record(log: list[tuple[int, bytes]]
                                                          ) -> None:
    records = [data for _, data in log]
    kinds, maps = decode_batch(records)
    assert kinds == [sequential.decode_record(data)[0] for data in records]
    assert [m for m, k in zip(maps, kinds, strict=True) if k != sequential.UNDECODABLE] == \
        [sequential.decode_record(d)[1] for d, k in zip(records, kinds, strict=True)
         if k != sequential.UNDECODABLE]
