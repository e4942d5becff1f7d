"""The broker's Kafka listener (`listeners = PLAINTEXT://HOST:PORT`): a Trio TCP server
speaking the Kafka wire protocol, decoded and encoded with `kio`.

Each frame is a 4-byte big-endian size and a request. Requests on one connection are
handled one at a time, in order (as Kafka does), so responses keep the order clients
expect. `Dispatcher.handle_frame` is the sans-I/O-ish part (bytes in, a response frame
out, no socket): decode the header, dispatch by api key and version, build the handler's
typed answer (`broker.kafka.response_shapes`) into kio's entity of the request's version
and encode it as parts (`broker.kafka.framed_response`: a Fetch response's records stay
regions of their segment files, sent with os.sendfile on a plaintext connection).
An unsupported api or version, a malformed frame or one above its limit closes that
connection only, with the reason logged; everyone else is served on.

Limits (`raft.common.connection_limits` states the rule): before a SASL listener's
connection has logged in, a frame may announce at most `sasl.server.max.receive.size`
bytes, after it (and on a listener without SASL) `socket.request.max.bytes`; a frame
announcing more closes the connection before its body is read, and a frame's buffer
grows only with the bytes that arrive. The TLS handshake and the SASL login together
must complete within `connections.authentication.timeout.ms`; a connection with no
complete request for `connections.max.idle.ms` is closed; the connections are counted
and capped per listener and per address, and within the process's share of
RLIMIT_NOFILE.

Every request passes through `Dispatcher.handle_frame`; its `on_request` hook (set by
`tools.metrics`, None: off) hears the api's name (`Produce`, `Fetch`, ...) and how long
the request took, in seconds, once it was handled (raised or not).
"""

from __future__ import annotations

import functools
import logging
import math
import random
import secrets
import ssl
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from broker import access_table
from broker.kafka import api_versions, authz, response_shapes
from broker.kafka.admin import (
    acls_api,
    admin_api,
    auto_create,
    configs_api,
    delete_records_api,
    elect_api,
    features_api,
    log_dirs_api,
    metadata_api,
    quorum_api,
    reassign_api,
    topic_partitions_api,
    transactions_api,
)
from broker.kafka.api_versions import SUPPORTED
from broker.kafka.framed_response import Part, encode_parts, send_parts
from broker.kafka.group_shapes import FindCoordinatorResponse
from broker.kafka.groups import group, membership
from broker.kafka.handler_context import REQUEST_CLIENT_ID, HandlerContext
from broker.kafka.ordered import ordered_api
from broker.kafka.partitions import fetch, produce
from broker.kafka.partitions.compaction import compaction_loop
from broker.kafka.partitions.file_region import RegionCutError
from broker.kafka.partitions.retention import retention_loop
from broker.kafka.replication.follower import ReplicaFetcher
from broker.kafka.replication.hw_checkpoint import high_watermark_loop, write_high_watermarks
from broker.kafka.replication.isr import IsrManager
from broker.kafka.replication.replica import ReplicaManager
from broker.kafka.sasl import sasl_api, scram_api
from broker.settings import Address, BrokerSettings
from metadata.authorizer import CLUSTER_NAME, ResourceType
from metadata.controller_client import ControllerClient
from metadata.image import MetadataImage
from raft.common import tls
from raft.common.connection_limits import (
    ConnectionGate,
    ListenerLimits,
    frame_limit,
    idle_deadline,
    serve_with_limits,
)
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import (
    ConnectionClosed,
    KafkaCodecError,
    build,
    parse_request,
    peek_header,
    response_class,
)
from raft.common.kafka.framing import KafkaFrameError, receive_frame
from raft.common.kafka.ordered_schemas import CONSUMER_GROUP_POSITION, PARTITION_LEADER_EPOCHS
from raft.common.session import Session, bind_session, current_session

if TYPE_CHECKING:
    from broker.server import BrokerServer
    from raft.node import RaftNode

log = logging.getLogger(__name__)

# a typed shape (broker.kafka.response_shapes), or None: no response
Handler = Callable[[HandlerContext, Any, int],
                   Awaitable[response_shapes.TypedResponse | None]]


async def _api_versions(context: HandlerContext, body: Any, version: int
                        ) -> response_shapes.ApiVersionsResponse:
    return api_versions.handle_api_versions_request(
        image=context.image, kraft_version=context.kraft_version(),
        client_software=getattr(body, "client_software_name", None))  # v3+ only


