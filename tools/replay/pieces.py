"""A node's scan split into pieces that run at once, then folded into the scan of the whole.

The scan (`sequential.NodeScan`) is sequential: each record is judged against the state
the records before it left. Yet most records only need what happened shortly before
them: a busy log's topics live a while, and their partition records follow their
creation. So a log's segments are cut into consecutive pieces (`cut`), each scanned in
its own Spark task, and the pieces after the first begin without the state before them
(`NodeScan(piece=True)`): a piece judges every record of the topics it saw created
itself, and notes (`sequential.PieceNotes`) what it could not judge alone: the records
naming a topic it never saw created (deferred, not flagged), the names and topic IDs its
Topic and RenameTopic records found free, and its first batch.

`fold` then joins the pieces in order. Before each piece it replays that piece's
deferred records on the state the pieces before left (no violation may come of them),
checks the seam (offsets contiguous, no epoch below the last one) and what the piece
found free (no ID the log used before, nor the metadata topic's; no name a topic from
before still held at that offset), and adds the piece's outputs, its batch indexes moved
past the batches before it, and its state. Whenever one of these does not hold, or a
deferred record is one the fold does not replay (a rename, a record of a resize: they
depend on the whole batch), the answer is None, and the caller scans the log again in
one piece: a log that breaks a rule near a seam costs a second scan, never a different
verdict.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import msgpack

from metadata.records import RecordType
from tools.replay.sequential import (
    MAX_KEPT,
    Aggregates,
    Deferred,
    NodeScan,
    PieceNotes,
    ScanResult,
    ScanState,
)

_PARTITION = int(RecordType.PARTITION)
_PARTITION_CHANGE = int(RecordType.PARTITION_CHANGE)
_REMOVE_TOPIC = int(RecordType.REMOVE_TOPIC)
_TOPIC_CONFIG = int(RecordType.TOPIC_CONFIG)


@dataclass(frozen=True, slots=True)
class Piece:
    """One piece's scan (batch indexes counted from the piece's first batch), its notes
    (None for the first piece, scanned from the log's start), its end state and how many
    batches it read."""

    result: ScanResult
    notes: PieceNotes | None
    state: ScanState
    batches: int


def cut(sizes: Sequence[int], pieces: int) -> list[range]:
    """Consecutive runs of segments (by index) of about equal bytes, at most `pieces`,
    none empty."""
    total = sum(sizes)
    runs: list[range] = []
    start, held = 0, 0
    for index, size in enumerate(sizes):
        held += size
        left = len(sizes) - index - 1  # segments after this one
        if len(runs) < pieces - 1 and left and held * pieces >= total * (len(runs) + 1):
            runs.append(range(start, index + 1))
            start = index + 1
    runs.append(range(start, len(sizes)))
    return runs


def fold(pieces: Sequence[Piece]) -> ScanResult | None:
    """The scan of the whole log the pieces make up, in order; None when it cannot be
    told from the pieces (see the module's docstring)."""
    head, *rest = pieces
    scan = NodeScan()  # without aggregates: each piece counted its own records
    scan.resume(head.state)
    joined, batches = head.result, head.batches
    for piece in rest:
        notes = piece.notes
        assert notes is not None  # only the first piece starts from the log's start
        if not _seam_holds(scan, notes) or not _ids_free(scan, piece, notes):
            return None
        names = dict(scan.live_by_name)
        freed = _replay_deferred(scan, notes.deferred, batches)
        if freed is None or not _names_free(names, freed, notes):
            return None
        joined = _join(joined, piece.result, batches)
        _absorb(scan, piece.state)
        batches += piece.batches
    return joined


def _seam_holds(scan: NodeScan, notes: PieceNotes) -> bool:
    """The piece's first batch follows the last one before it with no gap and no
    lower epoch: its scan saw no order break there, nor would the whole log's."""
    if scan.prev_offset is None or notes.first is None:
        return True
    base_offset, epoch = notes.first
    assert scan.prev_epoch is not None  # set with prev_offset
    return base_offset == scan.prev_offset + 1 and epoch >= scan.prev_epoch


def _ids_free(scan: NodeScan, piece: Piece, notes: PieceNotes) -> bool:
    """No Topic record of the piece takes an ID the log used before it or the metadata
    topic's, and a metadata topic assigned in the piece is the log's first."""
    metadata = scan.metadata_topic
    taken = scan.first_use
    if not taken.keys().isdisjoint(notes.ids) or \
            (metadata is not None and metadata[0] in notes.ids):
        return False
    if piece.result.metadata_topic_batch is None:
        return True
    assigned = piece.state.metadata_topic
    assert assigned is not None  # the piece's own MetadataTopic record set it
    return metadata is None and (assigned[0] is None or assigned[0] not in taken)


def _replay_deferred(scan: NodeScan, deferred: list[Deferred],
                     shift: int) -> dict[str, int] | None:
    """Apply the piece's deferred records to the state before it, in order; the names
    they freed (name -> offset), or None if one is flagged or needs its whole batch."""
    freed: dict[str, int] = {}
    for seq, offset, epoch, data, kind, tracked in deferred:
        if tracked:
            return None
        fields = msgpack.unpackb(data)
        topic_id = fields.get("topic_id")
        scan.seq = seq + shift
        if kind == _PARTITION or kind == _PARTITION_CHANGE:
            state = scan.partitions.get(topic_id)
            # a Partition of a counted topic is followed for a resize (resize_topics)
            if state is None or (kind == _PARTITION and topic_id in scan.counted):
                return None
            scan.partition_state(state, topic_id, offset, epoch, data, kind, fields)
        elif kind == _REMOVE_TOPIC:
            name = scan.live.get(topic_id)
            if name is not None and scan.live_by_name.get(name) == topic_id:
                freed[name] = offset
            scan.topic_user(offset, epoch, data, kind, fields)
        elif kind == _TOPIC_CONFIG:
            scan.topic_config_record(offset, epoch, data, kind, fields)
        else:  # a rename, PartitionCount or RemovePartition: judged with the whole batch
            return None
        if scan.violations:
            return None
    return freed


def _names_free(names: dict[str, bytes], freed: dict[str, int], notes: PieceNotes) -> bool:
    """Each name the piece found free was free in the whole log too: no topic from
    before the piece held it then (or a deferred RemoveTopic had freed it before)."""
    held = names.keys() & set(notes.names)
    return all(freed.get(name, offset) < offset
               for name, offset in zip(notes.names, notes.name_offsets, strict=True)
               if name in held)


def _join(before: ScanResult, piece: ScanResult, shift: int) -> ScanResult:
    """`before`'s outputs, then the piece's with its batch indexes moved by `shift`
    (violations kept up to MAX_KEPT per check in the whole log, as one scan keeps them)."""
    kept: dict[str, int] = {}
    for violation in before.violations:
        kept[violation[1]] = kept.get(violation[1], 0) + 1
    violations = list(before.violations)
    for seq, check, *rest in piece.violations:
        if kept.get(check, 0) < MAX_KEPT:
            kept[check] = kept.get(check, 0) + 1
            violations.append((seq + shift, check, *rest))
    marks = {check: array("q", seqs) for check, seqs in before.marks.items()}
    for check, seqs in piece.marks.items():
        marks.setdefault(check, array("q")).extend(seq + shift for seq in seqs)
    claims = before.claims + [(seq + shift, *rest) for seq, *rest in piece.claims]
    return ScanResult(
        violations=violations, marks=marks, claims=claims,
        first_topic_batch=_first(before.first_topic_batch, piece.first_topic_batch, shift),
        metadata_topic_batch=_first(before.metadata_topic_batch,
                                    piece.metadata_topic_batch, shift),
        aggregates=_join_aggregates(before.aggregates, piece.aggregates))


def _first(before: int | None, piece: int | None, shift: int) -> int | None:
    return before if before is not None or piece is None else piece + shift


def _join_aggregates(before: Aggregates | None, piece: Aggregates | None) -> Aggregates | None:
    if before is None or piece is None:
        return None
    epochs = {epoch: list(entry) for epoch, entry in before.epochs.items()}
    for epoch, (first, last, count) in piece.epochs.items():
        entry = epochs.get(epoch)
        if entry is None:
            epochs[epoch] = [first, last, count]
        else:
            entry[0], entry[1] = min(entry[0], first), max(entry[1], last)
            entry[2] += count
    kind_counts = dict(before.kind_counts)
    for kind, count in piece.kind_counts.items():
        kind_counts[kind] = kind_counts.get(kind, 0) + count
    return Aggregates(epochs=epochs, kind_counts=kind_counts,
                      topic_offsets=before.topic_offsets + piece.topic_offsets,
                      remove_offsets=before.remove_offsets + piece.remove_offsets,
                      topic_names=before.topic_names + piece.topic_names,
                      topic_ids=before.topic_ids + piece.topic_ids,
                      removed_ids=before.removed_ids | piece.removed_ids)


def _absorb(scan: NodeScan, state: ScanState) -> None:
    """The state after the piece: what the state before kept (the deferred records
    applied) and what the piece built, which share no topic ID and no name."""
    if state.prev_offset is not None:
        scan.prev_offset, scan.prev_epoch = state.prev_offset, state.prev_epoch
    scan.live.update(state.live)
    scan.live_by_name.update(state.live_by_name)
    scan.first_use.update(state.first_use)
    scan.removed |= state.removed
    if state.metadata_topic is not None:
        scan.metadata_topic = state.metadata_topic
    scan.partitions.update(state.partitions)
    scan.counted |= state.counted
