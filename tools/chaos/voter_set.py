"""A dynamic quorum's voter set as `kraft chaos --dynamic` judges it (KIP-853): pure
functions of the leader's DescribeQuorum voters and the voters' meta.properties.

A voter is a replica key, (node id, directory id); `kraft format` writes a new directory
id on every format, so a voter whose disk was wiped and formatted anew comes back as an
observer under a new key. The wipe-voter fault replaces it as an operator would: remove
the old key (`kraft quorum remove-controller`), then add the new one (`add-controller`).
`replacement_step` says which of those the leader's current voter set still needs, so a
request whose answer was lost (the change was applied anyway) is not sent again blindly;
`voter_set_problems` says how a voter set differs from the whole set, each voter id once
under its directory id of now (the nemesis wipes no voter unless it holds, and the checker
requires it after the run).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

REMOVE = "remove"  # the old key is still a voter
ADD = "add"  # the old key is gone, the new one not yet in
DONE = "done"  # the new key is a voter
STUCK = "stuck"  # the node is a voter under a third directory id: neither request helps


def voter_keys(voters: Iterable[Mapping[str, object]]) -> list[tuple[int, str | None]]:
    """(id, directory id) of each voter of a `describe_quorum` answer's `voters`."""
    return [(int(str(v["replica_id"])), None if v.get("replica_directory_id") is None
             else str(v["replica_directory_id"])) for v in voters]


def replacement_step(voters: Iterable[tuple[int, str | None]], node_id: int, old_directory: str,
                     new_directory: str) -> str:
    """What replacing (node_id, old_directory) by (node_id, new_directory) still needs."""
    keys = set(voters)
    if (node_id, new_directory) in keys:
        return DONE
    if (node_id, old_directory) in keys:
        return REMOVE
    if any(voter_id == node_id for voter_id, _ in keys):
        return STUCK
    return ADD


def voter_set_problems(voters: Iterable[tuple[int, str | None]],
                       expected: Mapping[int, str | None]) -> list[str]:
    """How `voters` differs from every expected voter id exactly once with its expected
    directory id (empty: it is whole)."""
    listed = list(voters)
    counts = Counter(voter_id for voter_id, _ in listed)
    problems = [f"voter {n} is listed {c} times" for n, c in sorted(counts.items()) if c > 1]
    problems += [f"node {n} is not a voter" for n in sorted(expected) if n not in counts]
    problems += [f"node {n} is a voter but not one of the cluster's controllers"
                 for n in sorted(counts) if n not in expected]
    problems += [f"voter {n} has directory id {d}, its disk {expected[n]}"
                 for n, d in sorted(listed, key=lambda k: (k[0], str(k[1])))
                 if n in expected and d != expected[n]]
    return problems
