"""The group workload's member logic (tools/chaos/group_workload.py) against a fake
consumer: what it records is what tools/chaos/client_checks.py reads (an assignment with
the committed offsets it read, instant consumes, a commit of what was processed followed
by a read-back), and member files merge with unique indices."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tools.chaos.client_checks import check_clients
from tools.chaos.group_workload import MEMBER_INDEX_STRIDE, Member, load_member_events
from tools.chaos.history import HistoryWriter, pair

confluent_kafka = pytest.importorskip("confluent_kafka")


@dataclass
class FakeMessage:
    part: int
    off: int
    val: bytes

    def partition(self) -> int:
        return self.part

    def offset(self) -> int:
        return self.off

    def value(self) -> bytes:
        return self.val


@dataclass
class FakeConsumer:
    """Committed offsets kept per partition; commit() stores them."""

    stored: dict[int, int] = field(default_factory=dict)
    commits: list[dict[int, int]] = field(default_factory=list)

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        return [confluent_kafka.TopicPartition(tp.topic, tp.partition,
                                               self.stored.get(tp.partition, -1001))
                for tp in partitions]

    def commit(self, offsets: list[Any], asynchronous: bool) -> list[Any]:
        assert asynchronous is False  # commit after processing, synchronously
        self.commits.append({tp.partition: tp.offset for tp in offsets})
        self.stored.update(self.commits[-1])
        return offsets


def test_a_member_records_assignment_consumes_commit_and_read_back(tmp_path: Path) -> None:
    (tmp_path / "members").mkdir()
    history = HistoryWriter(tmp_path / "members" / "member-0.0.jsonl")
    consumer = FakeConsumer(stored={1: 0})
    member = Member("member-0.0", history, "g0")
    member.on_assign(consumer, [confluent_kafka.TopicPartition("g0", 1)])
    for offset in range(3):
        member.consumed(FakeMessage(1, offset, f"idem-0.0:{offset}".encode()))
    member.commit(consumer)
    member.on_revoke(consumer, [])  # nothing pending: no second commit
    history.close()
    assert consumer.commits == [{1: 3}]
    ops = pair(history.events())
    assert [op.op for op in ops] == ["assign", "consume", "consume", "consume", "commit",
                                     "committed", "revoke"]
    assert ops[0].result["committed"] == {"1": 0}
    assert ops[4].args["offsets"] == {"1": 3}
    assert ops[5].result["committed"] == {"1": 3}
    merged = load_member_events(tmp_path / "members")
    assert {e.index for e in merged} == {i + MEMBER_INDEX_STRIDE for i in range(7)}
    result = check_clients(merged, [], read_complete=False)
    assert result.violations == ()
    assert result.counts["consumed"] == 3
    assert result.counts["commits_ok"] == 1


def test_member_files_merge_with_unique_indices(tmp_path: Path) -> None:
    for name in ("member-0.0", "member-1.0"):
        writer = HistoryWriter(tmp_path / f"{name}.jsonl")
        index = writer.invoke(name, "consume", {"partition": 0, "offset": 0, "value": "v"})
        writer.complete(index, name, "consume", "ok")
        writer.close()
    events = load_member_events(tmp_path)
    assert len(pair(events)) == 2
    assert load_member_events(tmp_path / "absent") == []
