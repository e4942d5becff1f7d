"""The acks=all verdict (broker/dataplane/acks.py): acknowledged only once the high
watermark passes the records with the ISR at min.insync.replicas, refused once leadership
left the log that holds them, else waited for."""

from __future__ import annotations

import pytest

from broker.dataplane.acks import ACKED, acks_all_verdict
from metadata.image import PartitionImage
from raft.common.errors import ErrorCode
from tools.chaos import planted

LED = PartitionImage(partition=0, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=4)


def verdict(current: PartitionImage | None = LED, *, epoch: int = 4, in_log: bool = True,
            hw: int = 11, last: int = 10, min_isr: int = 2) -> tuple[ErrorCode, str] | None:
    return acks_all_verdict(current, 1, leader_epoch=epoch, still_in_log=in_log,
                            high_watermark=hw, last_offset=last, min_isr=min_isr)


def test_acknowledged_once_the_high_watermark_passes_the_last_record() -> None:
    assert verdict(hw=11, last=10) == ACKED
    assert verdict(hw=10, last=10) is None


def test_an_isr_below_min_insync_replicas_refuses_even_when_replicated() -> None:
    shrunk = PartitionImage(partition=0, replicas=(1, 2, 3), isr=(1,), leader=1,
                            leader_epoch=4)
    code, _ = verdict(shrunk) or (None, "")
    assert code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_leadership_moved_refuses_before_looking_at_the_high_watermark() -> None:
    moved = PartitionImage(partition=0, replicas=(1, 2, 3), isr=(2, 3), leader=2,
                           leader_epoch=5)
    assert (verdict(moved) or (None,))[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (verdict(None) or (None,))[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_new_epoch_of_the_same_leader_counts_only_while_the_records_are_in_its_log() -> None:
    bumped = PartitionImage(partition=0, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1,
                            leader_epoch=5)
    assert verdict(bumped, epoch=4, in_log=True) == ACKED
    assert (verdict(bumped, epoch=4, in_log=False) or (None,))[0] == \
        ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_the_planted_ack_before_isr_acks_unreplicated_records_and_nothing_else(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`kraft chaos --planted-bug dp_ack_before_isr` (tools/chaos/planted.py) replaces the
    verdict the produce path calls: records below the high watermark are acknowledged,
    a lost leadership still refuses."""
    from broker.kafka.partitions import produce

    monkeypatch.setattr(produce, "acks_all_verdict", produce.acks_all_verdict)  # restored
    planted.PLANTS["dp_ack_before_isr"]()
    plant = produce.acks_all_verdict
    assert plant is not acks_all_verdict
    args = {"leader_epoch": 4, "still_in_log": True, "last_offset": 10, "min_isr": 2}
    assert plant(LED, 1, high_watermark=3, **args) == ACKED
    shrunk = PartitionImage(partition=0, replicas=(1, 2, 3), isr=(1,), leader=1,
                            leader_epoch=4)
    assert plant(shrunk, 1, high_watermark=3, **args) == ACKED
    assert (plant(None, 1, high_watermark=11, **args) or (None,))[0] == \
        ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_planted_node_refuses_an_unknown_bug_or_a_command_line_it_cannot_run() -> None:
    with pytest.raises(ValueError, match="unknown planted bug"):
        planted.interpreter_args("dp_nothing")
    assert planted.interpreter_args("dp_ack_before_isr") == (
        "-m", "tools.chaos.planted", "dp_ack_before_isr")
    assert planted.main(["dp_nothing", "-m", "tools.cli"]) == 2
    assert planted.main(["dp_ack_before_isr", "node"]) == 2
