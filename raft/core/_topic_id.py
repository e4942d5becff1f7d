"""The metadata partition's topic ID as one node knows it (KIP-516).

The first leader of an empty log writes `MetadataTopic{topic_id}` into its first batch,
right after its LeaderChange. A node that has seen that record committed addresses the
partition by that ID; until then by the sentinel `METADATA_TOPIC_ID`. Every node accepts
the sentinel, the committed ID, and the ID in the first batch of its own log (a node that
restarts forgets its high watermark, yet its followers already use the ID). Anything else
is UNKNOWN_TOPIC_ID, or INCONSISTENT_TOPIC_ID when this node knows a different ID.

A peer that answers UNKNOWN_TOPIC_ID has not applied the record yet (a voter that joins
with an empty log, say); it is addressed by the sentinel from then on, which every node
accepts, so it can still vote and be told who leads.
"""

from __future__ import annotations

from raft.common.errors import ErrorCode
from raft.common.record import RecordError
from raft.common.uuid import METADATA_TOPIC_ID, Uuid
from raft.control_records import CONTROL_RECORDS, MetadataTopic
from raft.segment import CorruptBatchError, iter_batches
from raft.snapshot_store import SnapshotStore
from raft.types import RaftLog, SnapshotId

_SCAN_BYTES = 64 * 1024


class MetadataTopicIds:
    def __init__(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id
        self.committed: Uuid | None = None
        self._scan_offset = 0  # committed records before this one have been looked at
        self._in_log: Uuid | None = None
        self._in_log_stale = True
        self._sentinel_peers: set[int] = set()

    @property
    def request_topic_id(self) -> Uuid:
        """The ID this node puts on its requests."""
        return self.committed or METADATA_TOPIC_ID

    def topic_id_for(self, peer: int) -> Uuid:
        if self.committed is None or peer in self._sentinel_peers:
            return METADATA_TOPIC_ID
        return self.committed

    def peer_lacks_id(self, peer: int) -> None:
        """`peer` answered UNKNOWN_TOPIC_ID: address it by the sentinel from now on."""
        self._sentinel_peers.add(peer)

    def on_append(self, base_offset: int) -> None:
        if base_offset == 0:  # a new first batch
            self._in_log_stale = True

    def on_truncate(self) -> None:
        self._in_log_stale = True

    def on_snapshot(self, snapshots: SnapshotStore, snapshot_id: SnapshotId) -> None:
        """The log now starts after `snapshot_id`, which holds the MetadataTopic record
        if it was committed (snapshots carry raft's records too): look near its start."""
        self._scan_offset = max(self._scan_offset, snapshot_id.end_offset)
        self._in_log_stale = True
        if self.committed is None:
            data = snapshots.read(snapshot_id, 0, _SCAN_BYTES)
            try:
                for stored in iter_batches(data, snapshot_id.file_name):
                    for record in stored.batch.records:
                        self.committed = self.committed or metadata_topic_of(record)
            except CorruptBatchError:
                pass  # a batch cut at _SCAN_BYTES: what came before it was read

    def on_high_watermark(self, log: RaftLog, high_watermark: int) -> None:
        """Scan newly committed records, once each, until the MetadataTopic record shows."""
        self._scan_offset = max(self._scan_offset, log.start_offset)
        while self.committed is None and self._scan_offset < high_watermark:
            batches = log.read(self._scan_offset, _SCAN_BYTES)
            if not batches:
                return
            for batch in batches:
                start = max(batch.base_offset, self._scan_offset)
                for offset in range(start, min(batch.next_offset, high_watermark)):
                    self._scan_offset = offset + 1
                    topic_id = metadata_topic_of(batch.records[offset - batch.base_offset])
                    if topic_id is not None:
                        self.committed = topic_id
                        return
                if batch.next_offset >= high_watermark:
                    return

    def in_log(self, log: RaftLog) -> Uuid | None:
        if self._in_log_stale:
            self._in_log_stale = False
            self._in_log = None
            first = log.read(log.start_offset, 0)
            for record in first[0].records if first else ():
                self._in_log = metadata_topic_of(record)
                if self._in_log is not None:
                    break
        return self._in_log

    def addressing_error(self, log: RaftLog, cluster_id: str, topic_id: Uuid,
                         partition_index: int, *, log_is_final: bool = False
                         ) -> ErrorCode | None:
        """None when the request addresses this partition; `log_is_final`: the ID in
        this node's first batch will commit (it leads), so another one is inconsistent."""
        if cluster_id != self.cluster_id:
            return ErrorCode.INCONSISTENT_CLUSTER_ID
        if partition_index != 0:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if topic_id == METADATA_TOPIC_ID or topic_id == self.committed:
            return None
        in_log = self.in_log(log)
        if topic_id == in_log:
            return None
        if self.committed is not None or (in_log is not None and log_is_final):
            return ErrorCode.INCONSISTENT_TOPIC_ID
        # An ID only in a follower's uncommitted first batch may be a losing first
        # leader's: the sender's (committed) ID is unknown here, not inconsistent, so it
        # falls back to the sentinel and can still win this node's vote or lead it.
        return ErrorCode.UNKNOWN_TOPIC_ID


def metadata_topic_of(record: bytes) -> Uuid | None:
    """The topic ID if `record` is a MetadataTopic record, else None (never raises)."""
    try:
        decoded = CONTROL_RECORDS.decode(record)
    except RecordError:
        return None
    return decoded.topic_id if isinstance(decoded, MetadataTopic) else None
