"""Brokers: metadata propagation and catch-up, Kafka client throughput.

    python -m bench broker_bench

One multi-process cluster of 3 voters and 3 brokers on 127.0.0.1 (ports picked free):

1. Catch-up from an empty directory: only the 3 voters run; 50,000 NoOp records are
   appended (batches of 1,000); then broker 4 is started on its empty log directory and
   its BrokerStatus is polled (~1 ms) until its applied offset reaches the high
   watermark read before it started. Reported from `start_node` (interpreter start-up
   included) and from its first status answer.
2. Metadata propagation: brokers 5 and 6 are started too; 200 topics are created one at
   a time (one partition, replication factor 1) through the admin API, whose reply
   returns after commit. From that reply, the controller's high watermark is asked
   (DescribeQuorum), then each broker, on its own kept-open connection, gets one
   BrokerStatus that waits until its image has applied the records below that high
   watermark (`wait_for_applied_offset`: answered as the broker applies them). A
   broker's time is the arrival of that answer, so the figure includes those two round
   trips (~0.2 ms each here) and no polling.
3. Past a paused controller leader, 10 times: the leader is SIGSTOPped; once a new
   leader is elected, a topic is created through it; from its reply, as in 2, until
   every broker's image has it (their fetches were parked on the paused leader); then
   SIGCONT, and the voters catch up before the next pause.
4. Kafka clients: kafka-python produces 20,000 messages of 100 bytes, confluent-kafka
   1,000,000 (it is ~20 times faster); acks=all, replication factor 3, one partition, a
   topic per client, one warm-up message first, not counted. Each then consumes its
   messages back with assign(); confluent-kafka's consume is also printed as the time to
   its first record and the steady rate after it. Each phase stops at the message count
   or after 30 s, whichever comes first.
5. A Fetch stream of 1 MiB records: 64 records of 1 MiB (acks=all, replication factor 3,
   the topic's max.message.bytes raised to 2 MiB) are fetched from the leader on one
   connection, one Fetch v13 (8 MiB limits) at a time, 48 passes over them after one
   not counted (3 GiB: a window of most of a second, not a few tenths, so one stall of
   a loaded host weighs less); beside it, measured in the same run, the loopback limit:
   the same frames (same count and sizes, after the same warm-up) sent over a plain
   127.0.0.1 TCP connection by a thread and received the same way (into one reused
   buffer). Both in bytes/s of frames received; the stream's figure also pays for each
   request's round trip and for reading each response where it was received: its error
   codes, where its records lie and their last offset, as a consumer's fetcher does
   before the application copies a record out (the warm-up pass also decodes each with
   kio, which copies the records: ~0.5-1.3 ms a response of 7 MiB, as much as the
   transfer itself, so a figure with it would be the client's memory bandwidth).
"""

from __future__ import annotations

import datetime
import itertools
import os
import selectors
import signal
import socket
import struct
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from kio.schema.fetch.v13.request import FetchPartition, FetchRequest, FetchTopic

from bench.stats import percentile
from metadata.admin import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from raft import messages
from raft.common.framing import FrameDecoder, encode_frame
from raft.common.kafka.wire_client import decode_response, encode_request
from raft.common.uuid import Uuid
from tools.admin_client import AdminClient
from tools.cluster import Cluster, ClusterError
from tools.config import parse_address

