"""metadata.records: every record type survives encode/decode with the bytes logs on disk
hold, and bad bytes are one RecordError naming the field."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metadata import records as rec
from raft.common.uuid import Uuid
from raft.control_records import Endpoint, VoterEntry
from tests.support.codec_mutations import assert_names_path, field_default, mutations
from tests.support.codec_reference import outcome, reference_record
from tests.support.record_strategies import ANY_RECORD, JUNK


@given(ANY_RECORD)
def test_record_round_trips_when_encoded_and_decoded(record: rec.Record) -> None:
    """The codec is lossless for every record type and every field value."""
    assert rec.decode(record.encode()) == record
    assert type(rec.decode(record.encode())) is type(record)


@given(ANY_RECORD)
def test_encoding_is_deterministic_when_encoded_twice(record: rec.Record) -> None:
    """Replay compares record bytes across nodes: equal records encode to equal bytes."""
    assert record.encode() == dataclasses.replace(record).encode()


@given(ANY_RECORD)
def test_encoded_map_carries_type_and_version_when_encoded(record: rec.Record) -> None:
    """Every record carries its type and version in its map."""
    fields = msgpack.unpackb(record.encode(), raw=False)
    assert (fields["type"], fields["version"]) == (int(record.TYPE), record.VERSION)
    assert rec.RECORD_CLASSES[fields["type"]] is type(record)


def packed(**fields: Any) -> bytes:
    """A record's bytes as a writer would make them: version 0 unless given."""
    return msgpack.packb({"version": 0, **fields}, use_bin_type=True)


def test_decode_refuses_a_record_from_a_newer_writer_naming_what_it_cannot_read() -> None:
    """Strict: a version this build does not know, or a key naming no field, is a
    RecordError saying which (never a record decoded with a field silently dropped)."""
    topic_id = Uuid.random()
    assert rec.decode(packed(type=9, topic_id=topic_id.to_bytes())) == \
        rec.RemoveTopic(topic_id=topic_id)
    with pytest.raises(rec.RecordError, match=r"^unsupported RemoveTopic record version 1 "
                                              r"\(this build reads version 0\)$"):
        rec.decode(packed(type=9, version=1, topic_id=topic_id.to_bytes()))
    with pytest.raises(rec.RecordError, match=r"^bad RemoveTopic record: "
                                              r"RemoveTopic\.future_field: unknown field$"):
        rec.decode(packed(type=9, topic_id=topic_id.to_bytes(), future_field=[1, 2]))


@pytest.mark.parametrize(("data", "error"), [
    (b"\xc1", "undecodable"),
    (msgpack.packb([1]), "not a map"),
    (packed(type=999), "unknown record type"),
    (packed(), "unknown record type"),
    (packed(type=6, name="t"), "bad Topic record"),
    (packed(type=9, topic_id=b"short"), "bad RemoveTopic"),
    (packed(type=9, topic_id=5), "bad RemoveTopic"),
    (packed(type=1, leader_id=1, voters=3),
     r"^bad LeaderChange record: LeaderChange\.voters: expected an array, got int 3$"),
    (packed(type=1, leader_id=True, voters=[]),
     r"^bad LeaderChange record: LeaderChange\.leader_id: expected a 64-bit integer"),
    (packed(type=6, topic_id=bytes(16), name=None),
     r"^bad Topic record: Topic\.name: expected a string, got NoneType None$"),
    (packed(type=7, topic_id=bytes(16), partition=0, replicas=[1, "2"], isr=[], leader=1),
     r"^bad Partition record: Partition\.replicas\[1\]: expected a 64-bit integer"),
    (packed(type=True), "unknown record type True"),
    (msgpack.packb({"type": 9, "topic_id": bytes(16)}),
     r"^unsupported RemoveTopic record version None"),
    (packed(type=9, version=False, topic_id=bytes(16)),
     r"^unsupported RemoveTopic record version False"),
])
def test_decode_raises_record_error_when_bytes_are_bad(data: bytes, error: str) -> None:
    """Undecodable or incomplete records are one typed error with the reason."""
    with pytest.raises(rec.RecordError, match=error):
        rec.decode(data)


