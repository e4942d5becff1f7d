"""The controller's decisions (pure): admin requests in, records to propose and a response
out. It runs on the raft leader; its shell proposes the records and sends the response
once they commit (`Decision.wait_offset`).

The controller decides against its *view*: the committed image plus the records it has
proposed that are not committed yet (Kafka's QuorumController does the same with its
timeline structures), so two creates of one name in flight conflict, and a delete sees
a topic whose creation is still replicating. Reads (DescribeTopics) use the committed
image only. `on_committed` moves the committed image forward; if what commits is not
what this controller proposed (it lost leadership and the log was rewritten), the
pending records are dropped and the view falls back to the committed image.

Clock and randomness come in as arguments (`now_ms`, `rng`); same inputs, same outputs.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from metadata import broker_control
from metadata import records as rec
from metadata.acl_control import create_acls, delete_acls
from metadata.admin import (
    BROKER_RESOURCE,
    DEFAULT,
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    TOPIC_RESOURCE,
    AdminRequest,
    AdminResponse,
    AlterableConfig,
    AlterConfigsResource,
    AlterConfigsResourceResult,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    AlterUserScramCredentialsRequest,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatableTopicResult,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteAclsRequest,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeTopicsRequest,
    DescribeTopicsResponse,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    PartitionDescription,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
    RenameTopicRequest,
    RenameTopicResponse,
    TopicDescription,
    UpdateFeaturesRequest,
)
from metadata.broker_configs import config_changes as broker_config_changes
from metadata.delta import MetadataDelta
from metadata.elections import Emit, elect_leaders
from metadata.feature_control import update_features
from metadata.features import (
    BROKER_CONFIGS_LEVEL,
    LEVEL_ERROR,
    metadata_level,
    release_name,
    write_refusal,
)
from metadata.image import NO_OFFSET, MetadataImage, TopicImage
from metadata.isr import alter_partition
from metadata.placement import place_replicas
from metadata.reassignments import alter_partition_reassignments
from metadata.scram_control import alter_user_scram_credentials
from metadata.topic_configs import (
    KEYS,
    ORDERED_DELIVERY,
    InvalidConfig,
    list_after,
    validate,
    validate_all,
)
from metadata.topic_names import invalid_topic_name_reason
from raft.common.errors import ErrorCode
from raft.common.uuid import ZERO_UUID, Uuid

BROKER_SESSION_TIMEOUT_MS = 9000  # Kafka's broker.session.timeout.ms


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerConfig:
    broker_session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS
    default_num_partitions: int = 1  # Kafka's num.partitions
    default_replication_factor: int = 1  # Kafka's default.replication.factor
    max_partitions_per_request: int = 10_000  # bounds one request's records
    # the controllers' enable.ordered.delivery: a new topic that sets none is ordered
    ordered_delivery_default: bool = False
    # the controllers' unclean.leader.election.enable, for topics that set none
    unclean_election_default: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """Propose `records` so the first lands at `base_offset`; send `response` once the
    committed image has applied `wait_offset` (NO_OFFSET: send it now)."""

    records: tuple[rec.Record, ...]
    base_offset: int
    response: AdminResponse | None
    wait_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchDecision:
    """Requests decided together (`Controller.handle_batch`): propose `records` as one
    batch whose first record lands at `base_offset`; `outcomes` has, per request in order,
    its Decision (its own records are a slice of `records`) or the exception its decision
    raised."""

    records: tuple[rec.Record, ...]
    base_offset: int
    outcomes: tuple[Decision | Exception, ...]


class _Batch:
    """Records being decided, applied to a delta over the view as they are emitted; each
    must be one the finalized metadata.version lets the log hold (`metadata.features`)."""

    def __init__(self, view: MetadataImage, next_offset: int) -> None:
        self.delta = MetadataDelta(view)
        self.base_offset = self.offset = next_offset
        self.records: list[tuple[int, rec.Record]] = []

    def emit(self, record: rec.Record) -> int:
        offset = self.offset
        reason = write_refusal(record, metadata_level(self.delta.finalized_features))
        if reason is not None:  # a decision that forgot its level check
            raise AssertionError(f"controller decided {record!r} above its level: {reason}")
        reason = self.delta.apply(record, offset)
        if reason is not None:  # a controller bug: never let it reach the log
            raise AssertionError(f"controller decided an invalid {record!r}: {reason}")
        self.records.append((offset, record))
        self.offset += 1
        return offset


class Controller:
    def __init__(self, image: MetadataImage, *, now_ms: int,
                 config: ControllerConfig | None = None) -> None:
        self.config = config or ControllerConfig()
        self._committed = image
        self._view = image
        self._pending: deque[tuple[int, rec.Record]] = deque()
        # soft state, not in the log: a new controller gives every broker a full session
        self._last_contact_ms = {broker_id: now_ms for broker_id in image.brokers}

    @property
    def committed(self) -> MetadataImage:
        return self._committed

    @property
    def view(self) -> MetadataImage:
        """The committed image plus this controller's pending records."""
        return self._view

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    # --- the log --------------------------------------------------------------------

    def on_committed(self, entries: Iterable[tuple[int, rec.Record | bytes]]) -> bool:
        """Committed records in log order (bytes that do not decode are anomalies). True
        when they are not what this controller proposed at those offsets (the log was
        rewritten under it): its pending records are dropped then, never to commit."""
        delta = MetadataDelta(self._committed)
        diverged = False
        for offset, record in entries:
            if isinstance(record, bytes):
                delta.apply_bytes(record, offset)
            else:
                delta.apply(record, offset)
            while self._pending and self._pending[0][0] < offset:
                diverged = True  # a pending offset was skipped: the log was rewritten
                self._pending.popleft()
            if self._pending and self._pending[0][0] == offset:
                diverged |= self._pending.popleft()[1] != record
        self._committed = delta.build()
        if diverged:
            self._pending.clear()
        if not self._pending:
            self._view = self._committed
        return diverged

    def reset(self, committed: MetadataImage, *, now_ms: int) -> None:
        """Start over from `committed` (e.g. on regaining leadership): no pending writes."""
        self._committed = self._view = committed
        self._pending.clear()
        self._last_contact_ms = {broker_id: now_ms for broker_id in committed.brokers}

    # --- requests -------------------------------------------------------------------

    def handle(self, request: AdminRequest, *, now_ms: int, rng: random.Random,
               next_offset: int | None = None) -> Decision:
        """Decide one request. `next_offset` is where the leader's log will put the first
        record (its log end); by default right after the view."""
        batch = _Batch(self._view, self._view.last_applied_offset + 1
                       if next_offset is None else next_offset)
        if isinstance(request, DescribeTopicsRequest):
            return Decision(records=(), base_offset=batch.base_offset, wait_offset=NO_OFFSET,
                            response=describe_topics(self._committed, request))
        return self._finish(batch, self._decide(batch, request, now_ms, rng))

    def handle_batch(self, requests: Sequence[AdminRequest], *, now_ms: int,
                     rng: random.Random, next_offset: int | None = None) -> BatchDecision:
        """Decide write requests taken together, in order, into one proposal: each sees
        the records of those before it (as if decided one by one), and the view is built
        once. A request whose decision raises (a controller bug) gets that exception as
        its outcome; the others are then decided one by one, so it fails alone."""
        base = self._view.last_applied_offset + 1 if next_offset is None else next_offset
        batch = _Batch(self._view, base)
        outcomes: list[Decision | Exception] = []
        pending = bool(self._pending)
        try:
            for request in requests:
                start = len(batch.records)
                response = self._decide(batch, request, now_ms, rng)
                outcomes.append(self._decision_in(batch, start, response, pending))
        except Exception:  # noqa: BLE001 - isolate the failing request (see the docstring)
            return self._handle_one_by_one(requests, now_ms=now_ms, rng=rng, base=base)
        if batch.records:
            self._view = batch.delta.build()
            self._pending.extend(batch.records)
        return BatchDecision(records=tuple(r for _, r in batch.records), base_offset=base,
                             outcomes=tuple(outcomes))

    def _handle_one_by_one(self, requests: Sequence[AdminRequest], *, now_ms: int,
                           rng: random.Random, base: int) -> BatchDecision:
        offset = base
        records: list[rec.Record] = []
        outcomes: list[Decision | Exception] = []
        for request in requests:
            batch = _Batch(self._view, offset)
            try:
                decision = self._finish(batch, self._decide(batch, request, now_ms, rng))
            except Exception as exc:  # noqa: BLE001 - this request's outcome
                outcomes.append(exc)
                continue
            records.extend(decision.records)
            offset += len(decision.records)
            outcomes.append(decision)
        return BatchDecision(records=tuple(records), base_offset=base, outcomes=tuple(outcomes))

    @staticmethod
    def _decision_in(batch: _Batch, start: int, response: AdminResponse | None,
                     pending_before: bool) -> Decision:
        """The decision of the request whose records are `batch.records[start:]`."""
        mine = batch.records[start:]
        if mine:
            wait_offset = mine[-1][0]
        elif batch.records:  # the answer may rest on records decided just before it
            wait_offset = batch.records[-1][0]
        else:
            wait_offset = batch.delta.last_applied_offset if pending_before else NO_OFFSET
        return Decision(records=tuple(r for _, r in mine),
                        base_offset=mine[0][0] if mine else batch.offset,
                        response=response, wait_offset=wait_offset)

    def _decide(self, batch: _Batch, request: AdminRequest, now_ms: int,
                rng: random.Random) -> AdminResponse:
        """Emit `request`'s records into `batch`; its response."""
        decide = _DECIDED_FROM_THE_DELTA.get(type(request))
        if decide is not None:
            return decide(batch.delta, batch.emit, request)
        response: AdminResponse
        match request:
            case CreateTopicsRequest():
                response = self._create_topics(batch, request, rng)
            case DeleteTopicsRequest():
                response = self._delete_topics(batch, request)
            case CreatePartitionsRequest():
                response = self._create_partitions(batch, request, rng)
            case RenameTopicRequest():
                response = self._rename_topic(batch, request)
            case RegisterBrokerRequest() | BrokerHeartbeatRequest():
                response = self._broker_session(batch, request, now_ms)
            case IncrementalAlterConfigsRequest():
                response = self._alter_configs(batch, request)
            case CreateAclsRequest():
                response = create_acls(batch.delta, batch.emit, request, rng)
            case _:
                raise TypeError(f"not an admin write request: {request!r}")
        return response

    def _broker_session(self, batch: _Batch,
                        request: RegisterBrokerRequest | BrokerHeartbeatRequest,
                        now_ms: int) -> AdminResponse:
        """A registration or heartbeat; either renews the broker's session."""
        if isinstance(request, RegisterBrokerRequest):
            alive = self._is_session_alive(request.broker_id, now_ms)
            response: RegisterBrokerResponse | BrokerHeartbeatResponse = \
                broker_control.register_broker(
                    batch.delta, batch.emit, request, session_alive=alive,
                    next_offset=batch.offset,
                    unclean_default=self.config.unclean_election_default)
        else:
            response = broker_control.broker_heartbeat(
                batch.delta, batch.emit, request,
                high_watermark=self._committed.last_applied_offset,
                unclean_default=self.config.unclean_election_default)
        if response.error_code == ErrorCode.NONE:
            self._last_contact_ms[request.broker_id] = now_ms
        return response

    def bootstrap(self, records: Sequence[rec.Record], *, next_offset: int) -> Decision:
        """Propose kraft format's bootstrap records (`metadata.bootstrap`) as they are; each
        must apply (they were checked when the file was written and read)."""
        batch = _Batch(self._view, next_offset)
        for record in records:
            batch.emit(record)
        return self._finish(batch, None)

    def tick(self, now_ms: int, *, next_offset: int | None = None) -> Decision | None:
        """Fence every unfenced broker whose session expired; None when there is none."""
        batch = _Batch(self._view, self._view.last_applied_offset + 1
                       if next_offset is None else next_offset)
        for broker_id in self._view.unfenced_broker_ids():
            if not self._is_session_alive(broker_id, now_ms):
                broker_control.fence_broker(batch.delta, batch.emit, broker_id,
                                            unclean_default=self.config.unclean_election_default)
        return self._finish(batch, None) if batch.records else None

    def tick_due(self, now_ms: int) -> bool:
        """Whether `tick` may fence anyone: an unfenced broker whose session expired, or
        one whose session clock has not started (`tick` starts it). Read-only, so the
        shell can ask between ticks and leave the node's core loop alone otherwise."""
        for broker_id in self._view.unfenced_broker_ids():
            last = self._last_contact_ms.get(broker_id)
            if last is None or now_ms - last >= self.config.broker_session_timeout_ms:
                return True
        return False

    def _is_session_alive(self, broker_id: int, now_ms: int) -> bool:
        last = self._last_contact_ms.setdefault(broker_id, now_ms)
        return now_ms - last < self.config.broker_session_timeout_ms

    def _finish(self, batch: _Batch, response: AdminResponse | None) -> Decision:
        if batch.records:
            self._view = batch.delta.build()
            self._pending.extend(batch.records)
            wait_offset = batch.records[-1][0]
        else:  # the answer may rest on pending records: it waits for them too
            wait_offset = self._view.last_applied_offset if self._pending else NO_OFFSET
        return Decision(records=tuple(r for _, r in batch.records),
                        base_offset=batch.base_offset, response=response,
                        wait_offset=wait_offset)

    # --- topics ---------------------------------------------------------------------

    def _new_topic_id(self, delta: MetadataDelta, rng: random.Random) -> Uuid:
        """KIP-516: random, never ZERO or the sentinel (Uuid.random), never used before."""
        while True:
            topic_id = Uuid.random(rng)
            if not delta.is_topic_id_used(topic_id):
                return topic_id

    def _create_topics(self, batch: _Batch, request: CreateTopicsRequest,
                       rng: random.Random) -> CreateTopicsResponse:
        counts = Counter(t.name for t in request.topics)
        partitions_left = self.config.max_partitions_per_request
        results = []
        for topic in request.topics:
            plan = self._check_new_topic(batch.delta, topic, counts[topic.name],
                                         partitions_left)
            if isinstance(plan, CreatableTopicResult):
                results.append(plan)
                continue
            partitions, factor, assignment, configs = plan
            if request.validate_only:
                results.append(CreatableTopicResult(
                    name=topic.name, num_partitions=partitions, replication_factor=factor,
                    configs=_config_list(configs)))
                continue
            partitions_left -= partitions
            topic_id = self._new_topic_id(batch.delta, rng)
            if assignment is None:
                brokers = batch.delta.unfenced_broker_ids()
                assignment = place_replicas(brokers, first_partition=0, count=partitions,
                                            replication_factor=factor,
                                            start=rng.randrange(len(brokers)))
            batch.emit(rec.Topic(name=topic.name, topic_id=topic_id,
                                 initial_partition_count=partitions))
            for index, replicas in enumerate(assignment):
                _emit_partition(batch, topic_id, index, replicas)
            # in the topic's batch: the topic never exists without its configs
            for key, value in sorted(configs.items()):
                batch.emit(rec.TopicConfig(topic_id=topic_id, key=key, value=value))
            results.append(CreatableTopicResult(
                name=topic.name, topic_id=topic_id, num_partitions=partitions,
                replication_factor=factor, assignment=assignment,
                configs=_config_list(configs)))
        return CreateTopicsResponse(topics=tuple(results))

    def _check_new_topic(self, delta: MetadataDelta, topic: CreatableTopic, count: int,
                         partitions_left: int) -> CreatableTopicResult | tuple[
                             int, int, tuple[tuple[int, ...], ...] | None, dict[str, str]]:
        """(partitions, replication factor, manual assignment or None, configs), or the
        result that refuses the topic."""
        def fail(code: ErrorCode, message: str) -> CreatableTopicResult:
            return CreatableTopicResult(name=topic.name, error_code=code, error_message=message)

        partitions = (self.config.default_num_partitions
                      if topic.num_partitions == DEFAULT else topic.num_partitions)
        factor = (self.config.default_replication_factor
                  if topic.replication_factor == DEFAULT else topic.replication_factor)
        reason = invalid_topic_name_reason(topic.name)
        if count > 1:
            return fail(ErrorCode.INVALID_REQUEST, f"topic {topic.name!r} appears more than once")
        if reason is not None:
            return fail(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        if delta.topic_id_by_name(topic.name) is not None:
            return fail(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists")
        try:
            configs = validate_all([(c.name, c.value) for c in topic.configs or ()],
                                   ordered_default=self.config.ordered_delivery_default)
        except InvalidConfig as exc:
            return fail(ErrorCode.INVALID_CONFIG, str(exc))
        manual = None
        if topic.assignments:
            checked = _manual_assignment(delta, topic)
            if isinstance(checked, CreatableTopicResult):
                return checked
            manual = checked
            partitions, factor = len(manual), len(manual[0])
        brokers = delta.unfenced_broker_ids()
        if partitions < 1:
            return fail(ErrorCode.INVALID_PARTITIONS,
                        f"number of partitions must be at least 1, not {partitions}")
        if partitions > partitions_left:
            return fail(ErrorCode.INVALID_PARTITIONS,
                        f"{partitions} partitions exceed the limit of "
                        f"{self.config.max_partitions_per_request} per request")
        if manual is None and not 1 <= factor <= len(brokers):
            return fail(ErrorCode.INVALID_REPLICATION_FACTOR,
                        f"replication factor {factor} must be between 1 and the "
                        f"{len(brokers)} unfenced brokers")
        return partitions, factor, manual, configs

    def _delete_topics(self, batch: _Batch, request: DeleteTopicsRequest
                       ) -> DeleteTopicsResponse:
        """KIP-516: the ID is checked first; ZERO_UUID means "use the name"."""
        resolved: list[TopicImage | DeletableTopicResult] = []
        for entry in request.topics:
            if entry.topic_id != ZERO_UUID:
                found = batch.delta.topic(entry.topic_id)
                missing = (ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {entry.topic_id}")
            elif entry.name:
                topic_id = batch.delta.topic_id_by_name(entry.name)
                found = None if topic_id is None else batch.delta.topic(topic_id)
                missing = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic named {entry.name!r}")
            else:
                found = None
                missing = (ErrorCode.INVALID_REQUEST, "neither a topic id nor a name")
            resolved.append(found if found is not None else DeletableTopicResult(
                name=entry.name, topic_id=entry.topic_id, error_code=missing[0],
                error_message=missing[1]))
        counts = Counter(t.topic_id for t in resolved if isinstance(t, TopicImage))
        results = []
        for item in resolved:
            if isinstance(item, DeletableTopicResult):
                results.append(item)
            elif counts[item.topic_id] > 1:
                results.append(DeletableTopicResult(
                    name=item.name, topic_id=item.topic_id, error_code=ErrorCode.INVALID_REQUEST,
                    error_message=f"topic {item.name!r} appears more than once"))
            else:
                batch.emit(rec.RemoveTopic(topic_id=item.topic_id))
                results.append(DeletableTopicResult(name=item.name, topic_id=item.topic_id))
        return DeleteTopicsResponse(responses=tuple(results))

    def _create_partitions(self, batch: _Batch, request: CreatePartitionsRequest,
                           rng: random.Random) -> CreatePartitionsResponse:
        """A new count of undeleted partitions: above the current one grows the topic,
        below it (ordered delivery only) marks the partitions above it for deletion
        (KIP-253). Each topic's change is one atomic batch, so a new controller resumes
        from whatever committed: removal is driven by the leaders' heartbeats."""
        counts = Counter(t.name for t in request.topics)
        partitions_left = self.config.max_partitions_per_request
        results = []
        for entry in request.topics:
            topic_id = batch.delta.topic_id_by_name(entry.name)
            topic = None if topic_id is None else batch.delta.topic(topic_id)
            code, message = ErrorCode.NONE, None
            if counts[entry.name] > 1:
                code, message = (ErrorCode.INVALID_REQUEST,
                                 f"topic {entry.name!r} appears more than once")
            elif topic is None:
                code, message = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"no topic named {entry.name!r}")
            elif entry.count == topic.undeleted_count:
                code, message = (ErrorCode.INVALID_PARTITIONS,
                                 f"topic {entry.name!r} already has {entry.count} partitions")
            elif entry.count < topic.undeleted_count:
                code, message = _shrink_error(topic, entry)
            else:
                code, message = self._growth_error(batch.delta, topic, entry, partitions_left)
            if topic is None or code != ErrorCode.NONE:
                results.append(CreatePartitionsTopicResult(
                    name=entry.name, topic_id=topic_id or ZERO_UUID, error_code=code,
                    error_message=message))
                continue
            assignment: tuple[tuple[int, ...], ...] = ()
            if entry.count < topic.undeleted_count:
                if not request.validate_only:
                    _shrink(batch, topic, entry.count)
            else:
                first = len(topic.partitions)
                if entry.assignments is not None:
                    assignment = tuple(tuple(r) for r in entry.assignments)
                else:
                    brokers = batch.delta.unfenced_broker_ids()
                    assignment = place_replicas(brokers, first_partition=first,
                                                count=entry.count - first,
                                                replication_factor=topic.replication_factor,
                                                start=rng.randrange(len(brokers)))
                if not request.validate_only:
                    partitions_left -= entry.count - first
                    _grow(batch, topic, assignment)
            results.append(CreatePartitionsTopicResult(
                name=entry.name, topic_id=topic.topic_id, assignment=assignment))
        return CreatePartitionsResponse(results=tuple(results))

    def _growth_error(self, delta: MetadataDelta, topic: TopicImage,
                      entry: CreatePartitionsTopic, partitions_left: int
                      ) -> tuple[ErrorCode, str | None]:
        marked = topic.marked_partitions
        brokers = delta.unfenced_broker_ids()
        if marked:
            # New partitions would land above the marked ones, which are removed from the
            # end: refused with ordered delivery off too, or they could never go.
            return (ErrorCode.INVALID_PARTITIONS,
                    f"topic {topic.name!r} has partitions marked for deletion "
                    f"({', '.join(map(str, marked))}); they must be removed before the "
                    "topic can grow")
        if entry.count - len(topic.partitions) > partitions_left:
            return (ErrorCode.INVALID_PARTITIONS,
                    f"more than {self.config.max_partitions_per_request} new partitions "
                    "in one request")
        if entry.assignments is not None:
            message = _new_partitions_error(delta, topic, entry.count, entry.assignments)
            return (ErrorCode.NONE if message is None
                    else ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)
        if topic.replication_factor > len(brokers):
            return (ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"replication factor {topic.replication_factor} exceeds the "
                    f"{len(brokers)} unfenced brokers")
        return ErrorCode.NONE, None

    def _alter_configs(self, batch: _Batch, request: IncrementalAlterConfigsRequest
                       ) -> IncrementalAlterConfigsResponse:
        """KIP-339 for topics (by name): SET and DELETE, each key validated; APPEND and
        SUBTRACT are INVALID_REQUEST (the one list key, cleanup.policy, has one value).
        Broker resources: the dynamic keys of `metadata.broker_configs`.
        A resource is all or nothing; resources are independent."""
        counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
        results = []
        for resource in request.resources:
            code, message = ErrorCode.NONE, None
            changes: list[rec.TopicConfig] | list[rec.ConfigRecord] = []
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                code, message = (ErrorCode.INVALID_REQUEST,
                                 f"resource {resource.resource_name!r} appears more than once")
            elif resource.resource_type == BROKER_RESOURCE and (
                    level := metadata_level(batch.delta.finalized_features)
            ) < BROKER_CONFIGS_LEVEL:
                code, message = (LEVEL_ERROR, f"broker configs need metadata.version "
                                 f"{BROKER_CONFIGS_LEVEL} ({release_name(BROKER_CONFIGS_LEVEL)}); "
                                 f"the finalized level is {level}")
            elif resource.resource_type == BROKER_RESOURCE:
                broker_outcome = broker_config_changes(batch.delta.broker_configs, resource,
                                                       replace=bool(request.replace))
                if isinstance(broker_outcome, tuple):
                    code, message = broker_outcome
                else:
                    changes = broker_outcome
            elif resource.resource_type != TOPIC_RESOURCE:
                code, message = (ErrorCode.INVALID_REQUEST,
                                 f"unsupported resource type {resource.resource_type}")
            else:
                if request.replace:
                    resource = _as_replacement(batch.delta, resource)
                outcome = _config_changes(batch.delta, resource)
                if isinstance(outcome, tuple):
                    code, message = outcome
                else:
                    changes = outcome
            if code == ErrorCode.NONE and not request.validate_only:
                for change in changes:
                    batch.emit(change)
            results.append(AlterConfigsResourceResult(
                resource_type=resource.resource_type, resource_name=resource.resource_name,
                error_code=code, error_message=message))
        return IncrementalAlterConfigsResponse(responses=tuple(results))

    def _rename_topic(self, batch: _Batch, request: RenameTopicRequest) -> RenameTopicResponse:
        """KIP-516 makes rename possible: by ID, the ID and the partitions stay."""
        topic = batch.delta.topic(request.topic_id)
        reason = invalid_topic_name_reason(request.new_name)
        owner = batch.delta.topic_id_by_name(request.new_name)
        code, message = ErrorCode.NONE, None
        if topic is None:
            code, message = ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {request.topic_id}"
        elif reason is not None:
            code, message = ErrorCode.INVALID_TOPIC_EXCEPTION, reason
        elif owner is not None and owner != request.topic_id:
            code, message = (ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"topic {request.new_name!r} already exists")
        elif owner is None:
            batch.emit(rec.RenameTopic(topic_id=request.topic_id, new_name=request.new_name))
        return RenameTopicResponse(topic_id=request.topic_id, new_name=request.new_name,
                                   old_name=None if topic is None else topic.name,
                                   error_code=code, error_message=message)


# the requests a pure module decides from the batch's delta alone
_DECIDED_FROM_THE_DELTA: dict[type[object], Callable[[MetadataDelta, Emit, Any], AdminResponse]] = {
    AlterPartitionRequest: alter_partition,
    AlterUserScramCredentialsRequest: alter_user_scram_credentials,
    DeleteAclsRequest: delete_acls,
    ElectLeadersRequest: elect_leaders,
    AlterPartitionReassignmentsRequest: alter_partition_reassignments,
    UpdateFeaturesRequest: update_features,
}


def _emit_partition(batch: _Batch, topic_id: Uuid, index: int, replicas: tuple[int, ...],
                    after_creation: rec.EpochMap | None = None) -> None:
    """A new partition: the ISR is its unfenced replicas (all of them when the controller
    placed it), the leader the first of those (Kafka's createTopic does the same)."""
    unfenced = set(batch.delta.unfenced_broker_ids())
    isr = tuple(r for r in replicas if r in unfenced) or replicas
    batch.emit(rec.Partition(topic_id=topic_id, partition=index, replicas=replicas, isr=isr,
                             leader=isr[0], leader_epoch_after_creation=after_creation))


def _initial_count(topic: TopicImage) -> int:
    """A topic created before the count was recorded started with all it has now (it
    cannot have shrunk: a shrink records the count)."""
    initial = topic.initial_partition_count
    return len(topic.partitions) if initial is None else initial


def _shrink_error(topic: TopicImage, entry: CreatePartitionsTopic
                  ) -> tuple[ErrorCode, str | None]:
    if not topic.ordered_delivery:
        return (ErrorCode.INVALID_PARTITIONS,
                f"topic {topic.name!r} has {topic.undeleted_count} partitions; without "
                f"{ORDERED_DELIVERY} the count can only grow, not become {entry.count}")
    initial = _initial_count(topic)
    if entry.count < initial:
        return (ErrorCode.INVALID_PARTITIONS,
                f"topic {topic.name!r} cannot shrink below the initial partition count "
                f"{initial} (asked for {entry.count})")
    if entry.assignments is not None:
        return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"shrinking topic {topic.name!r} to {entry.count} partitions takes no "
                "assignments")
    return ErrorCode.NONE, None


def _count_record(topic: TopicImage, count: int) -> rec.PartitionCount:
    return rec.PartitionCount(
        topic_id=topic.topic_id, undeleted_partition_count=count,
        initial_partition_count=(_initial_count(topic)
                                 if topic.initial_partition_count is None else None))


def _grow(batch: _Batch, topic: TopicImage, assignment: tuple[tuple[int, ...], ...]) -> None:
    """KIP-253 growth, one batch: the new count; with ordered delivery every existing
    partition's leader epoch bumped (what was produced before the bump used the old
    count), and the new partitions told each one's epoch before it, where consumers of
    a new partition wait for its split source. `topic` has no marked partitions."""
    batch.emit(_count_record(topic, len(topic.partitions) + len(assignment)))
    after_creation: rec.EpochMap | None = None
    if topic.ordered_delivery:
        after_creation = tuple((p.partition, p.leader_epoch) for p in topic.partitions)
        for p in topic.partitions:
            batch.emit(rec.PartitionChange(topic_id=topic.topic_id, partition=p.partition,
                                           bump_leader_epoch=True))
    for index, replicas in enumerate(assignment, start=len(topic.partitions)):
        _emit_partition(batch, topic.topic_id, index, replicas, after_creation)


def _shrink(batch: _Batch, topic: TopicImage, count: int) -> None:
    """KIP-253 shrink, one batch: the new count; each partition from `count` up not yet
    marked gets the leader epochs the staying partitions had before this change (its
    consumers may deliver up to them) and its own epoch bumped (a consumer's deletion
    gate asks its end fenced by that epoch, so only a leader that applied the mark, and
    takes no more records, answers), and every staying partition's epoch is bumped.
    Marked partitions are removed once empty (`broker_control.remove_empty_partitions`)."""
    batch.emit(_count_record(topic, count))
    before_deletion = tuple((p.partition, p.leader_epoch) for p in topic.partitions[:count])
    for p in topic.partitions[count:topic.undeleted_count]:
        if not p.marked_for_deletion:
            batch.emit(rec.PartitionChange(topic_id=topic.topic_id, partition=p.partition,
                                           leader_epoch_before_deletion=before_deletion,
                                           bump_leader_epoch=True))
    for p in topic.partitions[:count]:
        batch.emit(rec.PartitionChange(topic_id=topic.topic_id, partition=p.partition,
                                       bump_leader_epoch=True))


def _check_assignment(delta: MetadataDelta, assignments: Iterable[tuple[int, ...]], *,
                      first: int, factor: int | None) -> str | None:
    """Why replica lists for partitions first, first+1, ... are refused
    (INVALID_REPLICA_ASSIGNMENT), or None: each non-empty, no broker twice, every broker
    registered, one replication factor, and at least one unfenced replica."""
    brokers = delta.brokers()
    for index, replicas in enumerate(assignments, start=first):
        if not replicas:
            return f"the assignment of partition {index} is an empty replica list"
        if factor is not None and len(replicas) != factor:
            return (f"partition {index} has {len(replicas)} replicas, but the other "
                    f"partitions have {factor}")
        factor = len(replicas)
        for broker_id, seen in Counter(replicas).items():
            if seen > 1:
                return f"the assignment of partition {index} names broker {broker_id} twice"
            if broker_id not in brokers:
                return (f"the assignment of partition {index} names broker {broker_id}, "
                        "but no such broker is registered")
        if all(brokers[b].fenced for b in replicas):
            return f"every broker assigned to partition {index} is fenced"
    return None


def _new_partitions_error(delta: MetadataDelta, topic: TopicImage, count: int,
                          assignments: tuple[tuple[int, ...], ...]) -> str | None:
    """CreatePartitions with assignments: why they are refused, or None."""
    adding = count - len(topic.partitions)
    if len(assignments) != adding:
        return (f"attempted to add {adding} partitions, but {len(assignments)} "
                "assignments were given")
    return _check_assignment(delta, assignments, first=len(topic.partitions),
                             factor=topic.replication_factor)


def _manual_assignment(delta: MetadataDelta, topic: CreatableTopic
                       ) -> tuple[tuple[int, ...], ...] | CreatableTopicResult:
    """CreateTopics with assignments: the replicas by partition, or the refusal."""
    def fail(code: ErrorCode, message: str) -> CreatableTopicResult:
        return CreatableTopicResult(name=topic.name, error_code=code, error_message=message)

    if topic.num_partitions != DEFAULT or topic.replication_factor != DEFAULT:
        return fail(ErrorCode.INVALID_REQUEST, "both num_partitions or replication_factor "
                    "and replica assignments were given; they cannot be used together")
    by_index: dict[int, CreatableReplicaAssignment] = {}
    for entry in topic.assignments or ():
        if entry.partition_index in by_index:
            return fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"partition {entry.partition_index} is assigned more than once")
        by_index[entry.partition_index] = entry
    if sorted(by_index) != list(range(len(by_index))):
        return fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the assigned partitions must be "
                    f"0..{len(by_index) - 1}, not {sorted(by_index)}")
    replicas = tuple(tuple(by_index[i].broker_ids) for i in range(len(by_index)))
    reason = _check_assignment(delta, replicas, first=0, factor=None)
    return replicas if reason is None else fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, reason)