VOTERS = 3
BROKERS = 3
SETTINGS = {"broker.heartbeat.interval.ms": 200}
CATCH_UP_RECORDS = 50_000
CATCH_UP_BATCH = 1_000
CREATES = 200
POLL_INTERVAL_S = 0.001
PROPAGATION_TIMEOUT_S = 5.0
TARGET_P99_MS = 10.0
PAUSES = 10
PAUSED_TARGET_S = 1.0
PAUSED_STEP_TIMEOUT_S = 15.0
MESSAGES = {"kafka-python": 20_000, "confluent-kafka": 1_000_000}  # per client
MESSAGE_BYTES = 100
PHASE_LIMIT_S = 30.0
CATCH_UP_TIMEOUT_S = 30.0
# librdkafka stops fetching a partition for `fetch.queue.backoff.ms` (1,000 ms by default)
# whenever its prefetch queue holds `queued.min.messages` (100,000): fed faster than this
# process drained it, the consumer idled a whole second (consume rates were bimodal, 140k
# vs 700-950k msg/s over 200,000 records). 10 ms resumes as soon as the queue drains.
CONSUMER_SETTINGS = {"enable.auto.commit": False, "fetch.queue.backoff.ms": 10}
CONSUME_CHUNK = 10_000  # messages asked of each consume() call
STREAM_RECORD_BYTES = 1 << 20
STREAM_RECORDS = 64
STREAM_PASSES = 48
STREAM_FETCH_BYTES = 8 << 20
STREAM_TOPIC_CONFIGS = (CreatableTopicConfig(name="max.message.bytes", value=str(2 << 20)),)
DESCRIBE = "DescribeQuorumRequest"
STATUS = "BrokerStatus"


# --- kept-open connections to the nodes' msgpack listeners ------------------------------


