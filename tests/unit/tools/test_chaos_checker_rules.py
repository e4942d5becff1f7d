"""Every rule of the chaos checker (tools/chaos/checker.py) fires on a minimal history
planting exactly its violation, and is then the only rule reported.

The rules, by kind, each followed by the planted cases (`PLANTS`) that make it fire:
- id_reused: two acknowledged creates returned the same topic ID (id_reused).
- create_lost:
  * an acknowledged create is missing from the final metadata and no delete explains it
    (create_lost:missing);
  * a final topic carries an ID created under another name (create_lost:renamed);
  * a final topic was created by no operation (create_lost:from_nowhere).
- delete_undone: a topic whose delete was acknowledged is in the final metadata
  (delete_undone).
- stale_read:
  * describe by name answers the ID another name was created with
    (stale_read:name_answers_other_id);
  * describe by name answers an ID after its delete was acknowledged
    (stale_read:name_after_delete);
  * describe by ID answers another ID (the old ID of a recreated name answering the
    new incarnation), or another name than the ID's create
    (stale_read:id_answers_other_id, stale_read:id_answers_other_name);
  * describe by ID finds the topic after its delete was acknowledged
    (stale_read:id_after_delete);
  * describe by ID answers UNKNOWN_TOPIC_ID after the create was acknowledged and
    before any delete (stale_read:id_unknown_after_create).
- misplaced:
  * a partition's offsets are read out of order (misplaced:offsets_out_of_order);
  * a value is read from another partition than it was produced to
    (misplaced:wrong_partition).
- duplicate: a value is readable twice (duplicate).
- deleted_data:
  * a value no produce may have written is readable (deleted_data:never_produced,
    deleted_data:failed_produce);
  * a value written before its topic ID was created is readable under it
    (deleted_data:before_create).
- lost_write: an acknowledged produce is not readable at its offset (lost_write).
- divergence:
  * brokers applied different offsets (divergence:offsets);
  * a broker did not report its image (divergence:unreported);
  * a broker's image hash differs from the controller log's (divergence:hash);
  * brokers at one offset the voters' logs no longer reach (a snapshot moved their start
    past it) hold different images (divergence:images).
- stale_partition:
  * a broker hosts a partition the final metadata does not assign it: its topic was
    deleted, its topic ID replaced, or it is another broker's
    (stale_partition:deleted_topic, stale_partition:replaced_id, stale_partition:unassigned);
  * a staged deletion is overdue, or has no due time (stale_partition:overdue,
    stale_partition:no_due_time).
- missing_partition: a broker lacks a partition assigned to it (missing_partition).

The rules themselves are read from the checker's source (tests.support.rule_sites): every
`Violation(kind=..., message=...)`, one per branch of a conditional message. A rule
added to the checker without a plant here fails `test_every_rule_of_the_checker_has_a_plant`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from tests.support.chaos_history import NEW_ID, OLD_ID, Script
from tests.support.rule_sites import Site, chaos_kinds, chaos_sites
from tools.chaos.checker import (
    OVERDUE_GRACE_MS,
    BrokerDisk,
    BrokerObservation,
    CheckResult,
    FinalState,
    PartitionDir,
    ReadRecord,
    StagedDir,
    Violation,
    check,
)
from tools.chaos.history import Event

X, Y = OLD_ID, NEW_ID
SEEN_MS = 1_000_000
# image hashes longer than the 12 characters a divergence message shows of them
H3, H4 = "3333333333330000", "4444444444440000"
SITES = chaos_sites()


@dataclass(frozen=True, slots=True, kw_only=True)
class Plant:
    rule: str  # kind:case, as listed in the module docstring
    events: Sequence[Event]
    final: FinalState
    message: str  # of each violation, exactly
    count: int = 1  # violations expected, all of this rule
    op_index: int | None = None  # the operation the violation names
    # the plant without its anomaly (another final state, or other events and the same
    # final state): shows the rest of the plant is clean
    control: FinalState | None = None
    control_events: Sequence[Event] | None = None

    @property
    def kind(self) -> str:
        return self.rule.split(":")[0]


def _created(name: str = "a", topic_id: str = X) -> Script:
    """A history whose only operation is the acknowledged create of `name`."""
    script = Script()
    script.op("create", {"name": name}, 1, 2, topic_id=topic_id)
    return script


def _reads(topic_id: str, *values: str, partition: int = 0) -> list[ReadRecord]:
    return [ReadRecord(topic_id=topic_id, partition=partition, offset=i, value=v)
            for i, v in enumerate(values)]


def _final(topics: dict[str, str], reads: Sequence[ReadRecord] = (),
           assignments: dict[str, dict[int, Sequence[int]]] | None = None,
           disks: Sequence[BrokerDisk] = ()) -> FinalState:
    """Every final topic fully read."""
    return FinalState(topics=topics, reads=reads,
                      read_complete=dict.fromkeys(topics.values(), True),
                      assignments=assignments or {}, disks=disks)


def _disk(*dirs: tuple[str, int, str], staged: Sequence[StagedDir] = (),
          assignments: dict[int, Sequence[int]] | None = None) -> FinalState:
    """Topic a (X) whose partitions `assignments` assigns (default: partition 0 to broker
    4), and broker 4's log dir holding `dirs` (topic, partition, topic ID)."""
    disk = BrokerDisk(node_id=4, observed_ms=SEEN_MS, staged=staged, partitions=[
        PartitionDir(topic=t, partition=p, topic_id=i) for t, p, i in dirs])
    return _final({"a": X}, assignments={X: assignments or {0: (4,)}}, disks=[disk])