def _as_replacement(delta: MetadataDelta, resource: AlterConfigsResource
                    ) -> AlterConfigsResource:
    """A legacy AlterConfigs resource as its incremental equivalent: the named keys set
    (a null value deletes), and every key the topic sets now but the request leaves out
    deleted."""
    topic_id = delta.topic_id_by_name(resource.resource_name)
    topic = None if topic_id is None else delta.topic(topic_id)
    named = {c.name for c in resource.configs}
    dropped = () if topic is None else tuple(
        AlterableConfig(name=key, config_operation=OP_DELETE)
        for key, _ in topic.configs if key not in named)
    return dataclasses.replace(resource, configs=tuple(
        AlterableConfig(name=c.name, value=c.value,
                        config_operation=OP_DELETE if c.value is None else OP_SET)
        for c in resource.configs) + dropped)


def _config_changes(delta: MetadataDelta, resource: AlterConfigsResource
                    ) -> list[rec.TopicConfig] | tuple[ErrorCode, str]:
    """The TopicConfig records one topic resource asks for, or (error, message)."""
    topic_id = delta.topic_id_by_name(resource.resource_name)
    topic = None if topic_id is None else delta.topic(topic_id)
    if topic is None:
        return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"no topic named {resource.resource_name!r}")
    keys = Counter(c.name for c in resource.configs)
    current = dict(topic.configs)
    try:
        resource = _list_operations_as_sets(current, resource)
    except InvalidConfig as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    changes = []
    for config in resource.configs:
        if keys[config.name] > 1:
            return (ErrorCode.INVALID_REQUEST, f"config {config.name!r} appears more than once")
        value: str | None = None  # DELETE
        try:
            if config.config_operation == OP_SET:
                value = validate(config.name, config.value)
            elif config.config_operation != OP_DELETE:
                return (ErrorCode.INVALID_REQUEST,
                        f"unknown config operation {config.config_operation}")
            elif config.name not in KEYS:
                validate(config.name, None)  # raises: an unknown key
        except InvalidConfig as exc:
            return ErrorCode.INVALID_CONFIG, str(exc)
        if current.get(config.name) != value:
            changes.append(rec.TopicConfig(topic_id=topic.topic_id, key=config.name,
                                           value=value))
    refusal = _ordered_switch_error(topic, changes)
    return changes if refusal is None else (ErrorCode.INVALID_CONFIG, refusal)


