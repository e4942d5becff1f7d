"""What Fetch serves (`PartitionLog.read`, the slice of one segment file found through its
offset index) against the decode and re-encode it replaces: the segment files split into
their batches, Kafka's rules applied batch by batch, the kept batches concatenated. For
any log (batch sizes, several segments, sparse index entries, offset gaps as compaction
leaves them, both between batches and inside one, a reopened log) and any fetch offset,
byte limit and upper offset, the bytes are the same.

Kafka's rules: a fetch reads one segment, from the batch holding the fetch offset (or the
first after it); batches wholly below the fetch offset are not sent; a batch is sent only
when every offset it holds is below the upper offset (the high watermark for consumers,
the log end for followers); the batches fit in `max_bytes`, except the first, always sent
whole so a consumer progresses. No transactional or control batches: the brokers refuse
transactional producers."""

from __future__ import annotations

import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.kafka.partitions.partition_log import PartitionLog, split_batches
from broker.kafka.partitions.segments import RollLimits, segment_bases, segment_name
from raft.common.kafka.record_batch import encode_batch

# a few batches a segment, an index entry every other batch or so
LIMITS = RollLimits(segment_bytes=1200, index_interval_bytes=300)


@dataclass(frozen=True, slots=True)
class StoredBatch:
    segment: int
    base_offset: int
    last_offset: int
    data: bytes


def leader_batch(base_offset: int, count: int, value_bytes: int, hidden: int) -> bytes:
    """A batch as a leader stored it: at `base_offset`, `count` records, `hidden` more
    offsets at its end that compaction removed (the batch keeps its last offset)."""
    data = bytearray(encode_batch([(None, b"v" * value_bytes)] * count,
                                  timestamps=[1000] * count, partition_leader_epoch=3))
    struct.pack_into(">q", data, 0, base_offset)
    struct.pack_into(">i", data, 23, count - 1 + hidden)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def decoded(directory: Path) -> list[StoredBatch]:
    """Every batch of every segment file, in offset order."""
    out = []
    for base in segment_bases(p.name for p in directory.iterdir()):
        data = (directory / segment_name(base)).read_bytes()
        for batch in split_batches(data) if data else []:
            first, = struct.unpack_from(">q", batch, 0)
            delta, = struct.unpack_from(">i", batch, 23)
            out.append(StoredBatch(base, first, first + delta, batch))
    return out


def reencoded(batches: list[StoredBatch], offset: int, max_bytes: int, upper: int) -> bytes:
    """Kafka's rules (module docstring) applied to the decoded batches."""
    first = next((b for b in batches if b.last_offset >= offset), None)
    if first is None or first.last_offset >= upper:
        return b""
    kept, size = [], 0
    for batch in batches[batches.index(first):]:
        if batch.segment != first.segment or batch.last_offset >= upper or \
                (kept and size + len(batch.data) > max_bytes):
            break
        kept.append(batch.data)
        size += len(batch.data)
    return b"".join(kept)


BATCH = st.tuples(st.integers(0, 4),  # the gap before it (offsets compacted away)
                  st.integers(1, 4),  # records
                  st.integers(1, 400),  # value bytes
                  st.integers(0, 3))  # offsets compacted away at its end
FETCH = st.tuples(st.integers(-1, 120), st.integers(1, 3000), st.integers(0, 130))


@settings(max_examples=150, deadline=None)
@given(st.lists(BATCH, min_size=1, max_size=30), st.lists(FETCH, min_size=1, max_size=12),
       st.booleans())
def test_served_bytes_equal_the_decoded_batches_reencoded_when_fetching_any_range(
        shapes: list[tuple[int, int, int, int]], fetches: list[tuple[int, int, int]],
        reopen: bool) -> None:
    with tempfile.TemporaryDirectory() as temp:
        directory = Path(temp)
        log = PartitionLog(directory, LIMITS)
        end = 0
        for gap, count, value_bytes, hidden in shapes:
            batch = leader_batch(end + gap, count, value_bytes, hidden)
            log.append_replicated([batch])
            end += gap + count + hidden
        assert log.log_end_offset == end
        if reopen:
            log.close()
            log = PartitionLog(directory, LIMITS)
        batches = decoded(directory)
        assert len(batches) == len(shapes)
        try:
            for offset, max_bytes, upper in fetches:
                fetch_offset = max(0, min(offset, end))
                assert log.read(fetch_offset, max_bytes, upper) == \
                    reencoded(batches, fetch_offset, max_bytes, upper), \
                    (fetch_offset, max_bytes, upper)
        finally:
            log.close()
