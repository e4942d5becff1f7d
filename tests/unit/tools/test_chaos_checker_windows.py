"""The chaos checker's time windows (tools/chaos/checker.py): what an operation whose
outcome is unknown, a delete by ID, a delete answered late, or two operations at the same
instant allow and forbid; and that every finding is reported, not only the first.

Each test is the smallest history whose verdict depends on the window it names; the
rules themselves are planted one by one in test_chaos_checker_rules.py."""

from __future__ import annotations

from collections.abc import Sequence

from tests.support.chaos_history import NEW_ID, OLD_ID, Script
from tools.chaos import checker

X, Y, W = OLD_ID, NEW_ID, "AAAAAAAAAAAAAAAAAAAABA"


def final(topics: dict[str, str], *values: str, disks: Sequence[checker.BrokerDisk] = ()
          ) -> checker.FinalState:
    """`topics`, each read in full; `values` read from a's partition 0 in this order."""
    reads = [checker.ReadRecord(topic_id=topics["a"], partition=0, offset=i, value=v)
             for i, v in enumerate(values)]
    return checker.FinalState(topics=topics, reads=reads,
                              read_complete=dict.fromkeys(topics.values(), True), disks=disks)


def found(result: checker.CheckResult) -> list[tuple[str, str]]:
    return [(v.kind, v.message) for v in result.violations]


def produce(script: Script, value: str, start: float, end: float, offset: int) -> int:
    return script.op("produce", {"name": "a", "partition": 0, "value": value}, start, end,
                     offset=offset)


# -- unknown creates ---------------------------------------------------------------------


def test_final_topic_explained_when_its_only_create_is_unknown() -> None:
    """A create that timed out may have taken effect: the topic it made is no anomaly."""
    script = Script()
    script.op("create", {"name": "a"}, 1, 2, "unknown")
    assert checker.check(script.events, final({"a": X})).ok


def _recreated_by_unknown_create(*unknown_at: float) -> Script:
    """a created as W, v0 written to it at 3-4, W deleted at 5-6, then unknown creates of
    a invoked at `unknown_at`."""
    script = Script()
    script.op("create", {"name": "a"}, 1, 2, topic_id=W)
    produce(script, "v0", 3, 4, offset=0)
    script.op("delete", {"name": "a"}, 5, 6, topic_id=W)
    for start in unknown_at:
        script.op("create", {"name": "a"}, start, start, "unknown")
    return script


def test_deleted_data_caught_when_written_before_an_unknown_create_of_its_topic() -> None:
    """X can only come from the create invoked at 7; v0 was acknowledged at 4."""
    result = checker.check(_recreated_by_unknown_create(7).events, final({"a": X}, "v0"))
    assert found(result) == [("deleted_data", f"a-0@0 ({X}) holds 'v0', written before this "
                                              "topic ID was created (data of a deleted topic)")]
    assert result.violations[0].op_index == 1


def test_data_allowed_when_written_after_the_earliest_unknown_create() -> None:
    """Either unknown create may have made X; the one invoked at 2.5 may have taken
    effect before v0 was written, so v0 may be X's."""
    assert checker.check(_recreated_by_unknown_create(2.5, 7).events, final({"a": X}, "v0")).ok


# -- deletes by ID -----------------------------------------------------------------------


def _deleted_by_id(status: str = "ok") -> Script:
    script = Script()
    script.op("create", {"name": "a"}, 1, 2, topic_id=X)
    result = {"topic_id": X, "name": "a"} if status == "ok" else {}
    script.op("delete", {"topic_id": X}, 3, 4, status, **result)
    return script


def test_create_not_lost_when_its_topic_was_deleted_by_id() -> None:
    assert checker.check(_deleted_by_id().events, final({})).ok


def test_delete_undone_caught_when_deleted_by_id() -> None:
    assert found(checker.check(_deleted_by_id().events, final({"a": X}))) == [
        ("delete_undone", f"topic {X} is in the final metadata after its delete was "
                          "acknowledged")]


def test_topic_allowed_to_survive_an_unknown_delete_by_id() -> None:
    assert checker.check(_deleted_by_id("unknown").events, final({"a": X})).ok


def test_unknown_topic_id_allowed_once_a_delete_by_id_was_invoked() -> None:
    """The unknown delete invoked at 3 may have removed X before the describe at 5."""
    script = _deleted_by_id("unknown")
    script.op("describe_id", {"topic_id": X}, 5, 6, "failed", error="UNKNOWN_TOPIC_ID")
    assert checker.check(script.events, final({})).ok