def _brokers(*brokers: tuple[int, int | None, str | None]) -> FinalState:
    return FinalState(topics={}, reference_hashes={3: H3, 4: H4}, brokers=[
        BrokerObservation(node_id=n, applied_offset=o, image_hash=h) for n, o, h in brokers])


def _id_reused() -> Plant:
    script = _created("a", X)
    again = script.op("create", {"name": "b"}, 3, 4, topic_id=X)
    fresh = _created("a", X)
    fresh.op("create", {"name": "b"}, 3, 4, topic_id=Y)
    return Plant(rule="id_reused", events=script.events, final=_final({"b": X}),
                 message=f"create of 'b' returned {X}, already returned by op 0",
                 op_index=again,
                 control=_final({"a": X, "b": Y}), control_events=fresh.events)


def _create_lost_missing() -> Plant:
    """b, created first, is kept: a is checked after it."""
    script = _created("b", Y)
    lost = script.op("create", {"name": "a"}, 3, 4, topic_id=X)
    return Plant(rule="create_lost:missing", events=script.events, final=_final({"b": Y}),
                 message=f"acknowledged create of 'a' ({X}) is not in the final metadata "
                         "and no delete could have removed it",
                 op_index=lost, control=_final({"a": X, "b": Y}))


def _create_lost_renamed() -> Plant:
    return Plant(rule="create_lost:renamed", events=_created().events,
                 final=_final({"b": X}), message=f"final topic 'b' has ID {X}, created as 'a'",
                 control=_final({"a": X}))


def _create_lost_from_nowhere() -> Plant:
    """b's only create failed; a, created and listed before b, is checked first."""
    script = _created("a", X)
    script.op("create", {"name": "b"}, 3, 4, "failed", error="TOPIC_ALREADY_EXISTS")
    return Plant(rule="create_lost:from_nowhere", events=script.events,
                 final=_final({"a": X, "b": Y}),
                 message=f"final topic 'b' ({Y}) was created by no operation",
                 control=_final({"a": X}))


def _delete_undone() -> Plant:
    script = _created()
    script.op("delete", {"name": "a"}, 3, 4, topic_id=X)
    return Plant(rule="delete_undone", events=script.events, final=_final({"a": X}),
                 message=f"topic {X} is in the final metadata after its delete was "
                         "acknowledged", control=_final({}))


def _describe(op: str, args: dict[str, object], start: float, *, deleted: bool = False,
              status: str = "ok", **answer: object) -> tuple[Script, int]:
    """Topics a (X) and b (Y) created, a's deletion acknowledged when `deleted`, then
    one describe invoked at `start`."""
    script = _created("a", X)
    script.op("create", {"name": "b"}, 3, 4, topic_id=Y)
    if deleted:
        script.op("delete", {"name": "a"}, 5, 6, topic_id=X)
    return script, script.op(op, args, start, start + 1, status, **answer)


def _stale_name_other_id() -> Plant:
    script, describe = _describe("describe_name", {"name": "b"}, 7, topic_id=X)
    clean, _ = _describe("describe_name", {"name": "b"}, 7, topic_id=Y)
    return Plant(rule="stale_read:name_answers_other_id", events=script.events,
                 final=_final({"a": X, "b": Y}),
                 message=f"describe of name 'b' answered {X}, the ID of 'a'", op_index=describe,
                 control=_final({"a": X, "b": Y}), control_events=clean.events)


