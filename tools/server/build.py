"""Build a node from its configuration: the log directory, the image it starts from (its
newest usable snapshot, `metadata.snapshot_loader`), the Raft loop over its TCP
transport and clock (skewed by `fault.injection.file`, `tools.server.faults`), and what
runs beside the loop: the RPC host that serves the apis and gates every request
(`raft.rpc_host`), the high-watermark checkpoint and lazy flush
(`tools.server.durability`), and every part the roles need (the Append API on every
node, the metadata controller on voters, the broker role on brokers, the snapshot writer
on both, and Prometheus metrics when `metrics.listener` is set), with TLS on the
listeners mapped to SSL (`tools.server.node_tls`). The node is returned built but not yet
running. The core is told the controller endpoint the node advertises, so a voter of a
dynamic quorum restarted on a new one has its voter entry updated (KIP-853).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio

from broker import access_table
from broker.access_table import session_gate
from metadata.image import MetadataImage
from metadata.snapshot_loader import fetched_snapshot_image, load_start_image
from metadata.snapshot_policy import Retention
from metadata.snapshot_writer import LogSize, install_snapshotter
from raft.common.uuid import Uuid
from raft.control_records import Endpoint
from raft.core import RaftConfig
from raft.log import DiskLog
from raft.node import RaftNode
from raft.rpc_host import RpcHost
from raft.snapshot_store import DiskSnapshotStore
from raft.storage import open_log_dir, read_quorum_state, write_quorum_state
from raft.transport import TcpTransport
from raft.types import SnapshotId
from raft.voters import VoterSet, read_bootstrap_voters
from tools.config import WILDCARD_HOST, NodeConfig
from tools.server.append_api import install_append_api
from tools.server.durability import install_durability
from tools.server.faults import node_faults
from tools.server.node_tls import broker_tls, node_tls, transport_tls

log = logging.getLogger(__name__)


def raft_config(config: NodeConfig, bootstrap_voters: VoterSet | None = None) -> RaftConfig:
    """`bootstrap_voters`: the bootstrap checkpoint's (KIP-853; None: a static quorum)."""
    return RaftConfig(voters=tuple(sorted(config.voters)),
                      bootstrap_voters=bootstrap_voters,
                      election_timeout_ms=config.election_timeout_ms,
                      fetch_timeout_ms=config.fetch_timeout_ms,
                      election_backoff_max_ms=config.election_backoff_max_ms,
                      request_timeout_ms=config.request_timeout_ms,
                      fetch_max_wait_ms=config.fetch_max_wait_ms,
                      fetch_max_bytes=config.fetch_max_bytes, pre_vote=config.pre_vote,
                      fetch_snapshot_max_bytes=config.fetch_snapshot_max_bytes)


def advertised_controller_endpoints(config: NodeConfig) -> tuple[Endpoint, ...]:
    """The controller listener as this node advertises it (`advertised.listeners`,
    else `listeners`); none when it serves no controller listener or advertises a
    wildcard, which nobody can dial (its voter entry keeps the formatted endpoint)."""
    name = config.controller_listener_name
    if config.controller_address is None or name is None:
        return ()
    host, port = config.advertised_listeners[name]
    if host in (WILDCARD_HOST, "::"):
        return ()
    return (Endpoint(name=name, host=host, port=port),)


@dataclass(eq=False)
class BuiltNode:
    """A node built from its configuration, its RPC host, the files to close before
    a rebuild, and what a graceful stop does before the node shuts down (a broker's
    controlled shutdown)."""

    node: RaftNode
    rpc: RpcHost
    closers: list[Callable[[], None]] = field(default_factory=list)
    before_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def close(self) -> None:
        for close in self.closers:
            close()


def _log_size(disk_log: DiskLog) -> LogSize:
    """Blocking (a stat): the log's bytes, and the age of its oldest segment's last write
    (Kafka's time-based retention looks at a segment's newest record, too)."""
    oldest_ms = disk_log.segment_paths[0].stat().st_mtime * 1000
    return LogSize(disk_log.size_bytes, max(0, int(time.time() * 1000 - oldest_ms)))


