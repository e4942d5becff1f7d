"""ApiVersions: the APIs and version ranges this broker serves, and the KIP-511 fallback.

The ranges are a coherent subset of a Kafka 3.1 broker's (clients infer features from
them: Fetch 13 means topic IDs in Fetch, Metadata 12 topic IDs in Metadata), with the
minimums `kio` can decode. A request for an API or version outside them closes the
connection, except ApiVersions itself: a version above our max is answered with a v0
body, UNSUPPORTED_VERSION (35) and our ranges, so the client retries with one we know.
"""

from __future__ import annotations

from broker.kafka.response_shapes import ApiVersionRange, ApiVersionsResponse
from metadata.feature_control import describe_features
from metadata.image import MetadataImage
from raft.common.errors import ErrorCode
from raft.common.kafka.ordered_schemas import (
    CONSUMER_GROUP_POSITION,
    PARTITION_LEADER_EPOCHS,
    PROJECT_CLIENT_SOFTWARE,
)

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS = 15, 16
SASL_HANDSHAKE = 17
API_VERSIONS = 18
CREATE_TOPICS, DELETE_TOPICS = 19, 20
DELETE_RECORDS = 21
INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH = 22, 23
WRITE_TXN_MARKERS = 27
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
DESCRIBE_CONFIGS, ALTER_CONFIGS = 32, 33
ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 34, 35
SASL_AUTHENTICATE = 36
CREATE_PARTITIONS = 37
DELETE_GROUPS = 42
ELECT_LEADERS = 43
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46
OFFSET_DELETE = 47
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
DESCRIBE_QUORUM = 55
UPDATE_FEATURES = 57
DESCRIBE_CLUSTER = 60
DESCRIBE_PRODUCERS = 61
LIST_TRANSACTIONS = 66
LIST_CONFIG_RESOURCES = 74  # Kafka 3.9's ListClientMetricsResources
DESCRIBE_TOPIC_PARTITIONS = 75

# api key -> (min version, max version)
SUPPORTED: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 13),  # 13: topics by ID (KIP-516)
    FETCH: (4, 13),
    LIST_OFFSETS: (1, 7),
    METADATA: (0, 12),
    OFFSET_COMMIT: (2, 8),
    OFFSET_FETCH: (1, 7),
    FIND_COORDINATOR: (0, 3),
    JOIN_GROUP: (0, 7),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 4),
    SYNC_GROUP: (0, 5),
    DESCRIBE_GROUPS: (0, 5),
    LIST_GROUPS: (0, 5),
    DELETE_GROUPS: (0, 2),
    OFFSET_DELETE: (0, 0),
    API_VERSIONS: (0, 3),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    DELETE_RECORDS: (0, 2),  # broker.kafka.admin.delete_records_api
    INIT_PRODUCER_ID: (0, 4),
    OFFSET_FOR_LEADER_EPOCH: (2, 4),
    CREATE_PARTITIONS: (0, 3),
    DESCRIBE_ACLS: (1, 3),  # kio's range (broker.kafka.admin.acls_api)
    CREATE_ACLS: (1, 3),
    DELETE_ACLS: (1, 3),
    DESCRIBE_CONFIGS: (1, 4),  # kio's range; v0 lacks config_source
    ALTER_CONFIGS: (0, 2),  # the legacy whole-set replace (broker.kafka.admin.configs_api)
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    DESCRIBE_CLUSTER: (0, 1),
    DESCRIBE_LOG_DIRS: (1, 4),  # broker.kafka.admin.log_dirs_api
    DESCRIBE_PRODUCERS: (0, 0),
    ALTER_REPLICA_LOG_DIRS: (1, 2),  # kio's range (Kafka 3.9: 0-2)
    # no transactions here: empty lists, markers refused (broker.kafka.admin.transactions_api)
    LIST_TRANSACTIONS: (0, 1),
    WRITE_TXN_MARKERS: (1, 1),  # kio's range (Kafka 3.9: 0-1)
    LIST_CONFIG_RESOURCES: (0, 0),  # client metrics resources (KIP-714): none here
    ELECT_LEADERS: (0, 2),  # forwarded to the controllers (broker.kafka.admin.elect_api)
    # v1's allow_replication_factor_change is not served (broker.kafka.admin.reassign_api)
    ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    LIST_PARTITION_REASSIGNMENTS: (0, 0),
    DESCRIBE_TOPIC_PARTITIONS: (0, 0),  # KIP-966 (broker.kafka.admin.topic_partitions_api)
    DESCRIBE_QUORUM: (0, 2),  # forwarded to the controllers (broker.kafka.admin.quorum_api)
    UPDATE_FEATURES: (0, 1),  # forwarded (broker.kafka.admin.features_api)
    SASL_HANDSHAKE: (0, 1),  # broker.kafka.sasl.sasl_api
    SASL_AUTHENTICATE: (0, 2),
    DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),  # forwarded (broker.kafka.sasl.scram_api)
    ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    # ordered delivery across resizes (raft.common.kafka.ordered_schemas): not Kafka's
    CONSUMER_GROUP_POSITION: (0, 0),
    PARTITION_LEADER_EPOCHS: (0, 0),
}


PROJECT_APIS = frozenset({CONSUMER_GROUP_POSITION, PARTITION_LEADER_EPOCHS})


def api_keys(*, project: bool = False) -> list[ApiVersionRange]:
    """Our ranges: Kafka's APIs, and with `project` this project's own (served to every
    client; listed only to ours)."""
    return [{"api_key": key, "min_version": low, "max_version": high}
            for key, (low, high) in sorted(SUPPORTED.items())
            if project or key not in PROJECT_APIS]


def handle_api_versions_request(*, image: MetadataImage | None = None, kraft_version: int = 0,
                                client_software: str | None = None) -> ApiVersionsResponse:
    """The answer (our ranges, no error; this project's APIs only to a client whose v3+
    request names it `PROJECT_CLIENT_SOFTWARE`); from v3 on its entity also carries the
    features this broker supports and the cluster's finalized ones (KIP-584, as Kafka
    3.9's brokers: metadata.version from this broker's image, kraft.version from its raft
    core, read from the log it fetched), with the image's last applied offset as their
    epoch (`metadata.feature_control.describe_features`)."""
    features = describe_features(image or MetadataImage.empty(), kraft_version=kraft_version)
    return {"error_code": 0, "throttle_time": 0,
            "api_keys": api_keys(project=client_software == PROJECT_CLIENT_SOFTWARE),
            "supported_features": [{"name": f.name, "min_version": f.min_version,
                                    "max_version": f.max_version} for f in features.supported],
            "finalized_features_epoch": features.epoch,
            "finalized_features": [{"name": f.name, "min_version_level": f.min_version,
                                    "max_version_level": f.max_version}
                                   for f in features.finalized]}


def unsupported_version_response() -> ApiVersionsResponse:
    """KIP-511: UNSUPPORTED_VERSION and our ranges, sent as a v0 body."""
    return {"error_code": int(ErrorCode.UNSUPPORTED_VERSION), "api_keys": api_keys()}


def is_api_versions_above_max(api_key: int, api_version: int) -> bool:
    return api_key == API_VERSIONS and api_version > SUPPORTED[API_VERSIONS][1]
