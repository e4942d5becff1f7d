"""The cost of a SASL login on the broker's Kafka listener, in one process on 127.0.0.1.

    python -m bench sasl_bench

A `KafkaListener` with SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; the SCRAM credentials
at Kafka's default 4096 iterations in the image) and one client task. Per mechanism,
`CONNECTIONS` new connections in turn, each timed by the client from connect to the
answer of one ApiVersions sent after the login (`broker.kafka.sasl.sasl_client`): the login's
round trips plus, for SCRAM, the client's PBKDF2 (which a real client pays too); and,
for comparison, the same on a listener without SASL. Then the broker's own share: the
CPU time of one server-side SCRAM exchange (`ScramServer.first` + `final`: HMACs only,
the PBKDF2 is the client's), over `SERVER_EXCHANGES` exchanges. Bounded by
`PHASE_LIMIT_S` per phase (a cut-short figure says so); about 10 s in all.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

import trio
from kio.index import load_request_schema

from bench.stats import percentile
from broker.kafka.handler_context import HandlerContext
from broker.kafka.listener import Dispatcher, KafkaListener
from broker.kafka.replication.replica import ReplicaManager
from broker.kafka.sasl.sasl_client import authenticate
from broker.kafka.sasl.sasl_settings import SaslClientSettings, SaslSettings
from broker.kafka.sasl.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramServer,
    credential_from_password,
    unknown_user_key,
)
from metadata import records as rec
from metadata.delta import replay
from metadata.image import MetadataImage
from raft.common.kafka.codec import build
from raft.common.kafka.wire_client import encode_request
from raft.common.uuid import Uuid

CONNECTIONS = 200
SERVER_EXCHANGES = 500
ITERATIONS = 4096
PHASE_LIMIT_S = 4.0
PASSWORD = "bench-secret"
UNKNOWN_USER_KEY = unknown_user_key(b"sasl bench")


def image_with_user() -> MetadataImage:
    # the metadata topic's ID first, as a real log has it: brokers refuse SCRAM without it
    records: list[rec.Record] = [rec.MetadataTopic(topic_id=Uuid.random())]
    for mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
        c = credential_from_password(mechanism, PASSWORD, salt=b"bench-salt" * 3,
                                     iterations=ITERATIONS)
        records.append(rec.UserScramCredential(
            name="bench", mechanism=mechanism.name, salt=c.salt, stored_key=c.stored_key,
            server_key=c.server_key, iterations=c.iterations))
    return replay(enumerate(records))


async def timed_connections(port: int, login: SaslClientSettings | None) -> tuple[list[float],
                                                                                   bool]:
    api_versions = encode_request(build(load_request_schema(18, 3), {
        "client_software_name": "bench", "client_software_version": "1"}), correlation_id=1)
    rng = random.Random(1)
    times: list[float] = []
    deadline = time.monotonic() + PHASE_LIMIT_S
    while len(times) < CONNECTIONS:
        if time.monotonic() > deadline:
            return times, True
        started = time.perf_counter()
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            if login is not None:
                await authenticate(stream, login, rng=rng)
            await stream.send_all(api_versions)
            received = b""
            while len(received) < 4 or len(received) < 4 + int.from_bytes(received[:4], "big"):
                chunk = await stream.receive_some(65536)
                assert chunk, "closed by the listener"
                received += chunk
        times.append(time.perf_counter() - started)
    return times, False


async def listener_phase(directory: Path) -> None:
    image = image_with_user()
    context = HandlerContext(broker_id=1, cluster_id="bench", image=lambda: image,
                             replicas=ReplicaManager(log_dir=directory, broker_id=1,
                                                     image=lambda: image), controller=None)
    plain = KafkaListener(Dispatcher(context), ("127.0.0.1", 0))
    sasl = KafkaListener(Dispatcher(context), ("127.0.0.1", 0))
    sasl.sasl = SaslSettings(enabled_mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
                             plain_users={"bench": PASSWORD})
    async with trio.open_nursery() as nursery:
        plain_port = await nursery.start(plain.serve)
        sasl_port = await nursery.start(sasl.serve)
        cases: list[tuple[str, int, SaslClientSettings | None]] = [
            ("no SASL", plain_port, None)] + [
            (m, sasl_port, SaslClientSettings(mechanism=m, username="bench", password=PASSWORD))
            for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")]
        for name, port, login in cases:
            times, cut = await timed_connections(port, login)
            print(f"new connection + login + ApiVersions, {name:13s}: "
                  f"p50 {percentile(times, 0.5) * 1000:6.2f} ms  "
                  f"p99 {percentile(times, 0.99) * 1000:6.2f} ms  ({len(times)} connections"
                  f"{', cut short' if cut else ''})")
        nursery.cancel_scope.cancel()


def server_share() -> None:
    for mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
        credential = credential_from_password(mechanism, PASSWORD, salt=b"s" * 16,
                                              iterations=ITERATIONS)
        lookup = {"bench": credential}.get
        rng = random.Random(2)
        exchanges = []  # the client's messages, made before the clock starts
        for _ in range(SERVER_EXCHANGES):
            client = ScramClient(mechanism, "bench", PASSWORD, rng=rng)
            probe = ScramServer(mechanism, lookup, unknown_user_key=UNKNOWN_USER_KEY,
                                rng=random.Random(3))
            first = client.first()
            final = client.final(probe.first(first))
            exchanges.append((first, final))
        spent, done = 0.0, 0
        deadline = time.monotonic() + PHASE_LIMIT_S
        for first, final in exchanges:
            if time.monotonic() > deadline:
                break
            server = ScramServer(mechanism, lookup, unknown_user_key=UNKNOWN_USER_KEY,
                                 rng=random.Random(3))
            started = time.process_time()
            server.first(first)
            server.final(final)
            spent += time.process_time() - started
            done += 1
        print(f"server-side {mechanism.name} exchange (HMACs, no PBKDF2): "
              f"{spent / max(done, 1) * 1e6:6.1f} us CPU each ({done} exchanges)")
        client = ScramClient(mechanism, "bench", PASSWORD, rng=rng)
        server_first = ScramServer(mechanism, lookup, unknown_user_key=UNKNOWN_USER_KEY,
                                   rng=random.Random(3)).first(client.first())
        started = time.process_time()
        client.final(server_first)
        print(f"client-side {mechanism.name} proof ({ITERATIONS} PBKDF2 iterations): "
              f"{(time.process_time() - started) * 1000:6.2f} ms CPU")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="sasl-bench-") as directory:
        trio.run(listener_phase, Path(directory))
    server_share()


if __name__ == "__main__":
    main()