def test_to_json_shows_uuids_as_base64_text_when_dumped() -> None:
    """dump-log and replay show topic IDs as their KIP-516 text."""
    topic_id = Uuid.random()
    view = rec.to_json(rec.Topic(name="orders", topic_id=topic_id))
    assert view == {"type": "Topic", "version": 0, "name": "orders", "topic_id": str(topic_id)}
    assert rec.from_dict({"type": 6, "version": 0, "name": "orders",
                          "topic_id": topic_id.to_bytes()}) == \
        rec.Topic(name="orders", topic_id=topic_id)


def test_to_json_redacts_the_fields_marked_sensitive_unless_asked() -> None:
    """Kafka's RecordRedactor: a SCRAM credential's salt and keys are secrets."""
    credential = rec.UserScramCredential(name="alice", mechanism="SCRAM-SHA-256",
                                         salt=b"s" * 32, stored_key=b"k" * 32,
                                         server_key=b"v" * 32, iterations=4096)
    assert rec.sensitive_fields(rec.UserScramCredential) == {"salt", "stored_key",
                                                              "server_key"}
    assert rec.to_json(credential) == {
        "type": "UserScramCredential", "version": 0, "name": "alice",
        "mechanism": "SCRAM-SHA-256", "salt": "(redacted)", "stored_key": "(redacted)",
        "server_key": "(redacted)", "iterations": 4096}
    shown = rec.to_json(credential, print_sensitive=True)
    assert shown["stored_key"] == base64.b64encode(b"k" * 32).decode()
    assert rec.sensitive_record_type(credential.encode()) == "UserScramCredential"
    assert rec.sensitive_record_type(rec.NoOp().encode()) is None
    assert rec.sensitive_record_type(b"\xc1") is None


def test_every_bytes_field_of_a_record_is_marked_sensitive_or_not_when_defined() -> None:
    """A new bytes field (a key, a token, a hash) must be decided on: marked sensitive,
    or added here as shown in the clear."""
    shown_in_clear: set[tuple[str, str]] = set()
    for cls in rec.RECORD_CLASSES.values():
        for field in dataclasses.fields(cls):
            if "bytes" in str(field.type) and (cls.__name__, field.name) not in shown_in_clear:
                assert field.name in rec.sensitive_fields(cls), (cls.__name__, field.name)


@given(ANY_RECORD, st.data())
def test_one_broken_field_is_a_record_error_naming_it_when_decoded(
        record: rec.Record, data: Any) -> None:
    """A valid record with one value of a wrong type is a RecordError naming the field; a
    removed key takes the field's default or is "missing"; an unknown key is an error
    naming it."""
    kind, path, broken = data.draw(mutations(record.to_dict(), skip=frozenset({"type",
                                                                                "version"})))
    if kind == "remove":
        required, with_default = field_default(record, path)
        if not required:
            assert rec.from_dict(broken) == with_default
            return
    with pytest.raises(rec.RecordError) as caught:
        rec.from_dict(broken)
    name = type(record).__name__
    assert str(caught.value).startswith(f"bad {name} record: ")
    reason = {"remove": "missing required field", "add": "unknown field"}.get(kind, "expected")
    assert_names_path(caught.value.__cause__, name, path, reason)  # type: ignore[arg-type]


@given(st.sampled_from(sorted(rec.RECORD_CLASSES)), st.data())
def test_junk_fields_raise_only_record_error_when_decoded(type_id: int, data: Any) -> None:
    """Bytes read from disk never raise anything but RecordError; what decodes
    re-encodes to a record that decodes equal."""
    cls = rec.RECORD_CLASSES[type_id]
    names = [f.name for f in dataclasses.fields(cls)] + ["future"]
    fields = data.draw(st.dictionaries(st.sampled_from(names), JUNK, max_size=len(names)))
    try:
        record = rec.from_dict({"type": type_id, "version": 0, **fields})
    except rec.RecordError as exc:
        error = str(exc)
    else:
        error = ""
    if error:
        assert error.startswith(f"bad {cls.__name__} record: {cls.__name__}")
        return
    assert type(record) is cls
    assert rec.decode(record.encode()) == record


