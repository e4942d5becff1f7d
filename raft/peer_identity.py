"""Which node ids a request frame claims to come from, and whether a TLS peer may claim
them: a voter's or observer's identity bound to its certificate.

With mutual TLS on the controller listener (`ssl.client.auth=required`), every node
presents a certificate whose subject CN is `kraft-node-<id>` (`raft.common.tls.node_id_of`).
A request claims a node id where it names its sender: the frame's `src` (which the node
routes answers by), a Vote's `candidate_id`, a BeginQuorumEpoch's or EndQuorumEpoch's
`leader_id`, a Fetch's or FetchSnapshot's `replica_id` (when >= 0: -1 is a plain
consumer of the log), an UpdateRaftVoter's `voter_id` (KIP-853: a voter tells the leader
its own endpoints), and whatever the layers above add (`extra`: api -> a top-level body
field, e.g. the broker id of a broker registration). AddRaftVoter's and RemoveRaftVoter's
`voter_id` name the voter to change, not the sender: they claim nothing here (who may
send them is an authorization question, not an identity one). Every claimed id must be the
certificate's; a certificate without a node id (a tool's, a user's) may claim none. A
request that breaks this never reaches the core: the transport closes the connection
(`raft/transport.py`), so a stray process holding some valid certificate cannot count
as a voter, vote as another, or fetch as another replica.

Pure: frames in, ids and verdicts out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# api -> (where the id sits: "body" for a top-level field, "partition" for
# topics[0].partitions[0], the KIP-516 nesting of `raft.messages`), field name
RAFT_CLAIMS: dict[str, tuple[str, str]] = {
    "VoteRequest": ("partition", "candidate_id"),
    "BeginQuorumEpochRequest": ("partition", "leader_id"),
    "EndQuorumEpochRequest": ("partition", "leader_id"),
    "FetchRequest": ("body", "replica_id"),
    "FetchSnapshotRequest": ("body", "replica_id"),
    "UpdateRaftVoterRequest": ("partition", "voter_id"),
}
# requests whose node id field names whom they are about, not who sends them
TARGET_FIELDS = {"AddRaftVoterRequest": "voter_id", "RemoveRaftVoterRequest": "voter_id"}


def _partition(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    try:
        partition = body["topics"][0]["partitions"][0]
    except (KeyError, IndexError, TypeError):
        return None
    return partition if isinstance(partition, Mapping) else None


def claimed_ids(frame: Mapping[str, Any], extra: Mapping[str, str] | None = None
                ) -> list[int]:
    """The node ids `frame` claims as its sender's (non-negative ints only: a malformed
    field claims nothing here and is refused by the decoder instead)."""
    found: list[int] = []
    src = frame.get("src")
    if type(src) is int and src >= 0:
        found.append(src)
    api, body = frame.get("api"), frame.get("body")
    if not isinstance(api, str) or not isinstance(body, Mapping):
        return found
    where: tuple[str, str] | None = RAFT_CLAIMS.get(api)
    if where is None and extra and api in extra:
        where = ("body", extra[api])
    if where is None:
        return found
    holder = body if where[0] == "body" else _partition(body)
    value = holder.get(where[1]) if holder is not None else None
    if type(value) is int and value >= 0:
        found.append(value)
    return found


def identity_violation(frame: Mapping[str, Any], cert_node_id: int | None,
                       extra: Mapping[str, str] | None = None) -> int | None:
    """The first node id `frame` claims that the peer's certificate does not bind (its
    node id is `cert_node_id`; None: it binds none); None when every claim holds."""
    for claimed in claimed_ids(frame, extra):
        if claimed != cert_node_id:
            return claimed
    return None
