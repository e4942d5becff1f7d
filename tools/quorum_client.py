"""The blocking client of a quorum's nodes (msgpack frames, `tools.admin_client`): one
request to one node, a read that follows the leader, NoOp appends through the leader,
DescribeQuorum as plain JSON values. The launcher (`tools.cluster`), the verbs, chaos and
the benches use it.

TLS is explicit: each call dials with the `ssl_context` it is given (None: plaintext),
which `client_ssl_context` reads from a client properties file.
"""

from __future__ import annotations

import os
import ssl
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raft.common.errors import ErrorCode
from raft.common.leader_redirect import Done, Failed, Unknown
from raft.common.tls import TlsConfigError, client_context
from tools.admin_client import (
    ExchangeError,
    LeaderClient,
    exchange,
    problems_text,
    raft_outcome,
)
from tools.config_basics import ConfigError

if TYPE_CHECKING:
    from raft import messages

DESCRIBE_QUORUM = "DescribeQuorumRequest"
APPEND_BACKOFF_S = 0.05


class ClusterError(Exception):
    """The cluster (or a request to it) failed; the message says why."""


def client_ssl_context(properties_file: str | os.PathLike[str]) -> ssl.SSLContext | None:
    """The client context a properties file describes (None: PLAINTEXT); ClusterError
    when it cannot be read or its files do not load."""
    from tools.config import load_client_properties  # the node configuration: only for TLS
    try:
        properties = load_client_properties(Path(properties_file))
        return client_context(properties.tls) if properties.uses_tls else None
    except (ConfigError, TlsConfigError) as exc:
        raise ClusterError(str(exc)) from None


def request(address: str, api: str, body: Any, *, cluster_id: str = "",
            timeout_s: float = 5.0, ssl_context: ssl.SSLContext | None = None) -> Any:
    """Send one request frame and return the response body (ClusterError on failure)."""
    try:
        return exchange(address, api, body, cluster_id=cluster_id, timeout_s=timeout_s,
                        ssl_context=ssl_context)
    except ExchangeError as exc:
        raise ClusterError(str(exc)) from None


def request_leader(addresses: Iterable[str], api: str, body: Any, *, cluster_id: str = "",
                   timeout_s: float = 5.0, avoid: Iterable[str] = (),
                   ssl_context: ssl.SSLContext | None = None) -> Any:
    """Send to the first address that answers, following NOT_LEADER_OR_FOLLOWER
    redirections to the leader (a few hops at most), never to an address in `avoid`
    (e.g. a node known to be stopped, which would only time out). A read: while the
    nodes answer but name no leader (an election), asked again until `timeout_s`, as
    Kafka's admin client retries NOT_LEADER; when every address refuses the connection
    (no node runs), ClusterError at once."""
    client = LeaderClient(addresses, cluster_id=cluster_id, ssl_context=ssl_context,
                          attempt_timeout_s=timeout_s, avoid=avoid, refusals_end_call=True)
    result = client.call(api, body, classify=raft_outcome, is_write=False,
                         deadline=time.monotonic() + timeout_s)
    if isinstance(result, Done):
        return result.value
    raise ClusterError(problems_text(result.problems) or "no address to try")


def cluster_id_of(addresses: Iterable[str], *, timeout_s: float = 5.0,
                  ssl_context: ssl.SSLContext | None = None) -> str:
    """The cluster id the first node to answer DescribeQuorum names: a follower, or a
    node that knows of no leader, names it too, so this needs no leader (ClusterError
    when none answers)."""
    from raft import messages  # here, as in describe_quorum
    body = messages.encode_message(messages.DescribeQuorumRequest(cluster_id=""))[1]
    problems = []
    for address in addresses:
        try:
            reply = request(address, DESCRIBE_QUORUM, body, timeout_s=timeout_s,
                            ssl_context=ssl_context)
        except ClusterError as exc:
            problems.append(str(exc))
            continue
        found = reply.get("cluster_id") if isinstance(reply, dict) else None
        if isinstance(found, str):
            return found
        problems.append(f"{address}: no cluster id in its DescribeQuorum answer")
    raise ClusterError(problems_text(problems) or "no address to try")