# --- the wire format of logs on disk --------------------------------------------------
# WIRE_BYTES are the records the hand-written codec this module had before
# raft.common.codec encoded for WIRE_SAMPLES, captured from that code: metadata logs on
# disk hold these bytes, and replay compares them across nodes.

WIRE_SAMPLES: dict[str, Any] = {
    "leader-change": rec.LeaderChange(leader_id=1, voters=(1, 2, 3), granting_voters=(1, 2)),
    "leader-change-alone": rec.LeaderChange(leader_id=1, voters=(1,)),
    "metadata-topic": rec.MetadataTopic(topic_id=Uuid(123456789)),
    "register": rec.RegisterBroker(broker_id=4, incarnation_id=Uuid((1 << 127) + 3),
                                   broker_epoch=12, endpoints=("PLAINTEXT://h:1",), rack="r1"),
    "register-no-rack": rec.RegisterBroker(broker_id=4, incarnation_id=Uuid(3), broker_epoch=12),
    "fence": rec.FenceBroker(broker_id=4, broker_epoch=12),
    "unfence": rec.UnfenceBroker(broker_id=4, broker_epoch=12),
    "topic": rec.Topic(name="orders", topic_id=Uuid(7), initial_partition_count=3),
    "topic-plain": rec.Topic(name="t", topic_id=Uuid(8)),
    "partition": rec.Partition(topic_id=Uuid(7), partition=1, replicas=(1, 2, 3), isr=(1, 2),
                               leader=1, leader_epoch=2, partition_epoch=3,
                               leader_epoch_after_creation=((0, 2),),
                               leader_epoch_before_deletion=((0, 5),)),
    "partition-plain": rec.Partition(topic_id=Uuid(7), partition=0, replicas=(1,), isr=(1,),
                                     leader=1),
    "partition-change": rec.PartitionChange(topic_id=Uuid(7), partition=0, leader=2, isr=(2,)),
    "partition-change-none": rec.PartitionChange(topic_id=Uuid(7), partition=1),
    "partition-change-empty-isr": rec.PartitionChange(topic_id=Uuid(7), partition=2, isr=(),
                                                      replicas=(3, 4)),
    "remove-topic": rec.RemoveTopic(topic_id=Uuid(7)),
    "rename-topic": rec.RenameTopic(topic_id=Uuid(7), new_name="renamed"),
    "no-op": rec.NoOp(),
    # captured from raft.common.codec when these types were added (snapshots)
    "snapshot-header": rec.SnapshotHeader(last_contained_log_timestamp=1700000000123),
    "snapshot-footer": rec.SnapshotFooter(),
    "retired-topic-id": rec.RetiredTopicId(topic_id=Uuid(9)),
    "replay-anomalies": rec.ReplayAnomalies(count=2, offsets=(4, 9), record_types=("Topic", "?"),
                                         reasons=("name 'a' is live", "undecodable")),
    # captured when topic configs were added (a None value deletes the key)
    "topic-config": rec.TopicConfig(topic_id=Uuid(7), key="min.insync.replicas", value="2"),
    "topic-config-delete": rec.TopicConfig(topic_id=Uuid(7), key="retention.ms"),
    # captured when KIP-253 resizes were added (the epoch maps of "partition" became
    # (partition, epoch) pairs then; no earlier log set them)
    "partition-change-resize": rec.PartitionChange(
        topic_id=Uuid(7), partition=2, bump_leader_epoch=True,
        leader_epoch_before_deletion=((0, 4), (1, 6))),
    "partition-count": rec.PartitionCount(topic_id=Uuid(7), undeleted_partition_count=4,
                                          initial_partition_count=2),
    "remove-partition": rec.RemovePartition(topic_id=Uuid(7), partition=3, leader_epoch=5,
                                            log_start_offset=10, log_end_offset=10),
    # captured when ACLs were added (Kafka's codes: TOPIC, PREFIXED, READ, ALLOW)
    "access-control-entry": rec.AccessControlEntry(
        id=Uuid(11), resource_type=2, resource_name="orders", pattern_type=4,
        principal="User:alice", host="*", operation=3, permission_type=3),
    "remove-access-control-entry": rec.RemoveAccessControlEntry(id=Uuid(11)),
    # captured when SCRAM credentials were added (salted values only, never a password)
    "user-scram-credential": rec.UserScramCredential(
        name="alice", mechanism="SCRAM-SHA-256", salt=b"\x01\x02", stored_key=b"\x03" * 4,
        server_key=b"\x04" * 4, iterations=8192),
    "remove-user-scram-credential": rec.RemoveUserScramCredential(
        name="alice", mechanism="SCRAM-SHA-512"),
    # captured when the dynamic quorum (KIP-853) was added
    "voters": rec.VotersRecord(voters=(VoterEntry(
        voter_id=1, directory_id=Uuid(7),
        endpoints=(Endpoint(name="CONTROLLER", host="127.0.0.1", port=9093),)),)),
    "kraft-version": rec.KRaftVersionRecord(kraft_version=1),
    # captured when metadata.version was added (Kafka's FeatureLevelRecord)
    "feature-level": rec.FeatureLevel(name="metadata.version", feature_level=2),
    # captured when dynamic broker configs were added (Kafka's ConfigRecord on a BROKER)
    "config-record": rec.ConfigRecord(resource_type=4, resource_name="",
                                      name="leader.replication.throttled.rate",
                                      value="1048576"),
}
WIRE_BYTES = {
    "leader-change": (
        "85a47479706501a776657273696f6e00a96c65616465725f696401a6766f7465727393010203af677261"
        "6e74696e675f766f74657273920102"),
    "leader-change-alone": (
        "85a47479706501a776657273696f6e00a96c65616465725f696401a6766f746572739101af6772616e74"
        "696e675f766f7465727390"),
    "metadata-topic": (
        "83a47479706502a776657273696f6e00a8746f7069635f6964c410000000000000000000000000075bcd"
        "15"),
    "register": (
        "87a47479706503a776657273696f6e00a962726f6b65725f696404ae696e6361726e6174696f6e5f6964"
        "c41080000000000000000000000000000003ac62726f6b65725f65706f63680ca9656e64706f696e7473"
        "91af504c41494e544558543a2f2f683a31a47261636ba27231"),
    "register-no-rack": (
        "86a47479706503a776657273696f6e00a962726f6b65725f696404ae696e6361726e6174696f6e5f6964"
        "c41000000000000000000000000000000003ac62726f6b65725f65706f63680ca9656e64706f696e7473"
        "90"),
    "fence": (
        "84a47479706504a776657273696f6e00a962726f6b65725f696404ac62726f6b65725f65706f63680c"),
    "unfence": (
        "84a47479706505a776657273696f6e00a962726f6b65725f696404ac62726f6b65725f65706f63680c"),
    "topic": (
        "85a47479706506a776657273696f6e00a46e616d65a66f7264657273a8746f7069635f6964c410000000"
        "00000000000000000000000007b7696e697469616c5f706172746974696f6e5f636f756e7403"),
    "topic-plain": (
        "84a47479706506a776657273696f6e00a46e616d65a174a8746f7069635f6964c4100000000000000000"
        "0000000000000008"),
    "partition": (
        "8ba47479706507a776657273696f6e00a8746f7069635f6964c41000000000000000000000000000000007"
        "a9706172746974696f6e01a87265706c6963617393010203a3697372920102a66c656164657201ac6c6561"
        "6465725f65706f636802af706172746974696f6e5f65706f636803bb6c65616465725f65706f63685f6166"
        "7465725f6372656174696f6e91920002bc6c65616465725f65706f63685f6265666f72655f64656c657469"
        "6f6e91920005"),
    "partition-plain": (
        "89a47479706507a776657273696f6e00a8746f7069635f6964c410000000000000000000000000000000"
        "07a9706172746974696f6e00a87265706c696361739101a36973729101a66c656164657201ac6c656164"
        "65725f65706f636800af706172746974696f6e5f65706f636800"),
    "partition-change": (
        "86a47479706508a776657273696f6e00a8746f7069635f6964c410000000000000000000000000000000"
        "07a9706172746974696f6e00a66c656164657202a36973729102"),
    "partition-change-none": (
        "84a47479706508a776657273696f6e00a8746f7069635f6964c410000000000000000000000000000000"
        "07a9706172746974696f6e01"),
    "partition-change-empty-isr": (
        "86a47479706508a776657273696f6e00a8746f7069635f6964c410000000000000000000000000000000"
        "07a9706172746974696f6e02a369737290a87265706c69636173920304"),
    "remove-topic": (
        "83a47479706509a776657273696f6e00a8746f7069635f6964c410000000000000000000000000000000"
        "07"),
    "rename-topic": (
        "84a4747970650ba776657273696f6e00a8746f7069635f6964c410000000000000000000000000000000"
        "07a86e65775f6e616d65a772656e616d6564"),
    "no-op": (
        "82a4747970650aa776657273696f6e00"),
    "snapshot-header": (
        "83a4747970650ca776657273696f6e00bc6c6173745f636f6e7461696e65645f6c6f675f74696d65737461"
        "6d70cf0000018bcfe5687b"),
    "snapshot-footer": (
        "82a4747970650da776657273696f6e00"),
    "retired-topic-id": (
        "83a4747970650ea776657273696f6e00a8746f7069635f6964c41000000000000000000000000000000009"),
    "replay-anomalies": (
        "86a4747970650fa776657273696f6e00a5636f756e7402a76f666673657473920409ac7265636f72645f74"
        "7970657392a5546f706963a13fa7726561736f6e7392b06e616d6520276127206973206c697665ab756e64"
        "65636f6461626c65"),
    "topic-config": (
        "85a47479706510a776657273696f6e00a8746f7069635f6964c41000000000000000000000000000000007"
        "a36b6579b36d696e2e696e73796e632e7265706c69636173a576616c7565a132"),
    "topic-config-delete": (
        "84a47479706510a776657273696f6e00a8746f7069635f6964c41000000000000000000000000000000007"
        "a36b6579ac726574656e74696f6e2e6d73"),
    "partition-change-resize": (
        "86a47479706508a776657273696f6e00a8746f7069635f6964c41000000000000000000000000000000007"
        "a9706172746974696f6e02b162756d705f6c65616465725f65706f6368c3bc6c65616465725f65706f6368"
        "5f6265666f72655f64656c6574696f6e92920004920106"),
    "partition-count": (
        "85a47479706511a776657273696f6e00a8746f7069635f6964c41000000000000000000000000000000007"
        "b9756e64656c657465645f706172746974696f6e5f636f756e7404b7696e697469616c5f70617274697469"
        "6f6e5f636f756e7402"),
    "remove-partition": (
        "87a47479706512a776657273696f6e00a8746f7069635f6964c41000000000000000000000000000000007"
        "a9706172746974696f6e03ac6c65616465725f65706f636805b06c6f675f73746172745f6f66667365740a"
        "ae6c6f675f656e645f6f66667365740a"),
    "access-control-entry": (
        "8aa47479706517a776657273696f6e00a26964c4100000000000000000000000000000000bad7265736f75"
        "7263655f7479706502ad7265736f757263655f6e616d65a66f7264657273ac7061747465726e5f74797065"
        "04a97072696e636970616caa557365723a616c696365a4686f7374a12aa96f7065726174696f6e03af7065"
        "726d697373696f6e5f7479706503"),
    "remove-access-control-entry": (
        "83a47479706518a776657273696f6e00a26964c4100000000000000000000000000000000b"),
    "user-scram-credential": (
        "88a47479706515a776657273696f6e00a46e616d65a5616c696365a96d656368616e69736dad534352"
        "414d2d5348412d323536a473616c74c4020102aa73746f7265645f6b6579c40403030303aa73657276"
        "65725f6b6579c40404040404aa697465726174696f6e73cd2000"),
    "remove-user-scram-credential": (
        "84a47479706516a776657273696f6e00a46e616d65a5616c696365a96d656368616e69736dad534352"
        "414d2d5348412d353132"),
    "voters": (
        "83a47479706513a776657273696f6e00a6766f746572739183a8766f7465725f696401ac646972656374"
        "6f72795f6964c41000000000000000000000000000000007a9656e64706f696e74739183a46e616d65aa"
        "434f4e54524f4c4c4552a4686f7374a93132372e302e302e31a4706f7274cd2385"),
    "kraft-version": (
        "83a47479706514a776657273696f6e00ad6b726166745f76657273696f6e01"),
    "feature-level": (
        "84a47479706519a776657273696f6e00a46e616d65b06d657461646174612e76657273696f6ead6665"
        "61747572655f6c6576656c02"),
    "config-record": (
        "86a4747970651aa776657273696f6e00ad7265736f757263655f7479706504ad7265736f757263655f"
        "6e616d65a0a46e616d65d9216c65616465722e7265706c69636174696f6e2e7468726f74746c65642e"
        "72617465a576616c7565a731303438353736"),
}


