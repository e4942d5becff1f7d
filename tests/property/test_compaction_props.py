"""Log compaction against a model: after any sequence of appends (keys from a small set,
some tombstones), cleanings at random times, crashes between the cleaner's steps and
reopenings, the log read back (decoded by kafka-python, CRCs checked) holds exactly the
model's records: below each cleaning's end the latest record of each key, tombstones
until `delete.retention.ms` after the cleaning that first kept them, everything above
untouched, every record at its original offset.

A crash is the directory a killed cleaner leaves (tests/integration/test_compaction_kill.py
kills a real one): the copies of the first `swapped` changed segments complete as
`.swap`, the next one cut short as `.cleaned`, the rest not begun; the log object is
dropped without closing and the directory reopened.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from broker.kafka.partitions.cleaner import CompactionSettings
from broker.kafka.partitions.compaction import (
    cleanable_segments,
    install_all,
    prepare,
)
from broker.kafka.partitions.partition_log import PartitionLog, split_batches
from broker.kafka.partitions.segment_swap import cleaned_path, swap_path
from broker.kafka.partitions.segments import RollLimits
from raft.common.kafka.record_batch import encode_batch

KEYS = [b"a", b"b", b"c", b"d"]
# three or four small batches a segment, with index entries
LIMITS = RollLimits(segment_bytes=220, index_interval_bytes=60)

Stored = tuple[bytes, bytes | None]  # key, value (None: a tombstone)

APPEND = st.tuples(st.just("append"),
                   st.lists(st.tuples(st.sampled_from(KEYS), st.booleans()), min_size=1,
                            max_size=3))
CLEAN = st.tuples(st.just("clean"), st.integers(0, 400), st.none() | st.integers(0, 3))
REOPEN = st.tuples(st.just("reopen"))
OPS = st.lists(st.one_of(APPEND, APPEND, APPEND, CLEAN, CLEAN, REOPEN), min_size=8,
               max_size=60)
SETTINGS = st.builds(CompactionSettings,
                     min_cleanable_dirty_ratio=st.sampled_from([0.0, 0.5, 1.0]),
                     min_compaction_lag_ms=st.sampled_from([0, 30]),
                     delete_retention_ms=st.sampled_from([0, 50, 200]))


@dataclass
class Model:
    """Every record the log should hold, by offset, and each batch's delete horizon."""
    records: dict[int, Stored] = field(default_factory=dict)
    batches: dict[int, list[int]] = field(default_factory=dict)  # base -> its offsets
    horizons: dict[int, int] = field(default_factory=dict)

    def clean(self, end: int, now_ms: int, delete_retention_ms: int,
              installed: set[int], segment_of: dict[int, int]) -> None:
        """A cleaning below `end` whose copies of the segments `installed` (by base) took
        effect."""
        latest = {key: offset for offset, (key, _) in sorted(self.records.items())
                  if offset < end}
        for base, offsets in self.batches.items():
            if base >= end or segment_of[base] not in installed:
                continue
            expired = base in self.horizons and now_ms >= self.horizons[base]
            kept = [o for o in offsets if o in self.records
                    and latest[self.records[o][0]] == o
                    and not (self.records[o][1] is None and expired)]
            for offset in set(offsets) - set(kept):
                self.records.pop(offset, None)
            if base not in self.horizons and any(self.records[o][1] is None for o in kept):
                self.horizons[base] = now_ms + delete_retention_ms


def _read_back(plog: PartitionLog) -> dict[int, Stored]:
    out: dict[int, Stored] = {}
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20, plog.log_end_offset)
        assert data, f"nothing read at {offset} below the log end {plog.log_end_offset}"
        for raw in split_batches(data):
            batch = DefaultRecordBatch(raw)
            assert batch.validate_crc()
            for record in batch:
                assert record.offset not in out
                assert record.offset >= offset
                assert record.key is not None
                out[record.offset] = (record.key, record.value)
            offset = batch.next_offset
    return out


def _crash_during(plog: PartitionLog, cleaned_bases: list[int], swapped: int) -> None:
    """Turn the finished cleaning's copies into what a kill after `swapped` of them
    leaves: later ones cut short (the next) or not begun."""
    for number, base in enumerate(cleaned_bases):
        if number == swapped:
            os.rename(swap_path(plog.directory, base), cleaned_path(plog.directory, base))
        elif number > swapped:
            swap_path(plog.directory, base).unlink()


@settings(max_examples=150)
@given(ops=OPS, compaction=SETTINGS)
def test_compacted_log_matches_the_model_across_cleanings_crashes_and_reopens(
        ops: list[tuple], compaction: CompactionSettings) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        plog = PartitionLog(directory, LIMITS)
        model = Model()
        clock = 1_000
        try:
            for op in ops:
                if op[0] == "append":
                    clock += 10
                    stored: list[Stored] = [(key, None if tomb else b"v%d" % clock)
                                            for key, tomb in op[1]]
                    first, last = plog.append(
                        [encode_batch(stored, timestamps=[clock] * len(stored))], 0)
                    model.batches[first] = list(range(first, last + 1))
                    model.records.update(zip(range(first, last + 1), stored, strict=True))
                elif op[0] == "clean":
                    clock += op[1]
                    plog = _clean(plog, model, compaction, clock, crash_after=op[2])
                else:
                    plog.close()
                    plog = PartitionLog(directory, LIMITS)
                assert _read_back(plog) == model.records
            assert [name for name in os.listdir(directory)
                    if name.endswith((".cleaned", ".swap"))] == []
        finally:
            plog.close()


def _clean(plog: PartitionLog, model: Model, compaction: CompactionSettings, now_ms: int,
           crash_after: int | None) -> PartitionLog:
    """One cleaning (or a crash in it, then a reopen); the log to go on with."""
    cleanable = cleanable_segments(plog, high_watermark=plog.log_end_offset, now_ms=now_ms,
                                   settings=compaction)
    if cleanable is None:
        return plog
    end, segments = cleanable
    active = plog.segment_bases[-1]
    assert end <= active
    assert end in plog.segment_bases
    assert all(s.max_timestamp <= now_ms - compaction.min_compaction_lag_ms
               for s in segments)
    cleaning = prepare(plog.directory, segments, now_ms=now_ms,
                      delete_retention_ms=compaction.delete_retention_ms,
                      producer_last_offsets=plog.producer_last_offsets(), pace=lambda _: None)
    bases = [segment.base_offset for segment in cleaning.segments]
    segment_of = {base: max(s for s in plog.segment_bases if s <= base)
                  for base in model.batches}
    if crash_after is None:
        install_all(plog, cleaning, end)
        model.clean(end, now_ms, compaction.delete_retention_ms, set(bases), segment_of)
        return plog
    _crash_during(plog, bases, crash_after)
    # not closed: a killed process writes no producer snapshot
    reopened = PartitionLog(plog.directory, LIMITS)
    model.clean(end, now_ms, compaction.delete_retention_ms, set(bases[:crash_after]),
                segment_of)
    return reopened