def _ordered_switch_error(topic: TopicImage, changes: list[rec.TopicConfig]) -> str | None:
    """Why `changes` may not turn ordered delivery on or off (a DELETE turns it off: the
    log's absence is off), or None. Off while partitions are marked: only the ordered
    consumers' gates hold back what was written after the marking until the marked
    partitions are drained. On once partitions were added without it: they have no
    after-creation epoch map, so nothing would hold back their keys' records behind the
    older ones still unread in their split sources."""
    values = [c.value for c in changes if c.key == ORDERED_DELIVERY]
    if not values or (values[0] == "true") == topic.ordered_delivery:
        return None
    if topic.ordered_delivery:
        marked = topic.marked_partitions
        return None if not marked else (
            f"{ORDERED_DELIVERY} cannot be turned off while topic {topic.name!r} has "
            f"partitions marked for deletion ({', '.join(map(str, marked))}); they are "
            "removed once empty")
    unmapped = [p.partition for p in topic.partitions[_initial_count(topic):]
                if p.leader_epoch_after_creation is None]
    return None if not unmapped else (
        f"{ORDERED_DELIVERY} cannot be turned on for topic {topic.name!r}: partitions "
        f"{', '.join(map(str, unmapped))} were added without it, so their records could "
        "not be held behind older records of the same keys in their split sources; "
        "create an ordered topic instead")


