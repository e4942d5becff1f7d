"""The cross-node checks (tools/replay/crossnode.py) on hand-made batch indexes and
versions, without Spark: which nodes hold each batch, which batches overlap, the record
versions of those, where the committed prefix ends, and what log matching, the committed
prefix and the divergence table report, with their offsets, nodes and reasons."""

from __future__ import annotations

from array import array
from typing import Any

from tools.replay.batch_index import NodeIndex
from tools.replay.checks import CheckResult
from tools.replay.crossnode import (
    COMMITTED_BY_CHECKPOINTS,
    COMMITTED_BY_MAJORITY,
    LOG_MATCHING,
    Comparison,
    Version,
    add_records,
    batch_versions,
    committed_end,
    committed_prefix,
    divergence,
    log_matching,
    prefix_mismatches,
)

VOTERS = (1, 2, 3)
VOTERS_SET = frozenset(VOTERS)
NO_OP = {"record_type": "NO_OP"}


def _index(node: int, *batches: tuple[str, int, int, int]) -> NodeIndex:
    """(digest label, base offset, epoch, records) per batch: same label, same bytes."""
    return NodeIndex(node=node, files=("segment",), file_ids=array("l", [0] * len(batches)),
                     positions=array("q", range(len(batches))),
                     offsets=array("q", [b[1] for b in batches]),
                     epochs=array("l", [b[2] for b in batches]),
                     counts=array("l", [b[3] for b in batches]),
                     digests=b"".join(b[0].encode().ljust(16, b".") for b in batches))


def _version(offset: int, nodes: set[int], *, epoch: int = 1, count: int = 1,
             locator: tuple[int, int] = (0, 0), record: dict[str, Any] | None = None
             ) -> Version:
    return Version(offset=offset, epoch=epoch, count=count, nodes=frozenset(nodes),
                   locator=locator, record_hash=None if record is None else offset,
                   record=record)


def _spans(versions: list[Version]) -> list[tuple[int, int, list[int]]]:
    """(offset, count, holders) of each version."""
    return [(v.offset, v.count, sorted(v.nodes)) for v in versions]


def test_batch_versions_gives_each_root_batch_the_prefix_nodes_long_enough_to_hold_it():
    """Nodes 2 and 3 hold the root's first 4 and 2 batches."""
    root = _index(1, *((f"b{i}", i, 1, 1) for i in range(6)))
    indexes = {1: root, 2: _index(2, *((f"b{i}", i, 1, 1) for i in range(4))),
               3: _index(3, ("b0", 0, 1, 1), ("b1", 1, 1, 1))}
    comparison = batch_versions(indexes, 1, {1: 6, 2: 4, 3: 2}, VOTERS)
    assert _spans(comparison.versions) == [(0, 1, [1, 2, 3]), (1, 1, [1, 2, 3]), (2, 1, [1, 2]),
                                           (3, 1, [1, 2]), (4, 1, [1]), (5, 1, [1])]
    assert [v.locator for v in comparison.versions] == [(1, i) for i in range(6)]
    assert comparison.contested == []
    assert (comparison.voters, comparison.majority, comparison.high_watermarks) == (
        frozenset(VOTERS), 2, {})


def test_batch_versions_keeps_the_log_starts_above_0_only():
    """A log starting at 1 is cut below a snapshot (its snapshot holds offset 0); one at
    0 is whole, and needs no entry."""
    root = _index(1, ("a", 0, 1, 1), ("b", 1, 1, 1))
    comparison = batch_versions({1: root}, 1, {1: 2}, VOTERS, log_starts={1: 0, 2: 1, 3: 0})
    assert comparison.log_starts == {2: 1}


def test_batch_versions_holds_the_root_as_any_node_when_it_is_no_listed_prefix():
    comparison = batch_versions({1: _index(1, ("a", 0, 1, 2), ("b", 2, 1, 1))}, 1, {}, VOTERS)
    assert _spans(comparison.versions) == [(0, 2, [1]), (2, 1, [1])]