class Connection:
    """One TCP connection carrying one request at a time (frames as in tools.cluster)."""

    def __init__(self, address: str, cluster_id: str, timeout_s: float = 2.0) -> None:
        self.address = address
        self.cluster_id = cluster_id
        self.sock = socket.create_connection(parse_address(address), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.correlation = itertools.count(1)
        self.expected = 0

    def send(self, api: str, body: Any) -> None:
        self.expected = next(self.correlation)
        self.sock.sendall(encode_frame({"api": api, "version": 0,
                                        "correlation_id": self.expected,
                                        "cluster_id": self.cluster_id, "body": body}))

    def feed(self, data: bytes) -> Any | None:
        """The body of the awaited reply once it is complete, else None."""
        for frame in self.decoder.feed(data):
            if frame["correlation_id"] == self.expected:
                return frame["body"]
        return None

    def close(self) -> None:
        self.sock.close()


def round_trip(requests: dict[str, tuple[Connection, str, Any]], timeout_s: float = 2.0
               ) -> dict[str, tuple[float, Any]]:
    """Send every request at once, then wait for every reply; returns, by key, the
    perf_counter time its reply arrived and its body."""
    replies: dict[str, tuple[float, Any]] = {}
    with selectors.DefaultSelector() as selector:
        for key, (connection, api, body) in requests.items():
            connection.send(api, body)
            selector.register(connection.sock, selectors.EVENT_READ, (key, connection))
        deadline = time.perf_counter() + timeout_s
        while len(replies) < len(requests):
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise ClusterError("no reply within the poll timeout")
            for selected, _ in selector.select(remaining):
                key, connection = selected.data
                body = receive(connection)
                if body is not None:
                    replies[key] = (time.perf_counter(), body)
                    selector.unregister(connection.sock)
    return replies


def receive(connection: Connection) -> Any | None:
    data = connection.sock.recv(1 << 20)
    if not data:
        raise ClusterError(f"{connection.address} closed the connection")
    return connection.feed(data)


def wait_until_applied(controller: Connection, statuses: dict[int, Connection],
                       timeout_s: float) -> dict[int, float] | None:
    """DescribeQuorum to the controller for its high watermark, then one BrokerStatus to
    each broker that waits for its image to apply the offset below it
    (`wait_for_applied_offset`: the broker answers as it applies, no polling). Returns,
    by broker, the arrival time of that answer (None when a broker timed out)."""
    (_, reply), = round_trip({"hw": (controller, DESCRIBE, describe_body())}).values()
    hw = high_watermark(reply)
    wait = {"wait_for_applied_offset": hw - 1, "max_wait_ms": int(timeout_s * 1000)}
    replies = round_trip({str(b): (c, STATUS, wait) for b, c in statuses.items()},
                         timeout_s + 2.0)
    seen = {int(b): at for b, (at, body) in replies.items()
            if is_applied(status_body(int(b), body), hw)}
    return seen if len(seen) == len(statuses) else None


def describe_body() -> Any:
    return messages.encode_message(messages.DescribeQuorumRequest(cluster_id=""))[1]


def high_watermark(reply: Any) -> int:
    response = messages.decode_message("DescribeQuorumResponse", reply)
    assert isinstance(response, messages.DescribeQuorumResponse)
    if response.error_code != 0:
        raise ClusterError(f"DescribeQuorum failed: {response.error_code.name}")
    return response.high_watermark


def status_body(node_id: int, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict) or body.get("error_code") != 0:
        raise ClusterError(f"broker {node_id}: bad BrokerStatus reply {body!r}")
    return body


def is_applied(status: dict[str, Any], hw: int) -> bool:
    """The high watermark is exclusive, the applied offset inclusive."""
    return int(status["applied_offset"]) + 1 >= hw


# --- 1. catch-up --------------------------------------------------------------------------


def catch_up(cluster: Cluster, broker: int) -> None:
    for voter in cluster.voter_ids:
        cluster.start_node(voter)
    cluster.wait_for_leader(20)
    appended = time.perf_counter()
    cluster.append(CATCH_UP_RECORDS, batch=CATCH_UP_BATCH, timeout_s=60)
    append_s = time.perf_counter() - appended
    hw = cluster.describe()["high_watermark"]
    started = time.perf_counter()
    cluster.start_node(broker)
    deadline = started + CATCH_UP_TIMEOUT_S
    first: tuple[float, int] | None = None
    connection: Connection | None = None
    try:
        while True:
            if time.perf_counter() > deadline:
                raise ClusterError(f"broker {broker} not caught up within "
                                   f"{CATCH_UP_TIMEOUT_S} s")
            if connection is None:
                address = cluster.node(broker).status_address
                assert address is not None
                try:
                    connection = Connection(address, cluster.cluster_id)
                except OSError:
                    time.sleep(POLL_INTERVAL_S)
                    continue
            at, body = round_trip({"b": (connection, STATUS, {})})["b"]
            status = status_body(broker, body)
            if first is None:
                first = (at, status["applied_offset"])
            if is_applied(status, hw):
                done = at
                break
            time.sleep(POLL_INTERVAL_S)
    finally:
        if connection is not None:
            connection.close()
    total_s = done - started
    log_bytes = sum(p.stat().st_size for p in Path(cluster.node(1).data_dir).rglob("*")
                    if p.is_file())
    print(f"metadata log written for catch-up: {CATCH_UP_RECORDS:,} NoOp records in "
          f"batches of {CATCH_UP_BATCH:,} in {append_s:.2f} s (high watermark {hw:,}; "
          f"voter 1's log directory {log_bytes / 1e6:.1f} MB)")
    first_at, first_offset = first
    print(f"broker catch-up from an empty directory ({hw:,} records): {total_s:.2f} s "
          f"from start_node, {hw / total_s:,.0f} records/s (process start-up included: "
          f"first status answer after {first_at - started:.2f} s)")
    if done > first_at and hw - 1 - first_offset > 0:
        behind = hw - 1 - first_offset
        print(f"broker catch-up after its first status answer (applied offset "
              f"{first_offset:,} then): {behind:,} records in {done - first_at:.2f} s, "
              f"{behind / (done - first_at):,.0f} records/s")
    else:
        print(f"broker catch-up after its first status answer: already caught up "
              f"(applied offset {first_offset:,}), no rate without start-up")


# --- 2. propagation -----------------------------------------------------------------------


def propagation(cluster: Cluster, brokers: list[int]) -> None:
    leader = cluster.wait_for_leader(20)
    leader_address = leader["leader_address"]
    if not leader_address:
        raise ClusterError("DescribeQuorum did not name the leader's address")
    controller = Connection(leader_address, cluster.cluster_id)
    statuses = {b: Connection(a, cluster.cluster_id) for b in brokers
                if (a := cluster.node(b).status_address)}
    admin = AdminClient([leader_address, *cluster.controller_addresses()],
                        cluster_id=cluster.cluster_id, timeout_s=600)
    latencies: list[float] = []
    create_ms: list[float] = []
    each: list[float] = []  # every broker's own time, not only the last one's
    timeouts = 0
    try:
        for index in range(CREATES):
            begin = time.perf_counter()
            create_one(admin, f"propagation-{index}")
            committed = time.perf_counter()
            create_ms.append((committed - begin) * 1000)
            seen = wait_until_applied(controller, statuses, PROPAGATION_TIMEOUT_S)
            if seen is None:
                timeouts += 1
                continue
            latencies.append((max(seen.values()) - committed) * 1000)
            each.extend((at - committed) * 1000 for at in seen.values())
    finally:
        controller.close()
        for connection in statuses.values():
            connection.close()
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    verdict = "met" if p99 < TARGET_P99_MS and not timeouts else "NOT met"
    print(f"metadata propagation ({len(latencies)} creates, {len(statuses)} brokers): "
          f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(latencies, default=0):.1f} ms "
          f"(target p99 < {TARGET_P99_MS:.0f} ms: {verdict}; from the create's reply to "
          f"the last broker's answer that its image applied the controller's high "
          f"watermark; includes a DescribeQuorum and a BrokerStatus round trip"
          + (f"; {timeouts} not seen within {PROPAGATION_TIMEOUT_S:.0f} s" if timeouts
             else "") + ")")
    print(f"  (for context: any one broker p50 {percentile(each, 0.5):.1f} ms, p99 "
          f"{percentile(each, 0.99):.1f} ms; the create round trip itself p50 "
          f"{percentile(create_ms, 0.5):.1f} ms, p99 {percentile(create_ms, 0.99):.1f} ms)")


