"""The pure parts of raft/common/connection_limits.py: the descriptor budget, which
connection is refused and why, the frame limit before and after login, the idle
deadline, the rate limit of the WARNINGs, and a gate's counts."""

from __future__ import annotations

import errno
import resource
import sys

import pytest

from raft.common.connection_limits import (
    ConnectionGate,
    InboundCount,
    ListenerLimits,
    RateLimit,
    frame_limit,
    idle_deadline,
    inbound_budget,
    out_of_descriptors,
    refusal,
)

KAFKA_DEFAULTS = ListenerLimits()


@pytest.mark.parametrize(("soft", "budget"), [
    (1024, 768),  # a reserve of 256: a quarter, and the minimum
    (512, 256),  # the minimum reserve is more than a quarter
    (200, 0),  # too few descriptors to spare any for inbound connections
    (20_000, 15_000),  # a quarter
    (1 << 20, 786_432),
])
def test_inbound_budget_keeps_a_reserve_of_a_quarter_and_at_least_256(soft: int,
                                                                      budget: int) -> None:
    assert inbound_budget(soft) == budget


def test_inbound_budget_is_unlimited_without_a_descriptor_limit() -> None:
    assert inbound_budget(resource.RLIM_INFINITY) == sys.maxsize


def test_with_kafka_defaults_only_the_descriptor_budget_refuses() -> None:
    assert refusal(open_here=767, open_from_host=767, open_in_process=767,
                   soft_nofile=1024, limits=KAFKA_DEFAULTS) is None
    reason = refusal(open_here=0, open_from_host=0, open_in_process=768, soft_nofile=1024,
                     limits=KAFKA_DEFAULTS)
    assert reason is not None
    assert "768 inbound connections" in reason
    assert "1024" in reason


def test_max_connections_and_per_ip_refuse_the_newest_over_them() -> None:
    limits = ListenerLimits(max_connections=10, max_connections_per_ip=3)
    common = {"open_in_process": 0, "soft_nofile": 1024, "limits": limits}
    assert refusal(open_here=9, open_from_host=2, **common) is None
    assert refusal(open_here=10, open_from_host=0, **common) == \
        "max.connections (10) reached"
    assert refusal(open_here=5, open_from_host=3, **common) == \
        "max.connections.per.ip (3) reached"


def test_a_gate_counts_per_listener_per_host_and_in_the_process() -> None:
    process = InboundCount()
    limits = ListenerLimits(max_connections_per_ip=2)
    kafka = ConnectionGate("KAFKA", limits, process=process, read_nofile=lambda: 260)
    status = ConnectionGate("STATUS", limits, process=process, read_nofile=lambda: 260)
    # 260 descriptors leave 4 for inbound connections, shared by both listeners
    assert kafka.admit("10.0.0.1") is None
    assert kafka.admit("10.0.0.1") is None
    assert kafka.admit("10.0.0.1") == "max.connections.per.ip (2) reached"
    assert kafka.admit("10.0.0.2") is None
    assert status.admit("10.0.0.3") is None
    refused = status.admit("10.0.0.4")
    assert refused is not None
    assert "4 inbound connections" in refused
    assert (kafka.open, status.open, process.open) == (3, 1, 4)
    assert (kafka.refused, status.refused) == (1, 1)
    kafka.release("10.0.0.1")
    assert status.admit("10.0.0.4") is None  # the freed descriptor serves another listener
    kafka.release("10.0.0.1")
    assert kafka.by_host == {"10.0.0.2": 1}
    assert process.open == 3


def test_the_descriptor_limit_is_read_at_every_admission() -> None:
    soft = [1024]
    gate = ConnectionGate("C", ListenerLimits(), process=InboundCount(),
                          read_nofile=lambda: soft[0])
    assert gate.admit("h") is None
    soft[0] = 257  # prlimit lowered it on the running process: a budget of 1
    assert gate.admit("h") is not None
    assert gate.open == 1
    assert gate.refused == 1


def test_frame_limit_is_the_sasl_receive_size_before_login_and_the_request_size_after() -> None:
    assert frame_limit(KAFKA_DEFAULTS, authenticated=False) == 524288
    assert frame_limit(KAFKA_DEFAULTS, authenticated=True) == 104857600
    small = ListenerLimits(max_request_bytes=4096)  # never more before login than after
    assert frame_limit(small, authenticated=False) == 4096


def test_idle_deadline_counts_from_the_last_complete_request() -> None:
    assert idle_deadline(100.0, KAFKA_DEFAULTS) == 700.0  # 600000 ms
    assert idle_deadline(5.5, ListenerLimits(max_idle_ms=250)) == 5.75


def test_rate_limit_lets_one_through_per_interval_and_counts_the_rest() -> None:
    limit = RateLimit(10.0)
    assert limit.due(0.0)
    assert not limit.due(5.0)
    assert not limit.due(9.99)
    assert limit.take_suppressed() == 2
    assert limit.due(10.0)
    assert not limit.due(19.0)
    assert limit.due(20.5)
    assert limit.take_suppressed() == 1


def test_only_descriptor_exhaustion_is_out_of_descriptors() -> None:
    assert out_of_descriptors(OSError(errno.EMFILE, "Too many open files"))
    assert out_of_descriptors(OSError(errno.ENFILE, "Too many open files in system"))
    assert not out_of_descriptors(OSError(errno.ENOSPC, "No space left on device"))
    assert not out_of_descriptors(OSError(errno.EIO, "Input/output error"))
