"""Who may make which request, on every listener a node serves: one table, one row per
request, checked before the request reaches a handler, the Raft core or the image.

The model is Kafka's `AuthorizerIntegrationTest`: every API key with the ACL it needs.
A row is a `Rule`: the operation and resource type the caller must hold, and where the
check happens:
- `GATE`: on the one cluster resource (`kafka-cluster`), for the whole request, by the
  listener before anything else reads it (`gate_refusal`). A refusal is
  CLUSTER_AUTHORIZATION_FAILED.
- `PER_RESOURCE`: on the resources the request names (topics, groups), decided by the
  code that resolves them: the Kafka listener's handlers (`broker/kafka/authz.py`) and, on
  the controller listener, `metadata/acl_control.py` `admin_refusal`, which the controller
  runs on its committed image, where a topic ID is known for certain. The gate lets such
  a request through to them; the row says what they require.
- `OPEN`: no right needed, as in Kafka (ApiVersions, the SASL exchange itself, metrics).

Listeners: the controller listener (`raft/transport.py`: the Raft RPCs, the
node APIs of `raft/node.py`, the controllers' admin RPCs, Append, WriteSnapshot,
BrokerStatus), the brokers' Kafka listener (`broker/kafka/listener.py`), a broker's
STATUS listener (`broker/server.py`), and the Prometheus endpoint (`tools/metrics.py`),
whose one row is OPEN and which does not consult the table. On the other three, a
request that has no row is refused whatever the authorizer says:
serving an API means writing its row first (`tests/unit/broker/test_access_table.py`
fails for a served API without one).

Kafka's rules (ControllerApis, KafkaApis) where Kafka has the request; the project's own:
- `Append` (NoOp records through the leader): ALTER on the cluster, a write to the log;
- `WriteSnapshot` (every node writes a snapshot): ALTER on the cluster;
- `BrokerStatus` (a broker's image and partitions): DESCRIBE on the cluster;
- `DescribeQuorum` in the node API's shape: DESCRIBE on the cluster, as Kafka's;
- `RenameTopic`: per resource (`admin_refusal`);
- the KIP-253 APIs (ConsumerGroupPosition, PartitionLeaderEpochs): per resource, READ on
  the group and the topics, DESCRIBE on the topics.
Every Raft RPC, a plain consumer's Fetch (`replica_id` -1) included, needs
CLUSTER_ACTION: the metadata log holds SCRAM credentials and ACLs, and nobody but the
nodes reads it. Whoever claims a node id must also be that node
(`raft/peer_identity.py`).

Pure: a table and a function of (rule, principal, ACLs, settings).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from metadata.authorizer import (
    CLUSTER_NAME,
    AclImage,
    AclOperation,
    AuthorizerSettings,
    ResourceType,
    authorize,
)
from raft.common.errors import ErrorCode
from raft.common.session import KafkaPrincipal, current_session


class Check(enum.Enum):
    GATE = "gate"
    PER_RESOURCE = "per resource"
    OPEN = "open"


Op = AclOperation
Res = ResourceType


@dataclass(frozen=True, slots=True)
class Rule:
    """`operation` on `resource` (a GATE rule: on the cluster), checked as `check` says.
    `also`: further rights a PER_RESOURCE request needs (e.g. READ on the group and on
    the topics of an OffsetCommit), for the table's readers and tests."""

    check: Check
    operation: AclOperation | None = None
    resource: ResourceType | None = None
    also: tuple[tuple[AclOperation, ResourceType], ...] = ()

    def __str__(self) -> str:
        if self.check is Check.OPEN:
            return "open"
        rights = [(self.operation, self.resource), *self.also]
        return " + ".join(f"{op.name} on {res.name}" for op, res in rights
                          if op is not None and res is not None) + f" ({self.check.value})"


def cluster(operation: AclOperation) -> Rule:
    return Rule(Check.GATE, operation, Res.CLUSTER)


def per(operation: AclOperation, resource: ResourceType,
        *also: tuple[AclOperation, ResourceType]) -> Rule:
    return Rule(Check.PER_RESOURCE, operation, resource, tuple(also))


OPEN = Rule(Check.OPEN)

# Raft's RPCs by their frame api (`raft/messages.py` class names)
RAFT_RPCS: dict[str, Rule] = {
    "VoteRequest": cluster(Op.CLUSTER_ACTION),
    "BeginQuorumEpochRequest": cluster(Op.CLUSTER_ACTION),
    "EndQuorumEpochRequest": cluster(Op.CLUSTER_ACTION),
    "FetchRequest": cluster(Op.CLUSTER_ACTION),
    "FetchSnapshotRequest": cluster(Op.CLUSTER_ACTION),
    "UpdateRaftVoterRequest": cluster(Op.CLUSTER_ACTION),
    "AddRaftVoterRequest": cluster(Op.ALTER),
    "RemoveRaftVoterRequest": cluster(Op.ALTER),
    "UpdateKRaftVersionRequest": cluster(Op.ALTER),  # Kafka's UpdateFeatures
    "DescribeQuorumRequest": cluster(Op.DESCRIBE),
}

