"""A scan split in pieces and folded (`tools.replay.pieces`) finds what one scan of the
whole log finds, or says it cannot (None), never something else: on a sound log, and on
logs with one record replaced by a planted fault, cut at every segment; and the pieces'
indexes join into the whole log's. The tasks run in process (`load.node_task`, no Spark;
the job's second scan of a log whose pieces do not fold runs in tests/replay)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from metadata import records as rec
from raft.common.uuid import Uuid
from raft.segment import encode_batch
from raft.types import Batch
from tests.support.synthetic_logs import metadata_log, replace_record
from tools.replay.load import merge_results, node_task, piece_tasks
from tools.replay.pieces import cut
from tools.replay.sequential import ScanResult, decode_record

SEGMENT_BATCHES = 6


def _files(batches: list[Batch]) -> list[tuple[str, bytes]]:
    return [(f"/log/{i:020d}.log",
             b"".join(encode_batch(b) for b in batches[i:i + SEGMENT_BATCHES]))
            for i in range(0, len(batches), SEGMENT_BATCHES)]


def _scan(files: list[tuple[str, bytes]], runs: list[range] | None) -> ScanResult | None:
    """The folded scan of `files` cut in `runs` (None: one scan of the whole)."""
    plan: dict[str, Any] = {"scan": True, "analysis": True, "base": None}
    last = files[-1][0]
    if runs is None:
        return next(node_task(1, last, files, plan))["scan"]
    results = [next(node_task(1, last, [files[i] for i in run], {**plan, "piece": number}))
               for number, run in enumerate(runs)]
    return merge_results(results)[1]["scan"]


def _cuts(segments: int) -> list[list[range]]:
    """Every cut in two, and a few in three."""
    two = [[range(0, i), range(i, segments)] for i in range(1, segments)]
    three = [[range(0, i), range(i, i + 2), range(i + 2, segments)]
             for i in range(1, segments - 2, 3)]
    return two + three


def _log() -> list[Batch]:
    return metadata_log(records=600, batch_size=5, records_per_epoch=150, max_live=6,
                        seed=11)


def test_cut_makes_consecutive_runs_of_about_equal_bytes():
    assert cut([10, 10, 10, 10], 2) == [range(0, 2), range(2, 4)]
    assert cut([30, 1, 1, 1], 2) == [range(0, 1), range(1, 4)]
    assert cut([5], 4) == [range(0, 1)]
    assert cut([1, 1, 1, 1, 1, 1], 3) == [range(0, 2), range(2, 4), range(4, 6)]


def test_piece_tasks_split_only_a_scan_from_offset_zero_over_several_segments(tmp_path):
    paths = []
    for i, size in enumerate((30, 10, 10, 10)):
        paths.append(str(tmp_path / f"{i}.log"))
        (tmp_path / f"{i}.log").write_bytes(b"x" * size)
    plan = {"scan": True, "base": None}
    assert piece_tasks(paths, plan, 2) == [(paths[:1], {**plan, "piece": 0}),
                                           (paths[1:], {**plan, "piece": 1})]
    assert piece_tasks(paths, plan, 1) == [(paths, plan)]
    assert piece_tasks(paths[:1], plan, 2) == [(paths[:1], plan)]
    assert piece_tasks(paths, {"index": True}, 2) == [(paths, {"index": True})]
    decoding = {**plan, "decode": {paths[0]: [0]}}
    assert piece_tasks(paths, decoding, 2) == [(paths, decoding)]


def test_a_sound_log_folds_into_its_whole_scan_at_every_cut():
    files = _files(_log())
    whole = _scan(files, None)
    assert whole is not None
    assert whole.aggregates is not None
    for runs in _cuts(len(files)):
        assert _scan(files, runs) == whole, runs


def test_pieces_that_index_their_segments_join_into_the_whole_index():
    files = _files(_log())
    plan: dict[str, Any] = {"scan": True, "index": True, "base": None}
    whole = next(node_task(1, files[-1][0], files, plan))
    runs = [range(0, 2), range(2, 3), range(3, len(files))]
    joined = merge_results([
        next(node_task(1, files[-1][0], [files[i] for i in run], {**plan, "piece": number}))
        for number, run in enumerate(runs)])[1]
    assert joined["index"] == whole["index"]
    assert joined["scan"] == whole["scan"]


def _topics(batches: list[Batch]) -> list[tuple[int, Uuid, str]]:
    """(offset, ID, name) of each Topic record."""
    out = []
    for batch in batches:
        for i, data in enumerate(batch.records):
            kind, fields, _ = decode_record(data)
            if kind == int(rec.RecordType.TOPIC):
                out.append((batch.base_offset + i, Uuid.from_bytes(fields["topic_id"]),
                            fields["name"]))
    return out


def _plants(batches: list[Batch], rng: random.Random) -> list[tuple[int, rec.Record]]:
    """(offset, record) faults: IDs and names taken again, records of dead or unknown
    topics, renames onto live names, resizes and a second metadata topic, at offsets
    spread over the log (so some fall just after a cut, some far from one)."""
    topics = _topics(batches)
    end = batches[-1].next_offset
    plants: list[tuple[int, rec.Record]] = []
    for _ in range(40):
        offset = rng.randrange(20, end)
        _, topic_id, name = rng.choice([t for t in topics if t[0] < offset])
        stranger = Uuid.random(rng)
        plants += [(offset, rng.choice([
            rec.Topic(name=f"fresh-{offset}", topic_id=topic_id),
            rec.Topic(name=name, topic_id=stranger),
            rec.PartitionChange(topic_id=topic_id, partition=0, leader=2, isr=(1, 2, 3)),
            rec.PartitionChange(topic_id=stranger, partition=0, leader=2, isr=(1, 2)),
            rec.PartitionChange(topic_id=topic_id, partition=0,
                                leader_epoch_before_deletion=((0, 1),)),
            rec.Partition(topic_id=topic_id, partition=3, replicas=(1, 2, 3),
                          isr=(1, 2, 3), leader=1),
            rec.RemoveTopic(topic_id=topic_id),
            rec.RenameTopic(topic_id=topic_id, new_name=f"renamed-{offset}"),
            rec.RenameTopic(topic_id=stranger, new_name=name),
            rec.PartitionCount(topic_id=topic_id, undeleted_partition_count=2),
            rec.TopicConfig(topic_id=topic_id, key="enable.ordered.delivery", value="true"),
            rec.MetadataTopic(topic_id=stranger)]))]
    return plants


@pytest.mark.parametrize("seed", range(4))
def test_a_log_with_a_planted_fault_folds_into_its_whole_scan_or_not_at_all(seed: int):
    """Every fold that answers equals the whole scan; some answer with the fault's
    violations (a fault far from a cut), some do not (one the pieces cannot judge)."""
    batches = _log()
    folded_faults = unfolded = 0
    for offset, record in _plants(batches, random.Random(seed)):
        files = _files(replace_record(batches, offset, record))
        whole = _scan(files, None)
        assert whole is not None
        for runs in _cuts(len(files)):
            folded = _scan(files, runs)
            if folded is None:
                unfolded += 1
                continue
            assert folded == whole, (offset, record, runs)
            folded_faults += bool(folded.violations)
    assert folded_faults
    assert unfolded


@pytest.mark.parametrize("fault", ["gap", "falling epoch"])
def test_an_order_break_at_the_seam_does_not_fold(fault: str):
    batches = _log()
    seam = SEGMENT_BATCHES * 2
    moved = batches[seam]
    if fault == "gap":
        moved = Batch(base_offset=moved.base_offset + 1, epoch=moved.epoch,
                      records=moved.records)
    else:
        moved = Batch(base_offset=moved.base_offset, epoch=0, records=moved.records)
    files = _files([*batches[:seam], moved, *batches[seam + 1:]])
    assert _scan(files, [range(0, 2), range(2, len(files))]) is None
    assert _scan(files, [range(0, 1), range(1, len(files))]) == _scan(files, None)


def test_a_topic_counted_before_the_seam_and_grown_after_it_does_not_fold():
    """A PartitionCount before the seam records the topic's count; a Partition record
    adding a partition after it must be judged with its batch (no PartitionCount: a
    violation), which the fold cannot do."""
    batches = _log()
    seam = batches[SEGMENT_BATCHES * 2].base_offset
    removed, changes = {}, []
    for batch in batches:
        for i, data in enumerate(batch.records):
            kind, fields, _ = decode_record(data)
            if kind == int(rec.RecordType.REMOVE_TOPIC):
                removed.setdefault(fields["topic_id"], batch.base_offset + i)
            elif kind == int(rec.RecordType.PARTITION_CHANGE):
                changes.append(batch.base_offset + i)
    created, topic_id, _ = next(t for t in _topics(batches) if t[0] < seam - 10
                                and removed.get(t[1].to_bytes(), seam + 1) > seam)
    counted = next(o for o in changes if o > created + 3)  # after its partitions
    after = next(o for o in changes if o >= seam)  # in the piece after the seam
    assert counted < seam
    grown = replace_record(batches, counted, rec.PartitionCount(
        topic_id=topic_id, undeleted_partition_count=3, initial_partition_count=3))
    grown = replace_record(grown, after, rec.Partition(
        topic_id=topic_id, partition=3, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1))
    files = _files(grown)
    whole = _scan(files, None)
    assert whole is not None
    assert [v[1] for v in whole.violations] == ["partition_counts_consistent"]
    assert _scan(files, [range(0, 2), range(2, len(files))]) is None
