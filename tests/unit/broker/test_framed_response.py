"""broker.kafka.framed_response: a consumer's Fetch response written from its segment files
(os.sendfile on plaintext TCP, read and sent on TLS) is byte for byte the frame encoded
with its records as bytes (`raft.common.kafka.codec.encode_response`), for several
partitions, an empty one, an error and a batch cut at max_bytes, in every Fetch version
shape; a client gone mid-sendfile costs its own connection only; a file cut under a
region is never sent as other bytes. Real files, real sockets on 127.0.0.1."""

from __future__ import annotations

import datetime
import logging
import os
import socket
import ssl
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.index import load_request_schema
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from broker import partition_dir
from broker.kafka.framed_response import Part, encode_parts, send_parts
from broker.kafka.handler_context import HandlerContext
from broker.kafka.listener import Dispatcher, KafkaListener
from broker.kafka.partitions import fetch
from broker.kafka.partitions.fetch import SENDFILE_MIN_BYTES
from broker.kafka.partitions.file_region import FileRegion, RegionCutError
from broker.kafka.replication.replica import ReplicaManager
from raft.common import tls
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build, encode_response, response_class
from raft.common.kafka.framing import SIZE, receive_frame
from raft.common.kafka.wire_client import decode_response, encode_request
from raft.common.tls import TlsSettings
from tests.support.kafka_support import BROKER, TOPIC_ID, image_with_topic, joined, record_batch
from tools import tls_certs

PARTITIONS = 3  # 0 and 1 hold batches, 2 is empty
# three batches a partition, each large enough to be sent from the file
BATCH_VALUES = [[b"a" * SENDFILE_MIN_BYTES], [b"b" * 70_000, b"c"], [b"d" * 66_000]]
BIG_VALUE = b"x" * (512 << 10)


def dispatcher_with_partitions(tmp_path: Path) -> Dispatcher:
    image = image_with_topic(partitions=PARTITIONS,
                             configs={"max.message.bytes": str(2 << 20)})
    for index in range(PARTITIONS):
        (tmp_path / f"A-{index}").mkdir()
        partition_dir.write_partition_metadata(tmp_path / f"A-{index}", TOPIC_ID)
    replicas = ReplicaManager(log_dir=tmp_path, broker_id=BROKER, image=lambda: image)
    return Dispatcher(HandlerContext(broker_id=BROKER, cluster_id="test-cluster",
                                     image=lambda: image, replicas=replicas, controller=None))


async def produce(dispatcher: Dispatcher, partition: int, values: list[bytes]) -> None:
    request = ProduceRequest(acks=1, timeout=datetime.timedelta(seconds=5), topic_data=(
        TopicProduceData(name="A", partition_data=(
            PartitionProduceData(index=partition, records=record_batch(values)),)),))
    reply = joined(await dispatcher.handle_frame(encode_request(request)[4:]))
    assert reply is not None
    _, response = decode_response(reply[4:], 0, 9)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE


