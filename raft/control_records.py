"""Raft's own records in the metadata log: `LeaderChange`, the first record of every
leader's epoch (KIP-595), and `MetadataTopic`, the metadata partition's topic ID
written once by the first leader (KIP-516). Type ids 1 and 2 of the shared record
framing (`raft.common.record`); the metadata layer decodes them with its own records.
"""

from __future__ import annotations

from dataclasses import dataclass

from raft.common.record import Record, RecordSet
from raft.common.uuid import Uuid

LEADER_CHANGE = 1
METADATA_TOPIC = 2


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


CONTROL_RECORDS = RecordSet((LeaderChange, MetadataTopic))