def test_operations_after_a_failed_delete_still_checked() -> None:
    script = Script()
    script.op("delete", {"name": "a"}, 1, 2, "failed", error="UNKNOWN_TOPIC_OR_PARTITION")
    script.op("create", {"name": "a"}, 3, 4, topic_id=X)
    assert checker.check(script.events, final({"a": X})).ok
    assert found(checker.check(script.events, final({}))) == [
        ("create_lost", f"acknowledged create of 'a' ({X}) is not in the final metadata "
                        "and no delete could have removed it")]


def test_stale_read_judged_from_the_first_acknowledged_delete() -> None:
    """X's delete was acknowledged at 4; a later delete of X, answered at 9, does not
    make X's describe at 6 legitimate."""
    script = Script()
    script.op("create", {"name": "a"}, 1, 2, topic_id=X)
    script.op("delete", {"name": "a"}, 3, 4, topic_id=X, name="a")
    script.op("delete", {"topic_id": X}, 5, 9, topic_id=X, name="a")
    script.op("describe_id", {"topic_id": X}, 6, 7, name="a", topic_id=X)
    assert found(checker.check(script.events, final({}))) == [
        ("stale_read", f"describe by ID {X} found 'a' after its delete was acknowledged")]


# -- several deletes of one name ---------------------------------------------------------


def test_create_not_lost_when_an_earlier_delete_may_have_ended_after_it() -> None:
    """The delete invoked at 1 was answered at 10: it may have removed X, created at 5,
    though a later delete of a was answered at 3."""
    script = Script()
    script.op("delete", {"name": "a"}, 1, 10, topic_id=W)
    script.op("delete", {"name": "a"}, 2, 3, topic_id=W)
    script.op("create", {"name": "a"}, 5, 6, topic_id=X)
    assert checker.check(script.events, final({})).ok


def test_unknown_topic_id_allowed_once_the_first_delete_was_invoked() -> None:
    """X's delete invoked at 3 may have removed it before the describe at 5, though
    another delete of a was only invoked at 9."""
    script = Script()
    script.op("create", {"name": "a"}, 1, 2, topic_id=X)
    script.op("delete", {"name": "a"}, 3, 4, "unknown")
    script.op("describe_id", {"topic_id": X}, 5, 6, "failed", error="UNKNOWN_TOPIC_ID")
    script.op("delete", {"name": "a"}, 9, 10, "unknown")
    assert checker.check(script.events, final({})).ok


# -- operations at the same instant ------------------------------------------------------


def test_create_lost_when_a_delete_ended_as_it_was_invoked() -> None:
    """A delete answered at 2 cannot have removed a topic whose create began at 2."""
    script = Script()
    script.op("delete", {"name": "a"}, 1, 2, topic_id=W)
    script.op("create", {"name": "a"}, 2, 3, topic_id=X)
    assert [v.kind for v in checker.check(script.events, final({})).violations] == ["create_lost"]


def test_unknown_topic_id_caught_when_a_delete_began_as_the_describe_ended() -> None:
    script = Script()
    script.op("create", {"name": "a"}, 1, 2, topic_id=X)
    script.op("describe_id", {"topic_id": X}, 3, 4, "failed", error="UNKNOWN_TOPIC_ID")
    script.op("delete", {"name": "a"}, 4, 5, topic_id=X)
    assert [v.kind for v in checker.check(script.events, final({})).violations] == ["stale_read"]


def test_unknown_topic_id_allowed_when_asked_as_the_create_was_acknowledged() -> None:
    script = Script()
    script.op("create", {"name": "a"}, 1, 2, topic_id=X)
    script.op("describe_id", {"topic_id": X}, 2, 3, "failed", error="UNKNOWN_TOPIC_ID")
    assert checker.check(script.events, final({"a": X})).ok


def test_describe_allowed_to_find_a_topic_as_its_delete_is_acknowledged() -> None:
    """Described by name and by ID at 4, the instant X's delete was acknowledged."""
    script = Script()
    script.op("create", {"name": "a"}, 1, 2, topic_id=X)
    script.op("delete", {"name": "a"}, 3, 4, topic_id=X)
    script.op("describe_name", {"name": "a"}, 4, 5, name="a", topic_id=X)
    script.op("describe_id", {"topic_id": X}, 4, 5, name="a", topic_id=X)
    assert checker.check(script.events, final({})).ok


def test_data_allowed_when_written_as_its_topic_create_was_invoked() -> None:
    script = Script()
    produce(script, "v0", 3, 4, offset=0)
    script.op("create", {"name": "a"}, 4, 5, topic_id=X)
    assert checker.check(script.events, final({"a": X}, "v0")).ok