def test_batch_versions_merges_copies_of_a_batch_across_diverging_nodes():
    """Node 2 and 3 share the root's first batch, then hold their own: c on both, d on
    node 2, e on node 3. Batches overlapping others' offsets are contested."""
    indexes = {1: _index(1, ("a", 0, 1, 2), ("b", 2, 1, 1)),
               2: _index(2, ("a", 0, 1, 2), ("c", 2, 2, 1), ("d", 3, 2, 1)),
               3: _index(3, ("a", 0, 1, 2), ("c", 2, 2, 1), ("e", 3, 3, 2))}
    comparison = batch_versions(indexes, 1, {1: 2}, VOTERS, {2: 3})
    assert comparison.versions == [
        Version(offset=0, epoch=1, count=2, nodes=frozenset({1, 2, 3}), locator=(1, 0)),
        Version(offset=2, epoch=1, count=1, nodes=frozenset({1}), locator=(1, 1)),
        Version(offset=2, epoch=2, count=1, nodes=frozenset({2, 3}), locator=(2, 1)),
        Version(offset=3, epoch=2, count=1, nodes=frozenset({2}), locator=(2, 2)),
        Version(offset=3, epoch=3, count=2, nodes=frozenset({3}), locator=(3, 2))]
    assert [v.locator for v in comparison.contested] == [(1, 1), (2, 1), (2, 2), (3, 2)]
    assert comparison.high_watermarks == {2: 3}


def test_batch_versions_keeps_a_batch_repeated_in_one_log_once_and_goes_on():
    root = _index(1, ("a", 0, 1, 1), ("b", 1, 1, 1), ("b", 1, 1, 1), ("c", 2, 1, 1))
    comparison = batch_versions({1: root}, 1, {1: 4}, VOTERS)
    assert [v.locator for v in comparison.versions] == [(1, 0), (1, 1), (1, 3)]


def test_batch_versions_leaves_out_batches_without_records():
    root = _index(1, ("empty", 0, 1, 0), ("a", 0, 1, 1))
    assert _spans(batch_versions({1: root}, 1, {1: 2}, VOTERS).versions) == [(0, 1, [1])]


def test_batch_versions_contests_each_cluster_of_overlapping_batches_and_only_those():
    """Offsets [0,1) [1,3) [2,3) [3,4) [4,6) [5,6) [6,7): touching is no overlap."""
    root = _index(1, ("a", 0, 1, 1), ("b", 1, 1, 2), ("c", 2, 1, 1), ("d", 3, 1, 1),
                  ("e", 4, 1, 2), ("f", 5, 1, 1), ("g", 6, 1, 1))
    contested = batch_versions({1: root}, 1, {1: 7}, VOTERS).contested
    assert [v.locator[1] for v in contested] == [1, 2, 4, 5]


def test_batch_versions_chains_an_overlap_through_the_batch_that_reaches_furthest():
    """[4,5) overlaps [2,6) only, which overlaps [0,3): one cluster."""
    root = _index(1, ("a", 0, 1, 3), ("b", 2, 1, 4), ("c", 4, 1, 1))
    contested = batch_versions({1: root}, 1, {1: 3}, VOTERS).contested
    assert [v.locator[1] for v in contested] == [0, 1, 2]


def test_batch_versions_majority_is_more_than_half_the_voters():
    index = {1: _index(1, ("a", 0, 1, 1))}
    assert [batch_versions(index, 1, {1: 1}, voters).majority
            for voters in ((1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), (1, 2, 3, 4, 5))] == [
        1, 2, 2, 3, 3]


def test_add_records_gives_one_version_per_distinct_record_held_by_every_copy_holding_it():
    first = _version(2, {1, 2}, count=2, locator=(1, 0))
    second = _version(2, {3}, count=2, locator=(3, 0))
    comparison = Comparison(versions=[first, second], contested=[first, second])
    rec = [{"record_type": "NO_OP", "n": n} for n in range(3)]
    add_records(comparison, {(1, 0): [(2, 1, 21, rec[0]), (3, 1, 31, rec[1])],
                             (3, 0): [(2, 1, 21, rec[0]), (3, 2, 32, rec[2])]})
    assert comparison.records == [
        Version(offset=2, epoch=1, count=1, nodes=frozenset({1, 2, 3}), locator=(1, 0),
                record_hash=21, record=rec[0]),
        Version(offset=3, epoch=1, count=1, nodes=frozenset({1, 2}), locator=(1, 0),
                record_hash=31, record=rec[1]),
        Version(offset=3, epoch=2, count=1, nodes=frozenset({3}), locator=(3, 0),
                record_hash=32, record=rec[2])]


def test_committed_end_by_majority_stops_at_the_first_offset_no_majority_holds():
    """[2,4) held by exactly a majority counts; [4,5) held by one voter does not."""
    versions = [_version(0, {1, 2, 3}, count=2), _version(2, {1, 2}, count=2),
                _version(4, {1})]
    assert committed_end(Comparison(versions=versions, contested=[], voters=frozenset(VOTERS),
                                    majority=2)) == 4
    assert committed_end(Comparison(versions=[], contested=[])) == 0


