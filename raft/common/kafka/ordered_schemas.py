"""Wire schemas for ordered delivery across partition-count changes (linear hashing).

Two kinds, both `kio` entities so the broker's codec (`raft.common.kafka.codec`) reads and
writes them like Kafka's own:

- Produce v9-v13 and Fetch v12-v13 with one more *tagged* field per topic,
  `undeleted_partition_count` (tag `COUNT_TAG`): the count the client partitioned by. The
  broker answers a mismatch with `INVALID_PARTITION_METADATA`. Kafka's clients never send
  the tag, so they get no check and see the schemas they know. (The error code is
  `raft.common.errors.ErrorCode.INVALID_PARTITION_METADATA`: retriable, refresh the
  counts and send again.)
- Two APIs Kafka does not have, on API keys far above Kafka's (which end below 100):
  `CONSUMER_GROUP_POSITION` (group members exchange their positions through the group
  coordinator) and `PARTITION_LEADER_EPOCHS` (a topic's counts and the leader-epoch maps
  recorded when partitions were added or marked for deletion). Both are flexible v0,
  request header v2 and response header v1, and the broker advertises them in
  ApiVersions.
"""

# no `from __future__ import annotations`: kio reads the field types at run time

import dataclasses
import typing
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.index import load_request_schema
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

from raft.common.errors import ErrorCode

CONSUMER_GROUP_POSITION = 2530
PARTITION_LEADER_EPOCHS = 2531
# ApiVersions lists the two keys above only to a client that names itself this way
# (KIP-511's client_software_name): Kafka defines no such keys, and some of its clients
# fail on ones they do not know (kafka-python's api_versions())
PROJECT_CLIENT_SOFTWARE = "kraft-py"
COUNT_TAG = 253  # the topic-level tagged field's tag in Produce and Fetch

PRODUCE, FETCH = 0, 1
PRODUCE_VERSIONS = range(9, 14)  # the flexible versions the broker serves
FETCH_VERSIONS = range(12, 14)


def _count_field() -> Any:
    return field(metadata={"kafka_type": "int32", "tag": COUNT_TAG}, default=None)


def _with_count(request: type[Any], list_field: str) -> type[Any]:
    """`request` whose topic entries (the tuple `list_field`) carry the tagged count."""
    (topic_cls,) = typing.get_args(typing.get_type_hints(request)[list_field])[:1]
    topic = dataclasses.make_dataclass(
        topic_cls.__name__, [("undeleted_partition_count", i32 | None, _count_field())],
        bases=(topic_cls,), frozen=True, slots=True, kw_only=True)
    extended = dataclasses.make_dataclass(
        request.__name__, [(list_field, tuple[topic, ...])],  # type: ignore[valid-type]
        bases=(request,), frozen=True, slots=True, kw_only=True)
    topic.__module__ = extended.__module__ = __name__
    return extended


# (api key, version) -> request class, consulted before kio's own
EXTENDED_REQUESTS: dict[tuple[int, int], type[Any]] = {}
for _version in PRODUCE_VERSIONS:
    EXTENDED_REQUESTS[(PRODUCE, _version)] = _with_count(
        load_request_schema(PRODUCE, _version), "topic_data")
for _version in FETCH_VERSIONS:
    EXTENDED_REQUESTS[(FETCH, _version)] = _with_count(
        load_request_schema(FETCH, _version), "topics")


def _classvars(api_key: int, kind: EntityType, header: type[Any]) -> Any:
    """Class decorator: the kio ClassVars of a v0 flexible entity of `api_key`."""
    def decorate(cls: type[Any]) -> type[Any]:
        cls.__type__, cls.__version__, cls.__flexible__ = kind, i16(0), True
        cls.__api_key__, cls.__header_schema__ = i16(api_key), header
        return cls
    return decorate


# --- ConsumerGroupPosition ----------------------------------------------------------
# A member reports the positions the coordinator asked it for (need_position false,
# position set) and asks for the group's position of the partitions it waits on
# (need_position true). The response gives those positions (-1: no member has reported
# one) and, with need_position true, the partitions of this member whose position some
# other member waits on: the next request should include them.

_CGP_REQ = (CONSUMER_GROUP_POSITION, EntityType.nested, RequestHeader)
_CGP_RESP = (CONSUMER_GROUP_POSITION, EntityType.nested, ResponseHeader)
_PLE_REQ = (PARTITION_LEADER_EPOCHS, EntityType.nested, RequestHeader)
_PLE_RESP = (PARTITION_LEADER_EPOCHS, EntityType.nested, ResponseHeader)


@_classvars(*_CGP_REQ)
@dataclass(frozen=True, slots=True, kw_only=True)
class PositionRequestPartition:
    __type__: ClassVar[EntityType]
    partition: i32 = field(metadata={"kafka_type": "int32"})
    need_position: bool = field(metadata={"kafka_type": "bool"}, default=False)
    position: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))


@_classvars(*_CGP_REQ)
@dataclass(frozen=True, slots=True, kw_only=True)
class PositionRequestTopic:
    __type__: ClassVar[EntityType]
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[PositionRequestPartition, ...]


@_classvars(CONSUMER_GROUP_POSITION, EntityType.request, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupPositionRequest:
    __type__: ClassVar[EntityType]
    group_id: str = field(metadata={"kafka_type": "string"})
    generation_id: i32 = field(metadata={"kafka_type": "int32"})
    member_id: str = field(metadata={"kafka_type": "string"})
    topics: tuple[PositionRequestTopic, ...]


@_classvars(*_CGP_RESP)
@dataclass(frozen=True, slots=True, kw_only=True)
class PositionResponsePartition:
    __type__: ClassVar[EntityType]
    partition: i32 = field(metadata={"kafka_type": "int32"})
    need_position: bool = field(metadata={"kafka_type": "bool"}, default=False)
    position: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))


