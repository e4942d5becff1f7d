"""The Raft core (KIP-595 with KIP-996 pre-vote): pure, synchronous, deterministic.

`RaftCore` takes `step(envelope)`, `tick(now_ms)`, `propose(records)` and `resign()`,
and from the shell `peer_disconnected(node_id)` (its connection to a voter closed) and
`peer_unreachable(node_id)` (a connect to it was refused: nothing listens there), and
hands back a `Ready` (see `raft.types`), acknowledged with `advance()`. Modules:

- `_base`: the shared state and every transition below (the election state is
  persisted before anything that depends on it leaves the node);
- `_election`: Vote, BeginQuorumEpoch, EndQuorumEpoch (voter, candidate, announcements);
- `_replication`: Fetch, both sides, and the high watermark;
- `_raft_core`: the API, dispatch of messages to those two, and the timers;
- `_quorum_state`, `_leader_state`: one class per state; `_topic_id`: KIP-516 addressing.

The modules share private state: they are one class split by concept, and nothing
outside this package reaches into it (the simulator's planted bugs subclass it).

State transitions (Kafka's `QuorumState` table, as this core implements it):

    from         to            when
    any          Unattached    a message names a higher epoch and no leader for it
    any          Follower      a message names a leader of a higher epoch (or of this
                               epoch, from a state that knows no leader yet)
    Unattached   Voted         this voter grants its vote in the current epoch
    Unattached,  Prospective   the election timeout expires (a follower: its fetch
    Voted,                     timeout); without pre-vote straight to Candidate
    Follower,
    Candidate,
    Resigned
    Follower,    Prospective   the leader refuses connections (`peer_unreachable`; a
    Prospective                prospective only after a rejection: a new round)
    Prospective  Candidate     a majority grants the pre-vote (epoch + 1)
    Prospective  Follower      a majority rejects it while the known leader lives on
    Follower     Candidate     EndQuorumEpoch names this voter first successor
    Candidate    Leader        a majority grants the vote
    Leader       Resigned      graceful shutdown, or check-quorum: no Fetch from a
                               majority within 1.5 fetch timeouts

Observers never leave Unattached/Follower: they find the leader by asking voters, and
one whose leader went silent for longer than a long poll, or whose connection to it was
lost, asks the other voters who leads while it still fetches from it.
"""

from raft.core._base import RaftConfig, RaftInvariantError
from raft.core._quorum_state import Role
from raft.core._raft_core import RaftCore

__all__ = ["RaftConfig", "RaftCore", "RaftInvariantError", "Role"]
