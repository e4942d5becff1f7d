"""The data-plane simulator's ordered consumer group member (`ordered_consumer`), pure:
shares split a new partition from its split source, so one member's gate opens only by
another's reported position; a member reports no position its own closed gate holds; a
committed position counts only for its partition's life; a member whose image lacks a
partition assigned to it does not start."""

from __future__ import annotations

import pytest

from broker.dataplane.sim.node import TOPIC_ID, life_of
from broker.dataplane.sim.ordered_consumer import EPOCH_END, OrderedMember
from broker.dataplane.sim.planted import Plant
from broker.dataplane.sim.world import World
from broker.kafka.ordered.assignment import assign
from metadata.image import TopicImage


@pytest.fixture(scope="module")
def images() -> tuple[TopicImage, TopicImage]:
    """The topic at 2 partitions, then grown to 4 by the real controller."""
    world = World(brokers=3, seed=1, plant=Plant())
    world.start()
    world.run_until(1000)
    before = world.committed_image.topic(TOPIC_ID)
    assert world.resize(4)
    after = world.committed_image.topic(TOPIC_ID)
    assert before is not None
    assert after is not None
    return before, after


def started(topic: TopicImage, name: str, owned: list[int],
            committed: dict[int, tuple[int, object]] | None = None) -> OrderedMember:
    member = OrderedMember(name=name, home=1)
    assert member.start_generation(topic, 1, owned, committed or {}, now=0)
    return member


def test_a_new_partition_opens_by_its_source_owners_report(
        images: tuple[TopicImage, TopicImage]) -> None:
    _, grown = images
    shares = assign(["m0", "m1", "m2"], range(4), ())
    assert shares == {"m0": [0, 3], "m1": [1], "m2": [2]}  # 3 splits from 1, 2 from 0
    gated = started(grown, "m0", shares["m0"])
    epoch = dict(grown.partitions[3].leader_epoch_after_creation or ())[1]
    assert gated.queries == {(EPOCH_END, 1, epoch)}
    gated.on_answer(gated.attempt, (EPOCH_END, 1, epoch), 10)
    assert gated.limit(3) == 0  # nobody reported partition 1 yet
    assert gated.position_exchange() == ({}, {1})  # asks for it, reports nothing
    gated.on_positions(gated.attempt, {}, {1: 9}, set())
    assert gated.limit(3) == 0
    gated.on_positions(gated.attempt, {}, {1: 10}, set())
    assert gated.limit(3) is None
    assert gated.fetchable(now=0) == [0, 3]


def test_a_member_reports_no_position_its_closed_gate_holds(
        images: tuple[TopicImage, TopicImage]) -> None:
    _, grown = images
    member = started(grown, "m2", [2])
    (query,) = member.queries
    member.on_answer(member.attempt, query, 5)
    member.on_positions(member.attempt, {}, {0: -1}, {2})  # someone waits on 2
    assert member.position_exchange() == ({}, {0})
    member.on_positions(member.attempt, {}, {0: 5}, {2})  # its gate opened
    assert member.position_exchange() == ({2: 0}, {0})


def test_a_committed_position_counts_for_its_life_only(
        images: tuple[TopicImage, TopicImage]) -> None:
    _, grown = images
    life = life_of(grown.partitions[3])
    assert started(grown, "m0", [3], {3: (7, life)}).positions[3] == (7, life)
    other = started(grown, "m0", [3], {3: (7, ((0, 0), (1, 0)))})
    assert other.positions[3] == (0, life)
    assert other.queries
    assert other.moved() == {}


def test_a_member_without_an_assigned_partition_in_its_image_does_not_start(
        images: tuple[TopicImage, TopicImage]) -> None:
    lagging, _ = images
    member = OrderedMember(name="m1", home=1)
    assert not member.start_generation(lagging, 1, [1, 3], {}, now=0)
    assert member.metadata is None
    assert member.owned == ()


def test_an_answer_of_an_ended_generation_is_dropped(
        images: tuple[TopicImage, TopicImage]) -> None:
    _, grown = images
    member = started(grown, "m0", [0, 3])
    attempt, (query,) = member.attempt, member.queries
    member.stop()
    member.on_answer(attempt, query, 10)
    member.on_positions(attempt, {}, {1: 10}, {0})
    assert member.gates_of is None
    assert member.group_positions == {}
    assert member.wanted == set()