@_classvars(*_CGP_RESP)
@dataclass(frozen=True, slots=True, kw_only=True)
class PositionResponseTopic:
    __type__: ClassVar[EntityType]
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[PositionResponsePartition, ...]


@_classvars(CONSUMER_GROUP_POSITION, EntityType.response, ResponseHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupPositionResponse:
    __type__: ClassVar[EntityType]
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    topics: tuple[PositionResponseTopic, ...]


# --- PartitionLeaderEpochsForPartitions ------------------------------------------------
# For each topic asked (by ID): its initial and undeleted partition counts and, for each
# partition asked (all of them when the list is empty), the leader-epoch maps the
# controller recorded: after_creation when the partition was added (the epoch every
# older partition had just before the change), before_deletion when it was marked for
# deletion (the epoch every remaining partition had just before the change). A marked
# partition is one with a non-empty before_deletion map.


@_classvars(*_PLE_REQ)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderEpochsRequestTopic:
    __type__: ClassVar[EntityType]
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@_classvars(PARTITION_LEADER_EPOCHS, EntityType.request, RequestHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionLeaderEpochsRequest:
    __type__: ClassVar[EntityType]
    topics: tuple[LeaderEpochsRequestTopic, ...]


@_classvars(*_PLE_RESP)
@dataclass(frozen=True, slots=True, kw_only=True)
class EpochEntry:
    __type__: ClassVar[EntityType]
    partition: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})


@_classvars(*_PLE_RESP)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderEpochsResponsePartition:
    __type__: ClassVar[EntityType]
    partition: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    after_creation: tuple[EpochEntry, ...] = ()
    before_deletion: tuple[EpochEntry, ...] = ()


@_classvars(*_PLE_RESP)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderEpochsResponseTopic:
    __type__: ClassVar[EntityType]
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    name: str = field(metadata={"kafka_type": "string"}, default="")
    initial_partition_count: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    undeleted_partition_count: i32 = field(metadata={"kafka_type": "int32"},
                                           default=i32(-1))
    ordered_delivery: bool = field(metadata={"kafka_type": "bool"}, default=False)
    partitions: tuple[LeaderEpochsResponsePartition, ...] = ()
    # cleanup.policy has `compact`: the producer leaves split tombstones
    # (broker.kafka.ordered.split_tombstones); tagged, so an older reader skips it
    compacted: bool | None = field(metadata={"kafka_type": "bool", "tag": 0}, default=None)


@_classvars(PARTITION_LEADER_EPOCHS, EntityType.response, ResponseHeader)
@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionLeaderEpochsResponse:
    __type__: ClassVar[EntityType]
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    topics: tuple[LeaderEpochsResponseTopic, ...]


NEW_REQUESTS: dict[int, type[Any]] = {
    CONSUMER_GROUP_POSITION: ConsumerGroupPositionRequest,
    PARTITION_LEADER_EPOCHS: PartitionLeaderEpochsRequest,
}
NEW_RESPONSES: dict[int, type[Any]] = {
    CONSUMER_GROUP_POSITION: ConsumerGroupPositionResponse,
    PARTITION_LEADER_EPOCHS: PartitionLeaderEpochsResponse,
}


# --- reading error codes kio lacks ------------------------------------------------------
# The broker sends INVALID_PARTITION_METADATA as `raft.common.errors.ErrorCode` (the codec
# builds every error code as one of ours). kio's reader has its own table and refuses
# 253: clients decode with `tolerant_response_class`, whose error codes are plain int16.

_TOLERANT: dict[type[Any], type[Any]] = {}


def _copy_field(original: Any, **metadata: Any) -> Any:
    kwargs: dict[str, Any] = {"metadata": {**original.metadata, **metadata}}
    if original.default is not dataclasses.MISSING:
        kwargs["default"] = original.default
    if original.default_factory is not dataclasses.MISSING:
        kwargs["default_factory"] = original.default_factory
    return field(**kwargs)


def tolerant_response_class(entity: type[Any]) -> type[Any]:
    """`entity` (a kio response or one of its nested entities) with every error code read
    as a plain int16, at any depth: a response carrying INVALID_PARTITION_METADATA then
    decodes (the codes still compare equal to ErrorCode members)."""
    cached = _TOLERANT.get(entity)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(entity)
    overrides: list[tuple[str, Any, Any]] = []
    for item in dataclasses.fields(entity):
        hint = hints[item.name]
        if item.metadata.get("kafka_type") == "error_code":
            overrides.append((item.name, i16, _copy_field(item, kafka_type="int16")))
            continue
        args = [a for a in typing.get_args(hint) if a is not type(None) and a is not Ellipsis]
        nested = args[0] if typing.get_origin(hint) is not None and args else hint
        if not (isinstance(nested, type) and dataclasses.is_dataclass(nested)):
            continue
        replaced = tolerant_response_class(nested)
        if replaced is nested:
            continue
        if typing.get_origin(hint) is tuple:
            new_hint: Any = tuple[replaced, ...]  # type: ignore[valid-type]
        elif nested is not hint:  # optional
            new_hint = replaced | None
        else:
            new_hint = replaced
        overrides.append((item.name, new_hint, _copy_field(item)))
    result = entity
    if overrides:
        result = dataclasses.make_dataclass(entity.__name__, overrides, bases=(entity,),
                                            frozen=True, slots=True, kw_only=True)
        result.__module__ = __name__
    _TOLERANT[entity] = result
    return result