# --- 3. propagation past a paused controller leader ---------------------------------------


def paused_leader(cluster: Cluster, brokers: list[int]) -> None:
    statuses = {b: Connection(a, cluster.cluster_id) for b in brokers
                if (a := cluster.node(b).status_address)}
    latencies: list[float] = []
    failures = 0
    try:
        for index in range(PAUSES):
            state = voters_caught_up(cluster)
            leader = state["leader_id"]
            cluster.send_signal(leader, signal.SIGSTOP)
            try:
                new = cluster.wait_for_leader(PAUSED_STEP_TIMEOUT_S, exclude=[leader],
                                              above_epoch=state["leader_epoch"])
                admin = AdminClient([new["leader_address"]], cluster_id=cluster.cluster_id,
                                    timeout_s=PAUSED_STEP_TIMEOUT_S)
                create_one(admin, f"paused-{index}")
                committed = time.perf_counter()
                controller = Connection(new["leader_address"], cluster.cluster_id)
                try:
                    seen = wait_until_applied(controller, statuses, PAUSED_STEP_TIMEOUT_S)
                finally:
                    controller.close()
            finally:
                cluster.send_signal(leader, signal.SIGCONT)
            if seen is None:
                failures += 1
            else:
                latencies.append(max(seen.values()) - committed)
    finally:
        for connection in statuses.values():
            connection.close()
    p99 = percentile(latencies, 0.99)
    verdict = "met" if p99 < PAUSED_TARGET_S and not failures else "NOT met"
    print(f"controller leader SIGSTOPped ({len(latencies)} pauses, {len(statuses)} brokers): "
          f"a create acknowledged by the new leader reaches every broker's image in p50 "
          f"{percentile(latencies, 0.5) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms (target p99 "
          f"< {PAUSED_TARGET_S:.0f} s: {verdict}"
          + (f"; {failures} not seen within {PAUSED_STEP_TIMEOUT_S:.0f} s" if failures
             else "") + ")")


