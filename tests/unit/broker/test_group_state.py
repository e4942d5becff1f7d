"""broker.kafka.groups.group_state: the classic group protocol as a pure state machine (the
clock passed in)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.kafka.groups.group_state import (
    COMPLETING,
    EMPTY,
    PREPARING,
    STABLE,
    Answer,
    CommittedOffset,
    Group,
    Outcome,
    commit_error_for,
    subscribed_topics,
)
from raft.common.errors import ErrorCode

SESSION, REBALANCE = 10.0, 30.0
_ids = iter(range(1_000_000))


def join(group: Group, member_id: str = "", now: float = 0.0, *,
         instance_id: str | None = None, protocols: tuple[tuple[str, bytes], ...] = (
             ("range", b"r"),), initial_delay_s: float = 0.0) -> tuple[str, Outcome]:
    return group.join(member_id=member_id, instance_id=instance_id, protocol_type="consumer",
                      protocols=protocols, session_timeout_s=SESSION,
                      rebalance_timeout_s=REBALANCE, now=now,
                      new_member_id=f"m{next(_ids)}", initial_delay_s=initial_delay_s)


def stable_group(size: int, now: float = 0.0) -> tuple[Group, list[str]]:
    """A Stable group of `size` members (the first joins alone, the others make one
    more round in which everyone rejoins), synced."""
    group = Group(group_id="g")
    ids = []
    for _ in range(size):
        member_id, _ = join(group, now=now)
        ids.append(member_id)
    for member_id in ids:
        if group.state == PREPARING and not group.members[member_id].awaiting_join:
            join(group, member_id, now=now)
    assert group.state == COMPLETING
    assert group.generation == min(size, 2)
    outcome = group.sync(member_id=group.leader or "", instance_id=None,
                         generation=group.generation,
                         assignments={m: m.encode() for m in ids}, now=now)
    assert outcome.store
    assert group.state == STABLE
    return group, ids


def test_lone_member_leads_generation_one_and_gets_its_assignment_when_it_syncs() -> None:
    group = Group(group_id="g")
    member_id, outcome = join(group)
    answer = outcome.take(member_id)
    assert answer is not None
    assert answer.error == ErrorCode.NONE
    assert (answer.generation, answer.leader, answer.protocol) == (1, member_id, "range")
    assert [m[0] for m in answer.members] == [member_id]
    synced = group.sync(member_id=member_id, instance_id=None, generation=1,
                        assignments={member_id: b"all"}, now=1)
    assert synced.store
    assert synced.take(member_id) == Answer(member_id=member_id, generation=1,
                                            protocol_type="consumer", protocol="range",
                                            assignment=b"all")


def test_empty_groups_first_round_waits_the_initial_delay_so_members_share_it() -> None:
    """group.initial.rebalance.delay.ms (3 s here): the first JoinGroup parks; a second
    member joining 2 s later extends the delay to 5 s, and both get generation 1 at that
    tick, where without the delay the first would have had a round of its own (a
    cooperative consumer then hands partitions over: librdkafka's
    0113_cooperative_rebalance counts its assign calls)."""
    group = Group(group_id="g")
    first, outcome = join(group, initial_delay_s=3.0)
    assert outcome.answers == []
    second, outcome = join(group, now=2.0, initial_delay_s=3.0)
    assert outcome.answers == []
    assert group.tick(4.9).answers == []
    answers = {a.member_id: a for a in group.tick(5.0).answers}
    assert set(answers) == {first, second}
    assert {a.generation for a in answers.values()} == {1}
    # a later round (not an Empty group's first) is not delayed
    third, outcome = join(group, now=6.0, initial_delay_s=3.0)
    _, outcome = join(group, first, now=6.1, initial_delay_s=3.0)
    _, outcome = join(group, second, now=6.2, initial_delay_s=3.0)
    assert {a.member_id for a in outcome.answers} == {first, second, third}


def test_initial_delay_never_holds_a_round_past_its_deadline() -> None:
    group = Group(group_id="g")
    member, _ = join(group, initial_delay_s=REBALANCE * 2)
    assert group.tick(REBALANCE - 0.1).answers == []
    assert [a.member_id for a in group.tick(REBALANCE).answers] == [member]


def test_second_member_parks_until_first_rejoins_when_group_stable() -> None:
    group, (first,) = stable_group(1)
    second, outcome = join(group, now=1)
    assert outcome.take(second) is None
    assert group.state == PREPARING
    assert group.heartbeat(member_id=first, instance_id=None, generation=1, now=2) == \
        ErrorCode.REBALANCE_IN_PROGRESS
    _, outcome = join(group, first, now=3)
    answers = {a.member_id: a for a in outcome.answers}
    assert set(answers) == {first, second}
    assert {a.generation for a in answers.values()} == {2}
    assert answers[first].leader == first
    assert len(answers[first].members) == 2
    assert answers[second].members == ()


def test_dead_member_expires_after_session_timeout_when_group_stable() -> None:
    """The old bug: a member that dies in a Stable group without LeaveGroup was never
    removed. Now a tick past its session timeout removes it and rebalances the rest."""
    group, (alive, dead) = stable_group(2)
    for now in (3.0, 6.0, 9.0):
        group.heartbeat(member_id=alive, instance_id=None, generation=2, now=now)
        assert not group.tick(now).answers
    assert group.tick(SESSION).answers == []
    assert dead in group.members
    group.heartbeat(member_id=alive, instance_id=None, generation=2, now=SESSION + 0.5)
    group.tick(SESSION + 0.5)
    assert dead not in group.members
    assert group.state == PREPARING
    _, outcome = join(group, alive, now=SESSION + 1)
    assert outcome.take(alive) is not None
    assert group.generation == 3


def test_round_completes_at_deadline_without_members_that_did_not_rejoin() -> None:
    group, (first, second) = stable_group(2)
    third, _ = join(group, now=1)
    _, outcome = join(group, first, now=2)
    assert outcome.answers == []  # second has not rejoined yet
    for now in range(5, 31, 5):  # alive (its heartbeats say REBALANCE_IN_PROGRESS)
        assert group.heartbeat(member_id=second, instance_id=None, generation=2,
                               now=now) == ErrorCode.REBALANCE_IN_PROGRESS
        assert group.tick(now).answers == []
    assert group.tick(1 + REBALANCE - 0.1).answers == []
    outcome = group.tick(1 + REBALANCE)
    assert {a.member_id for a in outcome.answers} == {first, third}
    assert second not in group.members
    assert group.generation == 3


def test_parked_syncs_answered_rebalance_in_progress_when_a_new_round_starts() -> None:
    group, (first, second) = stable_group(2)
    _, outcome = join(group, first, now=0)  # the leader rejoins: a new round
    _, outcome = join(group, second, now=0)
    assert {a.member_id for a in outcome.answers} == {first, second}
    follower = second if group.leader == first else first
    parked = group.sync(member_id=follower, instance_id=None, generation=group.generation,
                        assignments={}, now=1)
    assert parked.answers == []  # waits for the leader
    _, outcome = join(group, now=2)  # a third member: new round
    assert outcome.answers == [Answer(member_id=follower,
                                      error=ErrorCode.REBALANCE_IN_PROGRESS)]


def test_commit_checks_member_and_generation_when_group_has_members() -> None:
    group, (member,) = stable_group(1)
    assert group.commit_error(member_id=member, instance_id=None, generation=1,
                              now=1) == ErrorCode.NONE
    assert group.commit_error(member_id=member, instance_id=None, generation=0,
                              now=1) == ErrorCode.ILLEGAL_GENERATION
    assert group.commit_error(member_id="zombie", instance_id=None, generation=1,
                              now=1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert group.commit_error(member_id="", instance_id=None, generation=-1,
                              now=1) == ErrorCode.UNKNOWN_MEMBER_ID
    join(group, now=2)  # PreparingRebalance: the current generation may still commit
    assert group.commit_error(member_id=member, instance_id=None, generation=1,
                              now=2) == ErrorCode.NONE
    assert commit_error_for(None, member_id="", instance_id=None, generation=-1,
                            now=0) == ErrorCode.NONE
    assert commit_error_for(None, member_id="x", instance_id=None, generation=3,
                            now=0) == ErrorCode.ILLEGAL_GENERATION
    assert commit_error_for(Group(group_id="e"), member_id="", instance_id=None,
                            generation=-1, now=0) == ErrorCode.NONE


def test_commit_refused_while_assignment_handed_out() -> None:
    group = Group(group_id="g")
    member, _ = join(group)
    assert group.commit_error(member_id=member, instance_id=None, generation=1,
                              now=0) == ErrorCode.REBALANCE_IN_PROGRESS


def test_static_member_replaced_without_rebalance_and_old_id_fenced_when_it_rejoins(
        ) -> None:
    group = Group(group_id="g")
    old, _ = join(group, instance_id="host-1")
    group.sync(member_id=old, instance_id="host-1", generation=1,
               assignments={old: b"p0"}, now=0)
    new, outcome = join(group, now=5, instance_id="host-1")
    answer = outcome.take(new)
    assert answer is not None
    assert answer.error == ErrorCode.NONE
    assert (answer.generation, group.state, answer.leader) == (1, STABLE, new)
    assert outcome.store
    synced = group.sync(member_id=new, instance_id="host-1", generation=1, assignments={},
                        now=6).take(new)
    assert synced is not None
    assert synced.assignment == b"p0"
    assert group.heartbeat(member_id=old, instance_id="host-1", generation=1, now=6) == \
        ErrorCode.FENCED_INSTANCE_ID
    assert group.commit_error(member_id=old, instance_id="host-1", generation=1,
                              now=6) == ErrorCode.FENCED_INSTANCE_ID


def test_static_member_with_new_protocols_rebalances_when_it_rejoins() -> None:
    group, _ = stable_group(1)
    new, outcome = join(group, now=1, instance_id="i",
                        protocols=(("range", b"r"), ("roundrobin", b"x")))
    new2, outcome = join(group, now=2, instance_id="i", protocols=(("range", b"other"),))
    assert group.state in (PREPARING, COMPLETING)
    errors, _ = group.leave([("", "i")], now=3)
    assert errors == [ErrorCode.NONE]
    assert new2 not in group.members


def test_inconsistent_protocol_refused_when_no_common_protocol() -> None:
    group, _ = stable_group(1)
    member_id, outcome = join(group, protocols=(("sticky", b""),))
    answer = outcome.take(member_id)
    assert answer is not None
    assert answer.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_later_record_wins_when_commits_replicate_out_of_order() -> None:
    group = Group(group_id="g")
    group.apply_offset("t", 0, CommittedOffset(offset=7, record_offset=11))
    group.apply_offset("t", 0, CommittedOffset(offset=5, record_offset=10))
    assert group.offsets[("t", 0)].offset == 7
    group.apply_offset("t", 0, None)
    assert ("t", 0) not in group.offsets


def test_metadata_record_restores_members_and_assignments_when_loaded() -> None:
    group, ids = stable_group(2)
    restored = Group(group_id="g")
    restored.restore(group.metadata_value(), now=100)
    assert (restored.state, restored.generation, restored.leader) == \
        (STABLE, 2, group.leader)
    assert {m: restored.members[m].assignment for m in ids} == {m: m.encode() for m in ids}
    assert restored.heartbeat(member_id=ids[0], instance_id=None, generation=2,
                              now=101) == ErrorCode.NONE
    restored.tick(101 + SESSION + 0.1)  # nobody heartbeats the new coordinator
    assert restored.state == EMPTY
    assert not restored.members


def static_member_synced(now: float = 0.0) -> tuple[Group, str]:
    """A Stable group whose one member is static (group.instance.id "host-1")."""
    group = Group(group_id="g")
    member, _ = join(group, now=now, instance_id="host-1")
    group.sync(member_id=member, instance_id="host-1", generation=1,
               assignments={member: b"p0"}, now=now)
    assert group.state == STABLE
    return group, member


def test_group_deletable_once_a_closed_static_members_session_ends_without_a_tick(
        ) -> None:
    """librdkafka's 0081_admin: a static member commits as it closes (no LeaveGroup),
    the client waits out its session timeout and deletes the group. The coordinator's
    tick need not have run since: DeleteGroups itself sees the session over."""
    group, member = static_member_synced()
    assert group.commit_error(member_id=member, instance_id="host-1", generation=1,
                              now=2.0) == ErrorCode.NONE  # the close's commit: last seen
    refused, outcome = group.delete_error(2.0 + SESSION - 0.001)
    assert (refused, outcome.answers, outcome.store) == (ErrorCode.NON_EMPTY_GROUP, [], False)
    assert member in group.members
    deleted, outcome = group.delete_error(2.0 + SESSION + 0.001)
    assert deleted == ErrorCode.NONE
    assert outcome.store  # the empty generation is written, as Kafka's
    assert (group.state, group.members, group.static) == (EMPTY, {}, {})


def test_subscribed_topics_read_when_consumer_protocol_metadata() -> None:
    metadata = b"\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bc" + b"\xff" * 4
    assert subscribed_topics("consumer", metadata) == {"a", "bc"}
    assert subscribed_topics("consumer", b"\x00") is None
    assert subscribed_topics("connect", metadata) is None


# --- random histories ---------------------------------------------------------------------

operations = st.lists(st.tuples(
    st.sampled_from(["join", "rejoin", "sync", "heartbeat", "leave", "tick"]),
    st.integers(0, 4),  # which member
    st.floats(0.0, 12.0)),  # time passing first
    max_size=60)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_invariants_hold_and_everyone_expires_when_random_history_then_silence(
        history: list[tuple[str, int, float]]) -> None:
    """Whatever members do, the generation never goes back, a group in
    CompletingRebalance/Stable has a leader among its members, an answer is given at
    most once per parked request, and once everyone goes silent every member is gone
    within a session timeout plus a rebalance timeout."""
    group = Group(group_id="g")
    now = 0.0
    parked: set[str] = set()
    known: list[str] = []
    for op, index, delay in history:
        now += delay
        generation = group.generation
        member = known[index % len(known)] if known else ""
        outcome = Outcome()
        if op == "join" or not known:
            member, outcome = join(group, now=now)
            known.append(member)
            parked.add(member)
        elif op == "rejoin" and member in group.members:
            _, outcome = join(group, member, now=now)
            parked.add(member)
        elif op == "sync" and member in group.members and member not in parked:
            outcome = group.sync(member_id=member, instance_id=None,
                                 generation=group.generation,
                                 assignments={m: b"a" for m in group.members}, now=now)
            parked.add(member)
        elif op == "heartbeat" and member not in parked:
            group.heartbeat(member_id=member, instance_id=None, generation=group.generation,
                            now=now)
        elif op == "leave" and member not in parked:
            _, outcome = group.leave([(member, None)], now)
        outcome.add(group.tick(now))
        for answer in outcome.answers:
            if answer.member_id in parked:
                parked.discard(answer.member_id)
        parked &= set(group.members)
        assert group.generation >= generation
        if group.state in (COMPLETING, STABLE):
            assert group.leader in group.members
        if group.state == EMPTY:
            assert not group.members
        assert all(not m.awaiting_sync for m in group.members.values()) or \
            group.state == COMPLETING
    end = now + SESSION + REBALANCE + 0.1
    outcome = group.tick(now + SESSION + 0.05)
    outcome.add(group.tick(end))
    outcome.add(group.tick(end + SESSION + 0.1))
    assert group.state == EMPTY
    assert not group.members
    assert not group.static


touches = st.lists(st.tuples(
    st.sampled_from(["heartbeat", "commit", "restart"]),
    st.floats(0.0, SESSION)),  # time since the member was last seen
    max_size=30)


@settings(max_examples=300, deadline=None)
@given(touches, st.floats(0.0, SESSION))
def test_static_member_kept_while_on_time_and_gone_when_its_session_ends(
        history: list[tuple[str, float]], probe: float) -> None:
    """A static member heartbeats, commits or restarts (rejoins under a new member id)
    at most a session timeout after it was last seen: it is never expired and DeleteGroups
    is always refused, even probed just before each touch. Then it closes silently:
    DeleteGroups is refused a millisecond before its session ends and succeeds a
    millisecond after, with no tick in between."""
    group, member = static_member_synced()
    last_seen = 0.0
    for op, gap in history:
        now = last_seen + gap
        assert group.delete_error(last_seen + min(probe, gap))[0] == \
            ErrorCode.NON_EMPTY_GROUP
        if op == "heartbeat":
            assert group.heartbeat(member_id=member, instance_id="host-1",
                                   generation=group.generation, now=now) == ErrorCode.NONE
        elif op == "commit":
            assert group.commit_error(member_id=member, instance_id="host-1",
                                      generation=group.generation, now=now) == ErrorCode.NONE
        else:
            member, outcome = join(group, now=now, instance_id="host-1")
            assert outcome.take(member) is not None  # Stable, same protocols: no round
        assert list(group.members) == [member]
        last_seen = now
    assert group.delete_error(last_seen + SESSION - 0.001)[0] == ErrorCode.NON_EMPTY_GROUP
    assert group.delete_error(last_seen + SESSION + 0.001)[0] == ErrorCode.NONE
    assert (group.state, group.members, group.static) == (EMPTY, {}, {})