async def _metadata(context: HandlerContext, body: Any, version: int
                    ) -> response_shapes.MetadataResponse:
    creator, creating = context.topic_creator, []
    requested = auto_create.allows_auto_creation(body, version)
    may_create_any = authz.cluster_allowed(context, authz.Op.CREATE)

    def unknown_topic(name: str) -> ErrorCode:
        answer = auto_create.unknown_topic_answer(
            name, settings=creator.settings, requested=requested,
            may_create=may_create_any or authz.topic_allowed(context, authz.Op.CREATE, name))
        if answer == ErrorCode.LEADER_NOT_AVAILABLE:
            creating.append(name)
        return answer
    response = metadata_api.handle_metadata_request(
        context.image, body, version, broker_id=context.broker_id,
        cluster_id=context.cluster_id,
        described=lambda name: authz.topic_allowed(context, authz.Op.DESCRIBE, name),
        unknown_topic=unknown_topic,
        operations=lambda name: authz.authorized_operations(context, ResourceType.TOPIC, name),
        cluster_operations=lambda: authz.authorized_operations(
            context, ResourceType.CLUSTER, CLUSTER_NAME))
    creator.want(creating)
    return response


async def _describe_cluster(context: HandlerContext, body: Any, version: int
                            ) -> response_shapes.DescribeClusterResponse:
    if not authz.cluster_allowed(context, authz.Op.DESCRIBE):
        return {"throttle_time": 0, "error_code": authz.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "DESCRIBE on the cluster is not allowed",
                "cluster_id": context.cluster_id, "controller_id": -1, "brokers": []}
    return metadata_api.handle_describe_cluster_request(
        context.image, body, version, broker_id=context.broker_id,
        cluster_id=context.cluster_id,
        operations=authz.authorized_operations(context, ResourceType.CLUSTER, CLUSTER_NAME))


async def _find_coordinator(context: HandlerContext, body: Any, version: int
                            ) -> FindCoordinatorResponse:
    refused = produce.refuse_transaction_coordinator(body)  # no transactions
    if refused is not None:
        return refused
    return await group.handle_find_coordinator_request(context, body, version)


async def _describe_quorum(context: HandlerContext, body: Any, version: int
                           ) -> response_shapes.DescribeQuorumResponse:
    """A Dispatcher built without a QuorumForwarder knows no controllers to ask."""
    return quorum_api.error_response(int(ErrorCode.UNKNOWN_SERVER_ERROR),
                                     "this listener does not forward DescribeQuorum")


