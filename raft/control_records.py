"""Raft's own records in the metadata log: `LeaderChange`, the first record of every
leader's epoch (KIP-595), and `MetadataTopic`, the metadata partition's topic ID
written once by the first leader (KIP-516). Type ids 1 and 2 of the shared record
framing (`raft.common.record`); the metadata layer decodes them with its own records.

`SnapshotHeader` and `SnapshotFooter` (type ids 12 and 13: `metadata.records` had taken
3-11) open and close every snapshot file (`raft.snapshot`); they never appear in the
log. Their own version is the framing's `version` (the class's VERSION): a field of
that name would collide with the framing's key.
"""

from __future__ import annotations

from dataclasses import dataclass

from raft.common.record import Record, RecordSet
from raft.common.uuid import Uuid

LEADER_CHANGE = 1
METADATA_TOPIC = 2
SNAPSHOT_HEADER = 12
SNAPSHOT_FOOTER = 13


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderChange(Record):
    TYPE = LEADER_CHANGE
    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataTopic(Record):
    TYPE = METADATA_TOPIC
    topic_id: Uuid


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotHeader(Record):
    """The first record of a snapshot file."""

    TYPE = SNAPSHOT_HEADER
    last_contained_log_timestamp: int  # ms: when the last record it covers was written


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotFooter(Record):
    """The last record of a snapshot file: without it the file was cut short."""

    TYPE = SNAPSHOT_FOOTER


CONTROL_RECORDS = RecordSet((LeaderChange, MetadataTopic, SnapshotHeader, SnapshotFooter))
