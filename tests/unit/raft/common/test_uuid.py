"""raft.common.uuid.Uuid: KIP-516 topic IDs with Kafka's Uuid behaviour."""

from __future__ import annotations

import random
import uuid as stdlib_uuid

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from raft.common.uuid import METADATA_TOPIC_ID, RESERVED, ZERO_UUID, Uuid, pack

values = st.integers(min_value=0, max_value=(1 << 128) - 1)


@given(values)
def test_text_round_trips_when_value_is_any_128_bits(value: int) -> None:
    """KIP-516: a Uuid's text is 22 chars of unpadded base64url and parses back."""
    uuid = Uuid(value)
    text = str(uuid)
    assert len(text) == 22
    assert "=" not in text
    assert Uuid.from_string(text) == uuid


@given(values)
def test_bytes_round_trip_when_value_is_any_128_bits(value: int) -> None:
    """A Uuid is 16 big-endian bytes on the wire and on disk."""
    uuid = Uuid(value)
    assert len(uuid.to_bytes()) == 16
    assert Uuid.from_bytes(uuid.to_bytes()) == uuid


@given(values)
def test_bits_accessors_match_java_when_value_is_any(value: int) -> None:
    """Kafka's getMostSignificantBits/getLeastSignificantBits return signed longs."""
    uuid = Uuid(value)
    msb, lsb = uuid.most_significant_bits, uuid.least_significant_bits
    assert -(1 << 63) <= msb < 1 << 63
    assert -(1 << 63) <= lsb < 1 << 63
    assert Uuid.from_bits(msb, lsb) == uuid
    assert (msb & ((1 << 64) - 1)) == value >> 64


@given(values, values)
def test_ordering_and_hash_follow_value_when_comparing(a: int, b: int) -> None:
    """Uuids order by unsigned value and equal Uuids hash equally."""
    assert (Uuid(a) < Uuid(b)) == (a < b)
    assert (Uuid(a) == Uuid(b)) == (a == b)
    if a == b:
        assert hash(Uuid(a)) == hash(Uuid(b))


@given(values)
def test_msgpack_encodes_16_byte_bin_when_packed(value: int) -> None:
    """DESIGN wire format: Uuids travel as 16-byte msgpack bin."""
    packed = pack({"id": Uuid(value)})
    decoded = msgpack.unpackb(packed, raw=False)
    assert decoded == {"id": Uuid(value).to_bytes()}
    assert isinstance(decoded["id"], bytes)
    assert packed[4] == 0xC4  # bin 8 type (after fixmap and "id" fixstr)
    assert packed[5] == 16


@given(st.randoms(use_true_random=False))
def test_random_is_v4_and_never_reserved_when_generated(rng: random.Random) -> None:
    """Kafka Uuid.randomUuid: version 4, variant 2, never ZERO/METADATA, never '-' first."""
    for _ in range(50):
        uuid = Uuid.random(rng)
        std = stdlib_uuid.UUID(int=uuid.value)
        assert std.version == 4
        assert std.variant == stdlib_uuid.RFC_4122
        assert uuid not in RESERVED
        assert not str(uuid).startswith("-")


def test_random_skips_reserved_when_rng_produces_them() -> None:
    """Reserved and flag-like IDs are redrawn, never returned."""

    class Scripted(random.Random):
        def __init__(self, draws: list[int]) -> None:
            super().__init__(0)
            self.draws = draws

        def getrandbits(self, k: int) -> int:
            return self.draws.pop(0)

    dash = Uuid.from_string("-" + "A" * 21).value  # top 6 bits 111110: version bits keep it
    good = 0x1234_5678_9ABC_4DEF_8123_4567_89AB_CDEF
    scripted = Scripted([dash, dash, good])
    produced = Uuid.random(scripted)
    assert scripted.draws == []
    assert not str(produced).startswith("-")
    assert produced == Uuid(stdlib_uuid.UUID(int=good, version=4).int)


def test_random_without_rng_uses_os_entropy_when_called() -> None:
    """Without a seeded rng, IDs come from the OS and differ call to call."""
    assert len({Uuid.random() for _ in range(100)}) == 100


def test_reserved_ids_have_kafka_values_when_shown() -> None:
    """KIP-516: ZERO_UUID is all zeros; METADATA_TOPIC_ID is ...0001 (AAAAAAAAAAAAAAAAAAAAAQ)."""
    assert str(ZERO_UUID) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert str(METADATA_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert METADATA_TOPIC_ID.to_bytes() == bytes(15) + b"\x01"


@pytest.mark.parametrize("text", ["", "AAAA", "A" * 21, "A" * 23, "AAAAAAAAAAAAAAAAAAAAA=",
                                  "AAAAAAAAAAAAAAAAAAAA+Q", "AAAAAAAAAAAAAAAAAAAA/Q",
                                  "AAAAAAAAAAAAAAAAAAAAAR", "AAAAAAAAAAAAAAAAAAAA Q",
                                  "00000000-0000-0000-0000-000000000001"])
def test_from_string_rejects_naming_input_when_text_is_not_canonical(text: str) -> None:
    """Only the 22-character canonical base64url form parses; the error names the input."""
    with pytest.raises(ValueError, match="invalid Uuid") as info:
        Uuid.from_string(text)
    assert repr(text) in str(info.value)


@given(st.text(max_size=30))
def test_from_string_accepts_only_canonical_text_when_input_is_arbitrary(text: str) -> None:
    """Any accepted string is exactly the canonical text of the parsed value."""
    try:
        parsed = Uuid.from_string(text)
    except ValueError:
        return
    assert str(parsed) == text


@pytest.mark.parametrize("value", [-1, 1 << 128])
def test_constructor_rejects_when_value_is_out_of_range(value: int) -> None:
    """A Uuid is exactly 128 bits."""
    with pytest.raises(ValueError, match="128-bit"):
        Uuid(value)


def test_from_bytes_rejects_when_length_is_not_16() -> None:
    """16 bytes, no more, no less."""
    with pytest.raises(ValueError, match="16 bytes"):
        Uuid.from_bytes(b"\x00" * 15)
