"""The ordered producer's resend rule (tools/client/producer.py), against a scripted
transport: a send whose outcome is unknown is sent again unchanged; a definite refusal
of that resend re-partitions the record under a new producer ID, since the first send
may be stored and its sequence would swallow the old partition's next record (the
data-plane simulator found that schedule: an acknowledged write answered as the
duplicate of another record)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import trio

from raft.common.errors import ErrorCode
from tools.client.connection import ConnectionLost
from tools.client.metadata import TopicMetadata
from tools.client.producer import OrderedProducer

TOPIC_ID = uuid.uuid4()
KEY = b"key-2"  # partition 0 at count 2, partition 2 at count 4


def metadata(count: int) -> TopicMetadata:
    partitions = range(count)
    return TopicMetadata(name="t", topic_id=TOPIC_ID, initial=2, undeleted=count,
                         leaders=dict.fromkeys(partitions, 1),
                         leader_epochs=dict.fromkeys(partitions, 0),
                         brokers={1: "127.0.0.1:1"})


def produced(error: ErrorCode, offset: int = -1) -> Any:
    part = SimpleNamespace(error_code=int(error), base_offset=offset)
    return SimpleNamespace(responses=[SimpleNamespace(partition_responses=[part])])


class ScriptedClient:
    """Answers Produce from a script; hands out producer IDs 100, 101, ..."""

    def __init__(self, script: list[Any], counts: list[int]) -> None:
        self.script, self.counts = script, counts
        self.sent: list[tuple[int, int, int, int]] = []  # (partition, count, id, sequence)
        self.producer_ids = iter(range(100, 200))

    async def topic_metadata(self, topic: str) -> TopicMetadata:
        return metadata(self.counts.pop(0) if len(self.counts) > 1 else self.counts[0])

    async def call_any(self, body: Any) -> tuple[str, Any]:
        return "127.0.0.1:1", SimpleNamespace(error_code=0, producer_id=next(self.producer_ids),
                                              producer_epoch=0)

    async def call(self, address: str, body: Any) -> Any:
        (topic,) = body.topic_data
        (part,) = topic.partition_data
        batch = bytes(part.records)
        producer_id = int.from_bytes(batch[43:51], "big")
        sequence = int.from_bytes(batch[53:57], "big")
        self.sent.append((int(part.index), int(topic.undeleted_partition_count), producer_id,
                          sequence))
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


def send(client: ScriptedClient) -> Any:
    async def run() -> Any:
        producer = OrderedProducer(client, "t", retry_backoff_s=0)  # type: ignore[arg-type]
        return await producer.send(KEY, b"v")
    return trio.run(run)


def test_a_refused_resend_goes_again_under_a_new_producer_id() -> None:
    client = ScriptedClient(
        [ConnectionLost("answer lost"),  # the first send may be stored
         produced(ErrorCode.INVALID_PARTITION_METADATA),  # the resend surely is not
         produced(ErrorCode.NONE, 7)],
        counts=[2, 2, 4])
    acked = send(client)
    assert (acked.partition, acked.offset) == (2, 7)
    first, resend, rerouted = client.sent
    assert first == resend == (0, 2, 100, 0)  # unchanged while its outcome is unknown
    assert rerouted == (2, 4, 101, 0)  # a new producer: the old one's sequences are gone


def test_a_refused_first_send_is_partitioned_again_by_the_same_producer() -> None:
    client = ScriptedClient(
        [produced(ErrorCode.INVALID_PARTITION_METADATA), produced(ErrorCode.NONE, 3)],
        counts=[2, 4])
    acked = send(client)
    assert (acked.partition, acked.offset) == (2, 3)
    assert client.sent == [(0, 2, 100, 0), (2, 4, 100, 0)]