def test_committed_end_by_majority_counts_contested_offsets_record_by_record():
    """Offsets 3-4 are held in two different batches (nodes 1 and 2): offset 3's record is
    the same in both (a majority), offset 4's differs."""
    batches = [_version(3, {1}, count=2, locator=(1, 1)), _version(3, {2}, count=2,
                                                                   locator=(2, 1))]
    comparison = Comparison(versions=[_version(0, VOTERS_SET, count=3), *batches],
                            contested=batches, voters=VOTERS_SET, majority=2,
                            records=[_version(3, {1, 2}, record=NO_OP), _version(4, {1}),
                                     _version(4, {2}, epoch=2)])
    assert committed_end(comparison) == 4


def test_holders_count_voters_whose_log_starts_above_the_version():
    """A voter whose log starts past the version holds it in its snapshot; one starting at
    or below it, and an observer, do not."""
    comparison = Comparison(versions=[], contested=[], voters=VOTERS_SET, majority=2,
                            log_starts={2: 10, 3: 5, 4: 20})
    assert comparison.holders(_version(5, {1})) == 2
    assert comparison.holders(_version(9, {1, 2})) == 2
    assert comparison.holders(_version(12, {1})) == 1


def test_committed_end_by_majority_reaches_where_a_majority_of_snapshots_cover():
    """Empty logs above snapshots: voters starting at 5 and 7 (a majority) commit up to 5;
    an observer's start counts for nothing; one voter alone commits nothing."""
    def end(log_starts: dict[int, int]) -> int:
        return committed_end(Comparison(versions=[], contested=[], voters=VOTERS_SET,
                                        majority=2, log_starts=log_starts))
    assert end({1: 5, 2: 7}) == 5
    assert end({1: 5, 2: 7, 3: 9}) == 7
    assert end({1: 5, 4: 9}) == 0


def test_is_committed_by_checkpoints_needs_a_holder_checkpointed_above_the_offset():
    """Node 1 checkpointed 3: its records below 3 are committed; node 2 has no
    checkpoint, so what only it holds is not."""
    comparison = Comparison(versions=[], contested=[], voters=VOTERS_SET, majority=2,
                            high_watermarks={1: 3})
    assert [comparison.is_committed(_version(offset, nodes))
            for offset, nodes in ((2, {1}), (3, {1, 2}), (0, {2}))] == [True, False, False]


def test_committed_prefix_by_checkpoints_reports_each_offset_where_a_node_breaks_it():
    """Nodes 1 and 2 checkpointed 6, node 3 checkpointed 2 (so only its records below 2
    are committed). Offset 2: node 3 holds another record of the committed epoch; 3: two
    committed records; 4: nothing committed; 5: a stale older epoch (allowed) and a
    later one; 6: not below the committed end."""
    records = [_version(2, {1, 2}, record=NO_OP), _version(2, {3}),
               _version(3, {1}), _version(3, {2}, epoch=2),
               _version(4, {3}),
               _version(5, {1, 2}, epoch=2), _version(5, {3}), _version(5, {3}, epoch=3),
               _version(6, {1}), _version(6, {2})]
    comparison = Comparison(versions=[_version(0, VOTERS_SET, count=7)], contested=[],
                            records=records, voters=VOTERS_SET, majority=2,
                            high_watermarks={1: 6, 2: 6, 3: 2})
    result = committed_prefix(comparison, committed_end(comparison))
    two = "2 different committed records at this offset (by the holders' high-watermark " \
          "checkpoints)"
    assert result == CheckResult(
        name="committed_prefix", description=COMMITTED_BY_CHECKPOINTS, violations=4,
        examples=(
            {"nodes": [3], "offset": 2, "epoch": 1,
             "reason": "epoch 1 where the committed record has epoch 1", "record": {}},
            {"nodes": [1], "offset": 3, "epoch": 1, "reason": two, "record": {}},
            {"nodes": [2], "offset": 3, "epoch": 2, "reason": two, "record": {}},
            {"nodes": [3], "offset": 5, "epoch": 3,
             "reason": "epoch 3 where the committed record has epoch 2", "record": {}}),
        note="committed prefix from high-watermark checkpoints: offsets below 6 "
             "(node -> checkpoint: {1: 6, 2: 6, 3: 2})")


