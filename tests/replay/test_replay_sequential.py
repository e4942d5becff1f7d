"""The per-node scan (tools.replay.sequential) without Spark: topic liveness with
renames, ID reuse and the metadata topic, over hand-made rows."""

from __future__ import annotations

from typing import Any

from tools.replay.sequential import NodeScan


def _row(offset: int, kind: str, topic_id: str | None = None, name: str | None = None,
         epoch: int = 1, leader: int | None = None) -> tuple[Any, ...]:
    return (1, offset, epoch, offset * 7, kind, topic_id, name, None, leader, None, "f.log")


def _violations(rows: list[tuple[Any, ...]]) -> list[tuple[str, int, str]]:
    scan = NodeScan(1)
    for row in rows:
        scan.step(row)
    return [(v[1], v[3], v[6]) for v in scan.finish() if v[0] == "violation"]


A, B = "AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAw"
META = "AAAAAAAAAAAAAAAAAAAABA"


def test_scan_passes_when_a_renamed_topic_frees_its_old_name():
    """KIP-516: a name maps to one live ID; after a rename the old name is free."""
    rows = [_row(0, "LEADER_CHANGE", leader=1), _row(1, "METADATA_TOPIC", META),
            _row(2, "TOPIC", A, "orders"), _row(3, "RENAME_TOPIC", A, "orders-old"),
            _row(4, "TOPIC", B, "orders"), _row(5, "PARTITION", B), _row(6, "PARTITION", A)]
    assert _violations(rows) == []


def test_scan_flags_a_reused_id_and_a_dead_topic_when_planted():
    """KIP-516: IDs are never reused; nothing names a topic after its RemoveTopic."""
    rows = [_row(0, "METADATA_TOPIC", META), _row(1, "TOPIC", A, "x"),
            _row(2, "REMOVE_TOPIC", A), _row(3, "PARTITION_CHANGE", A),
            _row(4, "TOPIC", A, "y")]
    found = _violations(rows)
    assert ("records_name_live_topic", 3, "no live topic with this ID here") in found
    assert [v[:2] for v in found if v[0] == "topic_ids_valid"] == [("topic_ids_valid", 4)]


def test_scan_flags_gaps_and_falling_epochs_when_the_log_is_out_of_order():
    """Raft: offsets are contiguous and epochs never decrease along a log."""
    rows = [_row(0, "NO_OP", epoch=2), _row(2, "NO_OP", epoch=1)]
    assert sorted(v[0] for v in _violations(rows)) == ["epochs_monotonic",
                                                       "offsets_contiguous"]


def test_prefix_mismatches_finds_differing_epochs_below_a_shared_epoch():
    """Raft §5.3: nodes sharing epoch 5 at offsets 20-29 must agree on every epoch below;
    node b holding epoch 3 where a holds 2 (offsets 10-14) breaks the Log Matching prefix."""
    from tools.replay.crossnode import prefix_mismatches

    a = [[1, 0, 9], [2, 10, 19], [5, 20, 29]]
    b = [[1, 0, 9], [3, 10, 14], [2, 15, 19], [5, 20, 24]]
    assert prefix_mismatches(a, b) == [(10, 5, 2, 3)]
    assert prefix_mismatches(a, [[1, 0, 9], [4, 10, 12]]) == []  # stale tail: no shared epoch
