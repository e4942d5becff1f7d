"""A follower dials the leader's advertised Kafka endpoint, or the test-only route for
that leader (`fault.injection.replica.routes`, a chaos proxy); never a fenced leader."""

from __future__ import annotations

from broker.kafka.replication.follower import leader_fetch_address
from tests.support.kafka_support import BROKER, image_with_topic

LEADER = 5


def test_follower_dials_the_advertised_endpoint_when_the_leader_has_no_route() -> None:
    image = image_with_topic(leader=LEADER, replicas=(BROKER, LEADER))
    assert leader_fetch_address(image, LEADER, {}) == ("127.0.0.1", 9000 + LEADER)
    assert leader_fetch_address(image, LEADER, {6: ("127.0.0.1", 41235)}) == \
        ("127.0.0.1", 9000 + LEADER)


def test_follower_dials_the_route_when_the_leader_has_one() -> None:
    image = image_with_topic(leader=LEADER, replicas=(BROKER, LEADER))
    assert leader_fetch_address(image, LEADER, {LEADER: ("127.0.0.1", 41234)}) == \
        ("127.0.0.1", 41234)


def test_follower_dials_nothing_when_the_leader_is_unknown_even_with_a_route() -> None:
    image = image_with_topic(leader=LEADER, replicas=(BROKER, LEADER))
    assert leader_fetch_address(image, 7, {7: ("127.0.0.1", 41236)}) is None