def _list_operations_as_sets(current: dict[str, str], resource: AlterConfigsResource
                             ) -> AlterConfigsResource:
    """`resource` with each APPEND and SUBTRACT as the SET of the list it makes from the
    topic's `current` configs (`topic_configs.list_after`; InvalidConfig for a key that
    is no list)."""
    return dataclasses.replace(resource, configs=tuple(
        AlterableConfig(name=c.name, config_operation=OP_SET, value=list_after(
            c.name, current.get(c.name), c.value, subtract=c.config_operation == OP_SUBTRACT))
        if c.config_operation in (OP_APPEND, OP_SUBTRACT) else c for c in resource.configs))


def _config_list(configs: dict[str, str]) -> tuple[CreatableTopicConfig, ...] | None:
    """None when there are none: the field is then left off the wire."""
    return tuple(CreatableTopicConfig(name=k, value=v)
                 for k, v in sorted(configs.items())) or None


def describe_topics(image: MetadataImage, request: DescribeTopicsRequest
                    ) -> DescribeTopicsResponse:
    """KIP-516 TopicCollection: by names or by IDs; every result carries both."""
    found: list[tuple[TopicImage | None, Uuid, str | None]]
    if request.topic_ids is not None:
        found = [(image.topic(t), t, None) for t in request.topic_ids]
    elif request.names is not None:
        found = [(image.topic_by_name(n), ZERO_UUID, n) for n in request.names]
    else:
        found = [(t, t.topic_id, t.name)
                 for t in sorted(image.topics.values(), key=lambda t: t.name)]
    results = []
    for topic, topic_id, name in found:
        if topic is None and name is None:
            results.append(TopicDescription(name=None, topic_id=topic_id,
                                            error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                            error_message=f"no topic with id {topic_id}"))
        elif topic is None:
            results.append(TopicDescription(name=name, topic_id=ZERO_UUID,
                                            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                            error_message=f"no topic named {name!r}"))
        else:
            results.append(describe_topic(topic))
    return DescribeTopicsResponse(topics=tuple(results))


def describe_topic(topic: TopicImage) -> TopicDescription:
    return TopicDescription(
        name=topic.name, topic_id=topic.topic_id, configs=_config_list(dict(topic.configs)),
        initial_partition_count=topic.initial_partition_count,
        undeleted_partition_count=topic.undeleted_count,
        partitions=tuple(PartitionDescription(
            partition=p.partition, leader=p.leader, leader_epoch=p.leader_epoch,
            replicas=p.replicas, isr=p.isr,
            leader_epoch_after_creation=p.leader_epoch_after_creation,
            leader_epoch_before_deletion=p.leader_epoch_before_deletion)
            for p in topic.partitions))
