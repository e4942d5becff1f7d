"""raft.common.uuid.Uuid: KIP-516 topic IDs with Kafka's Uuid behaviour."""

from __future__ import annotations

import base64
import random
import string
import uuid as stdlib_uuid
from collections import Counter

import msgpack
import pytest
from hypothesis import event, given, settings
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


BASE64URL = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"


def canonical_value(text: str) -> int | None:
    """The value `text` names if it is a canonical Uuid text, else None; worked out
    independently of the code under test: 22 base64url characters are 132 bits, the
    value is the first 128, and the last 4 must be zero."""
    if len(text) != 22 or any(c not in BASE64URL for c in text):
        return None
    bits = 0
    for c in text:
        bits = bits << 6 | BASE64URL.index(c)
    return None if bits & 0xF else bits >> 4


canonical_texts = values.map(lambda v: str(Uuid(v)))


@st.composite
def near_canonical_texts(draw: st.DrawFn) -> str:
    """A canonical text mutated the ways a typo, a copy or another encoding would: one
    character changed (to base64url or not), padding added or removed, a character
    dropped or added, a neighbouring format. Some of these are canonical still."""
    text = draw(canonical_texts)
    index = draw(st.integers(0, len(text) - 1))
    how = draw(st.sampled_from(["one base64url char", "one other char", "last char",
                                "padded", "unpadded short", "char dropped", "char added",
                                "standard base64", "hex uuid", "whitespace", "case swapped"]))
    event(how)
    if how == "one base64url char":
        return text[:index] + draw(st.sampled_from(BASE64URL)) + text[index + 1:]
    if how == "one other char":
        other = draw(st.characters(blacklist_characters=BASE64URL))
        return text[:index] + other + text[index + 1:]
    if how == "last char":  # the 4 padding bits: canonical only when they are zero
        return text[:-1] + draw(st.sampled_from(BASE64URL))
    if how == "padded":
        return text + draw(st.sampled_from(["=", "=="]))
    if how == "unpadded short":
        return text[:draw(st.integers(0, len(text) - 1))]
    if how == "char dropped":
        return text[:index] + text[index + 1:]
    if how == "char added":
        return text[:index] + draw(st.sampled_from(BASE64URL)) + text[index:]
    if how == "standard base64":
        return base64.b64encode(Uuid.from_string(text).to_bytes()).decode()
    if how == "hex uuid":
        return str(stdlib_uuid.UUID(int=Uuid.from_string(text).value))
    if how == "whitespace":
        return draw(st.sampled_from([" ", "\n", "\t"])).join(["", text][::draw(
            st.sampled_from([1, -1]))])
    assert how == "case swapped"
    return text[:index] + text[index].swapcase() + text[index + 1:]


# valid ones, near misses (some valid too) and anything at all, a third each
uuid_texts = st.one_of(canonical_texts, near_canonical_texts(), st.text(max_size=30))


def check_parse(text: str) -> bool:
    """Parse either returns the Uuid `text` names or raises the one ValueError naming
    the input; True when it parsed."""
    expected = canonical_value(text)
    if expected is None:
        with pytest.raises(ValueError, match="invalid Uuid") as info:
            Uuid.from_string(text)
        assert repr(text) in str(info.value)
        return False
    parsed = Uuid.from_string(text)
    assert parsed == Uuid(expected)
    assert str(parsed) == text
    return True


@given(uuid_texts)
def test_from_string_returns_the_named_uuid_or_one_error_when_text_is_near_canonical(
        text: str) -> None:
    """Only canonical text parses, to the value it names; anything else, however close,
    is the one ValueError naming the input."""
    event("parsed" if check_parse(text) else "rejected")


def test_uuid_texts_reach_both_valid_and_invalid_inputs() -> None:
    """The strategy above is worth its examples: a good share of them parse, a good share
    are rejected, and rejected ones include near misses of each kind."""
    outcomes: Counter[str] = Counter()

    @settings(max_examples=300, derandomize=True, database=None)
    @given(uuid_texts)
    def sample(text: str) -> None:
        parsed = check_parse(text)
        outcomes["parsed" if parsed else "rejected"] += 1
        if not parsed and len(text) == 22:
            outcomes["rejected at length 22"] += 1

    sample()
    total = outcomes["parsed"] + outcomes["rejected"]
    assert outcomes["parsed"] >= total // 4, outcomes
    assert outcomes["rejected"] >= total // 4, outcomes
    assert outcomes["rejected at length 22"] >= total // 20, outcomes


@pytest.mark.parametrize("value", [-1, 1 << 128])
def test_constructor_rejects_when_value_is_out_of_range(value: int) -> None:
    """A Uuid is exactly 128 bits."""
    with pytest.raises(ValueError, match="128-bit"):
        Uuid(value)


def test_from_bytes_rejects_when_length_is_not_16() -> None:
    """16 bytes, no more, no less."""
    with pytest.raises(ValueError, match="16 bytes"):
        Uuid.from_bytes(b"\x00" * 15)


@given(values, values)
def test_every_comparison_follows_the_value_when_written_out(a: int, b: int) -> None:
    """Equality and order are hand-written (not generated): the same answers as the
    value's, and sorting by the value is sorting the Uuids."""
    x, y = Uuid(a), Uuid(b)
    assert ((x < y), (x <= y), (x > y), (x >= y), (x == y), (x != y)) == \
        ((a < b), (a <= b), (a > b), (a >= b), (a == b), (a != b))
    assert sorted([x, y]) == sorted([x, y], key=lambda u: u.value)
    assert hash(Uuid.from_bytes(x.to_bytes())) == hash(x)


def test_uuids_equal_and_order_against_no_other_type_when_compared() -> None:
    uuid = Uuid(5)
    assert uuid != 5
    assert uuid != Uuid(5).to_bytes()
    assert uuid in {Uuid(5)}
    for other in (5, "x", None):
        with pytest.raises(TypeError):
            uuid < other  # type: ignore[operator]  # noqa: B015
        with pytest.raises(TypeError):
            uuid >= other  # type: ignore[operator]  # noqa: B015
