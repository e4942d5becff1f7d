"""broker.kafka: dispatch by api key and version (sans-I/O), KIP-511, and the Trio listener
closing only the offending connection."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.fetch.v13.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from broker import partition_dir
from broker.kafka.api_versions import SUPPORTED, handle_api_versions_request
from broker.kafka.handler_context import HandlerContext
from broker.kafka.listener import ConnectionClosed, Dispatcher, KafkaListener
from broker.kafka.replication.replica import ReplicaManager
from metadata.image import MetadataImage
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build, encode_response, request_schema, response_class
from raft.common.kafka.ordered_schemas import (
    CONSUMER_GROUP_POSITION,
    PARTITION_LEADER_EPOCHS,
    PROJECT_CLIENT_SOFTWARE,
)
from raft.common.kafka.wire_client import decode_response, encode_request
from tests.support.kafka_support import (
    BROKER,
    OLD_TOPIC_ID,
    TOPIC_ID,
    image_with_topic,
    joined,
    record_batch,
    with_producer,
)


def make_dispatcher(tmp_path: Path, image: MetadataImage | None = None) -> Dispatcher:
    image = image or image_with_topic()
    (tmp_path / "A-0").mkdir(exist_ok=True)
    partition_dir.write_partition_metadata(tmp_path / "A-0", TOPIC_ID)
    replicas = ReplicaManager(log_dir=tmp_path, broker_id=BROKER, image=lambda: image)
    return Dispatcher(HandlerContext(broker_id=BROKER, cluster_id="test-cluster",
                                     image=lambda: image, replicas=replicas, controller=None))


async def roundtrip(dispatcher: Dispatcher, body: Any) -> Any:
    frame = encode_request(body, correlation_id=42)[4:]
    reply = joined(await dispatcher.handle_frame(frame))
    assert reply is not None
    correlation_id, response = decode_response(reply[4:], body.__api_key__, body.__version__)
    assert correlation_id == 42
    return response


def test_every_advertised_version_has_a_schema_when_ranges_listed() -> None:
    """Coherent ranges: each advertised (api, version) decodes and encodes with kio (or
    with the broker's own schemas, for the APIs Kafka lacks)."""
    for api_key, (low, high) in SUPPORTED.items():
        for version in range(low, high + 1):
            assert request_schema(api_key, version) is not None
            assert response_class(api_key, version) is not None


async def test_v0_body_with_unsupported_version_when_api_versions_above_max(
        tmp_path: Path) -> None:
    """KIP-511: ApiVersions above our max -> v0 response, UNSUPPORTED_VERSION, our
    ranges, so the client retries with a version we know."""
    dispatcher = make_dispatcher(tmp_path)
    frame = bytearray(encode_request(ApiVersionsRequest(
        client_software_name="x", client_software_version="1"), correlation_id=9)[4:])
    frame[2:4] = (99).to_bytes(2, "big")  # ApiVersions v99, body unreadable to us
    reply = joined(await dispatcher.handle_frame(bytes(frame)))
    assert reply is not None
    correlation_id, response = decode_response(reply[4:], 18, 0)
    assert correlation_id == 9
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == {
        key: ranges for key, ranges in SUPPORTED.items()
        if key not in (CONSUMER_GROUP_POSITION, PARTITION_LEADER_EPOCHS)}  # Kafka's only


async def test_api_versions_reports_the_features_when_asked_at_v3(tmp_path: Path) -> None:
    """KIP-584/KIP-853: ApiVersions v3 lists kraft.version 0-1 and metadata.version 1-3
    as supported and the cluster's finalized levels, kraft.version as the broker's raft
    core read it from the log, metadata.version as its image holds it (2: no
    FeatureLevel record in this log)."""
    dispatcher = make_dispatcher(tmp_path)
    request = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    for level in (0, 1):
        dispatcher.context.kraft_version = lambda level=level: level
        response = await roundtrip(dispatcher, request)
        assert [(f.name, f.min_version, f.max_version)
                for f in response.supported_features] == [("kraft.version", 0, 1),
                                                          ("metadata.version", 1, 3)]
        assert [(f.name, f.min_version_level, f.max_version_level)
                for f in response.finalized_features] == [("kraft.version", level, level),
                                                          ("metadata.version", 2, 2)]
        assert response.finalized_features_epoch == dispatcher.context.image.last_applied_offset


async def test_connection_closed_when_api_unsupported(tmp_path: Path) -> None:
    """An API we do not serve (JoinGroup, 11) closes the connection."""
    dispatcher = make_dispatcher(tmp_path)
    frame = bytearray(encode_request(ApiVersionsRequest(
        client_software_name="x", client_software_version="1"))[4:])
    frame[0:2] = (11).to_bytes(2, "big")
    with pytest.raises(ConnectionClosed):
        await dispatcher.handle_frame(bytes(frame))


async def test_metadata_carries_topic_ids_when_asked_by_id(tmp_path: Path) -> None:
    """KIP-516 Metadata v12: by topic_id; unknown IDs get UNKNOWN_TOPIC_ID."""
    dispatcher = make_dispatcher(tmp_path)
    known = uuid.UUID(bytes=TOPIC_ID.to_bytes())
    unknown = uuid.UUID(bytes=OLD_TOPIC_ID.to_bytes())
    response = await roundtrip(dispatcher, MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=known, name=None),
                MetadataRequestTopic(topic_id=unknown, name=None)),
        include_topic_authorized_operations=False))
    found, missing = response.topics
    assert (found.name, found.topic_id, found.error_code) == ("A", known, ErrorCode.NONE)
    assert found.partitions[0].leader_id == BROKER
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert [b.node_id for b in response.brokers] == [BROKER]