def _stale_name_after_delete() -> Plant:
    script, describe = _describe("describe_name", {"name": "a"}, 7, deleted=True, topic_id=X)
    clean, _ = _describe("describe_name", {"name": "a"}, 7, deleted=True, status="failed",
                         error="UNKNOWN_TOPIC_OR_PARTITION")
    return Plant(rule="stale_read:name_after_delete", events=script.events,
                 final=_final({"b": Y}),
                 message=f"describe of name 'a' answered {X} after its delete was acknowledged",
                 op_index=describe, control=_final({"b": Y}), control_events=clean.events)


def _stale_id_other_id() -> Plant:
    """The old ID of a recreated name answers the new incarnation: the name is right,
    the ID is not (KIP-516)."""
    def history(answer: str | None) -> tuple[Script, int]:
        script = _created("a", X)
        script.op("delete", {"name": "a"}, 3, 4, topic_id=X)
        script.op("create", {"name": "a"}, 5, 6, topic_id=Y)
        if answer is None:
            return script, script.op("describe_id", {"topic_id": X}, 7, 8, "failed",
                                     error="UNKNOWN_TOPIC_ID")
        return script, script.op("describe_id", {"topic_id": X}, 7, 8, name="a",
                                 topic_id=answer)

    script, describe = history(Y)
    return Plant(rule="stale_read:id_answers_other_id", events=script.events,
                 final=_final({"a": Y}), message=f"describe by ID {X} answered 'a' ({Y})",
                 op_index=describe,
                 control=_final({"a": Y}), control_events=history(None)[0].events)


def _stale_id_other_name() -> Plant:
    script, describe = _describe("describe_id", {"topic_id": X}, 7, name="b", topic_id=X)
    clean, _ = _describe("describe_id", {"topic_id": X}, 7, name="a", topic_id=X)
    return Plant(rule="stale_read:id_answers_other_name", events=script.events,
                 final=_final({"a": X, "b": Y}), message=f"describe by ID {X} answered 'b' ({X})",
                 op_index=describe, control=_final({"a": X, "b": Y}), control_events=clean.events)


def _stale_id_after_delete() -> Plant:
    script, describe = _describe("describe_id", {"topic_id": X}, 7, deleted=True, name="a",
                                 topic_id=X)
    clean, _ = _describe("describe_id", {"topic_id": X}, 7, deleted=True, status="failed",
                         error="UNKNOWN_TOPIC_ID")
    return Plant(rule="stale_read:id_after_delete", events=script.events,
                 final=_final({"b": Y}),
                 message=f"describe by ID {X} found 'a' after its delete was acknowledged",
                 op_index=describe, control=_final({"b": Y}), control_events=clean.events)


def _stale_id_unknown_after_create() -> Plant:
    script, describe = _describe("describe_id", {"topic_id": X}, 7, status="failed",
                                 error="UNKNOWN_TOPIC_ID")
    clean, _ = _describe("describe_id", {"topic_id": X}, 7, name="a", topic_id=X)
    return Plant(rule="stale_read:id_unknown_after_create", events=script.events,
                 final=_final({"a": X, "b": Y}),
                 message=f"describe by ID {X} answered UNKNOWN_TOPIC_ID after its create was "
                         "acknowledged and before any delete of it",
                 op_index=describe, control=_final({"a": X, "b": Y}), control_events=clean.events)


def _produced(*values: tuple[str, int, str, int | None]) -> tuple[Script, list[int]]:
    """Topic a (X) created, then produces (value, partition, status, acknowledged
    offset) one after the other."""
    script = _created()
    ops = []
    for i, (value, partition, status, offset) in enumerate(values):
        result = {} if offset is None else {"offset": offset}
        ops.append(script.op("produce", {"name": "a", "partition": partition, "value": value},
                             3 + 2 * i, 4 + 2 * i, status, **result))
    return script, ops


def _misplaced_order() -> Plant:
    script, _ = _produced(("v0", 0, "ok", 0), ("v1", 0, "ok", 1))
    swapped = [ReadRecord(topic_id=X, partition=0, offset=1, value="v1"),
               ReadRecord(topic_id=X, partition=0, offset=0, value="v0")]
    return Plant(rule="misplaced:offsets_out_of_order", events=script.events,
                 final=_final({"a": X}, swapped),
                 message=f"{X}-0: offsets read out of order or twice",
                 control=_final({"a": X}, _reads(X, "v0", "v1")))


