"""Controlled shutdown with real processes: SIGTERM on a broker leading partitions under
an acks=all idempotent producer. Before it exits, the controller has moved the
leadership of every partition it led to another ISR member (it is fenced), so the
producer sees no error; the broker session is long (30 s), so without the hand-over
its partitions would stay led by a dead broker that long. One 1-voter + 3-broker
cluster."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.quorum_support import FAST_SETTINGS, log_events, running_cluster, wait_until

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

BROKERS = (2, 3, 4)
PARTITIONS = 6
RATE_PER_S = 1_000
WAIT_S = 20.0
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "broker.session.timeout.ms": 30_000}


class Producer:
    """An acks=all idempotent producer sending RATE_PER_S records, each at its due time
    (bounded: until stopped, at most 60 s), counting delivery errors and keeping each
    record's send time and latency, and the values acknowledged (each record's is its
    sequence number, padded to 100 bytes)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.errors: list[str] = []
        self.acknowledged: list[bytes] = []
        self.latencies: list[float] = []
        self.answered: list[tuple[float, float]] = []  # (sent, latency)
        self._producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 0})
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        for sequence in range(60 * RATE_PER_S):
            if self._stop.is_set():
                break
            due = started + sequence / RATE_PER_S
            if (ahead := due - time.monotonic()) > 0:
                time.sleep(ahead)
            sent = time.monotonic()

            def done(error: Any, message: Any, sent: float = sent) -> None:
                if error is not None:
                    self.errors.append(str(error))
                else:
                    self.acknowledged.append(message.value())
                self.latencies.append(time.monotonic() - sent)
                self.answered.append((sent, self.latencies[-1]))
            self._producer.produce(self._topic, value=str(sequence).encode().rjust(100, b"v"),
                                   on_delivery=done)
            self._producer.poll(0)

    def stop(self) -> int:
        """Stop sending, wait for every answer; the records still unanswered."""
        self._stop.set()
        self._thread.join(WAIT_S)
        return self._producer.flush(WAIT_S)  # type: ignore[no-any-return]


def leaders(cluster: Any, broker: int) -> dict[int, int]:
    status = cluster.broker_status(broker)
    assert status is not None
    return {h["partition"]: h["leader"] for h in status["hosted"] if h["topic"] == "cs"}


def test_sigterm_moves_leadership_away_before_the_broker_exits(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "cluster", SETTINGS, voters=1,
                         brokers=len(BROKERS)) as cluster:
        bootstrap = ",".join(a for n in BROKERS if (a := cluster.node(n).client_address))
        admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([admin_mod.NewTopic(
            "cs", num_partitions=PARTITIONS, replication_factor=3,
            config={"min.insync.replicas": "2"})])["cs"].result(WAIT_S)
        before = wait_until(lambda: (found := leaders(cluster, BROKERS[0])) and
                            len(found) == PARTITIONS and found, WAIT_S, "every partition led")
        victim = max(BROKERS, key=lambda b: list(before.values()).count(b))
        assert victim in before.values()
        survivor = next(b for b in BROKERS if b != victim)
        producer = Producer(bootstrap, "cs")
        wait_until(lambda: len(producer.latencies) >= RATE_PER_S // 2, WAIT_S,
                   "records acknowledged before the stop")

        stopping = time.monotonic()
        assert cluster.stop_node(victim), "the broker did not exit on SIGTERM"
        stopped = time.monotonic()
        committed = int(cluster.describe()["high_watermark"]) - 1
        wait_until(lambda: (s := cluster.broker_status(survivor)) is not None
                   and s["applied_offset"] >= committed, WAIT_S,
                   "the survivor's image at the committed offset")
        after = leaders(cluster, survivor)
        assert victim not in after.values(), after  # moved before it exited
        assert all(leader in BROKERS for leader in after.values()), after
        assert any(e.get("msg") == "controlled shutdown: leadership moved away"
                   for e in log_events(cluster, victim))

        sent_before_stop = len(producer.latencies)
        wait_until(lambda: len(producer.latencies) >= sent_before_stop + RATE_PER_S, WAIT_S,
                   "records acknowledged after the stop")
        assert producer.stop() == 0
        latencies = sorted(producer.latencies)
        during = sorted(latency for sent, latency in producer.answered
                        if stopping <= sent <= stopped)
        print(f"controlled shutdown at {RATE_PER_S} records/s: {len(latencies)} records, "
              f"{len(producer.errors)} errors; the {len(during)} sent during the "
              f"{stopped - stopping:.2f} s shutdown: p99 "
              f"{during[int(len(during) * 0.99)] * 1000:.1f} ms, max {during[-1] * 1000:.1f} ms; "
              f"all: p99 {latencies[int(len(latencies) * 0.99)] * 1000:.1f} ms")
        assert producer.errors == []
        assert during, "no record was sent while the broker shut down"
