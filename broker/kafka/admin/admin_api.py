"""CreateTopics (v2-v7, returns topic_id), DeleteTopics (v1-v6, by name or topic_id;
an entry naming both, or neither, is INVALID_REQUEST as in Kafka),
CreatePartitions (v0-v3): forwarded to the active controller as `metadata.admin` RPCs,
manual replica assignments and topic configs included (the controller validates them).

The controller answers once the records have committed; the answer is then held until
this broker's own image shows the change (bounded by the request's timeout), so a
client's next Metadata to this broker sees what it just did.

With the authorizer on (`broker.kafka.authz`), as in Kafka: CreateTopics needs CREATE on
the cluster or on the topic, DeleteTopics DELETE on the topic, CreatePartitions ALTER on
the topic. A refused topic answers TOPIC_AUTHORIZATION_FAILED and is not forwarded.
DeleteTopics can name a topic by ID, which this broker's image may not know yet (a
topic just created): it forwards such an entry, and every DeleteTopics, with its
client's principal and host (`forwarded_principal`, `forwarded_host`, as Kafka's
Envelope), and the controller authorizes that principal against its committed image
(`metadata.acl_control`). A refusal of a topic named by ID names it only to a caller
that may DESCRIBE it.

Internal topics (`metadata.topic_names`): a client's CreateTopics, DeleteTopics or
CreatePartitions of one answers INVALID_TOPIC_EXCEPTION once the caller is authorized
(the group coordinator creates `__consumer_offsets` itself, not through this path).
"""

from __future__ import annotations

import logging
from typing import Any

from broker.kafka import authz
from broker.kafka import response_shapes as shapes
from broker.kafka.admin.metadata_api import from_kafka_uuid, to_kafka_uuid
from broker.kafka.context import BrokerContext
from broker.kafka.ordered.rules import undeleted_count
from metadata.admin import (
    AdminErrorResponse,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
)
from metadata.controller_client import ControllerUnavailable
from metadata.topic_configs import KEYS as TOPIC_CONFIG_KEYS
from metadata.topic_names import is_internal_topic
from raft.common.errors import ErrorCode
from raft.common.session import current_session
from raft.common.uuid import ZERO_UUID

log = logging.getLogger(__name__)

MIN_TIMEOUT_S = 1.0


def kafka_error(code: int) -> int:
    """A controller error code as Kafka's (they share numbers; unknown -> -1)."""
    try:
        return int(ErrorCode(code))
    except ValueError:
        return int(ErrorCode.UNKNOWN_SERVER_ERROR)


def request_timeout_s(request: Any, context: BrokerContext) -> float:
    timeout = getattr(request, "timeout", None)
    ms = int(timeout.total_seconds() * 1000) if timeout is not None else \
        context.request_timeout_ms
    return max(MIN_TIMEOUT_S, ms / 1000)


async def forward_to_controller(context: BrokerContext, admin_request: Any, timeout_s: float
                                ) -> tuple[Any, int, str | None]:
    """(response or None, top-level error, message)."""
    if context.controller is None:
        return None, int(ErrorCode.NOT_CONTROLLER), "no controller client"
    try:
        response = await context.controller.call(admin_request, timeout_s)
    except ControllerUnavailable as exc:
        return None, int(ErrorCode.REQUEST_TIMED_OUT), str(exc)
    if isinstance(response, AdminErrorResponse):
        return None, kafka_error(response.top_level_error), response.error_message
    return response, 0, None


def _refused(name: str | None, topic_id: Any = None) -> shapes.TopicResult:
    result: shapes.TopicResult = {"name": name,
                                  "error_code": authz.TOPIC_AUTHORIZATION_FAILED,
                                  "error_message": "Authorization failed."}
    if topic_id is not None:
        result["topic_id"] = topic_id
    return result


def _internal(name: str, action: str, topic_id: Any = None) -> shapes.TopicResult:
    """A client may not create, delete or grow an internal topic (`metadata.topic_names`)."""
    result: shapes.TopicResult = {
        "name": name, "error_code": int(ErrorCode.INVALID_TOPIC_EXCEPTION),
        "error_message": f"{name} is an internal topic: clients may not {action} it"}
    if topic_id is not None:
        result["topic_id"] = topic_id
    return result


def _merge(refused: list[shapes.TopicResult | None], forwarded: list[shapes.TopicResult],
           missing: shapes.TopicResult) -> list[shapes.TopicResult]:
    """The request's order: each refused entry's result, else the next forwarded one."""
    answers = iter(forwarded)
    return [r if r is not None else next(answers, missing) for r in refused]


