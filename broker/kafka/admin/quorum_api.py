"""DescribeQuorum (v0-v2) on the broker's Kafka listener, forwarded to the controllers.

Kafka 3.9 brokers forward DescribeQuorum to the active controller, so that
kafka-metadata-quorum.sh --bootstrap-server (and `kraft quorum describe
--bootstrap-server`) works through a broker. Here the broker sends the controllers'
own DescribeQuorum (`raft.node`'s, msgpack over the controller listener) to the raft
leader, following a non-leader's NOT_LEADER_OR_FOLLOWER to the address it names, and
translates the answer into Kafka's response (`describe_quorum_response`, pure). With
`bind_identity` (mutual TLS between the nodes) each controller dialled must present a
certificate binding the voter id it is dialled as (`metadata.controller_client`).

The request must name `__cluster_metadata` partition 0 once, as Kafka checks: more
than one topic or partition is INVALID_REQUEST, another topic or partition is
UNKNOWN_TOPIC_OR_PARTITION on that partition. v2's `nodes` lists each voter with its
controller endpoint, from this broker's view of the voters.
"""

from __future__ import annotations

import itertools
import logging
import ssl
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from broker.kafka import authz
from broker.kafka import response_shapes as shapes
from broker.kafka.context import BrokerContext
from metadata.controller_client import (
    dial_and_exchange,
    follow_leader,
    leader_named,
    redirect_address,
)
from raft import messages
from raft.common import leader_redirect
from raft.common.errors import ErrorCode

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"
CONTROLLER_LISTENER = "CONTROLLER"
RETRY_PAUSE_S = 0.05
DEFAULT_TIMEOUT_S = 5.0

Address = tuple[str, int]


class QuorumUnavailable(Exception):
    """No controller gave the leader's DescribeQuorum before the deadline."""


