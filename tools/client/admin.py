"""Admin requests over the Kafka protocol to a broker's Kafka listener, for `kraft topics
--bootstrap-server` and `kraft quorum describe --bootstrap-server` (as Kafka's tools:
--bootstrap-server names a broker, --bootstrap-controller controllers).

`BrokerAdminClient.call` takes the same `metadata.admin` requests as the controllers'
admin client (`tools.admin_client.AdminClient`) and returns the same responses, so
`kraft topics` prints the same whichever it talks to:

- DescribeTopics -> Metadata (v10+: topic IDs; by name or by ID), plus
  PartitionLeaderEpochs (`raft.common.kafka.ordered_schemas`: the KIP-253 counts and
  epoch maps) when the broker serves it;
- CreateTopics -> CreateTopics, then Metadata by the new ID for its assignment (the
  broker answers once its own image holds the topic: `broker.kafka.admin.admin_api`);
- DeleteTopics -> DeleteTopics (by topic ID from v6 on);
- CreatePartitions -> Metadata, CreatePartitions, Metadata (the new partitions'
  replicas);
- ElectLeaders -> ElectLeaders (v1+: PREFERRED or UNCLEAN; `kraft leader-election`);
- AlterPartitionReassignments -> AlterPartitionReassignments, and
  `list_reassignments` -> ListPartitionReassignments (`kraft reassign-partitions`);
- UpdateFeatures -> UpdateFeatures (API 57), and DescribeFeatures -> ApiVersions v3's
  supported and finalized features, as Kafka's `Admin.describeFeatures`;
- RenameTopic: Kafka's protocol has none (refused before anything is sent).

Versions are negotiated with ApiVersions: the highest both sides speak. The translation
from Kafka's responses (`*_from_*` functions) is pure.
"""

from __future__ import annotations

import ssl
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import trio
from kio.index import load_request_schema

from broker.kafka.sasl.sasl_settings import SaslClientSettings
from metadata.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeFeaturesRequest,
    DescribeFeaturesResponse,
    DescribeTopicsRequest,
    DescribeTopicsResponse,
    ElectionPartitionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    FeatureLevelRange,
    PartitionDescription,
    ReassignablePartitionResult,
    ReassignableTopicResult,
    ReplicaElectionResult,
    TopicDescription,
    UpdatableFeatureResult,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from raft.common.kafka.codec import build
from raft.common.kafka.ordered_schemas import (
    PARTITION_LEADER_EPOCHS,
    PROJECT_CLIENT_SOFTWARE,
    PartitionLeaderEpochsRequest,
)
from raft.common.kafka.wire_client import CLOSED_BY_PEER
from raft.common.uuid import ZERO_UUID, Uuid
from tools.client import errors
from tools.client.connection import METADATA, ClientError, ConnectionLost, KafkaClient

API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS = 18, 19, 20
CREATE_PARTITIONS, DESCRIBE_QUORUM, ELECT_LEADERS = 37, 55, 43
ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 45, 46
UPDATE_FEATURES = 57
WRITE_APIS = frozenset({CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, ELECT_LEADERS,
                        ALTER_REASSIGNMENTS, UPDATE_FEATURES})
API_NAMES = {METADATA: "Metadata", CREATE_TOPICS: "CreateTopics",
             DELETE_TOPICS: "DeleteTopics", CREATE_PARTITIONS: "CreatePartitions",
             DESCRIBE_QUORUM: "DescribeQuorum", ELECT_LEADERS: "ElectLeaders",
             PARTITION_LEADER_EPOCHS: "PartitionLeaderEpochs",
             ALTER_REASSIGNMENTS: "AlterPartitionReassignments",
             LIST_REASSIGNMENTS: "ListPartitionReassignments",
             UPDATE_FEATURES: "UpdateFeatures"}
# the versions this client speaks (kio's schemas; Metadata v10+ carries topic IDs;
# ElectLeaders v1+ the election type)
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    METADATA: (10, 12), CREATE_TOPICS: (2, 7), DELETE_TOPICS: (1, 6),
    CREATE_PARTITIONS: (0, 3), DESCRIBE_QUORUM: (0, 2), ELECT_LEADERS: (1, 2),
    PARTITION_LEADER_EPOCHS: (0, 0), ALTER_REASSIGNMENTS: (0, 0), LIST_REASSIGNMENTS: (0, 0),
    UPDATE_FEATURES: (1, 1)}