def create_one(admin: AdminClient, name: str) -> None:
    """One topic (one partition, replication factor 1), answered once committed."""
    response = admin.call(CreateTopicsRequest(topics=(CreatableTopic(
        name=name, num_partitions=1, replication_factor=1),)))
    if not isinstance(response, CreateTopicsResponse) or response.topics[0].error_code:
        raise ClusterError(f"create failed: {response}")


def voters_caught_up(cluster: Cluster, timeout_s: float = 15.0) -> dict[str, Any]:
    """One record appended, then until every voter's log (as the leader last saw it) is
    past it: a voter just resumed follows again. Returns the leader's description."""
    last_offset = cluster.append(1, timeout_s=timeout_s)["last_offset"]
    deadline = time.monotonic() + timeout_s
    while True:
        state = cluster.describe()
        if all(v["log_end_offset"] > last_offset for v in state["voters"]):
            return state
        if time.monotonic() > deadline:
            raise ClusterError(f"voters not caught up within {timeout_s} s: {state['voters']}")
        time.sleep(0.05)


# --- 4. Kafka clients ---------------------------------------------------------------------


def create_topic(cluster: Cluster, brokers: list[int], name: str,
                 configs: tuple[CreatableTopicConfig, ...] | None = None) -> Uuid:
    """One partition at replication factor 3, once every broker's image has it; its ID."""
    admin = AdminClient(cluster.controller_addresses(), cluster_id=cluster.cluster_id,
                        timeout_s=30)
    response = admin.call(CreateTopicsRequest(topics=(CreatableTopic(
        name=name, num_partitions=1, replication_factor=BROKERS, configs=configs),)))
    if not isinstance(response, CreateTopicsResponse) or response.topics[0].error_code:
        raise ClusterError(f"create {name} failed: {response}")
    hw = cluster.describe()["high_watermark"]
    deadline = time.monotonic() + 30
    pending = list(brokers)
    while pending:
        pending = [b for b in pending
                   if not ((s := cluster.broker_status(b)) and is_applied(s, hw))]
        if pending and time.monotonic() > deadline:
            raise ClusterError(f"{name} not visible on brokers {pending} within 30 s")
        if pending:
            time.sleep(0.01)
    return response.topics[0].topic_id


def report(client: str, verb: str, count: int, seconds: float, note: str = "") -> None:
    rate = count / seconds if seconds > 0 else 0.0
    mb = rate * MESSAGE_BYTES / 1e6
    bounded = f"; stopped at {PHASE_LIMIT_S:.0f} s" if count < MESSAGES[client] else ""
    print(f"{verb} {client} (replication factor {BROKERS}, acks=all, {MESSAGE_BYTES} B "
          f"values): {count:,} messages in {seconds:.2f} s, {rate:,.0f} messages/s, "
          f"{mb:.2f} MB/s{bounded}{note}")


def kafka_python(bootstrap: str, topic: str) -> None:
    import kafka
    from kafka.errors import KafkaError

    payload = b"k" * MESSAGE_BYTES
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                   max_block_ms=int(PHASE_LIMIT_S * 1000))
    try:
        producer.send(topic, value=payload).get(timeout=PHASE_LIMIT_S)  # warm-up
        started = time.perf_counter()
        deadline = started + PHASE_LIMIT_S
        futures = []
        for _ in range(MESSAGES["kafka-python"]):
            if time.perf_counter() > deadline:
                break
            futures.append(producer.send(topic, value=payload))
        try:
            producer.flush(timeout=max(0.1, deadline - time.perf_counter()))
        except KafkaError:
            pass
        elapsed = time.perf_counter() - started
        acked = sum(1 for f in futures if f.succeeded())
    finally:
        producer.close(timeout=5)
    failed = sum(1 for f in futures if f.failed())
    report("kafka-python", "produce", acked, elapsed,
           f" ({failed} failed)" if failed else "")

    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                   group_id=None)
    try:
        partition = kafka.TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 1)  # after the warm-up message
        started = time.perf_counter()
        deadline = started + PHASE_LIMIT_S
        got = 0
        while got < acked and time.perf_counter() < deadline:
            batches = consumer.poll(timeout_ms=200)
            got += sum(len(records) for records in batches.values())
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    report("kafka-python", "consume", got, elapsed, " (from the first poll)")