def test_lost_write_caught_when_sent_as_its_topic_create_was_acknowledged() -> None:
    script = Script()
    script.op("create", {"name": "a"}, 1, 3, topic_id=X)
    produce(script, "v0", 3, 4, offset=0)
    result = checker.check(script.events, final({"a": X}))
    assert [v.kind for v in result.violations] == ["lost_write"]


# -- acknowledged writes whose topic changed ---------------------------------------------


def test_write_not_required_when_its_topic_was_deleted_by_id_and_recreated() -> None:
    """v0 went to X; the delete by ID names no topic, the recreation of a does."""
    script = Script()
    script.op("create", {"name": "a"}, 1, 2, topic_id=X)
    produce(script, "v0", 3, 4, offset=0)
    script.op("delete", {"topic_id": X}, 5, 6, topic_id=X, name="a")
    script.op("create", {"name": "a"}, 7, 8, topic_id=Y)
    result = checker.check(script.events, final({"a": Y}))
    assert result.ok, result.violations
    assert result.writes_verified == 0


def test_write_not_required_when_a_delete_of_its_topic_was_answered_after_it_was_sent() -> None:
    """a was deleted and recreated before v0 was sent, but the delete's answer came at 6:
    a broker may have taken v0 into the deleted X meanwhile."""
    script = Script()
    script.op("create", {"name": "a"}, 1, 2, topic_id=X)
    script.op("delete", {"name": "a"}, 2.5, 6, topic_id=X)
    script.op("create", {"name": "a"}, 2.6, 2.9, topic_id=Y)
    produce(script, "v0", 3, 4, offset=0)
    result = checker.check(script.events, final({"a": Y}))
    assert result.ok, result.violations
    assert result.writes_verified == 0


def test_write_not_required_when_its_topic_was_not_read_in_full() -> None:
    script = Script()
    script.op("create", {"name": "a"}, 1, 2, topic_id=X)
    produce(script, "v0", 3, 4, offset=0)
    result = checker.check(script.events, checker.FinalState(topics={"a": X}))
    assert result.ok, result.violations
    assert result.writes_verified == 0


def test_write_checked_when_its_topic_came_under_another_name() -> None:
    """b was never created: its ID is a's, and v0, acknowledged in b, is not there."""
    script = Script()
    script.op("create", {"name": "a"}, 1, 2, topic_id=X)
    script.op("produce", {"name": "b", "partition": 0, "value": "v0"}, 3, 4, offset=0)
    assert found(checker.check(script.events, checker.FinalState(topics={"b": X},
                                                                 read_complete={X: True}))) == [
        ("create_lost", f"final topic 'b' has ID {X}, created as 'a'"),
        ("lost_write", "acknowledged produce of 'v0' to b-0 at offset 0 is not readable there "
                       "(found at [])")]


# -- every finding reported ----------------------------------------------------------------


def test_every_broker_reported_when_several_diverge() -> None:
    """Broker 4 did not answer and broker 5's image differs: both, and the offsets."""
    result = checker.check([], checker.FinalState(topics={}, reference_hashes={4: "h4"}, brokers=[
        checker.BrokerObservation(node_id=4, applied_offset=None, image_hash=None),
        checker.BrokerObservation(node_id=5, applied_offset=4, image_hash="bad")]))
    assert found(result) == [
        ("divergence", "brokers applied different offsets: 4@None, 5@4"),
        ("divergence", "broker 4 did not report its image"),
        ("divergence", "broker 5 image hash bad at offset 4, controller's h4")]


def test_every_broker_disk_reported_after_other_findings() -> None:
    """A lost write, then a stale partition on each of two brokers."""
    script = Script()
    script.op("create", {"name": "a"}, 1, 2, topic_id=X)
    produce(script, "v0", 3, 4, offset=0)
    disks = [checker.BrokerDisk(node_id=n, observed_ms=0, staged=[], partitions=[
                 checker.PartitionDir(topic="a", partition=0, topic_id=X)])
             for n in (4, 5)]
    stale = (f"still hosts a-0 of topic ID {X} after the delete delay: the partition is "
             "not assigned to this broker")
    assert found(checker.check(script.events, final({"a": X}, disks=disks))) == [
        ("lost_write", "acknowledged produce of 'v0' to a-0 at offset 0 is not readable there "
                       "(found at [])"),
        ("stale_partition", f"broker 4 {stale}"), ("stale_partition", f"broker 5 {stale}")]
