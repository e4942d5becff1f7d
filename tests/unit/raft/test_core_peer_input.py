"""Peer input never raises: every quorum state takes any well-typed message,
including nonsense values, and answers with error codes at worst (h2-style: every
(state, message) pair)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from raft import messages as msg
from raft.common.errors import ErrorCode
from raft.core import RaftCore
from raft.types import Batch, ElectionState, Envelope
from tests.property.test_messages import messages as wild_messages
from tests.support.core_harness import CLUSTER_ID, drain, log_with, make_core, make_leader

small = st.integers(min_value=-2, max_value=12)
batches = st.lists(st.builds(Batch, base_offset=st.integers(0, 12), epoch=st.integers(0, 6),
                             records=st.just((b"r",))), max_size=3).map(tuple)
leaders = st.builds(msg.CurrentLeader, leader_id=small, leader_epoch=small)
plausible = st.one_of(
    st.builds(msg.VoteRequest, cluster_id=st.just(CLUSTER_ID), candidate_epoch=small,
              candidate_id=small, last_offset_epoch=small, last_offset=small,
              pre_vote=st.booleans()),
    st.builds(msg.BeginQuorumEpochRequest, cluster_id=st.just(CLUSTER_ID), leader_id=small,
              leader_epoch=small),
    st.builds(msg.EndQuorumEpochRequest, cluster_id=st.just(CLUSTER_ID), leader_id=small,
              leader_epoch=small, preferred_successors=st.lists(small, max_size=3).map(tuple)),
    st.builds(msg.FetchRequest, cluster_id=st.just(CLUSTER_ID), replica_id=small,
              max_wait_ms=small, max_bytes=small, current_leader_epoch=small,
              fetch_offset=small, last_fetched_epoch=small),
    st.builds(msg.VoteResponse, error_code=st.sampled_from(list(ErrorCode)), leader_id=small,
              leader_epoch=small, vote_granted=st.booleans()),
    st.builds(msg.BeginQuorumEpochResponse, leader_id=small, leader_epoch=small),
    st.builds(msg.EndQuorumEpochResponse, leader_id=small, leader_epoch=small),
    st.builds(msg.FetchResponse, error_code=st.sampled_from([ErrorCode.NONE,
                                                             ErrorCode.FENCED_LEADER_EPOCH]),
              high_watermark=small, current_leader=leaders, records=batches,
              diverging_epoch=st.none() | st.builds(msg.DivergingEpoch, epoch=small,
                                                    end_offset=small)),
)
messages = st.one_of(plausible, plausible, plausible, wild_messages)


def core_in(state: str) -> RaftCore:
    voters = (1, 2, 3)
    if state == "leader":
        return make_leader(log=log_with(1, 1, 2), epoch=2)
    if state == "follower":
        return make_core(1, log=log_with(1, 2), election=ElectionState(
            epoch=3, leader_id=2, voters=voters))
    if state == "observer":
        return make_core(9, log=log_with(1), election=ElectionState(epoch=3, voters=voters))
    core = make_core(1, log=log_with(1, 3), election=ElectionState(epoch=3, voters=voters),
                     pre_vote=state == "prospective")
    if state in ("prospective", "candidate"):
        core.tick(10_000)
    elif state == "resigned":
        return make_core(1, election=ElectionState(epoch=3, leader_id=1, voters=voters))
    return core


states = st.sampled_from(["unattached", "follower", "observer", "prospective", "candidate",
                          "leader", "resigned"])


@settings(max_examples=400)
@given(states, st.lists(st.tuples(st.sampled_from([-4, 0, 1, 2, 3, 7]), messages,
                                  st.integers(min_value=0, max_value=12)), max_size=8))
def test_any_message_is_handled_without_raising_when_it_is_nonsense(
        state: str, inputs: list[tuple[int, Any, int]]) -> None:
    """A peer's message becomes state changes or error codes, never an
    exception; epochs never go back and the log never loses committed records."""
    core = core_in(state)
    drain(core)
    now = 10_000
    for src, message, correlation_id in inputs:
        epoch, hw = core.epoch, core.high_watermark
        now += 7
        core.step(Envelope(src=src, dst=core.node_id, correlation_id=correlation_id,
                           message=message), now)
        core.tick(now)
        drain(core)
        assert core.epoch >= epoch
        assert core.high_watermark >= hw
        assert core.high_watermark <= core.log.end_offset