# The controllers' admin RPCs (`metadata/admin.py`); per resource in `admin_refusal`
ADMIN_RPCS: dict[str, Rule] = {
    "CreateTopics": per(Op.CREATE, Res.TOPIC),  # or CREATE on the cluster
    "DeleteTopics": per(Op.DELETE, Res.TOPIC),
    "DescribeTopics": per(Op.DESCRIBE, Res.TOPIC),
    "CreatePartitions": per(Op.ALTER, Res.TOPIC),
    "RenameTopic": per(Op.ALTER, Res.TOPIC, (Op.CREATE, Res.TOPIC)),
    "IncrementalAlterConfigs": per(Op.ALTER_CONFIGS, Res.TOPIC),
    "RegisterBroker": cluster(Op.CLUSTER_ACTION),
    "BrokerHeartbeat": cluster(Op.CLUSTER_ACTION),
    "AlterPartition": cluster(Op.CLUSTER_ACTION),
    "AlterUserScramCredentials": cluster(Op.ALTER),
    "DescribeUserScramCredentials": cluster(Op.DESCRIBE),
    "CreateAcls": cluster(Op.ALTER),
    "DeleteAcls": cluster(Op.ALTER),
    "DescribeAcls": cluster(Op.DESCRIBE),
    "ElectLeaders": cluster(Op.ALTER),
    "AlterPartitionReassignments": cluster(Op.ALTER),
    "UpdateFeatures": cluster(Op.ALTER),
    # what ApiVersions tells anyone on a Kafka listener (Kafka's describeFeatures reads it)
    "DescribeFeatures": OPEN,
}

# The project's node APIs (the constants live with their handlers, in layers this
# module does not all import: the table names them, a test ties the two)
NODE_APIS: dict[str, Rule] = {
    "Append": cluster(Op.ALTER),
    "WriteSnapshot": cluster(Op.ALTER),
    "BrokerStatus": cluster(Op.DESCRIBE),
}

CONTROLLER: dict[str, Rule] = {**RAFT_RPCS, **ADMIN_RPCS, **NODE_APIS}

STATUS: dict[str, Rule] = {"BrokerStatus": NODE_APIS["BrokerStatus"],
                           "WriteSnapshot": NODE_APIS["WriteSnapshot"]}

# Prometheus scrapes carry counters, no record, key or name of a resource; Kafka's
# metrics reporters are outside its authorizer too
METRICS: dict[str, Rule] = {"GET /metrics": OPEN}

