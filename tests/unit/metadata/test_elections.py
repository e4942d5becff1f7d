"""Leader elections the controller decides (metadata/elections.py): ElectLeaders'
PREFERRED and UNCLEAN answers per partition with Kafka's codes, and
`unclean.leader.election.enable` (the topic's, else the controllers') deciding whether a
partition whose last ISR member is fenced stays leaderless or takes a live replica
outside the ISR. Scenarios through the real controller, then the pure rule against a
model with hypothesis."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from metadata.admin import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionTopic,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    ElectionTopic,
    ElectLeadersRequest,
    ElectLeadersResponse,
)
from metadata.delta import replay
from metadata.elections import PREFERRED, UNCLEAN, decide_election, leaderless_election
from metadata.image import NO_LEADER, PartitionImage, TopicImage
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from tests.support.controller_harness import TIMEOUT_MS, Harness

UNCLEAN_KEY = "unclean.leader.election.enable"


def _harness(unclean_topic: str | None = None, *, cluster_default: bool = False) -> Harness:
    """Brokers 1 and 2; topic t with one partition on [1, 2] whose ISR is [1] only
    (broker 2 was fenced once, so it left the ISR, and came back)."""
    h = Harness(brokers=2, unclean_election_default=cluster_default)
    configs = None if unclean_topic is None else (
        CreatableTopicConfig(name=UNCLEAN_KEY, value=unclean_topic),)
    created = h.run(CreateTopicsRequest(topics=(CreatableTopic(
        name="t", assignments=(CreatableReplicaAssignment(partition_index=0,
                                                          broker_ids=(1, 2)),),
        configs=configs),))).response
    assert created.topics[0].error_code == 0, created  # type: ignore[union-attr]
    h.now_ms = TIMEOUT_MS // 2
    h.heartbeat(1)
    h.tick(TIMEOUT_MS)  # broker 2's session expires
    h.heartbeat(2)  # back, unfenced, outside the ISR
    assert _partition(h).isr == (1,)
    assert _partition(h).leader == 1
    return h


def _partition(h: Harness, name: str = "t", index: int = 0) -> PartitionImage:
    topic = h.controller.committed.topic_by_name(name)
    assert topic is not None
    return topic.partitions[index]


def _fence_broker_1(h: Harness) -> None:
    h.now_ms = TIMEOUT_MS + TIMEOUT_MS // 2
    h.heartbeat(2)
    h.tick(2 * TIMEOUT_MS)
    assert h.controller.committed.brokers[1].fenced


def _elect(h: Harness, election_type: int, topics: tuple[ElectionTopic, ...] | None
           ) -> tuple[ElectLeadersResponse, int]:
    decision = h.run(ElectLeadersRequest(election_type=election_type, topic_partitions=topics))
    assert isinstance(decision.response, ElectLeadersResponse)
    return decision.response, len(decision.records)


def _codes(response: ElectLeadersResponse) -> dict[tuple[str, int], int]:
    return {(t.topic, p.partition_id): p.error_code for t in response.replica_election_results
            for p in t.partition_result}


T0 = (ElectionTopic(topic="t", partitions=(0,)),)


def test_the_last_isr_member_fenced_leaves_the_partition_leaderless_without_unclean() -> None:
    """As Kafka: leader -1, the ISR keeps its last member."""
    h = _harness()
    _fence_broker_1(h)
    assert (_partition(h).leader, _partition(h).isr) == (NO_LEADER, (1,))


def test_the_topic_config_elects_a_live_replica_outside_the_isr_when_its_last_member_is_fenced(
) -> None:
    h = _harness("true")
    _fence_broker_1(h)
    part = _partition(h)
    assert (part.leader, part.isr, part.leader_epoch) == (2, (2,), 1)
    assert h.controller.committed.content_hash() == replay(h.log).content_hash()


def test_the_controllers_default_elects_unless_the_topic_says_false() -> None:
    on = _harness(cluster_default=True)
    _fence_broker_1(on)
    assert (_partition(on).leader, _partition(on).isr) == (2, (2,))
    off = _harness("false", cluster_default=True)
    _fence_broker_1(off)
    assert (_partition(off).leader, _partition(off).isr) == (NO_LEADER, (1,))


def test_an_explicit_unclean_election_elects_whatever_the_topic_config_says() -> None:
    """As Kafka's (KIP-460): the topic keeps unclean.leader.election.enable=false, so
    the partition stayed leaderless; the operator's UNCLEAN ElectLeaders elects the live
    replica outside the ISR; a second one is not needed."""
    h = _harness("false")
    _fence_broker_1(h)
    assert _partition(h).leader == NO_LEADER
    response, records = _elect(h, UNCLEAN, T0)
    assert _codes(response) == {("t", 0): ErrorCode.NONE}
    assert records == 1
    assert (_partition(h).leader, _partition(h).isr) == (2, (2,))
    again, _ = _elect(h, UNCLEAN, T0)
    assert _codes(again) == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED}


def test_unfencing_a_replica_outside_the_isr_elects_it_only_where_unclean_is_allowed() -> None:
    for value, leader in (("true", 2), ("false", NO_LEADER)):
        h = _harness(value)
        h.now_ms = TIMEOUT_MS + TIMEOUT_MS // 2
        h.tick(3 * TIMEOUT_MS)  # both fenced: nobody to elect
        assert _partition(h).leader == NO_LEADER
        h.now_ms = 3 * TIMEOUT_MS
        h.heartbeat(2)
        assert _partition(h).leader == leader


def test_preferred_election_moves_leadership_back_to_the_first_replica() -> None:
    """Broker 1 was fenced and came back into the ISR: PREFERRED gives it back the
    leadership (a new leader epoch); asked again, ELECTION_NOT_NEEDED."""
    h = Harness(brokers=2)
    h.run(CreateTopicsRequest(topics=(CreatableTopic(name="t", assignments=(
        CreatableReplicaAssignment(partition_index=0, broker_ids=(1, 2)),)),)))
    _fence_broker_1(h)
    assert _partition(h).leader == 2
    h.now_ms = 2 * TIMEOUT_MS
    h.heartbeat(1)
    response, _ = _elect(h, PREFERRED, T0)
    assert _codes(response) == {("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}  # not in ISR
    part = _partition(h)
    topic_id = h.controller.committed.topic_by_name("t").topic_id  # type: ignore[union-attr]
    h.run(AlterPartitionRequest(broker_id=2, broker_epoch=h.epochs[2], topics=(
        AlterPartitionTopic(topic_id=topic_id, partitions=(AlterPartitionData(
            partition=0, leader_epoch=part.leader_epoch, new_isr=(2, 1),
            partition_epoch=part.partition_epoch),)),)))
    response, records = _elect(h, PREFERRED, T0)
    assert _codes(response) == {("t", 0): ErrorCode.NONE}
    assert records == 1
    assert (_partition(h).leader, _partition(h).leader_epoch) == (1, part.leader_epoch + 1)
    again, records = _elect(h, PREFERRED, T0)
    assert _codes(again) == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED}
    assert records == 0


def test_unknown_topics_and_partitions_and_election_types_are_refused() -> None:
    h = _harness()
    response, records = _elect(h, PREFERRED, (ElectionTopic(topic="t", partitions=(0, 5)),
                                              ElectionTopic(topic="nope", partitions=(0,))))
    assert _codes(response) == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED,
                                ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert records == 0
    bad, records = _elect(h, 2, T0)
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    assert records == 0


def test_every_partition_when_no_topics_are_named_leaving_out_those_not_needing_one() -> None:
    """A null topic list: every partition; as Kafka, the ones that need no election are
    left out of the answer (each topic still listed)."""
    h = _harness()
    h.create("u", partitions=2, factor=1)
    _fence_broker_1(h)
    response, _ = _elect(h, UNCLEAN, None)
    by_topic = {t.topic: t.partition_result for t in response.replica_election_results}
    assert set(by_topic) == {"t", "u"}
    assert [p.error_code for p in by_topic["t"]] == [ErrorCode.NONE]
    led = {p.partition for p in h.controller.committed.topic_by_name("u").partitions  # type: ignore[union-attr]
           if p.leader != NO_LEADER}
    assert {p.partition_id for p in by_topic["u"]} == {0, 1} - led


# --- the pure rule against a model ---------------------------------------------------

BROKERS = st.integers(min_value=1, max_value=5)


@st.composite
def partitions(draw: st.DrawFn) -> PartitionImage:
    replicas = tuple(draw(st.lists(BROKERS, min_size=1, max_size=4, unique=True)))
    isr = tuple(r for r in replicas if draw(st.booleans())) or replicas[:1]
    leader = draw(st.sampled_from((NO_LEADER, *isr)))
    return PartitionImage(partition=0, replicas=replicas, isr=isr, leader=leader)


@given(partitions(), st.frozensets(BROKERS), st.sampled_from((PREFERRED, UNCLEAN)),
       st.sampled_from((None, "true", "false")))
def test_an_election_follows_the_model(part: PartitionImage, unfenced: frozenset[int],
                                       election_type: int, config: str | None) -> None:
    """Whatever the topic's unclean.leader.election.enable: an explicit election is the
    operator's."""
    topic = TopicImage(name="t", topic_id=Uuid.random(), partitions=(part,),
                       configs=() if config is None else ((UNCLEAN_KEY, config),))
    decided = decide_election(topic, part, election_type, unfenced)
    live_isr = [r for r in part.replicas if r in part.isr and r in unfenced]
    live = [r for r in part.replicas if r in unfenced]
    if election_type == PREFERRED:
        first = part.replicas[0]
        expected: object = (ErrorCode.ELECTION_NOT_NEEDED if part.leader == first else
                            (first, part.isr) if first in live_isr else
                            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
    elif part.leader != NO_LEADER:
        expected = ErrorCode.ELECTION_NOT_NEEDED
    elif live_isr:
        expected = (live_isr[0], part.isr)
    elif live:  # an explicit UNCLEAN election does not ask the config
        expected = (live[0], (live[0],))
    else:
        expected = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    if isinstance(decided, tuple):
        assert decided[0] == expected
    else:
        isr = part.isr if decided.isr is None else decided.isr
        assert (decided.leader, isr) == expected
        assert decided.leader in unfenced
        assert decided.leader in isr


@given(partitions(), st.frozensets(BROKERS), st.booleans())
def test_a_leaderless_election_never_elects_outside_the_isr_unless_unclean(
        part: PartitionImage, unfenced: frozenset[int], unclean: bool) -> None:
    elected = leaderless_election(part, unfenced, unclean=unclean)
    if elected is None:
        assert not any(r in unfenced for r in part.isr)
        assert not unclean or not any(r in unfenced for r in part.replicas)
        return
    leader, isr = elected
    assert leader in unfenced
    assert leader in part.replicas
    assert leader in isr
    assert leader in part.isr or (unclean and isr == (leader,))
    assert leader in part.isr or not any(r in unfenced for r in part.isr)
