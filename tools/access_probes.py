"""One request for each row of the controller listener that the gate decides
(`broker/access_table.py`, `Check.GATE`), sent over a real connection: for the
authorization test and for `kraft chaos --secure`'s attacker.

Each `Probe` has two bodies:
- `attack`: what an intruder would send, the harm the row must stop: a Vote or a
  BeginQuorumEpoch in a far higher epoch for a real voter, a Fetch of the whole log from
  offset 0 (SCRAM credentials included), RemoveRaftVoter of a real voter, kraft.version
  1, 20,000 NoOps, a snapshot on every node, a broker registered as a voter, an ACL
  granting everyone everything, every ACL deleted, the admin's SCRAM credential deleted,
  metadata.version downgraded;
- `harmless`: the same api asking for nothing that changes the cluster (a stale epoch,
  an unknown voter, an impossible version), claiming no node id, so that a caller with
  exactly the row's right is served by the core or the handler, which answers with an
  error of its own or none.
`send` returns the answer's error code, or `CLOSED` when the node closed the connection
instead (as it does to a request claiming a node id the certificate does not bind).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from metadata import admin
from metadata.authorizer import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from raft import messages
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from raft.types import SnapshotId
from tools.quorum_client import ClusterError, request

CLOSED = "closed"
Op = AclOperation
ATTACK_EPOCH = 1 << 30


@dataclass(frozen=True, slots=True)
class Probe:
    """`right`: the operation on the cluster the request must need, written here apart
    from the table (as Kafka's AuthorizerIntegrationTest keeps its own), so that a row
    lost from the table fails the authorization test instead of dropping out of it."""

    api: str
    right: AclOperation
    attack: dict[str, Any]
    harmless: dict[str, Any]


def _admin(request: admin.AdminRequest) -> dict[str, Any]:
    return admin.encode_body(request)


def _raft(message: Any) -> dict[str, Any]:
    return messages.encode_message(message)[1]


def probes(cluster_id: str, voter_id: int) -> list[Probe]:
    """A probe per GATE row of the controller listener; `voter_id` is the real voter the
    attacks aim at (a random directory id: the gate refuses before anyone reads it)."""
    directory = Uuid.random()
    c = cluster_id
    return [
        Probe("VoteRequest", Op.CLUSTER_ACTION,
              _raft(messages.VoteRequest(cluster_id=c, last_offset_epoch=0, last_offset=0,
                                         candidate_epoch=ATTACK_EPOCH, candidate_id=voter_id)),
              _raft(messages.VoteRequest(cluster_id=c, last_offset_epoch=0, last_offset=0,
                                         candidate_epoch=0, candidate_id=-1))),
        Probe("BeginQuorumEpochRequest", Op.CLUSTER_ACTION,
              _raft(messages.BeginQuorumEpochRequest(cluster_id=c, leader_id=voter_id,
                                                     leader_epoch=ATTACK_EPOCH)),
              _raft(messages.BeginQuorumEpochRequest(cluster_id=c, leader_id=-1,
                                                     leader_epoch=0))),
        Probe("EndQuorumEpochRequest", Op.CLUSTER_ACTION,
              _raft(messages.EndQuorumEpochRequest(cluster_id=c, leader_id=voter_id,
                                                   leader_epoch=ATTACK_EPOCH)),
              _raft(messages.EndQuorumEpochRequest(cluster_id=c, leader_id=-1,
                                                   leader_epoch=0))),
        Probe("FetchRequest", Op.CLUSTER_ACTION,
              _raft(messages.FetchRequest(cluster_id=c, replica_id=-1, current_leader_epoch=-1,
                                          fetch_offset=0, last_fetched_epoch=0)),
              _raft(messages.FetchRequest(cluster_id=c, replica_id=-1, current_leader_epoch=-1,
                                          fetch_offset=0, last_fetched_epoch=0,
                                          max_bytes=1))),
        Probe("FetchSnapshotRequest", Op.CLUSTER_ACTION,
              _raft(messages.FetchSnapshotRequest(
                  cluster_id=c, replica_id=-1, current_leader_epoch=-1,
                  snapshot_id=SnapshotId(0, 0), position=0)),
              _raft(messages.FetchSnapshotRequest(
                  cluster_id=c, replica_id=-1, current_leader_epoch=-1,
                  snapshot_id=SnapshotId(0, 0), position=0))),
        Probe("UpdateRaftVoterRequest", Op.CLUSTER_ACTION,
              _raft(messages.UpdateRaftVoterRequest(
                  cluster_id=c, current_leader_epoch=-1, voter_id=voter_id,
                  voter_directory_id=directory)),
              _raft(messages.UpdateRaftVoterRequest(
                  cluster_id=c, current_leader_epoch=-1, voter_id=-1,
                  voter_directory_id=directory))),
        Probe("AddRaftVoterRequest", Op.ALTER,
              _raft(messages.AddRaftVoterRequest(cluster_id=c, voter_id=999,
                                                 voter_directory_id=Uuid.random())),
              _raft(messages.AddRaftVoterRequest(cluster_id=c, voter_id=voter_id,
                                                 voter_directory_id=directory))),
        Probe("RemoveRaftVoterRequest", Op.ALTER,
              _raft(messages.RemoveRaftVoterRequest(cluster_id=c, voter_id=voter_id,
                                                    voter_directory_id=directory)),
              _raft(messages.RemoveRaftVoterRequest(cluster_id=c, voter_id=999,
                                                    voter_directory_id=Uuid.random()))),
        Probe("UpdateKRaftVersionRequest", Op.ALTER,
              _raft(messages.UpdateKRaftVersionRequest(cluster_id=c, kraft_version=1)),
              _raft(messages.UpdateKRaftVersionRequest(cluster_id=c, kraft_version=7))),
        Probe("DescribeQuorumRequest", Op.DESCRIBE, {}, {}),
        Probe("Append", Op.ALTER, {"count": 20_000, "batch": 100}, {"count": 1}),
        Probe("WriteSnapshot", Op.ALTER, {}, {}),
        Probe("BrokerStatus", Op.DESCRIBE,
              {"wait_for_applied_offset": 1 << 62, "max_wait_ms": 10_000}, {}),
        Probe("RegisterBroker", Op.CLUSTER_ACTION, _admin(admin.RegisterBrokerRequest(
            broker_id=voter_id, incarnation_id=Uuid.random(),
            endpoints=("PLAINTEXT://203.0.113.1:9092",))), {}),
        Probe("BrokerHeartbeat", Op.CLUSTER_ACTION, _admin(admin.BrokerHeartbeatRequest(
            broker_id=voter_id, broker_epoch=0, current_metadata_offset=0)), {}),
        Probe("AlterPartition", Op.CLUSTER_ACTION, _admin(admin.AlterPartitionRequest(
            broker_id=voter_id, broker_epoch=0, topics=())), {}),
        Probe("AlterUserScramCredentials", Op.ALTER, _admin(
            admin.AlterUserScramCredentialsRequest(deletions=(
                admin.ScramCredentialDeletion(name="admin", mechanism="SCRAM-SHA-512"),))),
              {}),
        Probe("DescribeUserScramCredentials", Op.DESCRIBE,
              _admin(admin.DescribeUserScramCredentialsRequest()), {"users": ["nobody"]}),
        Probe("CreateAcls", Op.ALTER, _admin(admin.CreateAclsRequest(creations=(AclBinding(
            resource_type=ResourceType.CLUSTER, resource_name=CLUSTER_NAME,
            pattern_type=PatternType.LITERAL, principal="User:*", host="*",
            operation=AclOperation.ALL, permission_type=AclPermissionType.ALLOW),))), {}),
        Probe("DeleteAcls", Op.ALTER, _admin(admin.DeleteAclsRequest(
            filters=(AclFilter(),))), {}),
        Probe("DescribeAcls", Op.DESCRIBE, _admin(admin.DescribeAclsRequest(
            filter=AclFilter())), {}),
        Probe("ElectLeaders", Op.ALTER, _admin(admin.ElectLeadersRequest(election_type=1)),
              _admin(admin.ElectLeadersRequest(topic_partitions=()))),
        Probe("AlterPartitionReassignments", Op.ALTER,
              _admin(admin.AlterPartitionReassignmentsRequest(topics=(admin.ReassignableTopic(
                  name="__probe", partitions=(admin.ReassignablePartition(
                      partition_index=0),)),))),
              _admin(admin.AlterPartitionReassignmentsRequest())),
        Probe("UpdateFeatures", Op.ALTER, _admin(admin.UpdateFeaturesRequest(
            feature_updates=(admin.FeatureUpdate(feature="metadata.version",
                                                 max_version_level=1, upgrade_type=3),))),
              _admin(admin.UpdateFeaturesRequest(feature_updates=(admin.FeatureUpdate(
                  feature="metadata.version", max_version_level=99),)))),
    ]


def send(address: str, api: str, body: dict[str, Any], *, cluster_id: str,
         ssl_context: ssl.SSLContext | None, timeout_s: float = 5.0) -> int | str:
    """The error code of the answer to one request, or CLOSED."""
    try:
        answer = request(address, api, body, cluster_id=cluster_id, timeout_s=timeout_s,
                         ssl_context=ssl_context)
    except ClusterError:
        return CLOSED
    code = answer.get("error_code", answer.get("top_level_error", 0)) \
        if isinstance(answer, dict) else 0
    return int(code) if isinstance(code, int) else CLOSED


def is_refused(code: int | str) -> bool:
    return code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