DELETE_BY_ID_VERSION = 6
API_VERSIONS_VERSION = 3
RETRY_BACKOFF_S = 0.1
UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID = 3, 100
METADATA_TOPIC = "__cluster_metadata"
CLIENT_ID = "kraft-admin"
Reassignment = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]  # replicas, +, -


class UnsupportedByBroker(ClientError):
    """The broker does not serve an API (or a version) the request needs."""


class NotAKafkaListener(ClientError):
    """The address closed the connection on ApiVersions."""


def to_kafka_uuid(topic_id: Uuid) -> uuid.UUID:
    return uuid.UUID(bytes=topic_id.to_bytes())


def from_kafka_uuid(value: uuid.UUID | None) -> Uuid:
    return ZERO_UUID if value is None else Uuid.from_bytes(value.bytes)


def pick_version(api_key: int, broker: dict[int, tuple[int, int]]) -> int:
    """The highest version of `api_key` both this client and the broker speak (raises
    UnsupportedByBroker)."""
    low, high = CLIENT_VERSIONS[api_key]
    theirs = broker.get(api_key)
    name = API_NAMES.get(api_key, str(api_key))
    if theirs is None:
        raise UnsupportedByBroker(f"the broker does not serve {name} (API key {api_key})")
    common = min(high, theirs[1])
    if common < max(low, theirs[0]):
        raise UnsupportedByBroker(f"the broker serves {name} v{theirs[0]}-v{theirs[1]}; "
                                  f"this client speaks v{low}-v{high}")
    return common


