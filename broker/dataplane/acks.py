"""When a leader answers an acks=all produce (pure): the records are acknowledged once
the high watermark passes them while the ISR still has `min.insync.replicas` members,
refused once leadership moved away from the log that holds them, else waited for."""

from __future__ import annotations

from metadata.image import PartitionImage
from raft.common.errors import ErrorCode

ACKED = (ErrorCode.NONE, "")


def leadership_lost(current: PartitionImage | None, broker_id: int, leader_epoch: int,
                    still_in_log: bool) -> bool:
    """Whether records this broker appended as leader in `leader_epoch` can no longer be
    vouched for: the partition is gone, another broker leads it, or a newer leader epoch
    began and they are not in this broker's log any more. Once the image shows another
    epoch, the broker's high watermark may be a follower's copy of a new leader's, whose
    log holds other records at these offsets: it proves nothing about ours."""
    return current is None or current.leader != broker_id or (
        current.leader_epoch != leader_epoch and not still_in_log)


def acks_all_verdict(current: PartitionImage | None, broker_id: int, *, leader_epoch: int,
                     still_in_log: bool, high_watermark: int, last_offset: int,
                     min_isr: int) -> tuple[ErrorCode, str] | None:
    """The answer to an acks=all produce whose records end at `last_offset`, given the
    broker's image of the partition now (`current`) and its high watermark: ACKED, an
    error and why, or None (wait for the high watermark or the image to move)."""
    if leadership_lost(current, broker_id, leader_epoch, still_in_log):
        return (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                "leadership moved before the records reached the ISR")
    assert current is not None
    if high_watermark <= last_offset:
        return None
    if len(current.isr) < min_isr:
        return (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                f"the ISR shrank to {list(current.isr)}, below "
                f"min.insync.replicas={min_isr}, before the records were acked")
    return ACKED