def produce_request(values: list[bytes], acks: int = 1, name: str = "A") -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout=datetime.timedelta(seconds=5), topic_data=(
        TopicProduceData(name=name, partition_data=(
            PartitionProduceData(index=0, records=record_batch(values)),)),))


def fetch_request(topic_id: uuid.UUID, offset: int, max_wait_ms: int = 0) -> FetchRequest:
    return FetchRequest(max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1,
                        topics=(FetchTopic(topic_id=topic_id, partitions=(FetchPartition(
                            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20),)),),
                        forgotten_topics_data=())


async def test_fetch_by_topic_id_returns_produced_batch_when_acks_one(tmp_path: Path) -> None:
    """Produce v9 assigns offsets; Fetch v13 by topic ID reads the batch back below the
    high watermark."""
    dispatcher = make_dispatcher(tmp_path)
    produced = await roundtrip(dispatcher, produce_request([b"one", b"two"]))
    part = produced.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (ErrorCode.NONE, 0)
    fetched = await roundtrip(dispatcher, fetch_request(
        uuid.UUID(bytes=TOPIC_ID.to_bytes()), 0))
    data = fetched.responses[0].partitions[0]
    assert (data.error_code, data.high_watermark) == (ErrorCode.NONE, 2)
    assert b"one" in data.records
    assert b"two" in data.records


async def test_fetch_with_stale_topic_id_gets_no_records_when_topic_recreated(
        tmp_path: Path) -> None:
    """KIP-516 stale reads: a Fetch holding the old ID gets UNKNOWN_TOPIC_ID, no data."""
    dispatcher = make_dispatcher(tmp_path)
    await roundtrip(dispatcher, produce_request([b"new topic data"]))
    fetched = await roundtrip(dispatcher, fetch_request(
        uuid.UUID(bytes=OLD_TOPIC_ID.to_bytes()), 0))
    data = fetched.responses[0].partitions[0]
    assert data.error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert not data.records


async def test_no_response_when_acks_zero(tmp_path: Path) -> None:
    """Produce acks=0: the client expects no response at all."""
    dispatcher = make_dispatcher(tmp_path)
    reply = await dispatcher.handle_frame(encode_request(produce_request([b"x"], acks=0))[4:])
    assert reply is None


