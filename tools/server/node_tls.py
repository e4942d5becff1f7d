"""A node's TLS contexts, from its configuration: which listener serves TLS, what its
clients dial with, and whether the controller listener binds node identities.

- The controller listener (raft and the controllers' admin API, `raft/transport.py`):
  served over TLS when this node has it and `controller.listener.names`' protocol is SSL;
  every node (voters, brokers) dials the voters over TLS when that protocol is SSL in
  its own `listener.security.protocol.map`, as Kafka's brokers do.
- The broker's Kafka listener and its STATUS listener: TLS when mapped to SSL (or
  SASL_SSL); the replica fetcher dials other brokers with the client context when the
  inter-broker (Kafka) listener is TLS.
- Identity binding: on when the controller listener is TLS and `ssl.client.auth` is
  `required` or `requested` (`raft.peer_identity`; a peer without a certificate then
  binds no node id and may claim none): besides raft's requests, a broker
  registration, heartbeat and AlterPartition must carry the broker id of the sender's
  certificate; and every dial from one node to another (raft's, a broker's controller
  client and DescribeQuorum forwarding, and its replica fetcher when the inter-broker
  listener is TLS: one keystore serves every listener, so a node's Kafka listener shows
  the same certificate) must reach a certificate binding the node id dialled
  (`raft.common.tls.open_node_stream`).

One keystore and truststore serve every listener of the node (of Kafka's per-listener
`listener.name.<name>.ssl.*` overrides only `ssl.client.auth` is read:
`NodeConfig.client_auth_of`, so a SASL_SSL listener asks for no certificate unless told
to). A file that does not load is a ConfigError naming the key, at start.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field, replace

from broker.settings import BrokerSettings
from raft.common.tls import CLIENT_AUTH_MODES, TlsConfigError, client_context, server_context
from raft.transport_protocol import TransportTls
from tools.config import ConfigError, NodeConfig

# admin apis (metadata.admin) whose top-level `broker_id` names the sending broker
BROKER_ID_CLAIMS = {"RegisterBroker": "broker_id", "BrokerHeartbeat": "broker_id",
                    "AlterPartition": "broker_id"}


@dataclass(frozen=True, slots=True)
class NodeTls:
    client: ssl.SSLContext | None  # what the node dials TLS listeners with
    # the listeners' contexts by ssl.client.auth mode (one per mode the node's TLS
    # listeners use; empty: no listener of the node is TLS)
    servers: dict[str, ssl.SSLContext] = field(default_factory=dict)

    def server_for(self, config: NodeConfig, listener: str | None) -> ssl.SSLContext | None:
        """The context listener `listener` serves with (None: it is not TLS)."""
        if not config.is_tls(listener):
            return None
        return self.servers[config.client_auth_of(listener)]


def node_tls(config: NodeConfig) -> NodeTls:
    """The contexts the node's TLS listeners and clients need (None where none does)."""
    listeners = [*config.listeners, config.controller_listener_name]
    if not any(config.is_tls(name) for name in listeners if name):
        return NodeTls(None)
    modes = {config.client_auth_of(n) for n in config.listeners if config.is_tls(n)}
    try:
        servers = {mode: server_context(replace(config.tls, client_auth=mode))
                   for mode in CLIENT_AUTH_MODES if mode in modes}
        client = client_context(config.tls)
    except TlsConfigError as exc:  # its message starts with the key, when there is one
        key, _, detail = str(exc).partition(" ")
        if not key.startswith("ssl."):
            key, detail = "ssl", str(exc)
        raise ConfigError(key.rstrip(":"), detail.lstrip(": "), config.source) from None
    return NodeTls(client, servers)


def transport_tls(config: NodeConfig, contexts: NodeTls) -> TransportTls | None:
    """The raft transport's TLS: serving the controller listener, dialing the voters."""
    name = config.controller_listener_name
    if not config.is_tls(name):
        return None
    serves = config.controller_address is not None
    return TransportTls(
        server=contexts.server_for(config, name) if serves else None, client=contexts.client,
        bind_identity=binds_identity(config),
        security_protocol=config.listener_protocol(name), claims=BROKER_ID_CLAIMS)


def broker_tls(config: NodeConfig, settings: BrokerSettings, contexts: NodeTls
               ) -> BrokerSettings:
    """`settings` with the Kafka and STATUS listeners' TLS, and the replica fetcher's."""
    kafka = config.kafka_listener_name
    kafka_tls = config.is_tls(kafka)
    return replace(
        settings,
        kafka_ssl_context=contexts.server_for(config, kafka),
        kafka_security_protocol=config.listener_protocol(kafka),
        status_ssl_context=contexts.server_for(config, "STATUS"),
        inter_broker_ssl_context=contexts.client if kafka_tls else None,
        inter_broker_bind_identity=kafka_tls and binds_identity(config))


def binds_identity(config: NodeConfig) -> bool:
    """Whether the nodes' certificates bind their ids: TLS on the controller listener
    asking peers for certificates (`required`, or `requested`: a peer without one then
    binds no node id and may claim none)."""
    name = config.controller_listener_name
    return config.is_tls(name) and config.client_auth_of(name) in ("required", "requested")
