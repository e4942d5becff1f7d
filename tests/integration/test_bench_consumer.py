"""The broker bench's confluent-kafka consumer never idles a second on a full prefetch
queue: librdkafka pauses a partition's fetches for `fetch.queue.backoff.ms` each time its
queue holds `queued.min.messages`, and at the default (1,000 ms) a consumer the broker fed
faster than the bench drained it lost a whole second (bench/broker_bench.py,
CONSUMER_SETTINGS). The queue is made to fill on every fetch here, and librdkafka's own log
says how long each pause lasted: no timing of ours is measured."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import pytest

from bench.broker_bench import CONSUMER_SETTINGS
from tests.support.quorum_support import FAST_SETTINGS, running_cluster

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")

RECORDS = 2_000  # one fetch brings them all: the queue is full at the next one
WAIT_S = 30.0
QUEUE_FULL = re.compile(r"Fetch backoff for (\d+)ms: Local: Queue full")
LONGEST_PAUSE_MS = 100  # a tenth of librdkafka's default pause


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _produce(bootstrap: str, topic: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for _ in range(RECORDS):
        producer.produce(topic, value=b"v" * 100)
    assert producer.flush(WAIT_S) == 0, "records not delivered"


def test_full_prefetch_queue_pauses_fetching_briefly_when_bench_consumer_settings(
        tmp_path: Path) -> None:
    with running_cluster(tmp_path / "cluster", FAST_SETTINGS, voters=1,
                         brokers=1) as cluster:
        (broker,) = (n for n in cluster.nodes if not cluster.node(n).is_voter)
        bootstrap = cluster.node(broker).client_address
        assert bootstrap is not None
        _produce(bootstrap, "bench-consumer")  # auto-created, as Kafka's default
        lines = _Lines()
        logger = logging.getLogger(f"{__name__}.librdkafka")
        logger.addHandler(lines)
        logger.setLevel(logging.DEBUG)
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "bench-consumer",
             **CONSUMER_SETTINGS, "queued.min.messages": 1, "debug": "fetch"},
            logger=logger)
        try:
            consumer.assign([confluent_kafka.TopicPartition("bench-consumer", 0, 0)])
            got, deadline = 0, time.monotonic() + WAIT_S
            while got < RECORDS and time.monotonic() < deadline:
                got += len(consumer.consume(num_messages=1, timeout=0.5))
        finally:
            consumer.close()
            logger.removeHandler(lines)
    assert got == RECORDS
    pauses = [int(m.group(1)) for line in lines.lines if (m := QUEUE_FULL.search(line))]
    assert pauses, "the prefetch queue never filled: nothing was tested"
    assert max(pauses) <= LONGEST_PAUSE_MS, pauses