HANDLERS: dict[int, Handler] = {
    api_versions.API_VERSIONS: _api_versions,
    api_versions.METADATA: _metadata,
    api_versions.DESCRIBE_CLUSTER: _describe_cluster,
    api_versions.DESCRIBE_QUORUM: _describe_quorum,  # the Dispatcher's forwarder replaces it
    api_versions.CREATE_TOPICS: admin_api.handle_create_topics_request,
    api_versions.DELETE_TOPICS: admin_api.handle_delete_topics_request,
    api_versions.DELETE_RECORDS: delete_records_api.handle_delete_records_request,
    api_versions.DESCRIBE_LOG_DIRS: log_dirs_api.handle_describe_log_dirs_request,
    api_versions.DESCRIBE_PRODUCERS: log_dirs_api.handle_describe_producers_request,
    api_versions.ALTER_REPLICA_LOG_DIRS: log_dirs_api.handle_alter_replica_log_dirs_request,
    api_versions.LIST_TRANSACTIONS: transactions_api.handle_list_transactions_request,
    api_versions.WRITE_TXN_MARKERS: transactions_api.handle_write_txn_markers_request,
    api_versions.LIST_CONFIG_RESOURCES: configs_api.handle_list_config_resources_request,
    api_versions.CREATE_PARTITIONS: admin_api.handle_create_partitions_request,
    api_versions.ELECT_LEADERS: elect_api.handle_elect_leaders_request,
    # without the Dispatcher's forwarder it knows no raft leader for kraft.version
    api_versions.UPDATE_FEATURES: features_api.handle_update_features_request,
    api_versions.ALTER_PARTITION_REASSIGNMENTS:
        reassign_api.handle_alter_partition_reassignments_request,
    api_versions.LIST_PARTITION_REASSIGNMENTS:
        reassign_api.handle_list_partition_reassignments_request,
    api_versions.DESCRIBE_TOPIC_PARTITIONS:
        topic_partitions_api.handle_describe_topic_partitions_request,
    api_versions.DESCRIBE_ACLS: acls_api.handle_describe_acls_request,
    api_versions.CREATE_ACLS: acls_api.handle_create_acls_request,
    api_versions.DELETE_ACLS: acls_api.handle_delete_acls_request,
    api_versions.DESCRIBE_CONFIGS: configs_api.handle_describe_configs_request,
    api_versions.ALTER_CONFIGS: configs_api.handle_alter_configs_request,
    api_versions.INCREMENTAL_ALTER_CONFIGS: configs_api.handle_incremental_alter_configs_request,
    api_versions.PRODUCE: produce.handle_produce_request,
    api_versions.FETCH: fetch.handle_fetch_request,
    api_versions.LIST_OFFSETS: fetch.handle_list_offsets_request,
    api_versions.OFFSET_FOR_LEADER_EPOCH: fetch.handle_offset_for_leader_epoch_request,
    api_versions.INIT_PRODUCER_ID: produce.handle_init_producer_id_request,
    api_versions.FIND_COORDINATOR: _find_coordinator,
    api_versions.OFFSET_COMMIT: group.handle_offset_commit_request,
    api_versions.OFFSET_FETCH: group.handle_offset_fetch_request,
    api_versions.JOIN_GROUP: membership.handle_join_group_request,
    api_versions.SYNC_GROUP: membership.handle_sync_group_request,
    api_versions.HEARTBEAT: membership.handle_heartbeat_request,
    api_versions.LEAVE_GROUP: membership.handle_leave_group_request,
    api_versions.DESCRIBE_GROUPS: group.handle_describe_groups_request,
    api_versions.LIST_GROUPS: group.handle_list_groups_request,
    api_versions.DELETE_GROUPS: group.handle_delete_groups_request,
    api_versions.OFFSET_DELETE: group.handle_offset_delete_request,
    CONSUMER_GROUP_POSITION: ordered_api.handle_consumer_group_position_request,
    PARTITION_LEADER_EPOCHS: ordered_api.handle_partition_leader_epochs_request,
    # outside a SASL exchange (broker.kafka.sasl.sasl_api: SaslAuthenticator serves it)
    api_versions.SASL_HANDSHAKE: sasl_api.handle_sasl_handshake_request,
    api_versions.SASL_AUTHENTICATE: sasl_api.handle_sasl_authenticate_request,
    api_versions.DESCRIBE_USER_SCRAM_CREDENTIALS:
        scram_api.handle_describe_user_scram_credentials_request,
    api_versions.ALTER_USER_SCRAM_CREDENTIALS:
        scram_api.handle_alter_user_scram_credentials_request,
}
assert set(HANDLERS) == set(SUPPORTED)


RequestObserver = Callable[[str, float], None]  # (api name, seconds) per request handled


def api_name(body: Any) -> str:
    """`ProduceRequest` -> `Produce`: Kafka's request name, for metrics."""
    return type(body).__name__.removesuffix("Request")


class Dispatcher:
    def __init__(self, context: HandlerContext, *,
                 quorum: quorum_api.QuorumForwarder | None = None) -> None:
        self.context = context
        self.on_request: RequestObserver | None = None
        # DescribeQuorum needs the controllers' addresses, which the context lacks
        self.handlers = dict(HANDLERS)
        if quorum is not None:
            self.handlers[api_versions.DESCRIBE_QUORUM] = quorum.handle
            self.handlers[api_versions.UPDATE_FEATURES] = functools.partial(
                features_api.handle_update_features_request, quorum=quorum)

    async def handle_frame(self, frame: bytes) -> list[Part] | None:
        """The response frame (size included) as parts, None when none is due (acks=0
        Produce); raises ConnectionClosed when the connection must close."""
        try:
            header = peek_header(frame)
            if api_versions.is_api_versions_above_max(header.api_key, header.api_version):
                return encode_parts(header.correlation_id, build(
                    response_class(api_versions.API_VERSIONS, 0),
                    api_versions.unsupported_version_response()))
            request = parse_request(frame, SUPPORTED)
        except KafkaCodecError as exc:
            raise ConnectionClosed(str(exc)) from None
        if request.header.api_key not in access_table.KAFKA:  # never served without a row
            raise ConnectionClosed(f"api key {request.header.api_key} has no "
                                   "authorization rule")
        handler = self.handlers[request.header.api_key]
        started = trio.current_time()
        client_id = REQUEST_CLIENT_ID.set(request.header.client_id or "")
        try:
            response = await handler(self.context, request.body, request.header.api_version)
        finally:
            REQUEST_CLIENT_ID.reset(client_id)
            if self.on_request is not None:
                self.on_request(api_name(request.body), trio.current_time() - started)
        if response is None:
            return None
        return encode_parts(request.header.correlation_id, build(
            response_class(request.header.api_key, request.header.api_version), response))


