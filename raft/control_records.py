"""Raft's own records in the metadata log: `LeaderChange`, the first record of every
leader's epoch (KIP-595), and `MetadataTopic`, the metadata partition's topic ID
written once by the first leader (KIP-516). Type ids 1 and 2 of the shared record
framing (`raft.common.record`); the metadata layer decodes them with its own records.

`SnapshotHeader` and `SnapshotFooter` (type ids 12 and 13: `metadata.records` had taken
3-11) open and close every snapshot file (`raft.snapshot`); they never appear in the
log. Their own version is the framing's `version` (the class's VERSION): a field of
that name would collide with the framing's key.

`VotersRecord` and `KRaftVersionRecord` (19 and 20) carry the dynamic voter set
(KIP-853, `raft.voters`): in the log, in snapshots and in the `bootstrap.checkpoint`
that `kraft format --standalone/--initial-controllers` writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from raft.common.record import Record, RecordSet
from raft.common.uuid import Uuid

LEADER_CHANGE = 1
METADATA_TOPIC = 2
SNAPSHOT_HEADER = 12
SNAPSHOT_FOOTER = 13
VOTERS = 19  # KIP-853 (dynamic quorum); 14-18 are metadata.records'
KRAFT_VERSION = 20


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """Where a voter listens: Kafka's listener name, host and port."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class VoterEntry:
    voter_id: int
    directory_id: Uuid
    endpoints: tuple[Endpoint, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class VotersRecord(Record):
    """KIP-853: the whole voter set from this record's offset on (each voter a replica
    key, node id and directory id, with its endpoints). The latest one in a node's log,
    committed or not, is the set it acts on."""

    TYPE = VOTERS
    voters: tuple[VoterEntry, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class KRaftVersionRecord(Record):
    """KIP-853: `kraft.version` from this offset on; 1 means the voters are the log's."""

    TYPE = KRAFT_VERSION
    kraft_version: int


CONTROL_RECORDS = RecordSet((LeaderChange, MetadataTopic, SnapshotHeader, SnapshotFooter,
                             VotersRecord, KRaftVersionRecord))
