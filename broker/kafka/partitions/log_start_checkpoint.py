"""The log dir's `log-start-offset-checkpoint`, as Kafka's: the log start of each
partition whose start lies inside its first segment (after DeleteRecords), which its
segment files alone cannot tell.

    0                      <- version
    2                      <- entries
    orders 0 1500          <- topic, partition, log start offset
    orders 3 42

Written atomically (temp file, fsync, rename) before DeleteRecords answers; a log start
at a segment boundary (retention) needs no entry, so a crash before the next write
loses nothing: a partition log opens at its checkpointed start or its first segment's
base, whichever is later (broker.kafka.partitions.partition_log). A damaged file is one
WARNING and read as empty: a start falls back to its first segment, never past a record.

The same format holds each partition's high watermark in `replication-offset-checkpoint`
(Kafka's file, broker.kafka.replication.hw_checkpoint): `read` and `write` take the file
name.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from raft.common.durable import write_atomically

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "log-start-offset-checkpoint"
VERSION = 0

PartitionKey = tuple[str, int]  # (topic name, partition), as the directory is named


def encode(starts: Mapping[PartitionKey, int]) -> bytes:
    lines = [str(VERSION), str(len(starts))]
    lines += [f"{topic} {partition} {offset}"
              for (topic, partition), offset in sorted(starts.items())]
    return ("\n".join(lines) + "\n").encode()


def decode(data: bytes) -> dict[PartitionKey, int]:
    """The entries of a checkpoint file; ValueError when it is not one."""
    lines = data.decode().splitlines()
    if len(lines) < 2 or lines[0] != str(VERSION):
        raise ValueError("not a version 0 log-start-offset-checkpoint")
    count = int(lines[1])
    if count != len(lines) - 2:
        raise ValueError(f"{count} entries announced, {len(lines) - 2} found")
    starts: dict[PartitionKey, int] = {}
    for line in lines[2:]:
        topic, partition, offset = line.split(" ")
        if int(partition) < 0 or int(offset) < 0:
            raise ValueError(f"negative partition or offset in {line!r}")
        starts[(topic, int(partition))] = int(offset)
    return starts


def read(log_dir: Path, name: str = CHECKPOINT_FILE) -> dict[PartitionKey, int]:
    path = log_dir / name
    try:
        return decode(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        log.warning("ignoring a damaged offset checkpoint", extra={
            "path": str(path), "reason": str(exc)})
        return {}


def write(log_dir: Path, starts: Mapping[PartitionKey, int], name: str = CHECKPOINT_FILE
          ) -> None:
    write_atomically(log_dir / name, encode(starts))
