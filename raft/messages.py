"""Raft RPCs (KIP-595) in the KIP-516 shape, and their msgpack codec.

Every request carries `cluster_id` and addresses the metadata partition by topic ID. On
the wire the partition-level fields sit under
`topics => [{topic_id, partitions => [{partition_index, ...}]}]` exactly as in KIP-516;
the dataclasses flatten that single topic and partition into `topic_id` and
`partition_index` fields, so every request and response still names its topic ID.

`encode_message(msg)` gives `(api, body)`: the api is the class name ("VoteRequest",
"FetchResponse", ...), so a frame says by itself whether it is a request or a response;
the body is msgpack-ready, made by the shared codec (raft.common.codec): Uuid as 16-byte
bin, batches as maps with records as bin, every field present (None as nil).
`decode_message(api, body)` raises `MessageError`, and nothing else, on any malformed body
(a wrong type, an unknown key, a missing field that has no default, batches that cannot
be a log); its text names the field: "FetchResponse.records[1].epoch: missing required
field".
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from raft.common.codec import Codec, CodecError, expected
from raft.common.errors import ErrorCode
from raft.common.uuid import METADATA_TOPIC_ID, Uuid
from raft.control_records import Endpoint
from raft.types import Batch, SnapshotId

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
    replica_directory_id: Uuid | None = None  # KIP-853
    log_end_offset: int
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeEndpoints:
    """DescribeQuorum v2's Nodes (KIP-853): where a voter listens, from the VotersRecord."""

    node_id: int
    listeners: tuple[Endpoint, ...] = ()


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
    # KIP-853 (Vote v1+): the candidate's replica key, and the key of the voter asked
    # (a replica formatted anew since, with another directory id, refuses to answer).
    candidate_directory_id: Uuid | None = None
    voter_directory_id: Uuid | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginQuorumEpochRequest:
    cluster_id: str
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    leader_id: int
    leader_epoch: int
    voter_directory_id: Uuid | None = None  # KIP-853: the voter this is meant for


