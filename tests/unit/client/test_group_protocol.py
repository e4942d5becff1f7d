"""ConsumerProtocol bytes and the ordered leader's assignment split."""

from __future__ import annotations

import pytest

from broker.kafka.ordered.assignment import assign
from tools.client.group_protocol import (
    ProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)


def test_subscription_round_trip() -> None:
    assert decode_subscription(encode_subscription(["a", "bé"])) == (["a", "bé"], None)
    assert decode_subscription(encode_subscription(["t"], b"x")) == (["t"], b"x")


def test_subscription_matches_kafka_python_bytes() -> None:
    # version 0, one topic "t", null user data (kafka-python's ConsumerProtocolMemberMetadata)
    assert encode_subscription(["t"]) == b"\0\0" b"\0\0\0\1" b"\0\1t" b"\xff\xff\xff\xff"


def test_later_subscription_versions_are_read_past() -> None:
    v1 = encode_subscription(["t"]) + b"\0\0\0\0"  # owned partitions: empty array
    assert decode_subscription(b"\0\1" + v1[2:]) == (["t"], None)


def test_assignment_round_trip() -> None:
    data = encode_assignment({"t": [0, 2, 5]})
    assert decode_assignment(data) == {"t": [0, 2, 5]}
    assert decode_assignment(b"") == {}


def test_truncated_bytes_are_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="truncated"):
        decode_assignment(encode_assignment({"t": [1]})[:-6])


def test_marked_partitions_are_dealt_separately() -> None:
    out = assign(["b", "a"], range(6), marked=[4, 5])
    assert out == {"a": [0, 2, 4], "b": [1, 3, 5]}
    # an unbalanced unmarked split is evened out by where the marked deal starts
    assert assign(["a", "b"], range(5), marked=[3, 4]) == {"a": [0, 2, 4], "b": [1, 3]}


def test_every_member_gets_unmarked_partitions_when_there_are_enough() -> None:
    out = assign(["a", "b", "c"], range(9), marked=range(3, 9))
    assert sorted(p for ps in out.values() for p in ps) == list(range(9))
    assert all(set(ps) & {0, 1, 2} for ps in out.values())


def test_no_members_no_assignment() -> None:
    assert assign([], range(3), marked=[]) == {}