def confluent(bootstrap: str, topic: str) -> None:
    import confluent_kafka

    payload = b"c" * MESSAGE_BYTES
    outcome = {"acked": 0, "failed": 0}

    def delivered(error: Any, _message: Any) -> None:
        outcome["failed" if error is not None else "acked"] += 1

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, value=payload)  # warm-up
    if producer.flush(PHASE_LIMIT_S) != 0:
        raise ClusterError("confluent-kafka warm-up message not delivered")
    started = time.perf_counter()
    deadline = started + PHASE_LIMIT_S
    sent = 0
    while sent < MESSAGES["confluent-kafka"] and time.perf_counter() < deadline:
        try:
            producer.produce(topic, value=payload, on_delivery=delivered)
            sent += 1
        except BufferError:
            producer.poll(0.01)
    producer.flush(max(0.1, deadline - time.perf_counter()))
    elapsed = time.perf_counter() - started
    report("confluent-kafka", "produce", outcome["acked"], elapsed,
           f" ({outcome['failed']} failed)" if outcome["failed"] else "")
    # an unflushed producer is simply dropped (no close in confluent-kafka)
    del producer

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                        "group.id": "broker-bench", **CONSUMER_SETTINGS})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 1)])
        started = time.perf_counter()
        deadline = started + PHASE_LIMIT_S
        got = errors = 0
        first: tuple[float, int] | None = None  # when the first records came, how many
        while got < outcome["acked"] and time.perf_counter() < deadline:
            # never more than are left: consume() waits its timeout for a full chunk
            messages = consumer.consume(num_messages=min(CONSUME_CHUNK,
                                                         outcome["acked"] - got),
                                        timeout=0.2)
            errors += sum(1 for message in messages if message.error() is not None)
            got += sum(1 for message in messages if message.error() is None)
            if first is None and got:
                first = (time.perf_counter(), got)
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    report("confluent-kafka", "consume", got, elapsed,
           " (from the first consume" + (f"; {errors} errors" if errors else "") + ")")
    if first is not None and got > first[1]:
        steady_s = started + elapsed - first[0]
        print(f"  consume: first records {(first[0] - started) * 1000:.0f} ms after "
              f"assign(); then {(got - first[1]) / steady_s:,.0f} messages/s steady "
              f"({got - first[1]:,} in {steady_s:.2f} s)")


# --- 5. a Fetch stream of 1 MiB records against the loopback limit ---------------------


def fetch_stream(cluster: Cluster, brokers: list[int], bootstrap: str) -> None:
    import confluent_kafka

    topic = "fetch-stream"
    topic_id = create_topic(cluster, brokers, topic, STREAM_TOPIC_CONFIGS)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "message.max.bytes": 2 << 20})
    for _ in range(STREAM_RECORDS):
        producer.produce(topic, value=b"s" * STREAM_RECORD_BYTES)
    if producer.flush(PHASE_LIMIT_S) != 0:
        raise ClusterError("1 MiB records not delivered")
    leader = producer.list_topics(topic).topics[topic].partitions[0].leader
    del producer
    address = cluster.node(leader).client_address
    assert address is not None
    host, _, port = address.rpartition(":")
    buffer = bytearray()  # one for the whole stream, as the loopback's receiver has
    stream_id = uuid.UUID(bytes=topic_id.to_bytes())
    with socket.create_connection((host, int(port)), timeout=PHASE_LIMIT_S) as sock:
        # not counted, on either side; its responses also decoded by kio
        warm_up = fetch_all(sock, stream_id, buffer, check=True)
        started = time.perf_counter()
        sizes = [size for _ in range(STREAM_PASSES)
                 for size in fetch_all(sock, stream_id, buffer)]
        stream_s = time.perf_counter() - started
    loopback_s = loopback(warm_up, sizes)
    total = sum(sizes)
    print(f"Fetch stream of {STREAM_RECORD_BYTES >> 20} MiB records from the leader "
          f"(Fetch v13, {STREAM_FETCH_BYTES >> 20} MiB limits, one at a time): "
          f"{total / 2**20:,.0f} MiB in {len(sizes)} responses in {stream_s:.2f} s, "
          f"{total / stream_s / 1e6:,.0f} MB/s; loopback limit, the same frames over a "
          f"plain 127.0.0.1 connection: {total / loopback_s / 1e6:,.0f} MB/s "
          f"({stream_s / loopback_s:.1f}x the time)")


