"""Voter changes of a dynamic quorum (KIP-853) sent to its leader: AddRaftVoter,
RemoveRaftVoter and UpdateKRaftVersion, as `kraft quorum add-controller` /
`remove-controller` and `kraft features upgrade` send them, and as kraft chaos's
wipe-voter fault replaces a voter.

Whom to ask is `raft.common.leader_redirect`'s decision (`tools.admin_client.LeaderClient`,
NOT_LEADER_OR_FOLLOWER followed to the leader it names). The leader answers
REQUEST_TIMED_OUT while the change cannot be made yet (the new voter not caught up,
another change under way): the change is asked again, after a pause, until the timeout;
any other refusal is final.
"""

from __future__ import annotations

import ssl
import time
from pathlib import Path
from typing import Any

from raft import messages
from raft.common.errors import ErrorCode
from raft.common.leader_redirect import Answered, Done, Lost, Outcome, Unknown
from raft.common.uuid import Uuid
from raft.control_records import Endpoint
from raft.storage import read_meta_properties
from tools.admin_client import LeaderClient, problems_text, raft_outcome
from tools.errors import CommandError

RETRY_S = 0.3  # the pause before a change the leader could not make yet is asked again
REQUEST_TIMEOUT_S = 10.0


def add_voter(addresses: list[str], *, cluster_id: str, node_id: int, directory_id: Uuid,
              endpoint: Endpoint, timeout_s: float,
              ssl_context: ssl.SSLContext | None = None) -> None:
    """AddRaftVoter for (node_id, directory_id) at `endpoint`."""
    send_change_to_leader(addresses, messages.AddRaftVoterRequest(
        cluster_id=cluster_id, voter_id=node_id, voter_directory_id=directory_id,
        listeners=(endpoint,)), timeout_s, ssl_context)


def remove_voter(addresses: list[str], *, cluster_id: str, node_id: int, directory_id: Uuid,
                 timeout_s: float, ssl_context: ssl.SSLContext | None = None) -> None:
    """RemoveRaftVoter for the replica key (node_id, directory_id)."""
    send_change_to_leader(addresses, messages.RemoveRaftVoterRequest(
        cluster_id=cluster_id, voter_id=node_id, voter_directory_id=directory_id),
        timeout_s, ssl_context)


def voter_change_outcome(address: str, reply: Any) -> Outcome:
    """A voter change's reply: a redirect as `raft_outcome` reads one, else the decoded
    VoterChangeResponse; an undecodable reply (an error frame) is `Lost`."""
    outcome = raft_outcome(address, reply)
    if not isinstance(outcome, Answered):
        return outcome
    try:
        return Answered(messages.decode_message("VoterChangeResponse", reply))
    except messages.MessageError:
        detail = reply.get("error_message", reply) if isinstance(reply, dict) else reply
        return Lost(f"{address}: {detail}")


def send_change_to_leader(addresses: list[str], message: Any, timeout_s: float,
                          ssl_context: ssl.SSLContext | None = None) -> None:
    """Send the voter change to the leader, asked again while it answers
    REQUEST_TIMED_OUT, until `timeout_s`; CommandError when refused or given up."""
    api, body = messages.encode_message(message)
    deadline = time.monotonic() + timeout_s
    client = LeaderClient(addresses, ssl_context=ssl_context,
                          attempt_timeout_s=REQUEST_TIMEOUT_S, backoff_s=RETRY_S)
    while True:
        result = client.call(api, body, classify=voter_change_outcome, is_write=True,
                             deadline=deadline)
        if not isinstance(result, Done):
            applied = " (it may have been applied)" if isinstance(result, Unknown) else ""
            problems = problems_text(result.problems) or "no controller answered"
            raise CommandError(f"no leader made the change within {timeout_s:g} s{applied}: "
                               f"{problems}")
        answer = result.value
        assert isinstance(answer, messages.VoterChangeResponse)
        if answer.error_code == ErrorCode.NONE:
            return
        last = f"{answer.error_code.name}: {answer.error_message or ''}".rstrip(": ")
        if answer.error_code != ErrorCode.REQUEST_TIMED_OUT:
            raise CommandError(last)
        if time.monotonic() + RETRY_S >= deadline:
            raise CommandError(f"gave up after {timeout_s:g} s: {last}")
        time.sleep(RETRY_S)  # the leader could not make the change yet: a backoff


def directory_id_of(data_dir: str | Path) -> str | None:
    """A node's directory id from its meta.properties (None before KIP-853 formats)."""
    meta = read_meta_properties(data_dir)
    return meta.directory_id if meta is not None else None
