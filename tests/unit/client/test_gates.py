"""The ordered consumer's gate decisions (broker/kafka/ordered/gates.py)."""

from __future__ import annotations

from broker.kafka.ordered.gates import (
    CreationGate,
    DeletionGate,
    PartitionGates,
    ReportState,
    committed_position,
    creation_source,
    deliverable,
    delivery_limit,
    incarnation,
    known_positions,
    needs_creation_gate,
    should_report,
)


def test_only_added_partitions_read_from_the_start_wait_for_their_source() -> None:
    assert needs_creation_gate(2, 2, start=None, earliest=0)
    assert needs_creation_gate(2, 2, start=5, earliest=5)  # retention moved the start
    assert not needs_creation_gate(2, 2, start=6, earliest=5)  # the group read it before
    assert not needs_creation_gate(1, 2, start=None, earliest=0)  # an initial partition


def test_creation_source_chains_through_partitions_added_together() -> None:
    # N=2 grown 2 -> 8 at once: 6 split from 2, itself new: its keys were in 0
    assert creation_source(6, 2, prior=[0, 1]) == 0
    assert creation_source(7, 2, prior=[0, 1]) == 1
    # grown 4 -> 5: 4 split from 0
    assert creation_source(4, 2, prior=[0, 1, 2, 3]) == 0


def test_creation_gate_holds_everything_until_the_source_passes_its_epoch() -> None:
    gates = PartitionGates(creation=CreationGate(source=0, source_epoch_end=10))
    assert delivery_limit(gates, {}) == 0  # nobody reported a position of 0
    assert delivery_limit(gates, {0: 9}) == 0
    assert delivery_limit(gates, {0: 10}) is None
    assert gates.watched() == {0}


def test_deletion_gate_holds_records_after_the_threshold_until_the_blocker_drains() -> None:
    gates = PartitionGates(deletions=(
        DeletionGate(blocker=3, upper_offset=19, blocker_log_end=7),
        DeletionGate(blocker=5, upper_offset=24, blocker_log_end=4)))
    limit = delivery_limit(gates, {3: 2, 5: 0})
    assert limit == 20
    assert deliverable(19, limit)
    assert not deliverable(20, limit)
    assert delivery_limit(gates, {3: 7, 5: 0}) == 25  # 3 drained: 5 still holds
    assert delivery_limit(gates, {3: 7, 5: 4}) is None
    assert gates.watched() == {3, 5}


def test_a_closed_creation_gate_overrides_open_deletion_gates() -> None:
    gates = PartitionGates(creation=CreationGate(source=1, source_epoch_end=3),
                           deletions=(DeletionGate(blocker=4, upper_offset=9,
                                                   blocker_log_end=0),))
    assert delivery_limit(gates, {4: 0}) == 0
    assert delivery_limit(gates, {1: 3, 4: 0}) is None


def test_no_gates_no_limit() -> None:
    assert delivery_limit(PartitionGates(), {}) is None
    assert deliverable(10**9, None)


def test_position_reports_only_when_they_can_unblock_someone() -> None:
    first = ReportState()
    assert should_report(first, position=0, high_watermark=10, epoch_before_position=-1)
    last = ReportState(position=4, epoch=2, reported=True)
    assert not should_report(last, position=6, high_watermark=10, epoch_before_position=2)
    assert should_report(last, position=10, high_watermark=10, epoch_before_position=2)
    assert not should_report(last, position=4, high_watermark=4, epoch_before_position=2)
    assert should_report(last, position=5, high_watermark=10, epoch_before_position=3)


def test_c_a_chain_of_growths_waits_transitively() -> None:
    """Schedule c: N=2, key-2 maps to 0, 2, 2, 6 at counts 2, 3, 4, 8. v0 is at offset 0
    of partition 0; the topic grows 2 -> 4 -> 8 with nothing in partition 2; v1 goes to
    6. One member holds 0, 2, 4, 6 (round-robin over two), all at offset 0. Partition 2
    waits on 0 past epoch 0's end (1); 6 waits on 2 past its epoch's end, 0, which 2's
    start alone would pass at once: 2 has no position until its own gate opens, so 6
    waits for v0 too."""
    gate_2 = PartitionGates(creation=CreationGate(source=0, source_epoch_end=1))
    gate_6 = PartitionGates(creation=CreationGate(source=2, source_epoch_end=0))
    gate_4 = PartitionGates(creation=CreationGate(source=0, source_epoch_end=1))
    own = {0: (0, PartitionGates()), 2: (0, gate_2), 4: (0, gate_4), 6: (0, gate_6)}
    known = known_positions(own, {})
    assert known == {0: 0}
    assert delivery_limit(gate_6, known) == 0, "v1 deliverable before v0"

    own[0] = (1, PartitionGates())  # v0 delivered
    known = known_positions(own, {})
    assert known == {0: 1, 2: 0, 4: 0, 6: 0}
    assert delivery_limit(gate_6, known) is None


def test_c_positions_other_members_report_open_a_chain_across_members() -> None:
    """The member holding 6 goes by the group's position of 2 only once 2's holder
    reports one, which it does only after 2's gate opened; its own reports stand for
    the partitions it holds."""
    gate_6 = PartitionGates(creation=CreationGate(source=2, source_epoch_end=0))
    own = {6: (0, gate_6), 1: (3, PartitionGates())}
    assert known_positions(own, {}) == {1: 3}
    assert known_positions(own, {2: 0, 1: 0}) == {2: 0, 1: 3, 6: 0}


def test_a_position_committed_by_a_removed_partition_does_not_count_for_its_successor() -> None:
    # 5 -> 3 removed partition 3 (added by 3 -> 4 while 0, 1, 2 had epochs 1, 1, 0); the
    # growth 3 -> 6 adds a new partition 3, after the bumps of every resize since
    old = incarnation("T", {0: 1, 1: 1, 2: 0})
    new = incarnation("T", {0: 5, 1: 5, 2: 4})
    assert old != new
    assert committed_position((40, old), old) == 40
    assert committed_position((40, old), new) is None  # start at the new log's beginning
    assert committed_position((40, ""), new) is None  # committed without a life: unknown
    assert committed_position(None, new) is None
    # an initial partition has no after-creation map: its life is the topic's
    assert committed_position((7, incarnation("T", {})), incarnation("T", {})) == 7
    assert committed_position((7, incarnation("T", {})), incarnation("U", {})) is None