def fetch_body(version: int, *, replica_id: int = -1, max_bytes: int = 1 << 20) -> Any:
    """Partition 0 cut to its first batch, 1 whole, 2 empty, 7 unknown (an error)."""
    first_batch = len(record_batch(BATCH_VALUES[0]))
    partitions = [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": first_batch + 10},
                  {"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1 << 20},
                  {"partition": 2, "fetch_offset": 0, "partition_max_bytes": 1 << 20},
                  {"partition": 7, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]
    topic = {"topic": "A", "topic_id": uuid.UUID(bytes=TOPIC_ID.to_bytes()),
             "partitions": partitions}
    return build(load_request_schema(1, version), {
        "replica_id": replica_id, "max_wait": 0, "min_bytes": 1, "max_bytes": max_bytes,
        "topics": [topic]})


async def tcp_pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    """(server side, client side) of one connection on 127.0.0.1."""
    (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    client = await trio.testing.open_stream_to_socket_listener(listener)
    server = await listener.accept()
    await listener.aclose()
    return server, client


async def sent_frame(server: trio.abc.Stream, client: trio.abc.Stream,
                     parts: list[Part]) -> bytes:
    """The frame `send_parts` writes to `server`, as received on `client`."""
    received: list[bytes] = []

    async def receive() -> None:
        payload = await receive_frame(client, bytearray())
        assert payload is not None
        received.append(SIZE.pack(len(payload)) + payload)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive)
            await send_parts(server, parts)
    return received[0]


def today_frame(correlation_id: int, version: int, response: Any) -> bytes:
    """The frame as encoded before regions: every region's records read into bytes."""
    for topic in response["responses"]:
        for partition in topic["partitions"]:
            records = partition["records"]
            if isinstance(records, FileRegion):
                partition["records"] = records.read()
                records.close()
    return encode_response(correlation_id, build(response_class(1, version), response))


async def filled(tmp_path: Path) -> Dispatcher:
    dispatcher = dispatcher_with_partitions(tmp_path)
    for partition in (0, 1):
        for values in BATCH_VALUES:
            await produce(dispatcher, partition, values)
    return dispatcher


@pytest.mark.parametrize("version", [4, 11, 12, 13])
async def test_sendfile_frame_is_the_encoded_frame_when_partitions_are_mixed(
        tmp_path: Path, version: int) -> None:
    """Plaintext TCP: the regions go by sendfile; the received frame equals the one
    encoded with the records as bytes. Partition 0 holds only its first batch (cut at
    max_bytes), 1 all three, 2 none, 7 an error, each as before."""
    dispatcher = await filled(tmp_path)
    body = fetch_body(version)
    parts = await dispatcher.handle_frame(encode_request(body, correlation_id=5)[4:])
    assert parts is not None
    regions = [part for part in parts if isinstance(part, FileRegion)]
    assert [region.size for region in regions] == [
        len(record_batch(BATCH_VALUES[0])),
        sum(len(record_batch(values)) for values in BATCH_VALUES)]
    server, client = await tcp_pair()
    async with server, client:
        wire = await sent_frame(server, client, parts)
    response = await fetch.handle_fetch_request(dispatcher.context, body, version)
    assert wire == today_frame(5, version, response)
    _, decoded = decode_response(wire[4:], 1, version)
    answers = [(p.partition_index, p.error_code, len(p.records))
               for p in decoded.responses[0].partitions]
    assert answers == [(0, ErrorCode.NONE, regions[0].size), (1, ErrorCode.NONE,
                                                              regions[1].size),
                       (2, ErrorCode.NONE, 0), (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0)]


async def test_tls_frame_is_the_encoded_frame_when_regions_are_read_and_sent(
        tmp_path: Path) -> None:
    """TLS: the regions are read and sent through the SSL stream; the same frame."""
    ca = tls_certs.make_ca()
    (tmp_path / "ca.pem").write_bytes(tls_certs.certificate_pem(ca))
    (tmp_path / "server.pem").write_bytes(tls_certs.keystore_pem(tls_certs.issue(ca, "b4")))
    server_context = tls.server_context(TlsSettings(
        keystore_location=str(tmp_path / "server.pem"),
        truststore_location=str(tmp_path / "ca.pem")))
    client_context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    logs = tmp_path / "logs"
    logs.mkdir()
    dispatcher = await filled(logs)
    body = fetch_body(13)
    parts = await dispatcher.handle_frame(encode_request(body, correlation_id=6)[4:])
    assert parts is not None
    assert any(isinstance(part, FileRegion) for part in parts)
    raw_server, raw_client = await tcp_pair()
    server = trio.SSLStream(raw_server, server_context, server_side=True)
    client = trio.SSLStream(raw_client, client_context, server_hostname="127.0.0.1")
    async with server, client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.do_handshake)
            nursery.start_soon(client.do_handshake)
        wire = await sent_frame(server, client, parts)
    response = await fetch.handle_fetch_request(dispatcher.context, body, 13)
    assert wire == today_frame(6, 13, response)


async def test_follower_fetch_reads_its_records_when_truncation_may_rewrite_them(
        tmp_path: Path) -> None:
    """A follower's records (up to the log end) are bytes in the frame, not regions."""
    dispatcher = await filled(tmp_path)
    parts = await dispatcher.handle_frame(
        encode_request(fetch_body(12, replica_id=BROKER + 1), correlation_id=7)[4:])
    assert parts is not None
    assert not any(isinstance(part, FileRegion) for part in parts)
    assert b"b" * 70_000 in b"".join(part for part in parts if isinstance(part, bytearray))


async def test_small_records_are_read_into_the_frame_when_below_the_sendfile_minimum(
        tmp_path: Path) -> None:
    dispatcher = dispatcher_with_partitions(tmp_path)
    await produce(dispatcher, 1, [b"small"])
    parts = await dispatcher.handle_frame(encode_request(fetch_body(13), correlation_id=8)[4:])
    assert parts is not None
    assert not any(isinstance(part, FileRegion) for part in parts)
    assert b"small" in b"".join(part for part in parts if isinstance(part, bytearray))


def test_parts_without_regions_are_the_encoded_frame_when_nothing_is_sent_from_a_file() -> None:
    response = build(response_class(1, 12), {"throttle_time": 0, "error_code": 0,
                                               "session_id": 0, "responses": []})
    assert encode_parts(3, response) == [bytearray(encode_response(3, response))]


def segment_fds(directory: Path) -> list[str]:
    """This process's open descriptors on the segment files under `directory`."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed by now
            continue
        if target.startswith(str(directory)) and target.endswith(".log"):
            found.append(target)
    return found


BIG_FETCH = {"max_wait": 0, "min_bytes": 1, "max_bytes": 4 << 20, "topics": [{
    "topic_id": uuid.UUID(bytes=TOPIC_ID.to_bytes()), "partitions": [
        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 4 << 20}]}]}


async def big_partition(tmp_path: Path) -> KafkaListener:
    """A listener whose partition 0 holds two batches of 512 KiB."""
    dispatcher = dispatcher_with_partitions(tmp_path)
    for _ in range(2):
        await produce(dispatcher, 0, [BIG_VALUE])
    return KafkaListener(dispatcher, ("127.0.0.1", 0))


async def stalled_fetch(listener: KafkaListener, nursery: trio.Nursery
                        ) -> tuple[trio.SocketStream, int]:
    """A client connection served by `listener` whose 1 MiB Fetch answer has begun and
    stalls (small buffers both ways, so most of it is still to be sent), and the bytes
    it has received (64 KiB or a little more)."""
    server, client = await tcp_pair()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    nursery.start_soon(listener.handle_connection, server)
    await client.send_all(encode_request(build(load_request_schema(1, 13), BIG_FETCH),
                                         correlation_id=1))
    got = b""
    while len(got) < 64 << 10:
        got += await client.receive_some(64 << 10)
    assert struct.unpack(">i", got[:4])[0] > 2 * len(BIG_VALUE)
    return client, len(got)


async def test_client_gone_mid_sendfile_closes_its_connection_only_when_others_are_served(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A consumer that takes 64 KiB of a 1 MiB response and resets the connection: the
    broker's sendfile fails on that connection, which closes (its region too); the next
    connection's fetch gets the whole response."""
    caplog.set_level(logging.INFO, logger="broker.kafka.listener")
    listener = await big_partition(tmp_path)
    appended_fds = segment_fds(tmp_path)  # the active segments' append handles
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            client, _ = await stalled_fetch(listener, nursery)
            client.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                     struct.pack("ii", 1, 0))  # a reset, as a crash gives
            await client.aclose()
        assert any(getattr(r, "peer", None) and r.message == "Kafka connection lost"
                   for r in caplog.records)
        assert segment_fds(tmp_path) == appended_fds  # the region's descriptor is closed

        server, client = await tcp_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(listener.handle_connection, server)
            async with client:
                await client.send_all(encode_request(
                    build(load_request_schema(1, 13), BIG_FETCH), correlation_id=2))
                payload = await receive_frame(client, bytearray())
    assert payload is not None
    correlation_id, response = decode_response(payload, 1, 13)
    (partition,) = response.responses[0].partitions
    assert (correlation_id, partition.error_code) == (2, ErrorCode.NONE)
    assert partition.records.count(BIG_VALUE) == 2