def build_node(config: NodeConfig) -> BuiltNode:
    """Open the log directory named by `config` and build the node (not yet running)
    with every part its roles need. SnapshotStartError when its snapshots forbid a start;
    ConfigError when its TLS files do not load."""
    contexts = node_tls(config)  # before the log opens: a bad keystore is a config error
    meta = open_log_dir(config.log_dir, cluster_id=config.cluster_id or None,
                        node_id=config.node_id)
    disk_log = DiskLog.open_metadata_log(config.log_dir, segment_bytes=config.log_segment_bytes)
    try:
        start = load_start_image(disk_log.directory, log_start_offset=disk_log.start_offset,
                                 log_end_offset=disk_log.end_offset)
        if start.snapshot_id is not None and start.replay_from > disk_log.end_offset:
            # fetched from the leader just before a stop: the log restarts at it
            disk_log.reset_to(start.replay_from, start.epoch)
    except BaseException:
        disk_log.close()
        raise
    log_dir = config.log_dir
    transport = TcpTransport(node_id=config.node_id, peers=config.voters,
                             listen=config.controller_address,
                             max_frame_bytes=config.socket_request_max_bytes,
                             queue_size=config.send_queue_max_messages)
    transport.use_limits(config.listener_limits())
    raft_tls = transport_tls(config, contexts)
    if raft_tls is not None:
        transport.use_tls(raft_tls)
    faults = node_faults(config.fault_injection_file) if config.fault_injection_file else None
    node = RaftNode(node_id=config.node_id, cluster_id=meta.cluster_id, voters=config.voters,
                    config=raft_config(config, read_bootstrap_voters(disk_log.directory)),
                    log=disk_log,
                    directory_id=None if meta.directory_id is None
                    else Uuid.from_string(meta.directory_id),
                    election=read_quorum_state(log_dir, voters=config.voters),
                    write_election=lambda state: write_quorum_state(log_dir, state),
                    transport=transport, clock=faults.clock if faults else None,
                    before_fsync=faults.before_fsync if faults else None,
                    publish_from=start.replay_from,
                    snapshots=DiskSnapshotStore(disk_log.directory),
                    # a controller may be added as a voter; a broker-only node never is
                    observer_flushes="controller" in config.roles,
                    listeners=advertised_controller_endpoints(config))
    rpc = RpcHost(node)
    built = BuiltNode(node, rpc, [disk_log.close])
    checkpoint_high_watermark = install_durability(node)
    install_append_api(node, rpc)
    images: list[Callable[[], MetadataImage]] = []  # the committed image each role keeps
    resets: list[Callable[[MetadataImage], None]] = []  # ... and how it restarts from one
    if "controller" in config.roles:  # the metadata controller (active on the leader)
        from metadata.bootstrap import read_bootstrap_records
        from metadata.controller_shell import install_controller
        controller = install_controller(
            node, rpc, broker_session_timeout_ms=config.broker_session_timeout_ms,
            ordered_delivery_default=config.ordered_delivery_default,
            unclean_election_default=config.unclean_leader_election_enable,
            initial_image=start.image, authorizer=config.authorizer_settings())
        controller.set_bootstrap_records(tuple(read_bootstrap_records(config.log_dir)))
        images.append(lambda: controller.image)
        resets.append(controller.reset_image)
    broker_role = None
    if "broker" in config.roles:  # registration, image, partition dirs, Kafka clients
        from broker.role import install_broker_role
        role = install_broker_role(
            node, rpc, broker_tls(config, config.broker_settings(), contexts),
            initial_image=start.image,
            kafka_image_view=faults.metadata.view if faults else None)
        built.closers.append(role.close)
        if role.server.settings.controlled_shutdown:
            built.before_stop.append(role.controlled_shutdown)
        images.append(lambda: role.server.image)
        resets.append(role.reset_image)
        if faults is not None and role.kafka is not None:
            faults.metadata.on_thaw = role.kafka.dispatcher.context.on_image_changed
        broker_role = role
    if config.metrics_listener:  # one endpoint per process: a rebuilt node keeps it
        from tools.metrics import install_metrics
        try:
            install_metrics(node, config.metrics_listener, is_voter=config.is_voter,
                            roles=",".join(sorted(config.roles)), broker=broker_role,
                            tls=config.tls)
        except BaseException:
            built.close()
            raise
    settings = config.authorizer_settings()  # every request on the controller listener
    rpc.set_request_gate(session_gate(access_table.CONTROLLER, lambda: images[0]().acls,
                                      settings))
    # After the images' commit listeners. A combined controller and broker snapshots the
    # controller's image: both replay the same log.
    snapshotter = install_snapshotter(
        node, rpc, disk_log.directory, images[0], start=start,
        max_bytes_between=config.max_record_bytes_between_snapshots,
        max_interval_ms=config.max_snapshot_interval_ms,
        log_size=lambda: _log_size(disk_log),
        retention=Retention(max_bytes=config.max_retention_bytes,
                            max_ms=config.max_retention_ms),
        checkpoint_high_watermark=checkpoint_high_watermark)

    async def reload_from(snapshot_id: SnapshotId, records: tuple[bytes, ...]) -> None:
        path = disk_log.directory / snapshot_id.file_name
        image = await trio.to_thread.run_sync(fetched_snapshot_image, path, snapshot_id,
                                              records)
        for reset in resets:
            reset(image)
        snapshotter.on_snapshot_loaded(snapshot_id)
        log.info("loaded a snapshot fetched from the leader", extra={
            "node": config.node_id, "file": str(path), "end_offset": snapshot_id.end_offset,
            "epoch": snapshot_id.epoch, "topics": len(image.topics)})

    node.add_snapshot_listener(reload_from)
    return built