def test_committed_prefix_by_checkpoints_flags_a_log_ending_below_its_checkpoint():
    """Node 4 holds nothing; node 5's log ends at 4 (a repeated batch [1,2) after
    [0,4) does not shorten it): both checkpointed 5."""
    comparison = Comparison(
        versions=[_version(0, {1, 5}, count=4), _version(1, {5}), _version(4, {1})],
        contested=[], voters=frozenset({1}), high_watermarks={1: 5, 4: 5, 5: 5})
    lost = "below this node's high-watermark checkpoint 5: committed records lost"
    assert list(committed_prefix(comparison, 5).examples) == [
        {"nodes": [4], "offset": 0, "reason": f"the log ends at offset 0, {lost}"},
        {"nodes": [5], "offset": 4, "reason": f"the log ends at offset 4, {lost}"}]


def test_committed_prefix_by_checkpoints_passes_a_node_holding_nothing_and_checkpointing_0():
    comparison = Comparison(versions=[], contested=[], high_watermarks={1: 0})
    assert committed_prefix(comparison, 0).violations == 0


def test_committed_prefix_by_majority_judges_only_offsets_below_the_end_it_is_given():
    records = [_version(1, {1, 2}, record=NO_OP), _version(1, {3}, epoch=2, record=NO_OP)]
    comparison = Comparison(versions=[], contested=[], records=records, voters=VOTERS_SET,
                            majority=2)
    assert committed_prefix(comparison, 1).violations == 0
    result = committed_prefix(comparison, 2)
    assert (result.description, result.violations, result.examples) == (
        COMMITTED_BY_MAJORITY, 1,
        ({"nodes": [3], "offset": 1, "epoch": 2, "record": NO_OP,
          "reason": "epoch 2 where the committed record has epoch 1"},))
    assert result.note == "committed prefix from majority: no high-watermark checkpoints; " \
                          "offsets below 2, held identically by a majority (2 of voters [1, 2, 3])"


def test_log_matching_counts_each_conflicting_record_and_each_offset_of_a_prefix_mismatch():
    """Offset 2, epoch 1: nodes 1 and 2 hold different records. Nodes 2 and 3 hold epoch
    2 at offsets 2-4 where node 1 holds epoch 1, below offset 7, where all hold epoch 3."""
    comparison = Comparison(versions=[], contested=[],
                            records=[_version(2, {1}, record=NO_OP), _version(2, {2})])
    runs = {1: [[1, 0, 4], [3, 5, 9]], 2: [[1, 0, 1], [2, 2, 4], [3, 5, 7]],
            3: [[1, 0, 1], [2, 2, 4], [3, 5, 7]]}
    result = log_matching(comparison, runs)
    conflict = "same offset and epoch, different bytes on other nodes"
    mismatch = "epochs 1 vs 2 below offset 7, where both hold the same epoch"
    assert (result.name, result.description, result.violations) == ("log_matching", LOG_MATCHING,
                                                                     2 + 3 + 3)
    assert list(result.examples) == [
        {"nodes": [1], "offset": 2, "epoch": 1, "reason": conflict, "record": NO_OP},
        {"nodes": [2], "offset": 2, "epoch": 1, "reason": conflict, "record": {}},
        {"nodes": [1, 2], "offset": 2, "length": 3, "reason": mismatch},
        {"nodes": [1, 3], "offset": 2, "length": 3, "reason": mismatch}]


def test_prefix_mismatches_needs_a_shared_epoch_and_looks_only_below_the_last_one():
    assert prefix_mismatches([[1, 0, 4]], [[2, 0, 4]]) == []
    assert prefix_mismatches([[1, 0, 4], [2, 5, 9]], [[1, 0, 4], [3, 5, 9]]) == []
    # a log repeating offsets 2-3 in epoch 1: the last shared epoch is still at offset 6
    assert prefix_mismatches([[1, 0, 4], [4, 5, 6], [1, 2, 3]],
                             [[1, 0, 1], [2, 2, 4], [4, 5, 8]]) == [(2, 2, 1, 2), (4, 1, 1, 2)]


def test_divergence_gives_each_node_its_first_uncommitted_record_below_the_end():
    """Nodes 1 and 2 checkpointed 5; nodes 3 to 6 hold records no checkpoint covers."""
    records = [_version(1, {1, 2}), _version(1, {3}), _version(2, {3}),
               _version(3, {1, 2}), _version(3, {4}), _version(5, {5}), _version(6, {6})]
    comparison = Comparison(versions=[], contested=[], records=records,
                            high_watermarks={1: 5, 2: 5})
    assert divergence(comparison, 5) == {3: 1, 4: 3}
