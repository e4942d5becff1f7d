"""raft/peer_identity.py: the node ids a request frame claims (the frame's `src`, and the
sender field of each raft request as `raft.messages` encodes it), and the verdict against
the node id bound in the peer's certificate."""

from __future__ import annotations

from typing import Any

import pytest

from raft import messages
from raft.common.uuid import Uuid
from raft.peer_identity import RAFT_CLAIMS, TARGET_FIELDS, claimed_ids, identity_violation


def frame_of(message: Any, src: int | None = None) -> dict[str, Any]:
    api, body = messages.encode_message(message)
    frame: dict[str, Any] = {"api": api, "version": 0, "correlation_id": 1,
                             "cluster_id": "c", "body": body}
    if src is not None:
        frame["src"] = src
    return frame


REQUESTS = {
    "VoteRequest": messages.VoteRequest(cluster_id="c", candidate_epoch=3, candidate_id=1,
                                        last_offset_epoch=2, last_offset=10),
    "BeginQuorumEpochRequest": messages.BeginQuorumEpochRequest(cluster_id="c", leader_id=1,
                                                                leader_epoch=3),
    "EndQuorumEpochRequest": messages.EndQuorumEpochRequest(cluster_id="c", leader_id=1,
                                                            leader_epoch=3),
    "FetchRequest": messages.FetchRequest(cluster_id="c", replica_id=1, current_leader_epoch=3,
                                          fetch_offset=0, last_fetched_epoch=0),
    "UpdateRaftVoterRequest": messages.UpdateRaftVoterRequest(
        cluster_id="c", current_leader_epoch=3, voter_id=1, voter_directory_id=Uuid(5)),
}


def test_add_and_remove_voter_claim_nothing_when_their_voter_id_is_the_target() -> None:
    add = messages.AddRaftVoterRequest(cluster_id="c", voter_id=9, voter_directory_id=Uuid(5))
    remove = messages.RemoveRaftVoterRequest(cluster_id="c", voter_id=9,
                                             voter_directory_id=Uuid(5))
    assert claimed_ids(frame_of(add)) == []
    assert claimed_ids(frame_of(remove)) == []


def test_every_raft_request_with_a_node_id_field_is_covered_when_claims_are_listed() -> None:
    """A new request type naming a node must be sorted: a sender's claim, or a target."""
    node_fields = {"candidate_id", "leader_id", "replica_id", "voter_id"}
    named = {cls.__name__ for cls in messages.REQUEST_TYPES
             if node_fields & set(cls.__dataclass_fields__)}
    assert named == set(RAFT_CLAIMS) | set(TARGET_FIELDS)
    assert not set(RAFT_CLAIMS) & set(TARGET_FIELDS)


@pytest.mark.parametrize("api", sorted(REQUESTS))
def test_the_sender_field_is_claimed_when_a_raft_request_names_one(api: str) -> None:
    assert claimed_ids(frame_of(REQUESTS[api])) == [1]
    assert identity_violation(frame_of(REQUESTS[api]), 1) is None
    assert identity_violation(frame_of(REQUESTS[api]), 7) == 1
    assert identity_violation(frame_of(REQUESTS[api]), None) == 1


def test_the_frame_src_is_claimed_too_when_the_body_is_honest() -> None:
    frame = frame_of(REQUESTS["VoteRequest"], src=7)
    assert claimed_ids(frame) == [7, 1]
    assert identity_violation(frame, 7) == 1
    assert identity_violation(frame_of(REQUESTS["FetchRequest"], src=1), 1) is None


def test_a_fetch_as_a_plain_consumer_claims_nothing_when_its_replica_id_is_negative() -> None:
    frame = frame_of(messages.FetchRequest(cluster_id="c", replica_id=-1,
                                           current_leader_epoch=3, fetch_offset=0,
                                           last_fetched_epoch=0))
    assert claimed_ids(frame) == []
    assert identity_violation(frame, None) is None


def test_describe_quorum_and_admin_apis_claim_nothing_when_no_extra_fields_are_given() -> None:
    assert claimed_ids(frame_of(messages.DescribeQuorumRequest(cluster_id="c"))) == []
    frame = {"api": "RegisterBroker", "body": {"broker_id": 5}}
    assert claimed_ids(frame) == []
    assert claimed_ids(frame, {"RegisterBroker": "broker_id"}) == [5]
    assert identity_violation(frame, 4, {"RegisterBroker": "broker_id"}) == 5


@pytest.mark.parametrize("body", [None, [], {"topics": []}, {"topics": [{"partitions": [7]}]},
                                  {"topics": [{"partitions": [{"candidate_id": "1"}]}]},
                                  {"topics": [{"partitions": [{"candidate_id": True}]}]}])
def test_a_malformed_body_claims_nothing_when_its_field_cannot_be_read(body: Any) -> None:
    assert claimed_ids({"api": "VoteRequest", "body": body}) == []