def _misplaced_partition() -> Plant:
    script, (produce,) = _produced(("v0", 1, "unknown", None))
    return Plant(rule="misplaced:wrong_partition", events=script.events,
                 final=_final({"a": X}, _reads(X, "v0")),
                 message=f"a-0@0 ({X}) holds 'v0', produced to a-1",
                 op_index=produce,
                 control=_final({"a": X}, _reads(X, "v0", partition=1)))


def _duplicate() -> Plant:
    script, _ = _produced(("v0", 0, "ok", 0))
    return Plant(rule="duplicate", events=script.events,
                 final=_final({"a": X}, _reads(X, "v0", "v0")),
                 message="value 'v0' readable 2 times",
                 control=_final({"a": X}, _reads(X, "v0")))


def _deleted_never_produced() -> Plant:
    return Plant(rule="deleted_data:never_produced", events=_created().events,
                 final=_final({"a": X}, _reads(X, "ghost")),
                 message=f"a-0@0 ({X}) holds 'ghost', which no produce may have written",
                 control=_final({"a": X}))


def _deleted_failed_produce() -> Plant:
    script, _ = _produced(("v0", 0, "failed", None))
    return Plant(rule="deleted_data:failed_produce", events=script.events,
                 final=_final({"a": X}, _reads(X, "v0")),
                 message=f"a-0@0 ({X}) holds 'v0', which no produce may have written",
                 control=_final({"a": X}))


def _deleted_before_create() -> Plant:
    script, (produce,) = _produced(("v0", 0, "ok", 0))
    script.op("delete", {"name": "a"}, 5, 6, topic_id=X)
    script.op("create", {"name": "a"}, 7, 8, topic_id=Y)
    return Plant(rule="deleted_data:before_create", events=script.events,
                 final=_final({"a": Y}, _reads(Y, "v0")),
                 message=f"a-0@0 ({Y}) holds 'v0', written before this topic ID was created "
                         "(data of a deleted topic)", op_index=produce,
                 control=_final({"a": Y}))


def _lost_write() -> Plant:
    script, (produce,) = _produced(("v0", 0, "ok", 0))
    return Plant(rule="lost_write", events=script.events, final=_final({"a": X}),
                 message="acknowledged produce of 'v0' to a-0 at offset 0 is not readable "
                         "there (found at [])", op_index=produce,
                 control=_final({"a": X}, _reads(X, "v0")))


def _divergence_offsets() -> Plant:
    return Plant(rule="divergence:offsets", events=[],
                 final=_brokers((4, 3, H3), (5, 4, H4)),
                 message="brokers applied different offsets: 4@3, 5@4",
                 control=_brokers((4, 4, H4), (5, 4, H4)))


def _divergence_unreported() -> Plant:
    return Plant(rule="divergence:unreported", events=[], final=_brokers((4, None, None)),
                 message="broker 4 did not report its image", control=_brokers((4, 4, H4)))


def _divergence_hash() -> Plant:
    return Plant(rule="divergence:hash", events=[],
                 final=_brokers((4, 4, "badbadbadbadbad0")),
                 message="broker 4 image hash badbadbadbad at offset 4, controller's "
                         "444444444444", control=_brokers((4, 4, H4)))


def _divergence_images() -> Plant:
    return Plant(rule="divergence:images", events=[],
                 final=_brokers((4, 7, "aaaaaaaaaaaaaaa0"), (5, 7, "bbbbbbbbbbbbbbb0")),
                 message="brokers at the same offset hold different images: 4: aaaaaaaaaaaa, "
                         "5: bbbbbbbbbbbb",
                 control=_brokers((4, 7, "aaaaaaaaaaaaaaa0"), (5, 7, "aaaaaaaaaaaaaaa0")))


def _stale_deleted_topic() -> Plant:
    return Plant(rule="stale_partition:deleted_topic", events=_created().events,
                 final=_disk(("a", 0, X), ("b", 0, Y)),
                 message=f"broker 4 still hosts b-0 of topic ID {Y} after the delete delay: "
                         "its topic was deleted",
                 control=_disk(("a", 0, X)))


def _stale_replaced_id() -> Plant:
    return Plant(rule="stale_partition:replaced_id", events=_created().events,
                 final=_disk(("a", 0, X), ("a", 1, Y), assignments={0: (4,), 1: (5,)}),
                 message=f"broker 4 still hosts a-1 of topic ID {Y} after the delete delay: "
                         f"the topic's ID is {X}",
                 control=_disk(("a", 0, X), assignments={0: (4,), 1: (5,)}))


