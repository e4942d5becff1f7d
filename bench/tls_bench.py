"""The cost of TLS: the same cluster plaintext and with `kraft quorum start --tls` (mutual
TLS on every listener), one after the other in the same run.

    python -m bench tls_bench

Each cluster: 3 voters and 2 brokers on 127.0.0.1, the integration tests' short raft
timeouts, fsync on. Both clusters run side by side, and the latency figures are taken in
turns (plaintext, TLS, plaintext, ...: `ROUNDS` rounds each), so that the load other
processes put on the host falls on both alike. Three figures per cluster:

1. 1-by-1 commit latency (p50/p99): `Append` of single NoOp records, one waiting for its
   commit at a time, timed on the leader from propose to commit: the voters' Fetch round
   trips (over the controller listener, TLS or not) and the fsyncs; 300 in all.
2. A request on a new connection (p50/p99): DescribeQuorum requests to a voter, each on a
   connection of its own, timed by the client: TCP connect, the TLS handshake with both
   certificates checked (ECDSA P-256), the request and its answer; 100 in all.
3. Produce throughput: confluent-kafka, 100,000 messages of 100 bytes, acks=all, one
   partition with replication factor 2 (the follower broker fetches over the
   inter-broker listener, TLS or not), after one warm-up message; in turns too, a third
   of the messages a turn.

Bounded: every phase stops after `PHASE_LIMIT_S` (a cut-short figure says so); the whole
bench takes about 40 s. Only processes it started are ended, by pid.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.stats import percentile
from metadata.admin import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from raft import messages
from tools import tls_certs
from tools.admin_client import AdminClient
from tools.cluster import Cluster, ClusterError
from tools.quorum_client import request

VOTERS = 3
BROKERS = 2
SETTINGS = {"controller.quorum.election.timeout.ms": 300,
            "controller.quorum.fetch.timeout.ms": 600,
            "controller.quorum.election.backoff.max.ms": 200,
            "controller.quorum.request.timeout.ms": 400,
            "controller.quorum.fetch.max.wait.ms": 150,
            "broker.heartbeat.interval.ms": 200}
COMMITS = 300
CONNECTIONS = 100
ROUNDS = 3
MESSAGES = 100_000
MESSAGE_BYTES = 100
PHASE_LIMIT_S = 15.0
TOPIC = "tls-bench"


def commit_latencies(cluster: Cluster, count: int) -> list[float]:
    reply = cluster.append(count, batch=1, in_flight=1, timeout_s=PHASE_LIMIT_S)
    latencies: list[float] = reply["latencies_ms"]
    return latencies


def new_connection_requests(cluster: Cluster, count: int) -> list[float]:
    address = cluster.controller_addresses()[0]
    body = messages.encode_message(messages.DescribeQuorumRequest(cluster_id=""))[1]
    times: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        request(address, "DescribeQuorumRequest", body, timeout_s=5,
                ssl_context=cluster.client_ssl)
        times.append((time.perf_counter() - started) * 1000)
    return times


def p50_p99(values: list[float]) -> tuple[float, float]:
    return percentile(values, 0.5), percentile(values, 0.99)


def create_topic(cluster: Cluster) -> None:
    admin = AdminClient(cluster.controller_addresses(), cluster_id=cluster.cluster_id,
                        timeout_s=30, ssl_context=cluster.client_ssl)
    response = admin.call(CreateTopicsRequest(topics=(
        CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=BROKERS),)))
    if not isinstance(response, CreateTopicsResponse) or response.topics[0].error_code:
        raise ClusterError(f"create {TOPIC} failed: {response}")
    hw = cluster.describe()["high_watermark"]
    brokers = [n for n in cluster.nodes if not cluster.node(n).is_voter]
    deadline = time.monotonic() + 30
    while True:
        statuses = [cluster.broker_status(b) for b in brokers]
        if all(s is not None and s["applied_offset"] + 1 >= hw for s in statuses):
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"{TOPIC} not visible on every broker within 30 s")
        time.sleep(0.01)


def produce_throughput(cluster: Cluster, count: int) -> tuple[int, float]:
    """(messages acknowledged, seconds) for confluent-kafka at acks=all."""
    import confluent_kafka

    bootstrap = ",".join(a for n in sorted(cluster.nodes)
                         if (a := cluster.node(n).client_address))
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all"}
    if cluster.client_properties is not None:
        tls_dir = cluster.directory / tls_certs.TLS_DIR
        config.update({"security.protocol": "SSL", "ssl.ca.location": str(tls_dir / "ca.pem"),
                       "ssl.certificate.location": str(tls_dir / "client-cert.pem"),
                       "ssl.key.location": str(tls_dir / "client-key.pem")})
    outcome = {"acked": 0, "failed": 0}

    def delivered(error: Any, _message: Any) -> None:
        outcome["failed" if error is not None else "acked"] += 1

    payload = b"t" * MESSAGE_BYTES
    producer = confluent_kafka.Producer(config)
    producer.produce(TOPIC, value=payload)  # warm-up: connections, metadata, producer id
    if producer.flush(PHASE_LIMIT_S) != 0:
        raise ClusterError("the warm-up message was not delivered")
    started = time.perf_counter()
    deadline = started + PHASE_LIMIT_S
    sent = 0
    while sent < count and time.perf_counter() < deadline:
        try:
            producer.produce(TOPIC, value=payload, on_delivery=delivered)
            sent += 1
        except BufferError:
            producer.poll(0.01)
    producer.flush(max(0.1, deadline - time.perf_counter()))
    return outcome["acked"], time.perf_counter() - started


def produce_in_turns(clusters: dict[str, Cluster], results: dict[str, dict[str, Any]]
                     ) -> None:
    """results[name]["produce"] = (acknowledged, seconds) summed over the turns, or
    results[name]["produce_error"]."""
    for name, cluster in clusters.items():
        try:
            create_topic(cluster)
            results[name]["produce"] = (0, 0.0)
        except Exception as exc:  # the quorum's figures still print
            results[name]["produce_error"] = f"{type(exc).__name__}: {exc}"
    for _ in range(ROUNDS):
        for name, cluster in clusters.items():
            if "produce_error" in results[name]:
                continue
            try:
                acked, seconds = produce_throughput(cluster, MESSAGES // ROUNDS)
            except Exception as exc:
                results[name]["produce_error"] = f"{type(exc).__name__}: {exc}"
                results[name].pop("produce")
                continue
            total, elapsed = results[name]["produce"]
            results[name]["produce"] = (total + acked, elapsed + seconds)


def measure(directory: Path) -> dict[str, dict[str, Any]]:
    clusters = {name: Cluster.create(directory / name, voters=VOTERS, brokers=BROKERS,
                                     settings=SETTINGS, tls=tls)
                for name, tls in (("plaintext", False), ("TLS", True))}
    try:
        for cluster in clusters.values():
            cluster.start()
        for cluster in clusters.values():
            cluster.wait_for_leader(30)
            cluster.wait_for_brokers(30)
            commit_latencies(cluster, 20)  # warm-up
        commits: dict[str, list[float]] = {name: [] for name in clusters}
        connects: dict[str, list[float]] = {name: [] for name in clusters}
        for _ in range(ROUNDS):  # in turns: the host's load falls on both alike
            for name, cluster in clusters.items():
                commits[name] += commit_latencies(cluster, COMMITS // ROUNDS)
                connects[name] += new_connection_requests(cluster, CONNECTIONS // ROUNDS)
        results: dict[str, dict[str, Any]] = {
            name: {"commit": p50_p99(commits[name]), "connect": p50_p99(connects[name])}
            for name in clusters}
        produce_in_turns(clusters, results)
        return results
    finally:
        for cluster in clusters.values():
            cluster.shut_down(timeout_s=5)


def main() -> None:
    started = time.monotonic()
    print(f"(host: {os.cpu_count()} CPUs, 1-minute load average {os.getloadavg()[0]:.1f}; "
          f"{VOTERS} voters + {BROKERS} brokers each, a plaintext and a mutual-TLS cluster "
          "side by side)")
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="tls-bench-") as temp:
        try:
            rows = measure(Path(temp))
        except ClusterError as exc:
            print(f"not measured: {exc}")
    for name, row in rows.items():
        p50, p99 = row["commit"]
        c50, c99 = row["connect"]
        line = (f"{name:<9} 1-by-1 commit p50 {p50:6.2f} ms p99 {p99:6.2f} ms | "
                f"request on a new connection p50 {c50:6.2f} ms p99 {c99:6.2f} ms | ")
        if "produce" in row:
            acked, seconds = row["produce"]
            rate = acked / seconds if seconds > 0 else 0.0
            cut = " (stopped at the time limit)" if acked < MESSAGES // ROUNDS * ROUNDS else ""
            line += (f"confluent-kafka produce acks=all RF {BROKERS}: {rate:,.0f} msg/s "
                     f"({rate * MESSAGE_BYTES / 1e6:.2f} MB/s){cut}")
        else:
            line += f"produce not measured: {row['produce_error']}"
        print(line)
    if len(rows) == 2 and "produce" in rows["plaintext"] and "produce" in rows["TLS"]:
        plain, secured = rows["plaintext"], rows["TLS"]
        plain_rate = plain["produce"][0] / plain["produce"][1]
        tls_rate = secured["produce"][0] / secured["produce"][1]
        print(f"TLS cost: commit p50 {secured['commit'][0] - plain['commit'][0]:+.2f} ms, "
              f"p99 {secured['commit'][1] - plain['commit'][1]:+.2f} ms; new connection p50 "
              f"{secured['connect'][0] - plain['connect'][0]:+.2f} ms; produce "
              f"{(tls_rate / plain_rate - 1) * 100:+.0f}%")
    print(f"(tls bench took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
