"""broker.kafka.replication.isr and the high watermark over the maximal ISR: a shrink
counts only once committed, an expansion at once, one AlterPartition in flight per
partition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from broker import partition_dir
from broker.kafka.context import BrokerContext
from broker.kafka.replication.isr import IsrManager
from broker.kafka.replication.replica import PartitionState, ReplicaManager, check_partition
from metadata import records as rec
from metadata.admin import (
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicResult,
)
from metadata.controller_client import ControllerUnavailable
from metadata.delta import replay
from metadata.image import MetadataImage
from raft.common.errors import ErrorCode
from tests.support.kafka_support import BROKER, TOPIC_ID, image_with_topic, record_batch

LAG_MS = 10_000
LAG_S = LAG_MS / 1000


class FakeController:
    """Answers AlterPartition with a fixed error, or accepts it (partition epoch + 1)."""

    def __init__(self, error: ErrorCode = ErrorCode.NONE) -> None:
        self.error = error
        self.requests: list[AlterPartitionRequest] = []

    async def call(self, request: Any, timeout_s: float) -> AlterPartitionResponse:
        self.requests.append(request)
        return AlterPartitionResponse(topics=tuple(AlterPartitionTopicResult(
            topic_id=topic.topic_id, partitions=tuple(AlterPartitionPartitionResult(
                partition=data.partition, error_code=self.error, leader_id=BROKER,
                leader_epoch=data.leader_epoch,
                partition_epoch=data.partition_epoch + (self.error == ErrorCode.NONE),
                isr=data.new_isr) for data in topic.partitions))
            for topic in request.topics))


class UnreachableController:
    def __init__(self) -> None:
        self.requests: list[AlterPartitionRequest] = []

    async def call(self, request: Any, timeout_s: float) -> AlterPartitionResponse:
        self.requests.append(request)
        raise ControllerUnavailable("no controller answered")


class Cluster:
    """A leader (BROKER) of partition A-0 with followers 5 and 6, and its ISR manager."""

    def __init__(self, tmp_path: Path, *, error: ErrorCode = ErrorCode.NONE) -> None:
        self.images = [image_with_topic(replicas=(BROKER, 5, 6))]
        (tmp_path / "A-0").mkdir()
        partition_dir.write_partition_metadata(tmp_path / "A-0", TOPIC_ID)
        self.replicas = ReplicaManager(log_dir=tmp_path, broker_id=BROKER,
                                       image=lambda: self.images[-1])
        self.controller = FakeController(error)
        self.context = BrokerContext(broker_id=BROKER, cluster_id="c",
                                     image=lambda: self.images[-1], replicas=self.replicas,
                                     controller=self.controller,  # type: ignore[arg-type]
                                     broker_epoch=lambda: BROKER)
        self.manager = IsrManager(self.context, replica_lag_time_max_ms=LAG_MS)

    async def open(self) -> PartitionState:
        """The partition, led from its opening (as the fetch handler observes it)."""
        error, state = await self.replicas.open(check_partition(self.image, BROKER, name="A",
                                                                partition=0))
        assert state is not None
        state.observe_partition(self.partition(), state.opened_at)
        return state

    @property
    def image(self) -> MetadataImage:
        return self.images[-1]

    def change_isr(self, isr: tuple[int, ...]) -> None:
        """The controller's PartitionChange reaches this broker's image."""
        self.images.append(replay([(
            self.image.last_applied_offset + 1,
            rec.PartitionChange(topic_id=TOPIC_ID, partition=0, isr=isr))], self.image))

    def partition(self) -> Any:
        return self.image.topics[TOPIC_ID].partitions[0]


async def test_lagging_follower_still_counts_when_its_removal_is_not_committed(
        tmp_path: Path) -> None:
    """The maximal ISR: a follower proposed for removal holds the high
    watermark back until the controller's smaller ISR is in the image, so an
    acknowledged record is on every replica the controller may elect."""
    cluster = Cluster(tmp_path)
    state = await cluster.open()
    start = state.opened_at
    state.log.append([record_batch([b"a", b"b"])], 0)
    state.record_follower_fetch(6, 2, start + LAG_S + 1)
    proposals = cluster.manager.propose(start + LAG_S + 1)
    assert [p[2] for p in proposals] == [(BROKER, 6)]  # 5 never caught up: out
    assert state.high_watermark == 0
    assert not state.maybe_advance_high_watermark(cluster.partition(), BROKER)
    cluster.change_isr((BROKER, 6))
    cluster.manager.propose(start + LAG_S + 2)
    assert state.high_watermark == 2
    assert state.pending_isr is None
    cluster.replicas.close_all()


async def test_replica_counts_in_high_watermark_once_its_addition_is_proposed(
        tmp_path: Path) -> None:
    """Maximal ISR: a replica proposed for addition counts at once (the HW waits for it)."""
    cluster = Cluster(tmp_path)
    cluster.change_isr((BROKER, 6))
    state = await cluster.open()
    now = state.opened_at
    state.log.append([record_batch([b"a"])], 0)
    state.record_follower_fetch(6, 1, now)
    assert state.maybe_advance_high_watermark(cluster.partition(), BROKER)
    state.record_follower_fetch(5, 1, now)  # 5 reached the high watermark
    assert state.is_expansion_candidate(cluster.partition(), 5)
    proposals = cluster.manager.propose(now)
    assert [p[2] for p in proposals] == [(BROKER, 6, 5)]
    assert state.maximal_isr(cluster.partition()) == (BROKER, 6, 5)
    state.log.append([record_batch([b"b"])], 0)
    state.record_follower_fetch(6, 2, now)
    assert not state.maybe_advance_high_watermark(cluster.partition(), BROKER)
    assert state.high_watermark == 1  # 5 holds it back
    cluster.replicas.close_all()


async def test_progress_from_an_earlier_leadership_does_not_count_when_leading_again(
        tmp_path: Path) -> None:
    """A broker that leads again in a later epoch must not count what its followers
    fetched the last time it led: an uncommitted tail they held then may have been
    truncated since, under another leader, and a new record at those offsets would be
    acknowledged without being on them."""
    cluster = Cluster(tmp_path)
    state = await cluster.open()
    state.log.append([record_batch([b"a", b"b"])], 0)
    state.record_follower_fetch(5, 2, state.opened_at)  # 5 has both, 6 none: HW 0
    assert not state.maybe_advance_high_watermark(cluster.partition(), BROKER)

    def change(**fields: Any) -> None:
        cluster.images.append(replay([(
            cluster.image.last_applied_offset + 1,
            rec.PartitionChange(topic_id=TOPIC_ID, partition=0, **fields))], cluster.image))

    change(leader=6)  # 6 leads with an empty log: this broker and 5 truncate to 0
    state.log.truncate_to(0)
    change(leader=BROKER, isr=(BROKER, 5))  # this broker leads again, 6 is out
    state.log.append([record_batch([b"c"])], cluster.partition().leader_epoch)
    assert not state.maybe_advance_high_watermark(cluster.partition(), BROKER)
    assert state.high_watermark == 0  # 5 has not fetched "c": it must not count
    cluster.replicas.close_all()


async def test_no_second_proposal_when_one_is_in_flight(tmp_path: Path) -> None:
    """At most one AlterPartition per partition until the image shows an answer."""
    cluster = Cluster(tmp_path)
    state = await cluster.open()
    state.log.append([record_batch([b"a"])], 0)
    later = state.opened_at + LAG_S + 1
    assert cluster.manager.propose(later)
    assert cluster.manager.propose(later + 1) == []
    cluster.replicas.close_all()


async def test_idle_follower_with_every_record_stays_in_the_isr(tmp_path: Path) -> None:
    """Kafka: out of sync means behind the log end for the lag time; a follower holding
    everything is in sync however long ago it fetched."""
    cluster = Cluster(tmp_path)
    state = await cluster.open()
    state.log.append([record_batch([b"a"])], 0)
    state.record_follower_fetch(5, 1, state.opened_at)
    state.record_follower_fetch(6, 1, state.opened_at)
    assert cluster.manager.propose(state.opened_at + 10 * LAG_S) == []
    cluster.replicas.close_all()


async def test_follower_keeping_up_under_load_is_caught_up_when_it_fetches_the_previous_end(
        tmp_path: Path) -> None:
    """Kafka's lastCaughtUpTime: fetching from where the log ended at the previous fetch
    means the follower was caught up at that fetch, though new records arrived since; a
    follower that never gets there is out once the lag time passes."""
    cluster = Cluster(tmp_path)
    state = await cluster.open()
    start = state.opened_at
    for step in range(1, 4):
        state.log.append([record_batch([b"x"])], 0)
        fetch_time = start + step * LAG_S / 2
        state.record_follower_fetch(5, step - 1, fetch_time)
        state.record_follower_fetch(6, 0, fetch_time)
    assert state.log.log_end_offset == 3
    now = start + 1.5 * LAG_S + 1
    assert not state.is_out_of_sync(5, now, LAG_S)
    assert state.is_out_of_sync(6, now, LAG_S)
    assert [p[2] for p in cluster.manager.propose(now)] == [(BROKER, 5)]
    cluster.replicas.close_all()


async def test_pending_isr_is_kept_when_refused_as_stale_and_forgotten_on_other_errors(
        tmp_path: Path) -> None:
    """INVALID_UPDATE_VERSION: the image will show the newer state, no resend meanwhile;
    INELIGIBLE_REPLICA: decided again from the image next round."""
    for error, kept in ((ErrorCode.INVALID_UPDATE_VERSION, True),
                        (ErrorCode.INELIGIBLE_REPLICA, False)):
        (tmp_path / error.name).mkdir()
        cluster = Cluster(tmp_path / error.name, error=error)
        state = await cluster.open()
        state.log.append([record_batch([b"a"])], 0)
        with trio.fail_after(5):
            await cluster.manager.send(cluster.manager.propose(state.opened_at + LAG_S + 1))
        assert len(cluster.controller.requests) == 1
        assert (state.pending_isr is not None) == kept
        cluster.replicas.close_all()


async def test_pending_isr_forgotten_when_the_image_shows_the_new_state(
        tmp_path: Path) -> None:
    """Success: the proposal stays pending until the committed ISR is in the image."""
    cluster = Cluster(tmp_path)
    state = await cluster.open()
    state.log.append([record_batch([b"a"])], 0)
    await cluster.manager.run_once()  # nobody fetched yet: 5 and 6 have never caught up
    assert cluster.controller.requests == []
    state.record_follower_fetch(6, 1, state.opened_at)
    proposals = cluster.manager.propose(state.opened_at + LAG_S + 1)
    assert state.pending_isr is not None
    partition = cluster.partition()
    response = AlterPartitionResponse(topics=(AlterPartitionTopicResult(
        topic_id=TOPIC_ID, partitions=(AlterPartitionPartitionResult(
            partition=0, leader_id=BROKER, leader_epoch=partition.leader_epoch,
            partition_epoch=partition.partition_epoch + 1, isr=(BROKER, 6)),)),))
    cluster.manager.handle_response(proposals, response, state.opened_at + LAG_S + 1)
    assert state.pending_isr is not None  # the response is not the image
    cluster.change_isr(proposals[0][2])
    cluster.manager.propose(state.opened_at + LAG_S + 2)
    assert state.pending_isr is None
    cluster.replicas.close_all()


async def test_unanswered_addition_keeps_counting_and_is_sent_again_unchanged(
        tmp_path: Path) -> None:
    """No answer (the controller may still have committed it): the proposed addition
    keeps holding the high watermark back and the same ISR is sent again next round,
    never dropped, or the leader could acknowledge records the new ISR member lacks."""
    cluster = Cluster(tmp_path)
    cluster.change_isr((BROKER, 6))
    unreachable = UnreachableController()
    cluster.context.controller = unreachable  # type: ignore[assignment]
    state = await cluster.open()
    now = state.opened_at
    state.log.append([record_batch([b"a"])], 0)
    state.record_follower_fetch(6, 1, now)
    assert state.maybe_advance_high_watermark(cluster.partition(), BROKER)
    state.record_follower_fetch(5, 1, now)  # at the high watermark: a candidate
    with trio.fail_after(5):
        await cluster.manager.send(cluster.manager.propose(now))
    assert state.pending_isr is not None
    assert state.maximal_isr(cluster.partition()) == (BROKER, 6, 5)
    state.log.append([record_batch([b"b"])], 0)
    state.record_follower_fetch(6, 2, now)
    assert not state.maybe_advance_high_watermark(cluster.partition(), BROKER)
    assert state.high_watermark == 1  # 5 (proposed, maybe committed) holds it back
    with trio.fail_after(5):
        await cluster.manager.send(cluster.manager.propose(now + 1))
    assert [r.topics[0].partitions[0].new_isr for r in unreachable.requests] == [
        (BROKER, 6, 5), (BROKER, 6, 5)]
    cluster.replicas.close_all()


async def test_isr_changes_are_reported_to_the_metrics_hook(tmp_path: Path) -> None:
    """`on_isr_change` hears a shrink the controller accepted, and a refused change as
    failed (Kafka's IsrShrinksPerSec and FailedIsrUpdatesPerSec)."""
    for error, heard in ((ErrorCode.NONE, ["shrink"]),
                         (ErrorCode.INELIGIBLE_REPLICA, ["failed"])):
        (tmp_path / error.name).mkdir()
        cluster = Cluster(tmp_path / error.name, error=error)
        changes: list[str] = []
        cluster.manager.on_isr_change = changes.append
        state = await cluster.open()
        state.log.append([record_batch([b"a"])], 0)
        state.record_follower_fetch(6, 1, state.opened_at)
        with trio.fail_after(5):
            await cluster.manager.send(cluster.manager.propose(state.opened_at + LAG_S + 1))
        assert changes == heard
        cluster.replicas.close_all()
