"""The broker role of a node (process.roles contains `broker`), installed in one call.

In the order the node needs them: registration and heartbeats to the active controller
(`broker.heartbeat`), the broker's metadata image, partition directories and status
(`broker.server`), then the Kafka listener with the replica fetcher and ISR changes
(`broker.kafka.listener`), which read the image the server keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.heartbeat import BrokerHeartbeat, install_broker_heartbeat
from broker.hosting import led_partitions
from broker.kafka.listener import ImageView, KafkaListener, install_kafka_listener
from broker.kafka.ordered.empty_marked import empty_marked_partitions
from broker.kafka.ordered.rules import MarkedLedPartitions
from broker.server import BrokerServer, install_broker
from broker.settings import BrokerSettings
from metadata.image import MetadataImage
from raft.node import RaftNode
from raft.rpc_host import RpcHost


@dataclass(frozen=True, slots=True, eq=False)
class BrokerRole:
    heartbeat: BrokerHeartbeat
    server: BrokerServer
    kafka: KafkaListener | None  # None: the broker has no client listener

    def reset_image(self, image: MetadataImage) -> None:
        """A snapshot fetched from the leader replaced the log (`RaftNode`'s snapshot
        listener): the image, and what the heartbeat reports applied, restart from it."""
        self.heartbeat.applied(image.last_applied_offset)
        self.server.reset_image(image)

    async def controlled_shutdown(self) -> None:
        """Move this broker's partition leadership away before it stops (unbounded:
        the supervisor bounds it)."""
        broker_id = self.server.settings.broker_id
        await self.heartbeat.controlled_shutdown(
            lambda: not led_partitions(self.server.image, broker_id))

    def close(self) -> None:
        """Close the partition logs the Kafka side keeps open; the node's tasks must have
        ended (before the node is rebuilt from disk)."""
        if self.kafka is not None:
            self.kafka.dispatcher.context.replicas.close_all()


def install_broker_role(node: RaftNode, rpc: RpcHost, settings: BrokerSettings,
                        initial_image: MetadataImage | None = None,
                        kafka_image_view: ImageView | None = None) -> BrokerRole:
    """With `initial_image` (a snapshot's), `node` must publish from just after its
    offset. `kafka_image_view` (test-only faults) turns the server's image into the one
    the Kafka side serves by."""
    heartbeat = install_broker_heartbeat(
        node, client_address=settings.advertised_address or settings.client_address,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        request_timeout_ms=settings.request_timeout_ms)
    server = install_broker(node, rpc, settings, heartbeat, initial_image)

    async def heartbeat_once_caught_up() -> None:
        await server.caught_up.wait()
        heartbeat.ready_to_unfence()
    node.add_background_task(heartbeat_once_caught_up)
    kafka = install_kafka_listener(node, settings, server, kafka_image_view)
    if kafka is not None:  # only a broker serving produce can vouch that a log stays empty
        replicas = kafka.dispatcher.context.replicas
        marked = MarkedLedPartitions(settings.broker_id)
        heartbeat.empty_partitions = lambda: empty_marked_partitions(replicas, marked)
    return BrokerRole(heartbeat=heartbeat, server=server, kafka=kafka)