def fetch_all(sock: socket.socket, topic_id: uuid.UUID, buffer: bytearray, *,
              check: bool = False) -> list[int]:
    """Fetch the partition from offset 0 to its high watermark, each response received
    into `buffer` (a fresh one would page-fault its megabytes in again: ~6 ms a pass)
    and read in place (`fetched_records`: its error codes, its records as a view of the
    buffer, their last offset), as a consumer's fetcher reads a response before the
    application copies any record out; with `check`, each is also decoded by kio, whose
    records must be the same bytes. Each response's size."""
    sizes, offset, correlation = [], 0, itertools.count(1)
    while True:
        sock.sendall(fetch_request(topic_id, offset, next(correlation)))
        with receive_frame(sock, buffer) as frame, frame.toreadonly() as view, \
                fetched_records(view) as records:
            if check and decode_response(view, 1, 13)[1].responses[0].partitions[0].records \
                    != records:
                raise ClusterError("kio and the in-place reader disagree on the records")
            if not records:
                return sizes
            sizes.append(len(view))
            offset = next_offset(records)


def fetch_request(topic_id: uuid.UUID, offset: int, correlation: int) -> bytes:
    return encode_request(FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1,
        max_bytes=STREAM_FETCH_BYTES, forgotten_topics_data=(),
        topics=(FetchTopic(topic_id=topic_id, partitions=(FetchPartition(
            partition=0, fetch_offset=offset,
            partition_max_bytes=STREAM_FETCH_BYTES),)),)), correlation)


def fetched_records(frame: memoryview) -> memoryview:
    """The records of a Fetch v13 response for one topic and one partition, a view of
    `frame` (no copy); raises ClusterError on an error code or another shape."""
    position = _skip_tags(frame, 4)  # correlation id, header tags
    error = struct.unpack_from(">h", frame, position + 4)[0]  # after throttle_time_ms
    topics, position = _uvarint(frame, position + 10)  # after session_id
    if error or topics != 2:
        raise ClusterError(f"fetch: error {error}, {topics - 1} topics")
    partitions, position = _uvarint(frame, position + 16)  # after the topic ID
    (partition_error,) = struct.unpack_from(">h", frame, position + 4)
    if partitions != 2 or partition_error:
        raise ClusterError(f"fetch: {partitions - 1} partitions, error {partition_error}")
    aborted, position = _uvarint(frame, position + 30)  # after the three offsets
    if aborted > 1:
        raise ClusterError("fetch: aborted transactions in a non-transactional topic")
    size, position = _uvarint(frame, position + 4)  # after preferred_read_replica
    return frame[position:position + max(size - 1, 0)]


