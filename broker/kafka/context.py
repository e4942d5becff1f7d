"""What every part of the brokers' Kafka side shares: the broker's identity, its image
(and a way to wait for the image to change), its partitions, the controller client, the
authorizer's settings, and live views of its registration and the cluster's
kraft.version. Everything is given to the constructor (`install_kafka_listener` builds it
once, in order); the only state that changes after is the producer-ID block handed out,
the followers' fetch sessions and the replication throttles' windows.

The API handlers get a `broker.kafka.handler_context.HandlerContext`: this, and the group
coordinator built on it."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping

import trio

from broker.kafka.partitions.fetch_sessions import FetchSessionCache
from broker.kafka.partitions.replication_quota import ReplicationQuota
from broker.kafka.replication.replica import ReplicaManager
from metadata.authorizer import OFF, AuthorizerSettings
from metadata.controller_client import ControllerClient
from metadata.image import MetadataImage

DEFAULT_OFFSETS_PARTITIONS = 50  # Kafka's offsets.topic.num.partitions
DEFAULT_OFFSETS_SEGMENT_BYTES = 100 * 1024 * 1024  # Kafka's offsets.topic.segment.bytes


def _unregistered() -> int | None:
    return None


def _first_kraft_version() -> int:
    return 0


class BrokerContext:
    def __init__(self, *, broker_id: int, cluster_id: str,
                 image: Callable[[], MetadataImage], replicas: ReplicaManager,
                 controller: ControllerClient | None, request_timeout_ms: int = 30_000,
                 replica_routes: Mapping[int, tuple[str, int]] | None = None,
                 broker_epoch: Callable[[], int | None] = _unregistered,
                 kraft_version: Callable[[], int] = _first_kraft_version,
                 authorizer: AuthorizerSettings = OFF,
                 unclean_election_default: bool = False,
                 offsets_topic_num_partitions: int = DEFAULT_OFFSETS_PARTITIONS,
                 offsets_topic_segment_bytes: int = DEFAULT_OFFSETS_SEGMENT_BYTES,
                 group_initial_rebalance_delay_ms: int = 0,
                 clock: Callable[[], float] = trio.current_time) -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self._image = image
        self.replicas = replicas
        self.controller = controller
        self.request_timeout_ms = request_timeout_ms
        # test-only (`fault.injection.replica.routes`): broker id -> the address the
        # replica fetcher dials instead of that broker's advertised endpoint
        self.replica_routes: Mapping[int, tuple[str, int]] = dict(replica_routes or {})
        self._image_changed = trio.Event()
        # this incarnation's broker epoch once registered (None before): the producer-ID
        # block of broker.kafka.partitions.produce
        self.broker_epoch = broker_epoch
        # the cluster's kraft.version as this broker's raft core reads it from the log
        self.kraft_version = kraft_version
        # authorizer.class.name and friends (broker.kafka.authz): OFF allows everything
        self.authorizer = authorizer
        # this node's unclean.leader.election.enable, described for topics setting none
        self.unclean_election_default = unclean_election_default
        # the group coordinator's: __consumer_offsets' partition count, segment size,
        # an Empty group's first-round delay and its clock
        self.offsets_topic_num_partitions = offsets_topic_num_partitions
        self.offsets_topic_segment_bytes = offsets_topic_segment_bytes
        self.group_initial_rebalance_delay_ms = group_initial_rebalance_delay_ms
        self.clock = clock
        # (broker epoch, IDs handed out from its block)
        self.producer_ids_issued: tuple[int, int] = (-1, 0)
        # the followers' KIP-227 fetch sessions with this leader (a random int32 id each)
        self.fetch_sessions = FetchSessionCache(lambda: secrets.randbelow(0x7FFFFFFF))
        # the replication throttles' windows (broker.kafka.partitions.replication_quota)
        self.leader_quota = ReplicationQuota(leader=True)
        self.follower_quota = ReplicationQuota(leader=False)

    @property
    def image(self) -> MetadataImage:
        return self._image()

    def on_image_changed(self) -> None:
        """Called after committed metadata records were applied (from the commit
        listener: quick, never blocks)."""
        self._image_changed.set()
        self._image_changed = trio.Event()

    async def wait_image(self, predicate: Callable[[MetadataImage], bool],
                         timeout_s: float) -> bool:
        """Until `predicate(image)` holds (True) or `timeout_s` passes (False)."""
        with trio.move_on_after(timeout_s):
            while not predicate(self.image):
                await self._image_changed.wait()
            return True
        return False