# The Kafka listener, by API key (Kafka's protocol numbers, written out: this module is
# loaded by every node, and the Kafka codec's import costs a controller ~0.5 s at start;
# tests/unit/broker/test_access_table.py ties them to broker/kafka/api_versions.py).
# KafkaApis' checks, made in the handlers.
KAFKA: dict[int, Rule] = {
    18: OPEN,  # ApiVersions
    17: OPEN,  # SaslHandshake
    36: OPEN,  # SaslAuthenticate
    3: per(Op.DESCRIBE, Res.TOPIC),  # Metadata; auto-creating a topic: CREATE, as CreateTopics
    60: cluster(Op.DESCRIBE),  # DescribeCluster
    55: cluster(Op.DESCRIBE),  # DescribeQuorum
    19: per(Op.CREATE, Res.TOPIC),  # CreateTopics; or CREATE on the cluster
    20: per(Op.DELETE, Res.TOPIC),  # DeleteTopics
    21: per(Op.DELETE, Res.TOPIC),  # DeleteRecords
    35: cluster(Op.DESCRIBE),  # DescribeLogDirs
    61: per(Op.READ, Res.TOPIC),  # DescribeProducers
    34: cluster(Op.ALTER),  # AlterReplicaLogDirs
    # ListTransactions: Kafka lists the transactional ids the caller may DESCRIBE; none
    # is ever open here, so every caller gets the same empty list
    66: OPEN,
    27: cluster(Op.CLUSTER_ACTION),  # WriteTxnMarkers
    74: cluster(Op.DESCRIBE_CONFIGS),  # ListClientMetricsResources (KIP-714)
    37: per(Op.ALTER, Res.TOPIC),  # CreatePartitions
    29: cluster(Op.DESCRIBE),  # DescribeAcls
    30: cluster(Op.ALTER),  # CreateAcls
    31: cluster(Op.ALTER),  # DeleteAcls
    32: per(Op.DESCRIBE_CONFIGS, Res.TOPIC),  # DescribeConfigs; a broker's: on the cluster
    33: per(Op.ALTER_CONFIGS, Res.TOPIC),  # AlterConfigs (legacy); a broker's: cluster
    44: per(Op.ALTER_CONFIGS, Res.TOPIC),  # IncrementalAlterConfigs; a broker's: cluster
    0: per(Op.WRITE, Res.TOPIC),  # Produce
    1: per(Op.READ, Res.TOPIC),  # Fetch; a follower's: CLUSTER_ACTION
    2: per(Op.DESCRIBE, Res.TOPIC),  # ListOffsets; a follower's: CLUSTER_ACTION
    23: per(Op.DESCRIBE, Res.TOPIC),  # OffsetForLeaderEpoch; a follower's: CLUSTER_ACTION
    22: per(Op.IDEMPOTENT_WRITE, Res.CLUSTER),  # InitProducerId; or WRITE on a topic
    10: per(Op.DESCRIBE, Res.GROUP),  # FindCoordinator
    8: per(Op.READ, Res.GROUP, (Op.READ, Res.TOPIC)),  # OffsetCommit
    9: per(Op.DESCRIBE, Res.GROUP, (Op.DESCRIBE, Res.TOPIC)),  # OffsetFetch
    11: per(Op.READ, Res.GROUP),  # JoinGroup
    14: per(Op.READ, Res.GROUP),  # SyncGroup
    12: per(Op.READ, Res.GROUP),  # Heartbeat
    13: per(Op.READ, Res.GROUP),  # LeaveGroup
    15: per(Op.DESCRIBE, Res.GROUP),  # DescribeGroups
    16: per(Op.DESCRIBE, Res.GROUP),  # ListGroups; or DESCRIBE on the cluster
    42: per(Op.DELETE, Res.GROUP),  # DeleteGroups
    47: per(Op.DELETE, Res.GROUP, (Op.READ, Res.TOPIC)),  # OffsetDelete
    50: cluster(Op.DESCRIBE),  # DescribeUserScramCredentials
    51: cluster(Op.ALTER),  # AlterUserScramCredentials
    43: cluster(Op.ALTER),  # ElectLeaders
    45: cluster(Op.ALTER),  # AlterPartitionReassignments
    46: cluster(Op.DESCRIBE),  # ListPartitionReassignments
    57: cluster(Op.ALTER),  # UpdateFeatures
    75: per(Op.DESCRIBE, Res.TOPIC),  # DescribeTopicPartitions (KIP-966), as Metadata
    2530: per(Op.READ, Res.GROUP, (Op.READ, Res.TOPIC)),  # ConsumerGroupPosition (KIP-253)
    2531: per(Op.DESCRIBE, Res.TOPIC),  # PartitionLeaderEpochs (KIP-253)
}

@dataclass(frozen=True, slots=True)
class Refusal:
    error_code: ErrorCode
    message: str


def gate_refusal(rules: Mapping[str, Rule], api: str, acls: AclImage,
                 principal: KafkaPrincipal, host: str, settings: AuthorizerSettings
                 ) -> Refusal | None:
    """Why the gate refuses `api` from this caller, or None to let it through (to the
    handler's own checks for a PER_RESOURCE row). No row: refused, authorizer or not."""
    rule = rules.get(api)
    if rule is None:
        return Refusal(ErrorCode.INVALID_REQUEST, f"{api!r:.60} is not served here")
    if rule.check is not Check.GATE or not settings.enabled:
        return None
    assert rule.operation is not None
    if authorize(acls, principal, host, rule.operation, Res.CLUSTER, CLUSTER_NAME, settings):
        return None
    return Refusal(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                   f"{principal} is not allowed {rule.operation.name} on the cluster "
                   f"({api!r:.60} needs it)")


def session_gate(rules: Mapping[str, Rule], acls: Callable[[], AclImage],
                 settings: AuthorizerSettings
                 ) -> Callable[[str], tuple[ErrorCode, str] | None]:
    """`gate_refusal` for the caller of the current connection (`current_session`), as
    `raft.rpc_host.RpcHost.set_request_gate` wants it; `acls`: the committed image's."""
    def gate(api: str) -> tuple[ErrorCode, str] | None:
        session = current_session()
        refusal = gate_refusal(rules, api, acls(), session.principal, session.client_host,
                               settings)
        return None if refusal is None else (refusal.error_code, refusal.message)
    return gate