class QuorumForwarder:
    """Asks the raft leader among `voters` for DescribeQuorum (`leader_hint`: who this
    broker believes leads, tried first)."""

    def __init__(self, *, voters: Mapping[int, Address], cluster_id: str,
                 leader_hint: Callable[[], Address | None] = lambda: None,
                 ssl_context: ssl.SSLContext | None = None,
                 bind_identity: bool = False) -> None:
        self.voters = voters
        self.cluster_id = cluster_id
        self.leader_hint = leader_hint
        self.ssl_context = ssl_context  # the controller listener's TLS (None: plaintext)
        self.bind_identity = bind_identity  # a controller's certificate binds its id
        self._correlation = itertools.count(1)

    async def describe(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
        """The leader's DescribeQuorum body as the controller sent it (raises
        QuorumUnavailable)."""
        return await self.ask_leader(
            messages.DescribeQuorumRequest(cluster_id=self.cluster_id), timeout_s)

    async def ask_leader(self, message: Any, timeout_s: float, *,
                         is_write: bool = False) -> dict[str, Any]:
        """The raft leader's answer body to `message`, a raft request (raises
        QuorumUnavailable). Whom to ask follows `raft.common.leader_redirect`."""
        api, body = messages.encode_message(message)
        node_ids: dict[Address, int | None] = {
            address: node_id for node_id, address in self.voters.items()}

        def classify(where: str, reply: Any) -> leader_redirect.Outcome:
            code = reply.get("error_code", 0) if isinstance(reply, dict) else -1
            if code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                return leader_redirect.Answered(reply if isinstance(reply, dict) else {})
            redirect = reply.get("leader_address")
            hint = redirect_address(redirect) if isinstance(redirect, str) else None
            if hint is not None:
                node_ids[hint] = leader_named(self.voters, reply.get("leader_id"), hint)
            return leader_redirect.Redirected(hint, f"{where}: not the leader")

        async def attempt(address: Address, attempt_timeout_s: float
                          ) -> leader_redirect.Outcome:
            return await dial_and_exchange(
                address, api, next(self._correlation), self.cluster_id, body,
                classify=classify, timeout_s=attempt_timeout_s, ssl_context=self.ssl_context,
                node_id=node_ids.get(address), bind_identity=self.bind_identity)

        call = leader_redirect.start(sorted(self.voters.values()), is_write=is_write,
                                     backoff_s=RETRY_PAUSE_S, preferred=self.leader_hint())
        _, decision = await follow_leader(call, attempt, timeout_s=timeout_s,
                                          attempt_timeout_s=max(0.5, timeout_s / 2))
        if isinstance(decision, leader_redirect.Done):
            return decision.value  # type: ignore[no-any-return]
        raise QuorumUnavailable("; ".join(decision.problems[-3:]) or "no controller answered")

    async def handle(self, context: BrokerContext, request: Any, version: int
                     ) -> shapes.DescribeQuorumResponse:
        """The listener's DescribeQuorum handler."""
        if not authz.cluster_allowed(context, authz.Op.DESCRIBE):
            return error_response(authz.CLUSTER_AUTHORIZATION_FAILED,
                                  "DESCRIBE on the cluster is not allowed")
        problem = request_error(request)
        if problem is not None:
            return error_response(*problem)
        if partition_mismatch(request):
            return unknown_partition_response(request)
        try:
            reply = await self.describe(min(DEFAULT_TIMEOUT_S,
                                            context.request_timeout_ms / 1000))
        except QuorumUnavailable as exc:
            log.warning("DescribeQuorum: no controller answered", extra={"reason": str(exc)})
            return error_response(int(ErrorCode.REQUEST_TIMED_OUT),
                                  f"no controller answered: {exc}")
        return describe_quorum_response(reply, voters=self.voters,
                                        topic_name=request.topics[0].topic_name)


# --- pure translation -------------------------------------------------------------------


def request_error(request: Any) -> tuple[int, str] | None:
    """(error code, message) when the request is not Kafka's singleton request
    (INVALID_REQUEST at the top level); None otherwise."""
    topics = request.topics
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        return int(ErrorCode.INVALID_REQUEST), \
            "DescribeQuorum takes exactly one topic with one partition"
    return None


def partition_mismatch(request: Any) -> bool:
    """The singleton request names another topic or partition than the metadata log's."""
    (topic,) = request.topics
    (partition,) = topic.partitions
    return topic.topic_name != METADATA_TOPIC or int(partition.partition_index) != 0


def error_response(code: int, message: str | None) -> shapes.DescribeQuorumResponse:
    """A top-level error (no topics)."""
    return {"error_code": code, "error_message": message, "topics": [], "nodes": []}


def unknown_partition_response(request: Any) -> shapes.DescribeQuorumResponse:
    """UNKNOWN_TOPIC_OR_PARTITION on the one partition asked (as Kafka answers)."""
    (topic,) = request.topics
    (partition,) = topic.partitions
    return {"error_code": 0, "topics": [{"topic_name": topic.topic_name, "partitions": [{
        "partition_index": int(partition.partition_index),
        "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        "leader_id": -1, "leader_epoch": -1, "high_watermark": -1}]}], "nodes": []}


def _kafka_error(code: int) -> int:
    try:
        return int(ErrorCode(code))
    except ValueError:
        return int(ErrorCode.UNKNOWN_SERVER_ERROR)


def _replicas(states: tuple[messages.ReplicaState, ...]) -> list[shapes.QuorumReplica]:
    return [{"replica_id": r.replica_id, "replica_directory_id": uuid.UUID(int=0),
             "log_end_offset": r.log_end_offset, "last_fetch_timestamp": r.last_fetch_timestamp,
             "last_caught_up_timestamp": r.last_caught_up_timestamp} for r in states]


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def describe_quorum_response(reply: Mapping[str, Any], *, voters: Mapping[int, Address],
                             topic_name: str = METADATA_TOPIC
                             ) -> shapes.DescribeQuorumResponse:
    """Kafka's DescribeQuorum response from the controller's reply body (a top-level
    error when the reply is an error body or malformed); `voters` fill v2's nodes."""
    if "topics" not in reply:  # an error body (e.g. INCONSISTENT_CLUSTER_ID)
        return error_response(_kafka_error(int(reply.get("error_code", -1))),
                              reply.get("error_message"))
    try:
        response = messages.decode_message("DescribeQuorumResponse", dict(reply))
    except messages.MessageError as exc:
        return error_response(int(ErrorCode.UNKNOWN_SERVER_ERROR),
                              f"malformed DescribeQuorum from the controller: {exc}")
    assert isinstance(response, messages.DescribeQuorumResponse)
    code = int(response.error_code)
    partition: shapes.QuorumPartition = {
        "partition_index": 0, "error_code": _kafka_error(code),
        "error_message": None if code == 0 else _error_name(code),
        "leader_id": response.leader_id, "leader_epoch": response.leader_epoch,
        "high_watermark": response.high_watermark,
        "current_voters": _replicas(response.current_voters),
        "observers": _replicas(response.observers)}
    nodes: list[shapes.QuorumNode] = [
        {"node_id": node_id,
         "listeners": [{"name": CONTROLLER_LISTENER, "host": host, "port": port}]}
        for node_id, (host, port) in sorted(voters.items())]
    return {"error_code": 0, "error_message": None,
            "topics": [{"topic_name": topic_name, "partitions": [partition]}], "nodes": nodes}