@pytest.mark.parametrize("name", list(WIRE_SAMPLES))
def test_wire_bytes_are_unchanged_when_a_sample_is_encoded(name: str) -> None:
    """Logs on disk hold exactly these bytes; every node reads them back equal."""
    record, wire = WIRE_SAMPLES[name], bytes.fromhex(WIRE_BYTES[name])
    assert record.encode() == wire
    assert rec.decode(wire) == record


def test_every_record_type_has_a_wire_sample_when_defined() -> None:
    assert {type(r) for r in WIRE_SAMPLES.values()} == set(rec.RECORD_CLASSES.values())


# --- the decoding fast path against the reference --------------------------------------
# RecordSet.decode looks the class, version and compiled decoder up in one table and the
# codec takes common values inline (tests/unit/raft/common/test_codec.py); the reference
# (tests/support/codec_reference.py) decodes step by step. Same record or same message.

PACKABLE_JUNK = st.recursive(  # JUNK within what msgpack packs (ints in -2**63 .. 2**64-1)
    st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.sampled_from([(1 << 63) - 1, 1 << 63, -(1 << 63)]) | st.floats(allow_nan=False)
    | st.text(max_size=5) | st.binary(max_size=17),
    lambda inner: st.lists(inner, max_size=3), max_leaves=8)