def append_records(addresses: list[str], count: int, batch: int = 1, *,
                   cluster_id: str = "", timeout_s: float = 30.0, in_flight: int = 64,
                   avoid: Iterable[str] = (), ssl_context: ssl.SSLContext | None = None,
                   refusals_end_call: bool = False) -> dict[str, Any]:
    """`Append` NoOp records through the leader; returns its reply once they committed.

    While no leader is known (an election is under way) the request is sent again, until
    `timeout_s`. An append cut short by a leader change may have left some of its records
    in the log (NoOps: harmless); only the batches of the returned reply are acknowledged.
    Given up after an attempt that may have reached a leader, the error says the outcome
    is unknown (`raft.common.leader_redirect`). `refusals_end_call`: fail at once when
    every address refuses the connection (no node runs), instead of at `timeout_s`."""
    client = LeaderClient(addresses, cluster_id=cluster_id, ssl_context=ssl_context,
                          attempt_timeout_s=timeout_s, backoff_s=APPEND_BACKOFF_S,
                          avoid=avoid, refusals_end_call=refusals_end_call)
    body = {"count": count, "batch": batch, "in_flight": in_flight}
    result = client.call("Append", body, classify=raft_outcome, is_write=True,
                         deadline=time.monotonic() + timeout_s)
    if isinstance(result, Unknown):
        raise ClusterError(f"append outcome unknown: {'; '.join(result.problems[-3:])}")
    if isinstance(result, Failed):
        raise ClusterError(f"append failed: {'; '.join(result.problems[-3:])}")
    reply = result.value
    if isinstance(reply, dict) and reply.get("error_code", 0) == 0:
        return reply
    message = reply.get("error_message") if isinstance(reply, dict) else reply
    code = reply.get("error_code") if isinstance(reply, dict) else None
    name = ErrorCode(code).name if code in set(ErrorCode) else code
    raise ClusterError(f"append failed: {name}: {message}")


def describe_quorum(addresses: Iterable[str], *, timeout_s: float = 5.0,
                    avoid: Iterable[str] = (), cluster_id: str = "",
                    ssl_context: ssl.SSLContext | None = None) -> dict[str, Any]:
    """DescribeQuorum from the leader, as a flat dict (raises ClusterError). Given a
    `cluster_id`, a node of another cluster refuses the request, and an answer that
    does not carry that id is not trusted."""
    from raft import messages  # here: `kraft topics` and the admin requests need no raft RPCs
    request_body = messages.encode_message(messages.DescribeQuorumRequest(cluster_id=""))[1]
    reply = request_leader(addresses, DESCRIBE_QUORUM, request_body, cluster_id=cluster_id,
                           timeout_s=timeout_s, avoid=avoid, ssl_context=ssl_context)
    if reply.get("error_code", 0) != 0 and "topics" not in reply:
        raise ClusterError(reply.get("error_message", f"error {reply.get('error_code')}"))
    try:
        response = messages.decode_message("DescribeQuorumResponse", reply)
    except messages.MessageError as exc:
        raise ClusterError(f"bad DescribeQuorum response: {exc}") from None
    assert isinstance(response, messages.DescribeQuorumResponse)
    if response.error_code != ErrorCode.NONE:  # a refusal names no cluster: say why
        raise ClusterError(f"DescribeQuorum failed: {response.error_code.name}")
    if cluster_id and reply.get("cluster_id") != cluster_id:
        raise ClusterError(f"DescribeQuorum answered for cluster {reply.get('cluster_id')!r}, "
                           f"not {cluster_id}")
    return {"leader_id": response.leader_id, "leader_epoch": response.leader_epoch,
            "high_watermark": response.high_watermark,
            "kraft_version": response.kraft_version,
            "leader_address": reply.get("leader_address"),
            "voter_addresses": dict(reply.get("voter_addresses") or {}),
            "cluster_id": reply.get("cluster_id", ""),
            "voters": [_replica(r) for r in response.current_voters],
            "observers": [_replica(r) for r in response.observers],
            # KIP-853: a dynamic quorum's voters' endpoints, from its VotersRecord
            "nodes": {n.node_id: [f"{e.name}://{e.host}:{e.port}" for e in n.listeners]
                      for n in response.nodes}}


def _replica(state: messages.ReplicaState) -> dict[str, Any]:
    """A replica's state as plain JSON values (its directory id as text, KIP-853)."""
    data = asdict(state)
    directory = state.replica_directory_id
    data["replica_directory_id"] = None if directory is None else str(directory)
    return data
