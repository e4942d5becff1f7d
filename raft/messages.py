"""Raft RPCs (KIP-595) in the KIP-516 shape, and their msgpack codec.

Every request carries `cluster_id` and addresses the metadata partition by topic ID. On
the wire the partition-level fields sit under
`topics => [{topic_id, partitions => [{partition_index, ...}]}]` exactly as in KIP-516;
the dataclasses flatten that single topic and partition into `topic_id` and
`partition_index` fields, so every request and response still names its topic ID.

`encode_message(msg)` gives `(api, body)`: the api is the class name ("VoteRequest",
"FetchResponse", ...), so a frame says by itself whether it is a request or a response;
the body is msgpack-ready (Uuid as 16-byte bin, batches as maps with records as bin).
`decode_message(api, body)` raises `MessageError`, and nothing else, on any malformed body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metadata.uuid import METADATA_TOPIC_ID, Uuid
from raft.errors import ErrorCode
from raft.types import Batch

NO_LEADER = -1  # Kafka's "no leader known" in a response's leader id


class MessageError(ValueError):
    """A message body that cannot be decoded; the text says which field and why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DivergingEpoch:
    """The leader's answer to a Fetch whose (offset, epoch) it does not hold: the largest
    epoch <= the fetcher's last epoch in the leader's log, and where that epoch ends."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CurrentLeader:
    leader_id: int = NO_LEADER
    leader_epoch: int = -1


NO_CURRENT_LEADER = CurrentLeader()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaState:
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1


# --- requests -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteRequest:
    """KIP-595 Vote; `pre_vote` (KIP-996) asks "would you vote for me" without any vote
    or epoch change on either side; a pre-vote carries the epoch the candidate would use."""

    cluster_id: str
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int  # the candidate's log end offset
    pre_vote: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginQuorumEpochRequest:
    cluster_id: str
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EndQuorumEpochRequest:
    cluster_id: str
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchRequest:
    cluster_id: str
    replica_id: int
    max_wait_ms: int = 0
    max_bytes: int = 1 << 20
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeQuorumRequest:
    cluster_id: str
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0


# --- responses ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteResponse:
    error_code: ErrorCode = ErrorCode.NONE
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    leader_id: int = NO_LEADER
    leader_epoch: int = -1
    vote_granted: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginQuorumEpochResponse:
    error_code: ErrorCode = ErrorCode.NONE
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    leader_id: int = NO_LEADER
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class EndQuorumEpochResponse:
    error_code: ErrorCode = ErrorCode.NONE
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    leader_id: int = NO_LEADER
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResponse:
    error_code: ErrorCode = ErrorCode.NONE
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    high_watermark: int = -1
    log_start_offset: int = 0
    diverging_epoch: DivergingEpoch | None = None
    current_leader: CurrentLeader = NO_CURRENT_LEADER
    records: tuple[Batch, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeQuorumResponse:
    error_code: ErrorCode = ErrorCode.NONE
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    leader_id: int = NO_LEADER
    leader_epoch: int = -1
    high_watermark: int = -1
    current_voters: tuple[ReplicaState, ...] = ()
    observers: tuple[ReplicaState, ...] = ()


REQUEST_TYPES = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest,
                 DescribeQuorumRequest)
RESPONSE_TYPES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse,
                  FetchResponse, DescribeQuorumResponse)
Request = (VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest
           | DescribeQuorumRequest)
Response = (VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse
            | DescribeQuorumResponse)
Message = Request | Response


def is_request(msg: object) -> bool:
    return isinstance(msg, REQUEST_TYPES)


def is_response(msg: object) -> bool:
    return isinstance(msg, RESPONSE_TYPES)


# --- codec ----------------------------------------------------------------------------
# Field kinds; each message lists its top-level and its partition-level fields.
_INT, _BOOL, _STR, _ERROR, _INTS, _BATCHES, _REPLICAS, _DIVERGING, _LEADER = range(9)
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

_SCHEMA: dict[type, tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]] = {
    VoteRequest: ((("cluster_id", _STR),),
                  (("candidate_epoch", _INT), ("candidate_id", _INT),
                   ("last_offset_epoch", _INT), ("last_offset", _INT), ("pre_vote", _BOOL))),
    BeginQuorumEpochRequest: ((("cluster_id", _STR),),
                              (("leader_id", _INT), ("leader_epoch", _INT))),
    EndQuorumEpochRequest: ((("cluster_id", _STR),),
                            (("leader_id", _INT), ("leader_epoch", _INT),
                             ("preferred_successors", _INTS))),
    FetchRequest: ((("cluster_id", _STR), ("replica_id", _INT), ("max_wait_ms", _INT),
                    ("max_bytes", _INT)),
                   (("current_leader_epoch", _INT), ("fetch_offset", _INT),
                    ("last_fetched_epoch", _INT))),
    DescribeQuorumRequest: ((("cluster_id", _STR),), ()),
    VoteResponse: ((("error_code", _ERROR),),
                   (("leader_id", _INT), ("leader_epoch", _INT), ("vote_granted", _BOOL))),
    BeginQuorumEpochResponse: ((("error_code", _ERROR),),
                               (("leader_id", _INT), ("leader_epoch", _INT))),
    EndQuorumEpochResponse: ((("error_code", _ERROR),),
                             (("leader_id", _INT), ("leader_epoch", _INT))),
    FetchResponse: ((("error_code", _ERROR),),
                    (("high_watermark", _INT), ("log_start_offset", _INT),
                     ("diverging_epoch", _DIVERGING), ("current_leader", _LEADER),
                     ("records", _BATCHES))),
    DescribeQuorumResponse: ((("error_code", _ERROR),),
                             (("leader_id", _INT), ("leader_epoch", _INT),
                              ("high_watermark", _INT), ("current_voters", _REPLICAS),
                              ("observers", _REPLICAS))),
}
_CLASS_BY_API: dict[str, type] = {cls.__name__: cls for cls in _SCHEMA}
CLASS_BY_API = _CLASS_BY_API  # api name ("VoteRequest", ...) -> message class


def _encode_value(kind: int, value: Any) -> Any:
    if kind == _BATCHES:
        return [{"base_offset": b.base_offset, "epoch": b.epoch, "records": b.records}
                for b in value]
    if kind == _ERROR:
        return int(value)
    if kind == _DIVERGING:
        return None if value is None else {"epoch": value.epoch, "end_offset": value.end_offset}
    if kind == _LEADER:
        return {"leader_id": value.leader_id, "leader_epoch": value.leader_epoch}
    if kind == _REPLICAS:
        return [{"replica_id": r.replica_id, "log_end_offset": r.log_end_offset,
                 "last_fetch_timestamp": r.last_fetch_timestamp,
                 "last_caught_up_timestamp": r.last_caught_up_timestamp} for r in value]
    return value  # int, bool, str, tuple of ints: msgpack-ready as they are


def encode_message(msg: Message) -> tuple[str, dict[str, Any]]:
    """(api name, msgpack-ready body) of a request or response."""
    cls = type(msg)
    schema = _SCHEMA.get(cls)
    if schema is None:
        raise TypeError(f"not a raft message: {cls.__name__}")
    top_fields, partition_fields = schema
    body = {name: _encode_value(kind, getattr(msg, name)) for name, kind in top_fields}
    partition = {"partition_index": msg.partition_index}
    for name, kind in partition_fields:
        partition[name] = _encode_value(kind, getattr(msg, name))
    body["topics"] = [{"topic_id": msg.topic_id.to_bytes(), "partitions": [partition]}]
    return cls.__name__, body


def _field(container: Any, name: str, where: str) -> Any:
    if not isinstance(container, dict):
        raise MessageError(f"{where} is a {type(container).__name__}, not a map")
    if name not in container:
        raise MessageError(f"{where} lacks {name!r}")
    return container[name]


def _int(value: Any, where: str, minimum: int = _INT64_MIN) -> int:
    if type(value) is not int or not minimum <= value <= _INT64_MAX:
        raise MessageError(f"{where} must be an integer >= {minimum}, got {value!r:.80}")
    return value


def _decode_batch(raw: Any, where: str) -> Batch:
    base_offset = _int(_field(raw, "base_offset", where), f"{where}.base_offset", 0)
    epoch = _int(_field(raw, "epoch", where), f"{where}.epoch", 0)
    records = _field(raw, "records", where)
    if not isinstance(records, list | tuple) or not records:
        raise MessageError(f"{where}.records must be a non-empty array")
    for record in records:
        if type(record) is not bytes:
            raise MessageError(f"{where}.records holds a {type(record).__name__}, not bin")
    return Batch(base_offset=base_offset, epoch=epoch, records=tuple(records))


def _decode_value(kind: int, value: Any, where: str) -> Any:
    if kind == _INT:
        return _int(value, where)
    if kind == _BOOL:
        if type(value) is not bool:
            raise MessageError(f"{where} must be a boolean")
        return value
    if kind == _STR:
        if type(value) is not str:
            raise MessageError(f"{where} must be a string")
        return value
    if kind == _ERROR:
        try:
            return ErrorCode(_int(value, where))
        except ValueError:
            raise MessageError(f"{where}: unknown error code {value!r:.40}") from None
    if kind == _INTS:
        if not isinstance(value, list | tuple):
            raise MessageError(f"{where} must be an array")
        return tuple(_int(v, f"{where}[]") for v in value)
    if kind == _BATCHES:
        if not isinstance(value, list | tuple):
            raise MessageError(f"{where} must be an array")
        batches = tuple(_decode_batch(b, f"{where}[{i}]") for i, b in enumerate(value))
        for prev, nxt in zip(batches, batches[1:], strict=False):
            if nxt.base_offset != prev.next_offset:
                raise MessageError(f"{where}: batches are not contiguous")
        return batches
    if kind == _REPLICAS:
        if not isinstance(value, list | tuple):
            raise MessageError(f"{where} must be an array")
        return tuple(ReplicaState(**{key: _int(_field(r, key, where), f"{where}.{key}")
                                     for key in ("replica_id", "log_end_offset",
                                                 "last_fetch_timestamp",
                                                 "last_caught_up_timestamp")})
                     for r in value)
    if kind == _DIVERGING:
        if value is None:
            return None
        return DivergingEpoch(epoch=_int(_field(value, "epoch", where), f"{where}.epoch"),
                              end_offset=_int(_field(value, "end_offset", where),
                                              f"{where}.end_offset"))
    if kind == _LEADER:
        return CurrentLeader(
            leader_id=_int(_field(value, "leader_id", where), f"{where}.leader_id"),
            leader_epoch=_int(_field(value, "leader_epoch", where), f"{where}.leader_epoch"))
    raise AssertionError(f"unknown field kind {kind}")


def decode_message(api: str, body: object) -> Message:
    """The message named `api` from its body; MessageError on anything malformed."""
    cls = _CLASS_BY_API.get(api) if isinstance(api, str) else None
    if cls is None:
        raise MessageError(f"unknown api {api!r:.60}")
    top_fields, partition_fields = _SCHEMA[cls]
    kwargs: dict[str, Any] = {}
    for name, kind in top_fields:
        kwargs[name] = _decode_value(kind, _field(body, name, api), f"{api}.{name}")
    topics = _field(body, "topics", api)
    if not isinstance(topics, list | tuple) or len(topics) != 1:
        raise MessageError(f"{api}.topics must hold exactly one topic (the metadata topic)")
    raw_id = _field(topics[0], "topic_id", f"{api}.topics[0]")
    if type(raw_id) is not bytes or len(raw_id) != 16:
        raise MessageError(f"{api}.topics[0].topic_id must be 16 bytes")
    kwargs["topic_id"] = Uuid.from_bytes(raw_id)
    partitions = _field(topics[0], "partitions", f"{api}.topics[0]")
    if not isinstance(partitions, list | tuple) or len(partitions) != 1:
        raise MessageError(f"{api}.partitions must hold exactly one partition")
    partition = partitions[0]
    where = f"{api}.partitions[0]"
    kwargs["partition_index"] = _int(_field(partition, "partition_index", where),
                                     f"{where}.partition_index")
    for name, kind in partition_fields:
        kwargs[name] = _decode_value(kind, _field(partition, name, where), f"{where}.{name}")
    return cls(**kwargs)  # type: ignore[no-any-return]