async def test_corrupt_message_when_batch_crc_wrong(tmp_path: Path) -> None:
    """A batch whose CRC32C does not match is refused and nothing is stored."""
    dispatcher = make_dispatcher(tmp_path)
    request = produce_request([b"x"])
    bad = bytearray(record_batch([b"x"]))
    bad[-1] ^= 1
    request = ProduceRequest(acks=1, timeout=request.timeout, topic_data=(TopicProduceData(
        name="A", partition_data=(PartitionProduceData(index=0, records=bytes(bad)),)),))
    response = await roundtrip(dispatcher, request)
    assert response.responses[0].partition_responses[0].error_code == \
        ErrorCode.CORRUPT_MESSAGE


async def test_parked_fetch_answers_when_data_arrives(tmp_path: Path) -> None:
    """Long poll: an empty Fetch waits (up to max_wait) and returns as soon as a produce
    lands, long before max_wait."""
    dispatcher = make_dispatcher(tmp_path)
    await roundtrip(dispatcher, produce_request([b"first"]))
    results: list[Any] = []

    async def parked_fetch() -> None:
        results.append(await roundtrip(dispatcher, fetch_request(
            uuid.UUID(bytes=TOPIC_ID.to_bytes()), 1, max_wait_ms=60_000)))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(parked_fetch)
            await trio.testing.wait_all_tasks_blocked()
            assert results == []
            await roundtrip(dispatcher, produce_request([b"second"]))
    data = results[0].responses[0].partitions[0]
    assert b"second" in data.records
    assert b"first" not in data.records


