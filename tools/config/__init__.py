"""Node configuration: Kafka's key names, in a TOML file or a Java `.properties` file.

TOML keys may be written quoted (`"node.id" = 1`) or as TOML dotted keys (`node.id = 1`);
both flatten to the same Kafka name. A `.properties` file (Kafka's `server.properties`
syntax: `#`/`!` comments, `=`, `:` or a blank as the separator, a trailing `\\` continues
a line) holds the same keys as strings. Unknown keys and bad values fail at start with
the key named (`ConfigError.key`). The keys, their defaults and what they do are `KEYS`
(`kraft config-keys` prints them as docs/configuration.md's table). Example:

    "node.id" = 1
    "process.roles" = "controller"
    "controller.quorum.voters" = "1@127.0.0.1:19091,2@127.0.0.1:19092,3@127.0.0.1:19093"
    "listeners" = "CONTROLLER://127.0.0.1:19091"
    "log.dirs" = "/var/lib/kraft/node-1"

kraft-py's early names `quorum.*` still work as aliases of `controller.quorum.*`; each one
used adds a line to `NodeConfig.warnings` (`kraft node` logs them as WARNINGs). Keys of
Kafka's sample configurations that mean nothing here (`num.network.threads`, ...) are
accepted and named in one warning. A listener mapped to SSL serves TLS with the node's
`ssl.*` keys (`TlsSettings`, built into contexts by `raft.common.tls`); a broker's Kafka
listener mapped to SASL_PLAINTEXT or SASL_SSL runs SASL (`broker.kafka.sasl.sasl_api`) with
the `sasl.*` keys.

`load_client_properties` reads a client's properties file (`--command-config FILE`, a
TLS cluster's `client.properties`): `security.protocol` and the same `ssl.*` keys.

The package, by concern (importers use the names re-exported here):

- `parsers`: `ConfigError` and how each value is read (addresses, listeners, ...);
- `keys`: the key table `KEYS`, each key's one default, and docs/configuration.md's table;
- `node`: `NodeConfig` and what each part of a node takes from it;
- `loading`: `load` and `from_mapping`, with the checks across keys;
- `security`: the TLS, SASL and JAAS checks;
- `client`: `load_client_properties`, a client's `--command-config` file;
- `toml_writer`: `to_toml`, the launcher's node files.
"""

from tools.config.client import (
    CLIENT_SSL_KEYS,
    ClientProperties,
    client_properties,
    load_client_properties,
)
from tools.config.keys import (
    ALIASES,
    IGNORED_KAFKA_KEYS,
    KEYS,
    KEYS_BY_NAME,
    KNOWN_KEYS,
    REQUIRED,
    Key,
    canonical_key,
    reference_table,
)
from tools.config.loading import from_mapping, load
from tools.config.node import NodeConfig
from tools.config.parsers import (
    CONTROLLER_LISTENER,
    DEFAULT_PROTOCOL_MAP,
    FRAME_OVERHEAD_BYTES,
    IMPLEMENTED_PROTOCOLS,
    ROLES,
    SECURITY_PROTOCOLS,
    STATUS_LISTENER,
    TLS_PROTOCOLS,
    UNLIMITED_CONNECTIONS,
    WILDCARD_HOST,
    Address,
    ConfigError,
    bind_address,
    flatten,
    parse_address,
    parse_listeners,
    parse_metrics_listener,
    parse_plain_users,
    parse_protocol_map,
    parse_replica_routes,
    parse_voters,
)
from tools.config.toml_writer import to_toml

__all__ = [
    "ALIASES", "CLIENT_SSL_KEYS", "CONTROLLER_LISTENER", "DEFAULT_PROTOCOL_MAP",
    "FRAME_OVERHEAD_BYTES", "IGNORED_KAFKA_KEYS", "IMPLEMENTED_PROTOCOLS", "KEYS",
    "KEYS_BY_NAME", "KNOWN_KEYS", "REQUIRED", "ROLES", "SECURITY_PROTOCOLS", "STATUS_LISTENER",
    "TLS_PROTOCOLS", "UNLIMITED_CONNECTIONS", "WILDCARD_HOST", "Address", "ClientProperties",
    "ConfigError", "Key", "NodeConfig", "bind_address", "canonical_key", "client_properties",
    "flatten", "from_mapping", "load", "load_client_properties", "parse_address",
    "parse_listeners", "parse_metrics_listener", "parse_plain_users", "parse_protocol_map",
    "parse_replica_routes", "parse_voters", "reference_table", "to_toml",
]