async def handle_create_topics_request(context: BrokerContext, request: Any,
                                       version: int) -> shapes.CreateTopicsResponse:
    timeout_s = request_timeout_s(request, context)
    on_cluster = authz.cluster_allowed(context, authz.Op.CREATE)
    refused = [_refused(t.name) if not (on_cluster or authz.topic_allowed(
                   context, authz.Op.CREATE, t.name))
               else _internal(t.name, "create") if is_internal_topic(t.name) else None
               for t in request.topics]
    wanted = [t for t, r in zip(request.topics, refused, strict=True) if r is None]
    admin = CreateTopicsRequest(
        topics=tuple(CreatableTopic(
            name=t.name, num_partitions=int(t.num_partitions),
            replication_factor=int(t.replication_factor),
            # manual assignments and configs: the controller validates them
            assignments=tuple(CreatableReplicaAssignment(
                partition_index=int(a.partition_index),
                broker_ids=tuple(int(b) for b in a.broker_ids)) for a in t.assignments) or None,
            configs=tuple(CreatableTopicConfig(name=c.name, value=c.value)
                          for c in t.configs) or None)
            for t in wanted),
        validate_only=bool(getattr(request, "validate_only", False)))
    response: Any = CreateTopicsResponse(topics=())
    error, message = 0, None
    if admin.topics:
        response, error, message = await forward_to_controller(context, admin, timeout_s)
    results: list[shapes.TopicResult] = []
    if response is None:
        results = [{"name": t.name, "error_code": error, "error_message": message}
                   for t in wanted]
    else:
        assert isinstance(response, CreateTopicsResponse)
        created = {r.topic_id for r in response.topics
                   if r.error_code == 0 and r.topic_id != ZERO_UUID}
        if created and not admin.validate_only:
            await context.wait_image(lambda image: all(image.topic(t) for t in created),
                                     timeout_s)
        results = [{"name": r.name, "topic_id": to_kafka_uuid(r.topic_id),
                    "error_code": kafka_error(r.error_code), "error_message": r.error_message,
                    "num_partitions": r.num_partitions,
                    "replication_factor": r.replication_factor,
                    "configs": _created_configs(r.configs) if r.error_code == 0 else None}
                   for r in response.topics]
    results = _merge(refused, results, {"name": "", "error_code": int(
        ErrorCode.UNKNOWN_SERVER_ERROR), "error_message": "no answer from the controller"})
    log.info("create topics", extra={"topics": [r["name"] for r in results],
                                     "errors": [r["error_code"] for r in results]})
    return {"throttle_time": 0, "topics": results}


def _created_configs(configs: Any) -> list[shapes.CreatedConfig]:
    """CreateTopics v5+: every topic config the new topic has, its own or the default."""
    own = {c.name: c.value for c in configs or ()}
    return [{"name": key, "value": own.get(key, spec.default), "read_only": False,
             "config_source": 1 if key in own else 5, "is_sensitive": False}
            for key, spec in sorted(TOPIC_CONFIG_KEYS.items())]


def _delete_request_error(state: DeleteTopicState) -> str | None:
    """Kafka's check of one DeleteTopics v6 entry: a name or a topic ID, not both, not
    neither (INVALID_REQUEST)."""
    if state.name is not None and state.topic_id != ZERO_UUID:
        return "You may not specify both topic name and topic id."
    if state.name is None and state.topic_id == ZERO_UUID:
        return "Neither topic name nor id were specified."
    return None


def _delete_refusal(context: BrokerContext, state: DeleteTopicState) -> shapes.TopicResult | None:
    """This broker's answer to one valid DeleteTopics entry it will not forward, or None.
    A topic ID its image does not know (yet) is forwarded: only the controller can tell
    whose topic it is."""
    by_id = state.topic_id != ZERO_UUID
    topic = context.image.topic(state.topic_id) if by_id else None
    if by_id and topic is None:
        return None
    name = topic.name if topic is not None else state.name
    topic_id = to_kafka_uuid(state.topic_id)
    if not authz.topic_allowed(context, authz.Op.DELETE, name):
        # by ID, the name only for a caller that may describe it (Kafka's rule)
        shown = name if not by_id or authz.topic_allowed(context, authz.Op.DESCRIBE, name) \
            else None
        return _refused(shown, topic_id)
    if is_internal_topic(name):
        assert name is not None
        return _internal(name, "delete", topic_id)
    return None