VALID_FRAMES = [encode_request(body)[4:] for body in (
    ApiVersionsRequest(client_software_name="x", client_software_version="1"),
    MetadataRequest(topics=None, include_topic_authorized_operations=False),
    produce_request([b"fuzz"]),
    fetch_request(uuid.UUID(bytes=TOPIC_ID.to_bytes()), 0))]


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    """A valid request with bytes flipped, cut or inserted."""
    frame = bytearray(draw(st.sampled_from(VALID_FRAMES)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert"]))
        at = draw(st.integers(0, max(0, len(frame) - 1)))
        if kind == "flip" and frame:
            frame[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del frame[at:]
        else:
            frame[at:at] = draw(st.binary(min_size=1, max_size=8))
    return bytes(frame)


@settings(max_examples=200, deadline=None)
@given(frame=st.one_of(
    st.binary(max_size=200),
    st.tuples(st.sampled_from([0, 1, 3, 18, 19, 20]), st.integers(0, 13),
              st.binary(max_size=120)).map(
        lambda t: t[0].to_bytes(2, "big") + t[1].to_bytes(2, "big") + t[2]),
    mutated_frames()))
def test_random_frames_close_the_connection_or_get_answers_when_fuzzed(
        frame: bytes, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Bad input: random, header-shaped and mutated valid frames never raise anything
    but ConnectionClosed (the broker stays up), and only a Fetch (long poll, its
    max_wait possibly mutated) takes long."""
    dispatcher = make_dispatcher(tmp_path_factory.mktemp("fuzz"))

    async def run() -> None:
        with trio.move_on_after(5) as waited:
            try:
                await dispatcher.handle_frame(frame)
            except ConnectionClosed:
                pass
        if waited.cancelled_caught:  # only a Fetch may park (long poll up to max_wait)
            assert frame[:2] == b"\x00\x01"

    trio.run(run)


async def test_other_clients_served_when_one_sends_garbage(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A malformed frame closes that connection only, with the reason logged; another
    client is still served."""
    listener = KafkaListener(make_dispatcher(tmp_path), ("127.0.0.1", 0),
                             max_frame_bytes=1 << 20)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(listener.serve)
            bad = await trio.open_tcp_stream("127.0.0.1", port)
            good = await trio.open_tcp_stream("127.0.0.1", port)
            await bad.send_all(b"\x00\x00\x00\x05\xff\xff\x00\x00\x01")
            assert await bad.receive_some(100) == b""  # closed by the broker
            huge = await trio.open_tcp_stream("127.0.0.1", port)
            await huge.send_all((1 << 30).to_bytes(4, "big"))
            assert await huge.receive_some(100) == b""
            await good.send_all(encode_request(ApiVersionsRequest(
                client_software_name="x", client_software_version="1"), correlation_id=3))
            reply = b""
            while len(reply) < 4 or len(reply) < 4 + int.from_bytes(reply[:4], "big"):
                reply += await good.receive_some(65536)
            correlation_id, response = decode_response(reply[4:], 18, 3)
            assert correlation_id == 3
            assert response.error_code == ErrorCode.NONE
            for stream in (bad, good, huge):
                await stream.aclose()
            nursery.cancel_scope.cancel()
    reasons = [r.reason for r in caplog.records  # type: ignore[attr-defined]
               if r.getMessage() == "closing Kafka connection"]
    assert any("malformed request header" in reason for reason in reasons)
    assert any("frame size" in reason for reason in reasons)


async def test_retried_batch_stored_once_when_idempotent_producer_resends(
        tmp_path: Path) -> None:
    """Idempotent producer (kafka-python's default): the same producer id and base
    sequence again gets the original offset and is not stored twice."""
    dispatcher = make_dispatcher(tmp_path)
    batch = with_producer(record_batch([b"once"]), producer_id=77, base_sequence=0)
    request = ProduceRequest(acks=1, timeout=datetime.timedelta(seconds=5), topic_data=(
        TopicProduceData(name="A", partition_data=(
            PartitionProduceData(index=0, records=batch),)),))
    first = await roundtrip(dispatcher, request)
    retry = await roundtrip(dispatcher, request)
    offsets = [r.responses[0].partition_responses[0].base_offset for r in (first, retry)]
    assert offsets == [0, 0]
    fetched = await roundtrip(dispatcher, fetch_request(
        uuid.UUID(bytes=TOPIC_ID.to_bytes()), 0))
    assert fetched.responses[0].partitions[0].high_watermark == 1


async def test_diverging_epoch_when_follower_last_epoch_unknown_to_leader(
        tmp_path: Path) -> None:
    """KIP-595 style: a follower fetching with a last epoch the leader's log does not
    have gets `diverging_epoch` (where to truncate) and no records."""
    image = image_with_topic(replicas=(BROKER, 5), leader_epoch=2)
    dispatcher = make_dispatcher(tmp_path, image)
    await roundtrip(dispatcher, produce_request([b"epoch two"]))
    request = FetchRequest(
        replica_id=5, max_wait=datetime.timedelta(seconds=60), min_bytes=1,
        topics=(FetchTopic(topic_id=uuid.UUID(bytes=TOPIC_ID.to_bytes()), partitions=(
            FetchPartition(partition=0, fetch_offset=3, last_fetched_epoch=1,
                           partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=())
    with trio.fail_after(5):  # answered at once, not parked for max_wait
        data = (await roundtrip(dispatcher, request)).responses[0].partitions[0]
    assert (data.diverging_epoch.epoch, data.diverging_epoch.end_offset) == (-1, 0)
    assert not data.records


async def test_diverged_follower_counts_for_nothing_until_it_has_truncated(
        tmp_path: Path) -> None:
    """A follower fetching from a diverged tail (a restarted former leader) is told where
    to truncate, and its claimed offset moves neither the high watermark nor its ISR
    standing: only a fetch that matches the leader's log is progress."""
    image = image_with_topic(replicas=(BROKER, 5), leader_epoch=2)
    dispatcher = make_dispatcher(tmp_path, image)
    await roundtrip(dispatcher, produce_request([b"epoch two"]))
    [(state, partition)] = dispatcher.context.replicas.led_partitions()

    def fetch(offset: int, last_epoch: int) -> FetchRequest:
        return FetchRequest(
            replica_id=5, max_wait=datetime.timedelta(seconds=0), min_bytes=0,
            topics=(FetchTopic(topic_id=uuid.UUID(bytes=TOPIC_ID.to_bytes()), partitions=(
                FetchPartition(partition=0, fetch_offset=offset, last_fetched_epoch=last_epoch,
                               partition_max_bytes=1 << 20),)),),
            forgotten_topics_data=())

    diverged = (await roundtrip(dispatcher, fetch(3, 1))).responses[0].partitions[0]
    assert diverged.diverging_epoch.end_offset == 0
    assert 5 not in state.follower_offsets
    assert state.high_watermark == 0
    assert not state.is_expansion_candidate(partition, 5)
    await roundtrip(dispatcher, fetch(1, 2))  # after truncating and fetching the record
    assert state.follower_offsets[5] == 1
    assert state.high_watermark == 1


async def test_acks_all_fails_when_leadership_moves_before_the_records_reach_the_isr(
        tmp_path: Path) -> None:
    """A deposed leader waiting on acks=all must not take the new leader's high
    watermark (copied into the same partition state once it follows) as proof that its
    own records were replicated: the new leader may hold other records there."""
    images = [image_with_topic(replicas=(BROKER, 5), leader_epoch=2)]
    (tmp_path / "A-0").mkdir()
    partition_dir.write_partition_metadata(tmp_path / "A-0", TOPIC_ID)
    replicas = ReplicaManager(log_dir=tmp_path, broker_id=BROKER, image=lambda: images[-1])
    dispatcher = Dispatcher(HandlerContext(broker_id=BROKER, cluster_id="test-cluster",
                                           image=lambda: images[-1], replicas=replicas,
                                           controller=None))
    answers = []

    async def produce() -> None:
        answers.append(await roundtrip(dispatcher, produce_request([b"mine"], acks=-1)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        with trio.fail_after(5):  # appended (in a worker thread), then waiting on broker 5
            await replicas.wait_data()
            await trio.testing.wait_all_tasks_blocked()
        [(state, _)] = replicas.led_partitions()
        assert state.log.log_end_offset == 1
        assert state.high_watermark == 0
        assert not answers
        images.append(image_with_topic(replicas=(BROKER, 5), leader=5, leader_epoch=3))
        state.high_watermark = 5  # as the follower path copies the new leader's
        state.notify()
    [answer] = answers
    data = answer.responses[0].partition_responses[0]
    assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_clients_infer_a_topic_id_capable_broker_when_reading_our_ranges() -> None:
    """Coherent ranges: kafka-python infers Kafka 4.1 from them (Produce v13: topics by
    ID in Produce, KIP-516; Fetch v13 and Metadata v12: topic IDs there), not an older
    broker."""
    inference = pytest.importorskip("kafka.protocol.broker_version_data")
    assert inference.infer_broker_version_from_api_versions(SUPPORTED) == (4, 1)
    assert SUPPORTED[0][1] >= 13
    assert SUPPORTED[1][1] >= 13
    assert SUPPORTED[3][1] >= 12


def test_project_apis_are_listed_only_to_the_projects_own_client() -> None:
    """Kafka defines no keys 2530/2531 and kafka-python's api_versions() fails on them:
    a Kafka client (any other or no client_software_name) sees only Kafka's keys; the
    kraft-py admin client, which negotiates PartitionLeaderEpochs, sees both."""
    def listed(software: str | None) -> set[int]:
        answer = handle_api_versions_request(client_software=software)
        return {entry["api_key"] for entry in answer["api_keys"]}
    ours = {CONSUMER_GROUP_POSITION, PARTITION_LEADER_EPOCHS}
    for software in (None, "confluent-kafka-python", "kafka-python"):
        assert listed(software) == set(SUPPORTED) - ours
        assert max(listed(software)) < 1000
    assert listed(PROJECT_CLIENT_SOFTWARE) == set(SUPPORTED)


def test_one_mapping_builds_every_version_when_fields_differ() -> None:
    """`build` fills what a version has and drops what it lacks: Metadata v0 has no
    topic_id, v12 does."""
    values = {"brokers": [{"node_id": 1, "host": "h", "port": 1}], "topics": [{
        "error_code": 0, "name": "A", "topic_id": uuid.UUID(int=5), "partitions": []}]}
    old = build(load_response_schema(3, 0), values)
    new = build(load_response_schema(3, 12), values)
    assert not hasattr(old.topics[0], "topic_id")
    assert new.topics[0].topic_id == uuid.UUID(int=5)
    assert encode_response(1, old) != encode_response(1, new)


@pytest.mark.parametrize("version", [4, 11, 12])
async def test_fetch_by_name_and_list_offsets_when_older_versions_used(
        tmp_path: Path, version: int) -> None:
    """Fetch v4-v12 address topics by name; ListOffsets gives the log start and the high
    watermark."""
    dispatcher = make_dispatcher(tmp_path)
    await roundtrip(dispatcher, produce_request([b"by name", b"again"]))
    fetch = build(load_request_schema(1, version), {
        "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [{
            "topic": "A", "partitions": [{"partition": 0, "fetch_offset": 0,
                                          "partition_max_bytes": 1 << 20}]}]})
    data = (await roundtrip(dispatcher, fetch)).responses[0].partitions[0]
    assert (data.error_code, data.high_watermark) == (ErrorCode.NONE, 2)
    assert b"by name" in data.records
    offsets = {}
    for timestamp in (-2, -1):
        request = build(load_request_schema(2, 7), {"replica_id": -1, "topics": [{
            "name": "A", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]})
        part = (await roundtrip(dispatcher, request)).topics[0].partitions[0]
        offsets[timestamp] = (part.error_code, part.offset)
    assert offsets == {-2: (ErrorCode.NONE, 0), -1: (ErrorCode.NONE, 2)}


@pytest.mark.parametrize("version", [4, 12])
async def test_fetch_errors_carry_an_empty_record_set_when_the_offset_or_partition_is_bad(
        tmp_path: Path, version: int) -> None:
    """A partition error answers an empty record set, as Kafka does, never a null one:
    librdkafka takes null for a broken response (`invalid MessageSetSize -1`) and never
    sees the error (its offset reset after OFFSET_OUT_OF_RANGE, 0034_offset_reset)."""
    dispatcher = make_dispatcher(tmp_path)
    fetch = build(load_request_schema(1, version), {
        "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [{
            "topic": "A", "partitions": [
                {"partition": 0, "fetch_offset": 99, "partition_max_bytes": 1 << 20},
                {"partition": 7, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    parts = (await roundtrip(dispatcher, fetch)).responses[0].partitions
    assert [(p.error_code, p.records) for p in parts] == [
        (ErrorCode.OFFSET_OUT_OF_RANGE, b""), (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, b"")]


async def _read_reply_or_close(stream: trio.SocketStream) -> bytes:
    data = b""
    while True:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return data
        data += chunk
        if len(data) >= 4 and len(data) >= 4 + int.from_bytes(data[:4], "big"):
            return data


@settings(max_examples=40, deadline=None)
@given(frame=st.one_of(st.binary(max_size=120), mutated_frames()))
def test_listener_survives_and_serves_others_when_fuzzed_over_tcp(
        frame: bytes, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Bad input over a real socket: whatever a random or mutated frame gets (an answer,
    a closed connection, or nothing for an acks=0 Produce), a well-behaved client on
    another connection is answered afterwards, within a bound."""
    listener = KafkaListener(make_dispatcher(tmp_path_factory.mktemp("tcp")),
                             ("127.0.0.1", 0), max_frame_bytes=1 << 16)

    async def run() -> None:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                port = await nursery.start(listener.serve)
                fuzzed = await trio.open_tcp_stream("127.0.0.1", port)
                await fuzzed.send_all(len(frame).to_bytes(4, "big") + frame)
                with trio.move_on_after(2):  # an acks=0 Produce legitimately gets no reply
                    await _read_reply_or_close(fuzzed)
                good = await trio.open_tcp_stream("127.0.0.1", port)
                await good.send_all(encode_request(ApiVersionsRequest(
                    client_software_name="x", client_software_version="1"), correlation_id=5))
                reply = await _read_reply_or_close(good)
                assert decode_response(reply[4:], 18, 3)[0] == 5
                await fuzzed.aclose()
                await good.aclose()
                nursery.cancel_scope.cancel()

    trio.run(run)