async def test_segment_cut_mid_sendfile_closes_the_connection_when_the_frame_is_unfinished(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The segment cut to 200 KiB while its 1 MiB region is being sent: the broker's
    sendfile meets the file's end, and the connection closes before the frame is whole
    (never padded nor filled with other bytes), with the reason logged as a warning."""
    listener = await big_partition(tmp_path)
    (segment,) = (tmp_path / "A-0").glob("*.log")
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            client, received = await stalled_fetch(listener, nursery)
            os.truncate(segment, 200 << 10)
            while chunk := await client.receive_some(64 << 10):
                received += len(chunk)
            await client.aclose()
    assert received < 2 * len(BIG_VALUE)
    assert any(r.levelno == logging.WARNING and r.message == "closing Kafka connection"
               and "the file ends at" in getattr(r, "reason", "") for r in caplog.records)


async def test_region_cut_under_it_is_refused_when_read_or_sent(tmp_path: Path) -> None:
    """A file shorter than its region (cut after the read) raises rather than sending
    other bytes, by sendfile or by read."""
    path = tmp_path / "segment.log"
    path.write_bytes(b"r" * 1000)
    parts: list[Part] = [bytearray(b"head"),
                         FileRegion(os.open(path, os.O_RDONLY), 100, 800)]
    os.truncate(path, 500)
    with pytest.raises(RegionCutError):
        parts[1].read()  # type: ignore[union-attr]
    server, client = await tcp_pair()
    async with server, client:
        with pytest.raises(RegionCutError):
            await send_parts(server, parts)