class KafkaListener:
    def __init__(self, dispatcher: Dispatcher, address: Address, *,
                 max_frame_bytes: int = 100 * 1024 * 1024,
                 ssl_context: ssl.SSLContext | None = None,
                 security_protocol: str = "PLAINTEXT",
                 limits: ListenerLimits | None = None) -> None:
        self.dispatcher = dispatcher
        self.address = address
        self.limits = limits or ListenerLimits(max_request_bytes=max_frame_bytes)
        self.gate = ConnectionGate(security_protocol, self.limits)
        self.port: int | None = None
        self.isr_manager: IsrManager | None = None  # set by install_kafka_listener
        # SASL_PLAINTEXT / SASL_SSL (broker.kafka.sasl.sasl_api); None: no SASL exchange
        self.sasl: sasl_api.SaslSettings | None = None
        self.sasl_rng: random.Random = secrets.SystemRandom()  # SCRAM nonces and salts
        # TLS (raft.common.tls): a handshake before the first frame; None: plaintext
        self.ssl_context = ssl_context
        self.security_protocol = security_protocol

    async def serve(self, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        listeners = await trio.open_tcp_listeners(self.address[1], host=self.address[0])
        self.port = listeners[0].socket.getsockname()[1]
        log.info("serving the Kafka protocol", extra={
            "broker": self.dispatcher.context.broker_id,
            "address": f"{self.address[0]}:{self.port}",
            "security_protocol": self.security_protocol})
        task_status.started(self.port)
        await serve_with_limits(self._accept, listeners, self.gate)

    @property
    def max_frame_bytes(self) -> int:
        """The largest frame after login (`socket.request.max.bytes`)."""
        return self.limits.max_request_bytes

    async def _accept(self, stream: trio.SocketStream) -> None:
        """One accepted connection: its TLS handshake (when the listener has TLS) and
        its `Session`, bound for the connection's task, then its frames."""
        peer = _peer(stream)
        host = peer.rpartition(":")[0]
        login_deadline = trio.current_time() + self.limits.authentication_timeout_s
        if self.ssl_context is None:
            bind_session(Session(client_host=host, security_protocol=self.security_protocol))
            await self.handle_connection(stream, login_deadline=login_deadline)
            return
        try:
            secured, cert = await tls.accept(stream, self.ssl_context,
                                             timeout_s=self.limits.authentication_timeout_s)
        except tls.TlsHandshakeError as exc:
            log.info("refused Kafka connection", extra={"peer": peer, "reason": str(exc)})
            await trio.aclose_forcefully(stream)
            return
        bind_session(tls.tls_session(cert, client_host=host,
                                     security_protocol=self.security_protocol))
        await self.handle_connection(secured, login_deadline=login_deadline)

    async def _next_frame(self, stream: trio.abc.Stream, buffer: bytearray, *,
                          logged_in: bool, login_deadline: float) -> bytes | None:
        """The next frame within the connection's deadlines: its idle one, and until it
        has logged in its login deadline; ConnectionClosed when one passes first."""
        deadline = idle_deadline(trio.current_time(), self.limits)
        if not logged_in:
            deadline = min(deadline, login_deadline)
        with trio.move_on_at(deadline):
            return await receive_frame(
                stream, buffer, frame_limit(self.limits, authenticated=logged_in))
        if logged_in or deadline < login_deadline:
            raise ConnectionClosed(f"no complete request for {self.limits.max_idle_ms} ms")
        raise ConnectionClosed("not logged in within "
                               f"{self.limits.authentication_timeout_ms} ms")

    async def handle_connection(self, stream: trio.abc.Stream, *,
                                login_deadline: float = math.inf) -> None:
        peer = _peer(stream)
        buffer = bytearray()
        session = current_session()
        bind_session(session)  # the listener's own, or a new anonymous one, kept for the task
        sasl = None if self.sasl is None else sasl_api.SaslAuthenticator(
            self.sasl, session, rng=self.sasl_rng,
            credentials=lambda: self.dispatcher.context.image.scram_credentials,
            unknown_user_key=lambda: sasl_api.unknown_user_key_of(self.dispatcher.context.image))
        try:
            while (frame := await self._next_frame(
                    stream, buffer, logged_in=sasl is None or sasl.complete,
                    login_deadline=login_deadline)) is not None:
                if sasl is not None and not sasl.complete and not sasl.passes(frame):
                    reply, close = sasl.handle(frame)  # nothing else before authenticating
                    if reply is not None:
                        await stream.send_all(reply)
                    if close is not None:
                        raise ConnectionClosed(close)
                    continue
                parts = await self.dispatcher.handle_frame(frame)
                if parts is not None:
                    await send_parts(stream, parts)
        # KafkaFrameError and RegionCutError (a segment cut under a response) are OSErrors
        except (ConnectionClosed, KafkaFrameError, RegionCutError) as exc:
            log.warning("closing Kafka connection", extra={"peer": peer, "reason": str(exc)})
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.info("Kafka connection lost", extra={"peer": peer, "reason": str(exc)})
        except Exception as exc:  # a handler bug must not take the broker down
            log.exception("Kafka request failed, closing the connection",
                          extra={"peer": peer, "reason": repr(exc)})
        finally:
            await stream.aclose()


def _peer(stream: trio.abc.Stream) -> str:
    if isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    try:
        host, port = stream.socket.getpeername()[:2]  # type: ignore[attr-defined]
        return f"{host}:{port}"
    except (AttributeError, OSError):
        return "?"


ImageView = Callable[[MetadataImage], MetadataImage]


def install_kafka_listener(node: RaftNode, settings: BrokerSettings, server: BrokerServer,
                           image_view: ImageView | None = None) -> KafkaListener | None:
    """Serve the Kafka protocol on the broker's client listener (None: it has none), by
    the server's image, or by what `image_view` (test-only faults) makes of it."""
    address = settings.client_address
    if address is None:
        return None
    view = image_view or (lambda live: live)

    def image() -> MetadataImage:
        return view(server.image)

    # the nodes' mutual TLS: every controller dialled must present its own id's certificate
    bind_identity = node.transport.tls is not None and node.transport.tls.bind_identity
    replicas = ReplicaManager(log_dir=settings.log_dir, broker_id=settings.broker_id,
                              image=image, wait_reconciled=server.wait_reconciled,
                              log_defaults=settings.log_defaults)

    def broker_epoch() -> int | None:
        registration = server.registration
        return None if registration is None else registration.broker_epoch

    context = HandlerContext(
        broker_id=settings.broker_id, cluster_id=node.cluster_id, image=image,
        replicas=replicas,
        controller=ControllerClient(voters=dict(settings.voters), cluster_id=node.cluster_id,
                                    ssl_context=node.transport.client_ssl_context,
                                    bind_identity=bind_identity),
        request_timeout_ms=max(settings.request_timeout_ms, 30_000),
        replica_routes=settings.replica_routes, broker_epoch=broker_epoch,
        kraft_version=lambda: node.core.kraft_version, authorizer=settings.authorizer,
        unclean_election_default=settings.unclean_election_default,
        offsets_topic_num_partitions=settings.offsets_topic_num_partitions,
        offsets_topic_segment_bytes=settings.offsets_topic_segment_bytes,
        group_initial_rebalance_delay_ms=settings.group_initial_rebalance_delay_ms,
        auto_create=settings.auto_create)
    node.add_commit_listener(lambda batch: context.on_image_changed())
    quorum = quorum_api.QuorumForwarder(voters=dict(settings.voters),
                                        cluster_id=node.cluster_id,
                                        leader_hint=lambda: node.leader_address,
                                        ssl_context=node.transport.client_ssl_context,
                                        bind_identity=bind_identity)
    listener = KafkaListener(Dispatcher(context, quorum=quorum), address,
                             ssl_context=settings.kafka_ssl_context,
                             security_protocol=settings.kafka_security_protocol,
                             limits=settings.listener_limits(settings.kafka_limits))
    listener.sasl = settings.sasl
    node.add_background_task(listener.serve)
    fetcher = ReplicaFetcher(  # followers fetch from leaders
        context, ssl_context=settings.inter_broker_ssl_context)
    fetcher.sasl = settings.inter_broker_sasl
    fetcher.bind_identity = settings.inter_broker_bind_identity
    node.add_background_task(fetcher.run)
    node.add_background_task(context.groups.run)  # groups on __consumer_offsets leaders
    node.add_background_task(context.topic_creator.run)  # topics Metadata requests name
    listener.isr_manager = IsrManager(  # leaders shrink and expand ISRs
        context, replica_lag_time_max_ms=settings.replica_lag_time_max_ms,
        request_timeout_ms=settings.request_timeout_ms)
    node.add_background_task(listener.isr_manager.run)
    node.add_background_task(partial(retention_loop, replicas,
                                     settings.log_retention_check_interval_ms))
    node.add_background_task(partial(compaction_loop, replicas,
                                     settings.log_cleaner_backoff_ms,
                                     settings.log_cleaner_io_max_bytes_per_second))
    node.add_background_task(partial(high_watermark_loop, replicas))
    node.add_stop_task(partial(write_high_watermarks, replicas))
    return listener