class KafkaAdmin:
    """Async admin calls to the first bootstrap broker that answers (trio)."""

    def __init__(self, client: KafkaClient, *, deadline: float) -> None:
        self.client = client
        self.deadline = deadline  # time.monotonic()
        self.versions: dict[int, tuple[int, int]] | None = None
        self.resent_after_loss = False  # a request went again after a lost connection

    def remaining_s(self) -> float:
        return max(self.deadline - time.monotonic(), 0.0)

    async def _retrying(self, attempt: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """`attempt()`, again after a short pause while no broker can be reached, until
        the deadline (a broker restarting); addresses where nothing listens already
        failed in `negotiate`."""
        while True:
            try:
                return await attempt()
            except ConnectionLost as exc:
                if self.remaining_s() <= RETRY_BACKOFF_S:
                    raise ConnectionLost(str(exc)) from None
            await trio.sleep(RETRY_BACKOFF_S)

    async def negotiate(self) -> dict[int, tuple[int, int]]:
        """The broker's API version ranges (ApiVersions, asked once)."""
        if self.versions is None:
            self.versions = await self._retrying(self._api_versions)
        return self.versions

    async def send(self, api_key: int, values: dict[str, Any], *,
                   version: int | None = None) -> Any:
        """The response to a request of `api_key` built from `values` at `version`, by
        default the highest both sides speak."""
        versions = await self.negotiate()
        chosen = pick_version(api_key, versions) if version is None else version
        body = build(self._schema(api_key, chosen), values)

        sent = False

        async def attempt() -> Any:
            nonlocal sent
            # a write lost on its way back may have been applied; a read changed nothing
            self.resent_after_loss |= sent and api_key in WRITE_APIS
            sent = True
            return (await self.client.call_any(body))[1]
        return await self._retrying(attempt)

    @staticmethod
    def _schema(api_key: int, version: int) -> type[Any]:
        if api_key == PARTITION_LEADER_EPOCHS:
            return PartitionLeaderEpochsRequest
        return load_request_schema(api_key, version)

    async def _api_versions(self) -> dict[int, tuple[int, int]]:
        """Every Kafka listener answers ApiVersions (KIP-511, whatever the version): an
        address that only closes the connection is something else, most likely a
        controller named by a script written when --bootstrap-server meant controllers;
        that fails at once, with the hint; so does a list of addresses that all refuse
        the connection (no broker runs there)."""
        body = build(load_request_schema(API_VERSIONS, API_VERSIONS_VERSION), {
            "client_software_name": PROJECT_CLIENT_SOFTWARE, "client_software_version": "1"})
        failures: list[str] = []
        refused = True
        for address in dict.fromkeys(self.client.bootstrap):
            try:
                response = await self.client.call(address, body)
            except ConnectionLost as exc:
                failures.append(str(exc))
                refused = refused and exc.refused
                continue
            if int(response.error_code) != 0:
                raise ClientError(f"{address}: ApiVersions failed: "
                                  f"{errors.name(int(response.error_code))}")
            return {int(k.api_key): (int(k.min_version), int(k.max_version))
                    for k in response.api_keys}
        if failures and all(CLOSED_BY_PEER in f for f in failures):
            tls_hint = "" if self.client.ssl_context is not None else (
                "; an SSL listener closes a plaintext client too: give --command-config FILE "
                "with security.protocol=SSL")
            raise NotAKafkaListener("; ".join(failures) + ": not a broker's Kafka listener "
                                    "(--bootstrap-server names brokers; controllers take "
                                    f"--bootstrap-controller){tls_hint}")
        if failures and refused:
            raise ClientError("every broker refused the connection: "
                              f"{', '.join(dict.fromkeys(self.client.bootstrap))} "
                              "(is the cluster running?)")
        raise ConnectionLost("no broker answered: " + "; ".join(failures))

    def serves(self, api_key: int) -> bool:
        return self.versions is not None and api_key in self.versions

    def timeout_ms(self) -> int:
        return max(int(self.remaining_s() * 1000), 1000)

    # --- topics -------------------------------------------------------------------

    async def metadata(self, topics: list[dict[str, Any]] | None) -> Any:
        """Metadata for `topics` ([{name, topic_id}]), every topic when None."""
        return await self.send(METADATA, {
            "topics": topics, "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})

    async def leader_epochs(self, topic_ids: list[uuid.UUID]) -> Any | None:
        """PartitionLeaderEpochs for the topics (None: the broker does not serve it, as
        Kafka's brokers do not, or no topic to ask about)."""
        if not topic_ids or not self.serves(PARTITION_LEADER_EPOCHS):
            return None
        return await self.send(PARTITION_LEADER_EPOCHS, {
            "topics": [{"topic_id": t, "partitions": []} for t in topic_ids]}, version=0)

    async def describe_topics(self, request: DescribeTopicsRequest) -> DescribeTopicsResponse:
        if request.topic_ids is not None:
            wanted: list[dict[str, Any]] | None = [
                {"name": None, "topic_id": to_kafka_uuid(t)} for t in request.topic_ids]
        elif request.names is not None:
            wanted = [{"name": n, "topic_id": None} for n in request.names]
        else:
            wanted = None
        metadata = await self.metadata(wanted)
        found = [t.topic_id for t in metadata.topics if int(t.error_code) == 0]
        epochs = await self.leader_epochs(found)
        return describe_from_metadata(metadata, epochs)

    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        response = await self.send(CREATE_TOPICS, {
            "topics": [{"name": t.name, "num_partitions": t.num_partitions,
                        "replication_factor": t.replication_factor,
                        "assignments": [{"partition_index": a.partition_index,
                                         "broker_ids": list(a.broker_ids)}
                                        for a in t.assignments or ()],
                        "configs": [{"name": c.name, "value": c.value}
                                    for c in t.configs or ()]}
                       for t in request.topics],
            "timeout": self.timeout_ms(), "validate_only": request.validate_only})
        created = [r.name for r in response.topics if int(r.error_code) == 0]
        metadata = await self.metadata([{"name": n, "topic_id": None} for n in created]) \
            if created and not request.validate_only else None
        return create_from_responses(response, metadata)

    async def delete_topics(self, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
        by_id = any(t.topic_id != ZERO_UUID for t in request.topics)
        version = pick_version(DELETE_TOPICS, await self.negotiate())
        if by_id and version < DELETE_BY_ID_VERSION:
            raise UnsupportedByBroker(
                f"the broker's DeleteTopics (up to v{version}) cannot delete by topic ID "
                f"(v{DELETE_BY_ID_VERSION} can)")
        values: dict[str, Any] = {"timeout": self.timeout_ms()}
        if version >= DELETE_BY_ID_VERSION:
            values["topics"] = [{"name": t.name if t.topic_id == ZERO_UUID else None,
                                 "topic_id": to_kafka_uuid(t.topic_id)}
                                for t in request.topics]
        else:
            values["topic_names"] = [t.name for t in request.topics]
        response = await self.send(DELETE_TOPICS, values, version=version)
        return delete_from_response(response)

    async def create_partitions(self, request: CreatePartitionsRequest
                                ) -> CreatePartitionsResponse:
        names = [{"name": t.name, "topic_id": None} for t in request.topics]
        before = await self.metadata(names)
        response = await self.send(CREATE_PARTITIONS, {
            "topics": [{"name": t.name, "count": t.count,
                        "assignments": None if t.assignments is None else
                        [{"broker_ids": list(a)} for a in t.assignments]}
                       for t in request.topics],
            "timeout": self.timeout_ms(), "validate_only": request.validate_only})
        after = await self.metadata(names)
        return create_partitions_from_responses(response, before, after)

    async def elect_leaders(self, request: ElectLeadersRequest) -> ElectLeadersResponse:
        response = await self.send(ELECT_LEADERS, {
            "election_type": request.election_type, "timeout": self.timeout_ms(),
            "topic_partitions": None if request.topic_partitions is None else [
                {"topic": t.topic, "partitions": list(t.partitions)}
                for t in request.topic_partitions]})
        return elect_from_response(response)

    async def alter_reassignments(self, request: AlterPartitionReassignmentsRequest
                                  ) -> AlterPartitionReassignmentsResponse:
        response = await self.send(ALTER_REASSIGNMENTS, {
            "timeout": self.timeout_ms(), "topics": [
                {"name": t.name, "partitions": [
                    {"partition_index": p.partition_index,
                     "replicas": None if p.replicas is None else list(p.replicas)}
                    for p in t.partitions]} for t in request.topics]})
        code = int(response.error_code)
        if code != 0:
            raise KafkaRequestFailed("AlterPartitionReassignments", code,
                                     response.error_message)
        return AlterPartitionReassignmentsResponse(responses=tuple(ReassignableTopicResult(
            name=t.name, partitions=tuple(ReassignablePartitionResult(
                partition_index=int(p.partition_index), error_code=int(p.error_code),
                error_message=p.error_message) for p in t.partitions))
            for t in response.responses))

    async def list_reassignments(self) -> dict[tuple[str, int], Reassignment]:
        """(topic, partition) -> (replicas, adding, removing) of every ongoing one."""
        response = await self.send(LIST_REASSIGNMENTS, {"timeout": self.timeout_ms(),
                                                        "topics": None})
        code = int(response.error_code)
        if code != 0:
            raise KafkaRequestFailed("ListPartitionReassignments", code,
                                     response.error_message)
        return {(t.name, int(p.partition_index)): (
            tuple(map(int, p.replicas)), tuple(map(int, p.adding_replicas)),
            tuple(map(int, p.removing_replicas))) for t in response.topics for p in t.partitions}

    # --- features -----------------------------------------------------------------

    async def update_features(self, request: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
        response = await self.send(UPDATE_FEATURES, {
            "timeout": self.timeout_ms(), "validate_only": request.validate_only,
            "feature_updates": [{"feature": u.feature, "max_version_level": u.max_version_level,
                                 "upgrade_type": u.upgrade_type}
                                for u in request.feature_updates]})
        return UpdateFeaturesResponse(
            error_code=int(response.error_code), error_message=response.error_message,
            results=tuple(UpdatableFeatureResult(
                feature=r.feature, error_code=int(r.error_code), error_message=r.error_message)
                for r in response.results))

    async def describe_features(self) -> DescribeFeaturesResponse:
        response = await self.send(API_VERSIONS, {
            "client_software_name": PROJECT_CLIENT_SOFTWARE, "client_software_version": "1"},
            version=API_VERSIONS_VERSION)
        return DescribeFeaturesResponse(
            supported=tuple(FeatureLevelRange(name=f.name, min_version=int(f.min_version),
                                              max_version=int(f.max_version))
                            for f in response.supported_features),
            finalized=tuple(FeatureLevelRange(name=f.name,
                                              min_version=int(f.min_version_level),
                                              max_version=int(f.max_version_level))
                            for f in response.finalized_features),
            epoch=int(response.finalized_features_epoch))

    # --- the quorum ---------------------------------------------------------------

    async def describe_quorum(self) -> tuple[dict[str, Any], dict[int, list[str]]]:
        """(state, voter endpoints) as `tools.commands.quorum` prints them; the cluster
        ID comes from Metadata (Kafka's tool asks DescribeCluster)."""
        response = await self.send(DESCRIBE_QUORUM, {"topics": [{
            "topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]})
        metadata = await self.metadata([])
        return quorum_from_response(response, metadata.cluster_id or ""), \
            endpoints_from_response(response)


# --- pure translation ----------------------------------------------------------------


class KafkaRequestFailed(ClientError):
    """A top-level or partition-level error in a response: (code, message)."""

    def __init__(self, api: str, code: int, message: str | None) -> None:
        super().__init__(f"{api} failed: {errors.name(code)} ({code})" +
                         (f": {message}" if message else ""))
        self.api, self.code, self.message = api, code, message


def _sorted_partitions(metadata_topic: Any) -> list[Any]:
    return sorted(metadata_topic.partitions, key=lambda p: int(p.partition_index))


def _epoch_map(entries: Any) -> tuple[tuple[int, int], ...] | None:
    """PartitionLeaderEpochs entries as `metadata.admin`'s epoch map; none -> None, as the
    controller describes a partition without one."""
    pairs = tuple((int(e.partition), int(e.leader_epoch)) for e in entries or ())
    return pairs or None


def topic_from_metadata(metadata_topic: Any, epochs_topic: Any | None) -> TopicDescription:
    """One Metadata v10+ topic (and its PartitionLeaderEpochs entry, if any) as the
    controller's DescribeTopics describes it; an unknown topic gets the controller's
    message (metadata/controller.py, describe_topics)."""
    code = int(metadata_topic.error_code)
    topic_id = from_kafka_uuid(metadata_topic.topic_id)
    if code == UNKNOWN_TOPIC_ID:
        return TopicDescription(name=None, topic_id=topic_id, error_code=code,
                                error_message=f"no topic with id {topic_id}")
    if code == UNKNOWN_TOPIC_OR_PARTITION:
        return TopicDescription(name=metadata_topic.name, topic_id=ZERO_UUID, error_code=code,
                                error_message=f"no topic named {metadata_topic.name!r}")
    if code != 0:
        return TopicDescription(name=metadata_topic.name, topic_id=topic_id, error_code=code)
    epochs = epochs_topic if epochs_topic is not None and \
        int(epochs_topic.error_code) == 0 else None
    maps = {int(p.partition): p for p in epochs.partitions} if epochs is not None else {}
    partitions = []
    for p in _sorted_partitions(metadata_topic):
        entry = maps.get(int(p.partition_index))
        partitions.append(PartitionDescription(
            partition=int(p.partition_index), leader=int(p.leader_id),
            leader_epoch=int(p.leader_epoch),
            replicas=tuple(int(r) for r in p.replica_nodes),
            isr=tuple(int(r) for r in p.isr_nodes),
            leader_epoch_after_creation=None if entry is None else
            _epoch_map(entry.after_creation),
            leader_epoch_before_deletion=None if entry is None else
            _epoch_map(entry.before_deletion)))
    return TopicDescription(
        name=metadata_topic.name, topic_id=topic_id, partitions=tuple(partitions),
        initial_partition_count=None if epochs is None else int(epochs.initial_partition_count),
        undeleted_partition_count=None if epochs is None
        else int(epochs.undeleted_partition_count))


def describe_from_metadata(metadata: Any, epochs: Any | None) -> DescribeTopicsResponse:
    """A Metadata response (and PartitionLeaderEpochs for its topics, None without) as
    the controller's DescribeTopicsResponse, in the order Metadata lists them."""
    by_id = {t.topic_id: t for t in epochs.topics} if epochs is not None else {}
    return DescribeTopicsResponse(topics=tuple(
        topic_from_metadata(t, by_id.get(t.topic_id)) for t in metadata.topics))


def _assignment(metadata_topic: Any, first: int = 0) -> tuple[tuple[int, ...], ...]:
    """Replicas of each partition from `first` on, in partition order, leader first."""
    return tuple(tuple(int(r) for r in p.replica_nodes)
                 for p in _sorted_partitions(metadata_topic)
                 if int(p.partition_index) >= first)


def create_from_responses(response: Any, metadata: Any | None) -> CreateTopicsResponse:
    """CreateTopics results, with each created topic's ID and assignment from Metadata."""
    described = {t.name: t for t in metadata.topics if int(t.error_code) == 0} \
        if metadata is not None else {}
    results = []
    for r in response.topics:
        code = int(r.error_code)
        topic = described.get(r.name)
        topic_id = getattr(r, "topic_id", None)
        if topic is not None and (topic_id is None or topic_id.int == 0):
            topic_id = topic.topic_id  # CreateTopics before v7 carries no ID
        results.append(CreatableTopicResult(
            name=r.name, topic_id=from_kafka_uuid(topic_id), error_code=code,
            error_message=r.error_message,
            num_partitions=int(getattr(r, "num_partitions", -1)),
            replication_factor=int(getattr(r, "replication_factor", -1)),
            assignment=_assignment(topic) if topic is not None and code == 0 else ()))
    return CreateTopicsResponse(topics=tuple(results))


def delete_from_response(response: Any) -> DeleteTopicsResponse:
    return DeleteTopicsResponse(responses=tuple(
        DeletableTopicResult(name=r.name, topic_id=from_kafka_uuid(getattr(r, "topic_id", None)),
                             error_code=int(r.error_code),
                             error_message=getattr(r, "error_message", None))
        for r in response.responses))


def create_partitions_from_responses(response: Any, before: Any, after: Any
                                     ) -> CreatePartitionsResponse:
    """CreatePartitions results with the replicas of the partitions added (none for a
    shrink), from Metadata before and after."""
    counts = {t.name: len(t.partitions) for t in before.topics if int(t.error_code) == 0}
    now = {t.name: t for t in after.topics if int(t.error_code) == 0}
    results = []
    for r in response.results:
        code = int(r.error_code)
        topic = now.get(r.name)
        grown = code == 0 and topic is not None and r.name in counts
        results.append(CreatePartitionsTopicResult(
            name=r.name, topic_id=from_kafka_uuid(topic.topic_id) if topic else ZERO_UUID,
            error_code=code, error_message=r.error_message,
            assignment=_assignment(topic, counts[r.name]) if grown else ()))
    return CreatePartitionsResponse(results=tuple(results))


def elect_from_response(response: Any) -> ElectLeadersResponse:
    """An ElectLeaders response as the controller's (a top-level error included)."""
    return ElectLeadersResponse(
        error_code=int(response.error_code),
        replica_election_results=tuple(ReplicaElectionResult(
            topic=t.topic, partition_result=tuple(ElectionPartitionResult(
                partition_id=int(p.partition_id), error_code=int(p.error_code),
                error_message=p.error_message) for p in t.partition_result))
            for t in response.replica_election_results))


def _replica(state: Any) -> dict[str, int]:
    return {"replica_id": int(state.replica_id), "log_end_offset": int(state.log_end_offset),
            "last_fetch_timestamp": int(getattr(state, "last_fetch_timestamp", -1)),
            "last_caught_up_timestamp": int(getattr(state, "last_caught_up_timestamp", -1))}


def quorum_from_response(response: Any, cluster_id: str) -> dict[str, Any]:
    """A DescribeQuorum response as the state dict `tools.cluster.describe_quorum` gives
    (raises KafkaRequestFailed on an error)."""
    code = int(response.error_code)
    if code != 0:
        raise KafkaRequestFailed("DescribeQuorum", code, getattr(response, "error_message", None))
    partitions = [p for t in response.topics if t.topic_name == METADATA_TOPIC
                  for p in t.partitions if int(p.partition_index) == 0]
    if not partitions:
        raise KafkaRequestFailed("DescribeQuorum", -1, "no answer for __cluster_metadata-0")
    (partition,) = partitions[:1]
    code = int(partition.error_code)
    if code != 0:
        raise KafkaRequestFailed("DescribeQuorum", code,
                                 getattr(partition, "error_message", None))
    return {"leader_id": int(partition.leader_id), "leader_epoch": int(partition.leader_epoch),
            "high_watermark": int(partition.high_watermark), "cluster_id": cluster_id,
            "voters": [_replica(v) for v in partition.current_voters],
            "observers": [_replica(o) for o in partition.observers]}


def endpoints_from_response(response: Any) -> dict[int, list[str]]:
    """Voter id -> ["LISTENER://HOST:PORT", ...] from DescribeQuorum v2's nodes (none
    before v2)."""
    return {int(n.node_id): [f"{lst.name}://{lst.host}:{int(lst.port)}" for lst in n.listeners]
            for n in getattr(response, "nodes", ())}


# --- the blocking facade -------------------------------------------------------------


class BrokerAdminClient:
    """Blocking: `call(request)` for `metadata.admin` requests, answered through a broker
    (each call one trio run with its own connections, over TLS with `ssl_context` and
    logged in with `sasl` when given; the negotiated versions are kept)."""

    def __init__(self, addresses: Sequence[str], *, ssl_context: ssl.SSLContext | None,
                 sasl: SaslClientSettings | None, timeout_s: float = 30.0) -> None:
        if not addresses:
            raise ClientError("no broker address given")
        self.addresses = list(addresses)
        self.ssl_context, self.sasl = ssl_context, sasl
        self.deadline = time.monotonic() + timeout_s
        self.versions: dict[int, tuple[int, int]] | None = None
        # the last call's answer came after an attempt of it that may have been applied
        self.maybe_applied_before = False

    def run(self, work: Callable[[KafkaAdmin], Coroutine[Any, Any, Any]]) -> Any:
        async def main() -> Any:
            client = KafkaClient(self.addresses, ssl_context=self.ssl_context,
                                 sasl=self.sasl, client_id=CLIENT_ID,
                                 timeout_s=max(self.deadline - time.monotonic(), 1.0))
            admin = KafkaAdmin(client, deadline=self.deadline)
            admin.versions = self.versions
            try:
                return await work(admin)
            finally:
                self.versions = admin.versions
                self.maybe_applied_before = admin.resent_after_loss
                await client.aclose()
        return trio.run(main)

    def call(self, request: Any) -> Any:
        if isinstance(request, DescribeTopicsRequest):
            return self.run(lambda admin: admin.describe_topics(request))
        if isinstance(request, CreateTopicsRequest):
            return self.run(lambda admin: admin.create_topics(request))
        if isinstance(request, DeleteTopicsRequest):
            return self.run(lambda admin: admin.delete_topics(request))
        if isinstance(request, CreatePartitionsRequest):
            return self.run(lambda admin: admin.create_partitions(request))
        if isinstance(request, ElectLeadersRequest):
            return self.run(lambda admin: admin.elect_leaders(request))
        if isinstance(request, AlterPartitionReassignmentsRequest):
            return self.run(lambda admin: admin.alter_reassignments(request))
        if isinstance(request, UpdateFeaturesRequest):
            return self.run(lambda admin: admin.update_features(request))
        if isinstance(request, DescribeFeaturesRequest):
            return self.run(lambda admin: admin.describe_features())
        raise UnsupportedByBroker(f"{type(request).__name__} has no Kafka-protocol "
                                  "equivalent: use --bootstrap-controller")

    def describe_quorum(self) -> tuple[dict[str, Any], dict[int, list[str]]]:
        return self.run(lambda admin: admin.describe_quorum())  # type: ignore[no-any-return]

    def list_reassignments(self) -> dict[tuple[str, int], Reassignment]:
        return self.run(lambda admin: admin.list_reassignments())  # type: ignore[no-any-return]

    def metadata(self) -> Any:
        """Kafka's Metadata answer for every topic (brokers and assignments)."""
        return self.run(lambda admin: admin.metadata(None))
