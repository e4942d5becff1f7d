"""Consumer groups: rebalance times and offset commit latency.

    python -m bench group_bench

One multi-process cluster of 3 voters and 3 brokers on 127.0.0.1 (ports picked free),
`offsets.topic.num.partitions` 10, a 6-partition topic with replication factor 3.
Clients are confluent-kafka (librdkafka runs the group protocol in its own threads, so
one thread can drive several consumers), range assignment, heartbeats every 300 ms.

1. Join of a 3rd member: two consumers share the topic (stable); a third subscribes.
   From its subscribe() until all three hold disjoint, non-empty assignments covering
   every partition (as their on_assign callbacks report them). Repeated in new groups.
2. Death of a member: three consumers share the topic, one of them in a child process
   that is SIGKILLed (no LeaveGroup); from the kill until the two survivors cover every
   partition. Dominated by the session timeout (3 s here), reported alongside.
3. Offset commit latency: one consumer commits synchronously (OffsetCommit, acks=all on
   the __consumer_offsets partition: the ISR of 3 holds it before the answer), 500 times
   after 20 warm-up commits; p50 and p99 of the client-side round trip.
Figures only, no assertions; each phase gives up after 60 s.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.stats import percentile
from tools.cluster import Cluster

VOTERS, BROKERS = 3, 3
SETTINGS = {"broker.heartbeat.interval.ms": 200, "offsets.topic.num.partitions": 10}
PARTITIONS = 6
REPEATS = 3
SESSION_MS = 3000
COMMITS, WARM_UP = 500, 20
PHASE_LIMIT_S = 60.0
TOPIC = "bench-groups"

CHILD = """
import sys, confluent_kafka
bootstrap, topic, group, session_ms = sys.argv[1:5]
def on_assign(consumer, partitions):
    print("assigned", ",".join(str(p.partition) for p in partitions), flush=True)
consumer = confluent_kafka.Consumer({
    "bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": int(session_ms),
    "heartbeat.interval.ms": 300, "partition.assignment.strategy": "range",
    "enable.auto.commit": False})
consumer.subscribe([topic], on_assign=on_assign)
while True:
    consumer.poll(0.05)
"""


class Member:
    """A confluent-kafka consumer in this process and the assignment it last got."""

    def __init__(self, bootstrap: str, group: str) -> None:
        import confluent_kafka
        self.assigned: set[int] = set()
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group,
            "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 300,
            "partition.assignment.strategy": "range", "enable.auto.commit": False})

    def subscribe(self) -> None:
        self.consumer.subscribe([TOPIC], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, consumer: Any, partitions: list[Any]) -> None:
        self.assigned = {p.partition for p in partitions}

    def _revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self.assigned = set()

    def close(self) -> None:
        self.consumer.close()


def split_evenly(assignments: list[set[int]]) -> bool:
    """Every member holds something, nobody shares, every partition is held."""
    union: set[int] = set()
    for assigned in assignments:
        if not assigned or assigned & union:
            return False
        union |= assigned
    return union == set(range(PARTITIONS))


def poll_until(members: list[Member], done: Any, limit_s: float = PHASE_LIMIT_S
               ) -> float | None:
    """Poll every member (callbacks run in poll) until `done()`; seconds, None on timeout."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        for member in members:
            member.consumer.poll(0.01)
        if done():
            return time.perf_counter() - started
    return None


def join_third(bootstrap: str, run: int) -> float | None:
    group = f"join-{run}"
    members = [Member(bootstrap, group), Member(bootstrap, group)]
    try:
        for member in members:
            member.subscribe()
        if poll_until(members, lambda: split_evenly([m.assigned for m in members])) is None:
            return None
        third = Member(bootstrap, group)
        members.append(third)
        third.subscribe()
        return poll_until(members, lambda: split_evenly([m.assigned for m in members]))
    finally:
        for member in members:
            member.close()


def death(bootstrap: str, run: int) -> float | None:
    group = f"death-{run}"
    child = subprocess.Popen([sys.executable, "-c", CHILD, bootstrap, TOPIC, group,
                              str(SESSION_MS)], stdout=subprocess.PIPE, text=True)
    members = [Member(bootstrap, group), Member(bootstrap, group)]
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in child.stdout or ()],
                     daemon=True).start()
    child_assigned: set[int] = set()

    def three_way() -> bool:
        nonlocal child_assigned
        while not lines.empty():
            _, _, rest = lines.get().strip().partition(" ")
            child_assigned = {int(p) for p in rest.split(",") if p}
        return split_evenly([m.assigned for m in members] + [child_assigned])
    try:
        for member in members:
            member.subscribe()
        if poll_until(members, three_way) is None:
            return None
        child.kill()
        return poll_until(members, lambda: split_evenly([m.assigned for m in members]))
    finally:
        child.kill()
        child.wait()
        for member in members:
            member.close()


def commit_latencies(bootstrap: str) -> list[float]:
    import confluent_kafka
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                         "group.id": "committer",
                                         "enable.auto.commit": False})
    latencies: list[float] = []
    try:
        started = time.perf_counter()
        for number in range(WARM_UP + COMMITS):
            if time.perf_counter() - started > PHASE_LIMIT_S:
                break
            offsets = [confluent_kafka.TopicPartition(TOPIC, 0, number + 1)]
            before = time.perf_counter()
            consumer.commit(offsets=offsets, asynchronous=False)
            if number >= WARM_UP:
                latencies.append(time.perf_counter() - before)
    finally:
        consumer.close()
    return latencies


def seconds(values: list[float | None]) -> str:
    return ", ".join("timeout" if v is None else f"{v:.2f} s" for v in values)


def run(directory: Path) -> None:
    import confluent_kafka.admin
    cluster = Cluster.create(directory / "cluster", voters=VOTERS, brokers=BROKERS,
                             settings=SETTINGS)
    try:
        cluster.start()
        cluster.wait_for_leader(20)
        cluster.wait_for_brokers(30)
        bootstrap = ",".join(a for n in range(VOTERS + 1, VOTERS + BROKERS + 1)
                             if (a := cluster.node(n).client_address))
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap,
                                                   "log_level": 3})
        for future in admin.create_topics([confluent_kafka.admin.NewTopic(
                TOPIC, PARTITIONS, 3)]).values():
            future.result(30)
        joins = [join_third(bootstrap, run) for run in range(REPEATS)]
        print(f"join of a 3rd member, until all 3 hold their new assignment: {seconds(joins)}")
        deaths = [death(bootstrap, run) for run in range(REPEATS)]
        print(f"SIGKILL of 1 of 3 members, until the 2 survivors hold every partition "
              f"(session timeout {SESSION_MS / 1000:.0f} s): {seconds(deaths)}")
        latencies = commit_latencies(bootstrap)
        print(f"offset commit (synchronous, RF 3), {len(latencies)} commits: "
              f"p50 {percentile(latencies, 0.5) * 1000:.1f} ms, "
              f"p99 {percentile(latencies, 0.99) * 1000:.1f} ms")
    finally:
        cluster.kill_all_started()


def main() -> None:
    started = time.monotonic()
    print(f"(host: {os.cpu_count()} CPUs, 1-minute load average {os.getloadavg()[0]:.1f})")
    with tempfile.TemporaryDirectory(prefix="group-bench-") as temp:
        run(Path(temp))
    print(f"(group bench took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