@dataclass(frozen=True, slots=True, kw_only=True)
class EndQuorumEpochRequest:
    cluster_id: str
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()
    # KIP-853: the successors' directory ids, in the same order
    preferred_directory_ids: tuple[Uuid, ...] = ()


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
    replica_directory_id: Uuid | None = None  # KIP-853 (Fetch v17)


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchSnapshotRequest:
    """KIP-630: `max_bytes` of the snapshot `snapshot_id` from byte `position`."""

    cluster_id: str
    replica_id: int
    max_bytes: int = 1 << 20
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int
    replica_directory_id: Uuid | None = None  # KIP-853


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeQuorumRequest:
    cluster_id: str
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class AddRaftVoterRequest:
    """KIP-853: add the replica (voter_id, voter_directory_id), an observer caught up
    with the leader, to the voters; answered once the new VotersRecord commits."""

    cluster_id: str
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    timeout_ms: int = 30_000
    voter_id: int
    voter_directory_id: Uuid
    listeners: tuple[Endpoint, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveRaftVoterRequest:
    """KIP-853: remove the voter (voter_id, voter_directory_id)."""

    cluster_id: str
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    voter_id: int
    voter_directory_id: Uuid


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateKRaftVersionRequest:
    """Upgrade `kraft.version` (Kafka's UpdateFeatures for kraft.version, to the leader):
    0 -> 1 turns a static quorum's voters (with the directory ids the leader heard in
    their Fetches, and `nodes`' endpoints) into the log's first VotersRecord."""

    cluster_id: str
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    kraft_version: int
    nodes: tuple[NodeEndpoints, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateRaftVoterRequest:
    """KIP-853: a voter tells the leader its current endpoints."""

    cluster_id: str
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    current_leader_epoch: int
    voter_id: int
    voter_directory_id: Uuid
    listeners: tuple[Endpoint, ...] = ()


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
    snapshot_id: SnapshotId | None = None  # fetch this snapshot first (KIP-630)
    records: tuple[Batch, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchSnapshotResponse:
    error_code: ErrorCode = ErrorCode.NONE
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    snapshot_id: SnapshotId | None = None
    current_leader: CurrentLeader = NO_CURRENT_LEADER
    size: int = -1  # of the whole snapshot file
    position: int = -1  # of `unaligned_records` in it
    unaligned_records: bytes = b""


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
    nodes: tuple[NodeEndpoints, ...] = ()  # KIP-853: a dynamic quorum's voters' endpoints
    kraft_version: int = 0  # the leader's: 1 once the voters are the log's (KIP-853)


@dataclass(frozen=True, slots=True, kw_only=True)
class VoterChangeResponse:
    """The answer to AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter (the same
    fields in Kafka's three responses): an error code and why."""

    error_code: ErrorCode = ErrorCode.NONE
    topic_id: Uuid = METADATA_TOPIC_ID
    partition_index: int = 0
    error_message: str | None = None


REQUEST_TYPES = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest,
                 FetchSnapshotRequest, DescribeQuorumRequest, AddRaftVoterRequest,
                 RemoveRaftVoterRequest, UpdateRaftVoterRequest, UpdateKRaftVersionRequest)
RESPONSE_TYPES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse,
                  FetchResponse, FetchSnapshotResponse, DescribeQuorumResponse,
                  VoterChangeResponse)
Request = (VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest
           | FetchSnapshotRequest | DescribeQuorumRequest | AddRaftVoterRequest
           | RemoveRaftVoterRequest | UpdateRaftVoterRequest | UpdateKRaftVersionRequest)
Response = (VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse
            | FetchSnapshotResponse | DescribeQuorumResponse | VoterChangeResponse)
Message = Request | Response


# the response that answers each request (a refusal is one with its error code)
RESPONSE_TYPE_OF: dict[type, type] = {
    VoteRequest: VoteResponse, BeginQuorumEpochRequest: BeginQuorumEpochResponse,
    EndQuorumEpochRequest: EndQuorumEpochResponse, FetchRequest: FetchResponse,
    FetchSnapshotRequest: FetchSnapshotResponse, DescribeQuorumRequest: DescribeQuorumResponse,
    AddRaftVoterRequest: VoterChangeResponse, RemoveRaftVoterRequest: VoterChangeResponse,
    UpdateRaftVoterRequest: VoterChangeResponse, UpdateKRaftVersionRequest: VoterChangeResponse}


def refusal(request_api: str, error_code: ErrorCode, message: str
            ) -> tuple[str, dict[str, Any]] | None:
    """(api, body) of the response refusing request `request_api` with `error_code`
    (and `message` where the response has room for one); None: not a raft request."""
    request_type = _CLASS_BY_API.get(request_api)
    response_type = RESPONSE_TYPE_OF.get(request_type) if request_type else None
    if response_type is None:
        return None
    fields: dict[str, Any] = {"error_code": error_code}
    if response_type is VoterChangeResponse:
        fields["error_message"] = message
    return encode_message(response_type(**fields))


def is_request(msg: object) -> bool:
    return isinstance(msg, REQUEST_TYPES)


def is_response(msg: object) -> bool:
    return isinstance(msg, RESPONSE_TYPES)


# --- codec ----------------------------------------------------------------------------
# The dataclasses are flat. On the wire these fields stay in the body, topic_id goes to
# topics[0] and every other field to topics[0].partitions[0], partition_index first, each
# group in field order (KIP-516).
_TOP_LEVEL = frozenset({"cluster_id", "replica_id", "max_wait_ms", "max_bytes", "error_code"})
_TOPIC_KEYS = frozenset({"topic_id", "partitions"})
# raft/rpc_host.py adds these to the DescribeQuorum answer it serves, so tools find the
# leader and every voter (voter_addresses: voter id -> "HOST:PORT", as the node dials it).
_NODE_EXTRAS: dict[type, frozenset[str]] = {
    DescribeQuorumResponse: frozenset({"leader_address", "node_id", "cluster_id", "is_leader",
                                       "voter_addresses"})}

_CODEC = Codec()
_CODEC.register(Uuid, wire=bytes, encode=Uuid.to_bytes, decode=Uuid.from_bytes,
                name="a 16-byte Uuid")


@dataclass(frozen=True, slots=True)
class _Shape:
    top: tuple[str, ...]  # the body's own fields
    body_keys: frozenset[str]  # what a body may hold
    partition_keys: frozenset[str]  # what topics[0].partitions[0] may hold


def _shape(cls: type) -> _Shape:
    names = [f.name for f in fields(cls) if f.name != "topic_id"]
    partition = [n for n in names if n not in _TOP_LEVEL]
    if partition[0] != "partition_index":  # encode_message keeps the declaration order
        raise TypeError(f"{cls.__name__}: partition_index must precede its partition's "
                        "other fields")
    top = tuple(n for n in names if n in _TOP_LEVEL)
    return _Shape(top, frozenset(top) | {"topics"} | _NODE_EXTRAS.get(cls, set()),
                  frozenset(partition))


_SHAPES: dict[type, _Shape] = {cls: _shape(cls) for cls in REQUEST_TYPES + RESPONSE_TYPES}
_CLASS_BY_API: dict[str, type] = {cls.__name__: cls for cls in _SHAPES}
CLASS_BY_API = _CLASS_BY_API  # api name ("VoteRequest", ...) -> message class


# KIP-853's fields, left off the wire when unset (as Kafka's newer message versions are
# only sent to peers that know them): a static quorum's messages keep their bytes, and a
# body without them decodes with their defaults.
_KIP_853_FIELDS = ("candidate_directory_id", "voter_directory_id", "replica_directory_id",
                   "preferred_directory_ids", "nodes")


def encode_message(msg: Message) -> tuple[str, dict[str, Any]]:
    """(api name, msgpack-ready body) of a request or response."""
    cls = type(msg)
    shape = _SHAPES.get(cls)
    if shape is None:
        raise TypeError(f"not a raft message: {cls.__name__}")
    partition = _CODEC.encode(msg)  # all fields, then the body's and the topic's go
    for name in _KIP_853_FIELDS:
        if name in partition and partition[name] in (None, []):
            del partition[name]
    if cls is DescribeQuorumResponse:
        if partition["kraft_version"] == 0:  # a static quorum's answer keeps its bytes
            del partition["kraft_version"]
        for key in ("current_voters", "observers"):
            for replica in partition[key]:
                if replica.get("replica_directory_id", 0) is None:
                    del replica["replica_directory_id"]
    body = {name: partition.pop(name) for name in shape.top}
    body["topics"] = [{"topic_id": partition.pop("topic_id"), "partitions": [partition]}]
    return cls.__name__, body


def decode_message(api: str, body: object) -> Message:
    """The message named `api` from its body; MessageError on anything malformed."""
    cls = _CLASS_BY_API.get(api) if isinstance(api, str) else None
    if cls is None:
        raise MessageError(f"unknown api {api!r:.60}")
    try:  # every CodecError below names its path from the api on
        message: Message = _CODEC.decode(cls, _flatten(api, _SHAPES[cls], body))
        if type(message) is FetchResponse:
            _check_batches(message.records)
    except CodecError as exc:
        raise MessageError(str(exc)) from exc
    return message


def _flatten(api: str, shape: _Shape, body: object) -> dict[str, Any]:
    """The fields of a KIP-516 body, its one topic and that topic's one partition in one
    map, checking the nesting on the way; the codec checks the fields."""
    try:
        top = _map(body, shape.body_keys, "", holding="topics")
        topic = _map(_only_entry(top["topics"], ".topics"), _TOPIC_KEYS, ".topics[0]",
                     holding="partitions")
        partition = _map(_only_entry(topic["partitions"], ".topics[0].partitions"),
                         shape.partition_keys, ".topics[0].partitions[0]")
    except CodecError as exc:
        raise exc.within(api) from None
    flat = dict(partition)
    if "topic_id" in topic:
        flat["topic_id"] = topic["topic_id"]
    for name in shape.top:
        if name in top:
            flat[name] = top[name]
    return flat


def _map(value: Any, allowed: frozenset[str], where: str, holding: str | None = None
         ) -> dict[str, Any]:
    """`value`, checked to be a map of `allowed` keys only that holds `holding` if given."""
    if type(value) is not dict:
        raise expected("a map", value).within(where)
    if not value.keys() <= allowed:
        unknown = min((k for k in value if k not in allowed), key=repr)
        raise CodecError("unknown field").within(f"{where}.{unknown}")
    if holding is not None and holding not in value:
        raise CodecError("missing required field").within(f"{where}.{holding}")
    return value


def _only_entry(value: Any, where: str) -> Any:
    """The metadata partition is always the only topic and the only partition."""
    if type(value) is not list and type(value) is not tuple:
        raise expected("an array", value).within(where)
    if len(value) != 1:
        raise CodecError(f"expected exactly one entry, got {len(value)}").within(where)
    return value[0]


def _check_batches(batches: tuple[Batch, ...]) -> None:
    """What the annotations cannot say about fetched batches: offsets and epochs are not
    negative, no batch is empty, and each starts where the one before it ends."""
    for index, batch in enumerate(batches):
        error = None
        if batch.base_offset < 0:
            error = expected("an offset >= 0", batch.base_offset).within(".base_offset")
        elif batch.epoch < 0:
            error = expected("an epoch >= 0", batch.epoch).within(".epoch")
        elif not batch.records:
            error = expected("at least one record", batch.records).within(".records")
        elif index and batch.base_offset != batches[index - 1].next_offset:
            error = CodecError(f"starts at {batch.base_offset}, not where the batch before "
                               f"it ends ({batches[index - 1].next_offset})")
        if error is not None:
            raise error.within(f".records[{index}]").within("FetchResponse")