def _uvarint(data: memoryview, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def _skip_tags(data: memoryview, position: int) -> int:
    count, position = _uvarint(data, position)
    for _ in range(count):
        _, position = _uvarint(data, position)
        size, position = _uvarint(data, position)
        position += size
    return position


def next_offset(records: bytes | memoryview) -> int:
    """The offset after the last batch of `records` (whole magic v2 batches)."""
    position = 0
    while True:
        base, length = struct.unpack_from(">qi", records, position)
        if position + 12 + length >= len(records):
            (delta,) = struct.unpack_from(">i", records, position + 23)
            return int(base) + int(delta) + 1
        position += 12 + length


def receive_frame(sock: socket.socket, buffer: bytearray) -> memoryview:
    """The next frame's bytes after its size, received into `buffer` (grown to fit and
    reused: neither side of the comparison pays for fresh buffers)."""
    size = struct.unpack(">i", receive_exactly(sock, buffer, 4))[0]
    return receive_exactly(sock, buffer, size)


def receive_exactly(sock: socket.socket, buffer: bytearray, size: int) -> memoryview:
    if len(buffer) < size:
        buffer.extend(bytes(size - len(buffer)))
    view = memoryview(buffer)[:size]
    done = 0
    while done < size:
        received = sock.recv_into(view[done:])
        if not received:
            raise ClusterError("the connection closed mid-frame")
        done += received
    return view


def loopback(warm_up: list[int], sizes: list[int]) -> float:
    """Seconds to send frames of `sizes` (built beforehand) over a 127.0.0.1 TCP
    connection from a thread and receive them as the stream does (`receive_frame`),
    after frames of `warm_up`, not counted."""
    frames = {size: struct.pack(">i", size) + bytes(size) for size in {*warm_up, *sizes}}
    with socket.create_server(("127.0.0.1", 0)) as server:
        def send() -> None:
            connection, _ = server.accept()
            with connection:
                for size in warm_up + sizes:
                    connection.sendall(frames[size])
        sender = threading.Thread(target=send)
        sender.start()
        buffer = bytearray()
        with socket.create_connection(server.getsockname(), timeout=PHASE_LIMIT_S) as sock:
            for _ in warm_up:
                receive_frame(sock, buffer)
            started = time.perf_counter()
            for _ in sizes:
                receive_frame(sock, buffer)
            elapsed = time.perf_counter() - started
        sender.join(PHASE_LIMIT_S)
    return elapsed


# --- main ---------------------------------------------------------------------------------


def run(directory: Path) -> None:
    cluster = Cluster.create(directory / "cluster", voters=VOTERS, brokers=BROKERS,
                             settings=SETTINGS)
    brokers = [n for n in sorted(cluster.nodes) if not cluster.node(n).is_voter]
    try:
        catch_up(cluster, brokers[0])
        for broker in brokers[1:]:
            cluster.start_node(broker)
        cluster.wait_for_brokers(30)
        propagation(cluster, brokers)
        paused_leader(cluster, brokers)
        bootstrap = ",".join(a for b in brokers if (a := cluster.node(b).client_address))
        for name, client in (("kafka-python", kafka_python), ("confluent-kafka", confluent)):
            topic = f"throughput-{name}"
            try:
                create_topic(cluster, brokers, topic)
                client(bootstrap, topic)
            except Exception as exc:  # one client failing must not hide the other's figures
                print(f"{name} throughput not measured: {type(exc).__name__}: {exc}")
        try:
            fetch_stream(cluster, brokers, bootstrap)
        except Exception as exc:  # nor the stream the clients' figures
            print(f"Fetch stream not measured: {type(exc).__name__}: {exc}")
    except ClusterError as exc:
        print(f"broker bench failed: {exc}")
    finally:
        cluster.shut_down(timeout_s=5)


def main() -> None:
    started = time.monotonic()
    load = os.getloadavg()[0]
    print(f"(host: {os.cpu_count()} CPUs, 1-minute load average {load:.1f} before the "
          f"cluster starts; other processes' load shows in every figure below)")
    with tempfile.TemporaryDirectory(prefix="broker-bench-") as temp:
        run(Path(temp))
    print(f"(broker bench took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
