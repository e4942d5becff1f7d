"""A broker heartbeats at once when its image has caught up with the metadata log, and
keeps asking while the controller fences it (`broker.heartbeat.BrokerHeartbeat.
ready_to_unfence`, wired in `broker.role`), so the controller unfences it then, not up to
`broker.heartbeat.interval.ms` later: with heartbeats a minute apart, a new broker is
still unfenced within seconds of its start, also when its image caught up before its
registration was answered (the heartbeat that unfences needs the registration applied)."""

from __future__ import annotations

import pytest

from tests.integration.conftest import ClusterFactory
from tests.support.quorum_support import log_events

pytestmark = pytest.mark.integration

MINUTE_MS = 60_000
UNFENCED_WITHIN_S = 30.0  # half the heartbeat interval: only the catch-up heartbeat fits


def test_a_new_broker_is_unfenced_by_the_heartbeat_sent_once_it_caught_up(
        make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(voters=1, brokers=1, settings={
        "broker.heartbeat.interval.ms": MINUTE_MS, "broker.session.timeout.ms": 3 * MINUTE_MS})
    (broker,) = cluster.wait_for_brokers(UNFENCED_WITHIN_S)
    events = [e.get("msg") for e in log_events(cluster, broker)]
    assert "caught up with the metadata log" in events
    assert events.index("caught up with the metadata log") < events.index("broker unfenced")