def _state_result(state: DeleteTopicState, error: int, message: str | None
                  ) -> shapes.TopicResult:
    return {"name": state.name, "topic_id": to_kafka_uuid(state.topic_id),
            "error_code": int(error), "error_message": message}


async def handle_delete_topics_request(context: BrokerContext, request: Any,
                                       version: int) -> shapes.DeleteTopicsResponse:
    timeout_s = request_timeout_s(request, context)
    if hasattr(request, "topics"):  # v6: names or topic IDs
        states = tuple(DeleteTopicState(name=t.name,
                                        topic_id=from_kafka_uuid(t.topic_id) or ZERO_UUID)
                       for t in request.topics)
    else:
        states = tuple(DeleteTopicState(name=n) for n in request.topic_names)
    invalid = {i: m for i, s in enumerate(states) if (m := _delete_request_error(s))}
    refused = {i: r for i, s in enumerate(states)
               if i not in invalid and (r := _delete_refusal(context, s)) is not None}
    valid = tuple(s for i, s in enumerate(states) if i not in invalid and i not in refused)
    forwarded: list[shapes.TopicResult] = []
    if valid:
        session = current_session()  # the controller authorizes it again (see the docstring)
        response, error, message = await forward_to_controller(context, DeleteTopicsRequest(
            topics=valid, forwarded_principal=str(session.principal),
            forwarded_host=session.client_host), timeout_s)
        if response is None:
            forwarded = [_state_result(s, error, message) for s in valid]
        else:
            assert isinstance(response, DeleteTopicsResponse)
            gone = {r.topic_id for r in response.responses
                    if r.error_code == 0 and r.topic_id != ZERO_UUID}
            if gone:
                await context.wait_image(lambda image: not any(image.topic(t) for t in gone),
                                         timeout_s)
            forwarded = [{"name": r.name, "topic_id": to_kafka_uuid(r.topic_id),
                          "error_code": kafka_error(r.error_code),
                          "error_message": r.error_message}
                         for r in response.responses]
    answers = iter(forwarded)
    results = [_state_result(s, ErrorCode.INVALID_REQUEST, invalid[i]) if i in invalid
               else refused[i] if i in refused
               else next(answers, _state_result(s, ErrorCode.UNKNOWN_SERVER_ERROR,
                                                "no answer from the controller"))
               for i, s in enumerate(states)]
    log.info("delete topics", extra={"topics": [str(s.topic_id) if s.name is None else s.name
                                                for s in states],
                                     "errors": [r["error_code"] for r in results]})
    return {"throttle_time": 0, "responses": results}


async def handle_create_partitions_request(context: BrokerContext, request: Any,
                                           version: int) -> shapes.CreatePartitionsResponse:
    timeout_s = request_timeout_s(request, context)
    refused = [_refused(t.name) if not authz.topic_allowed(context, authz.Op.ALTER, t.name)
               else _internal(t.name, "add partitions to") if is_internal_topic(t.name)
               else None for t in request.topics]
    allowed = [t for t, r in zip(request.topics, refused, strict=True) if r is None]
    admin = CreatePartitionsRequest(
        topics=tuple(CreatePartitionsTopic(
            name=t.name, count=int(t.count),
            assignments=None if t.assignments is None else tuple(
                tuple(int(b) for b in a.broker_ids) for a in t.assignments))
            for t in allowed),
        validate_only=bool(request.validate_only))
    response: Any = CreatePartitionsResponse(results=())
    error, message = 0, None
    if admin.topics:
        response, error, message = await forward_to_controller(context, admin, timeout_s)
    results: list[shapes.TopicResult]
    if response is None:
        results = [{"name": t.name, "error_code": error, "error_message": message}
                   for t in allowed]
    else:
        assert isinstance(response, CreatePartitionsResponse)
        wanted = {t.name: t.count for t in admin.topics}
        grown = {r.name for r in response.results if r.error_code == 0}
        if grown and not admin.validate_only:
            # a grow shows as new partitions, a shrink (ordered delivery) as a lower
            # undeleted count: either way the image then holds the count asked for
            await context.wait_image(lambda image: all(
                (t := image.topic_by_name(n)) is not None and
                undeleted_count(t) == wanted[n] for n in grown), timeout_s)
        results = [{"name": r.name, "error_code": kafka_error(r.error_code),
                    "error_message": r.error_message} for r in response.results]
    results = _merge(refused, results, {"name": "", "error_code": int(
        ErrorCode.UNKNOWN_SERVER_ERROR), "error_message": "no answer from the controller"})
    return {"throttle_time": 0, "results": results}