def _stale_unassigned() -> Plant:
    return Plant(rule="stale_partition:unassigned", events=_created().events,
                 final=_disk(("a", 0, X), ("a", 1, X), assignments={0: (4,), 1: (5,)}),
                 message=f"broker 4 still hosts a-1 of topic ID {X} after the delete delay: "
                         "the partition is not assigned to this broker",
                 control=_disk(("a", 0, X), ("a", 1, X), assignments={0: (4,), 1: (4, 5)}))


def _staged(due_ms: int | None) -> Sequence[StagedDir]:
    return [StagedDir(name=f"a-0.{Y}-delete", due_ms=due_ms)]


def _stale_overdue() -> Plant:
    return Plant(rule="stale_partition:overdue", events=_created().events,
                 final=_disk(("a", 0, X), staged=_staged(SEEN_MS - OVERDUE_GRACE_MS - 1)),
                 message=f"broker 4: staged deletion a-0.{Y}-delete is overdue "
                         f"(due {SEEN_MS - OVERDUE_GRACE_MS - 1}, seen at {SEEN_MS})",
                 control=_disk(("a", 0, X), staged=_staged(SEEN_MS - OVERDUE_GRACE_MS)))


def _stale_no_due_time() -> Plant:
    return Plant(rule="stale_partition:no_due_time", events=_created().events,
                 final=_disk(("a", 0, X), staged=_staged(None)),
                 message=f"broker 4: staged deletion a-0.{Y}-delete is overdue "
                         f"(due None, seen at {SEEN_MS})",
                 control=_disk(("a", 0, X)))


def _missing_partition() -> Plant:
    return Plant(rule="missing_partition", events=_created().events, final=_disk(),
                 message=f"broker 4 has no a-0 ({X}), assigned to it",
                 control=_disk(("a", 0, X)))


BUILDERS: tuple[Callable[[], Plant], ...] = (
    _id_reused, _create_lost_missing, _create_lost_renamed, _create_lost_from_nowhere,
    _delete_undone, _stale_name_other_id, _stale_name_after_delete, _stale_id_other_id,
    _stale_id_other_name, _stale_id_after_delete, _stale_id_unknown_after_create,
    _misplaced_order, _misplaced_partition, _duplicate, _deleted_never_produced,
    _deleted_failed_produce, _deleted_before_create, _lost_write, _divergence_offsets,
    _divergence_unreported, _divergence_hash, _divergence_images, _stale_deleted_topic,
    _stale_replaced_id, _stale_unassigned, _stale_overdue, _stale_no_due_time,
    _missing_partition)
PLANTS = [build() for build in BUILDERS]


def _sites_of(violation: Violation) -> list[Site]:
    return [s for s in SITES if s.matches(violation.kind, violation.message)]


def _run(plant: Plant) -> CheckResult:
    return check(plant.events, plant.final)


@pytest.mark.parametrize("plant", PLANTS, ids=lambda p: p.rule)
def test_planted_violation_is_reported_by_its_rule_alone(plant: Plant) -> None:
    result = _run(plant)
    assert [v.kind for v in result.violations] == [plant.kind] * plant.count, \
        result.violations
    for violation in result.violations:
        assert violation.message == plant.message
        assert violation.op_index == plant.op_index
        assert len(_sites_of(violation)) == 1, violation.message


@pytest.mark.parametrize("plant", PLANTS, ids=lambda p: p.rule)
def test_planted_history_passes_without_its_anomaly(plant: Plant) -> None:
    """The plant minus its anomaly (the final state it should have had, or the answer
    it should have got) is clean: what fires is the anomaly, not the scaffolding."""
    assert plant.control is not None
    result = check(plant.events if plant.control_events is None else plant.control_events,
                   plant.control)
    assert result.ok, result.violations


def test_every_rule_of_the_checker_has_a_plant() -> None:
    """Each site of the checker (each `Violation(kind=...)`, each branch of its message)
    is the one reported by some plant; a new rule without a plant fails here."""
    fired = {site for plant in PLANTS for v in _run(plant).violations
             for site in _sites_of(v)}
    assert {p.kind for p in PLANTS} == chaos_kinds()
    assert not set(SITES) - fired, [str(s) for s in set(SITES) - fired]
    assert len(SITES) >= 22  # the site reader still finds the checker's rules


def test_every_plant_is_listed_in_the_module_docstring() -> None:
    assert __doc__ is not None
    assert [p.rule for p in PLANTS if p.rule not in __doc__] == []
    cases = set(re.findall(r"\b[a-z_]+:[a-z_]+\b", __doc__))
    assert cases == {p.rule for p in PLANTS if ":" in p.rule}
    assert len({p.rule for p in PLANTS}) == len(PLANTS)

