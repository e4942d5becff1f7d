"""broker.kafka.ordered.split_tombstones (pure): where a producer of a compacted ordered
topic leaves a key's tombstone, when, and what ordered consumers skip."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.kafka.groups.offsets_records import decode_records_with_headers
from broker.kafka.ordered.partitioner import partition_for
from broker.kafka.ordered.split_tombstones import (
    SPLIT_TOMBSTONE_HEADER,
    SentTombstones,
    is_split_tombstone,
    needs_tombstone,
    tombstone_targets,
)
from raft.common.kafka.record_batch import encode_batch


def grown(initial: int, counts: list[int]) -> dict[int, dict[int, int]]:
    """The after-creation maps growth records (metadata/controller.py): each partition
    added maps every partition existing then to its epoch, and every growth bumps the
    epoch of every existing partition (here: the growth's number)."""
    epochs = dict.fromkeys(range(initial), 0)
    maps: dict[int, dict[int, int]] = {}
    for step, count in enumerate(counts, start=1):
        before = dict(epochs)
        for partition in range(len(epochs), count):
            maps[partition] = before
        epochs = dict.fromkeys(range(count), step)
    return maps


def test_a_chain_of_growths_leaves_the_key_tombstones_down_its_split_sources() -> None:
    # N=2: `key-2` lives in 0 at count 2, in 2 at counts 3 and 4, in 6 at count 8
    maps = grown(2, [3, 4, 8])
    assert [partition_for(b"key-2", 2, c) for c in (2, 3, 4, 8)] == [0, 2, 2, 6]
    assert tombstone_targets(6, 2, maps) == [(2, 2), (0, 0)]
    assert tombstone_targets(2, 2, maps) == [(0, 0)]
    assert tombstone_targets(1, 2, maps) == []  # an initial partition has no source


@given(st.integers(1, 4), st.lists(st.integers(1, 5), min_size=1, max_size=4),
       st.binary(min_size=1, max_size=8))
def test_targets_are_exactly_the_partitions_the_key_lived_in_before(
        initial: int, steps: list[int], key: bytes) -> None:
    counts = [initial]
    for step in steps:
        counts.append(counts[-1] + step)
    homes = [partition_for(key, initial, c) for c in counts]
    lived = list(dict.fromkeys(reversed(homes[:-1])))
    targets = tombstone_targets(homes[-1], initial, grown(initial, counts[1:]))
    assert [source for source, _ in targets] == [p for p in lived if p != homes[-1]]


def test_a_tombstone_is_needed_while_records_from_before_the_split_remain() -> None:
    assert needs_tombstone(earliest=0, epoch_end=10)
    assert needs_tombstone(earliest=9, epoch_end=10)
    assert not needs_tombstone(earliest=10, epoch_end=10)  # all from before are gone
    assert needs_tombstone(earliest=50, epoch_end=-1)  # an epoch the leader forgot


def test_only_a_null_value_with_the_header_is_a_split_tombstone() -> None:
    mark = [(SPLIT_TOMBSTONE_HEADER, b"")]
    assert is_split_tombstone(None, mark)
    assert not is_split_tombstone(b"v", mark)
    assert not is_split_tombstone(None, [("other", b"")])
    assert not is_split_tombstone(None, None)
    batch = encode_batch([(b"k", None)], timestamps=[5], headers=mark)
    ((offset, key, value, headers),) = decode_records_with_headers(batch)
    assert (offset, key, value) == (0, b"k", None)
    assert is_split_tombstone(value, headers)


def test_each_split_is_tombstoned_once_per_key_and_never_once_clean() -> None:
    sent = SentTombstones(limit=3)
    targets = [(2, 1), (0, 0)]
    assert sent.missing(targets, b"a") == targets
    sent.settle(2, 1, b"a", clean=False)
    assert sent.missing(targets, b"a") == [(0, 0)]
    assert sent.missing(targets, b"b") == targets
    sent.settle(0, 0, b"a", clean=True)
    assert sent.missing(targets, b"b") == [(2, 1)]  # 0 holds nothing from before
    sent.settle(2, 1, b"b", clean=False)
    sent.settle(2, 1, b"c", clean=False)  # full: forgets, at worst sends again
    assert sent.missing(targets, b"a") == targets