HEADS = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(sorted(rec.RECORD_CLASSES)) | PACKABLE_JUNK,
    "version": st.just(0) | PACKABLE_JUNK})


@given(st.sampled_from(sorted(rec.RECORD_CLASSES)), HEADS, st.data())
def test_decode_equals_the_reference_when_fields_are_junk(
        type_id: int, head: dict[str, Any], data: Any) -> None:
    cls = rec.RECORD_CLASSES[type_id]
    names = [f.name for f in dataclasses.fields(cls)] + ["future"]
    fields = data.draw(st.dictionaries(st.sampled_from(names), PACKABLE_JUNK,
                                       max_size=len(names)))
    raw = msgpack.packb({"type": type_id, "version": 0, **fields, **head}, use_bin_type=True)
    assert outcome(lambda: rec.decode(raw)) == \
        outcome(lambda: reference_record(rec.METADATA_RECORDS, raw))


@given(ANY_RECORD, st.data())
def test_decode_equals_the_reference_when_one_field_is_broken(
        record: rec.Record, data: Any) -> None:
    raw = record.encode()
    assert rec.decode(raw) == reference_record(rec.METADATA_RECORDS, raw) == record
    _, _, broken = data.draw(mutations(record.to_dict()))
    raw = msgpack.packb(broken, use_bin_type=True)
    assert outcome(lambda: rec.decode(raw)) == \
        outcome(lambda: reference_record(rec.METADATA_RECORDS, raw))


@pytest.mark.parametrize("data", [b"", b"\xc1", b"\x93\x01\x02\x03", b"\x81\xa4type\x07",
                                  msgpack.packb({"type": 7, "version": 0}) + b"\x00"])
def test_decode_equals_the_reference_when_bytes_are_not_a_record(data: bytes) -> None:
    assert outcome(lambda: rec.decode(data))[0] == "error"
    assert outcome(lambda: rec.decode(data)) == \
        outcome(lambda: reference_record(rec.METADATA_RECORDS, data))
