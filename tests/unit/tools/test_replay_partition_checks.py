"""The replay's partition-log checks (tools/replay/partition_checks.py, acknowledged.py) on
synthetic clusters written as brokers write them (tests/support/partition_data.py): the
clean cluster passes, and each planted fault (a diverging replica, a gap, an epoch the
metadata never gave, an acknowledged write missing or stored twice) fails its check.
The checks run on the driver, so no Spark is needed here."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from raft.common.uuid import Uuid
from tests.replay.snapshot_logs import write_snapshot_of
from tests.support.partition_data import (
    ORDERS_ID,
    StoredWrite,
    clean_log,
    history_line,
    metadata_batches,
    write_partition_cluster,
)
from tools.replay.acknowledged import check_acknowledged, read_history
from tools.replay.checks import PARTITION_CHECKS, CheckResult
from tools.replay.images import ReplayBase
from tools.replay.inputs import InputError, from_cluster
from tools.replay.partition_checks import (
    check_epochs_match,
    check_offsets_contiguous,
    check_replicas_agree,
)
from tools.replay.partition_history import partition_history
from tools.replay.partition_logs import read_replicas

END = 12  # clean_log()'s log end


def _checks(root: Path, history: list[str] | None = None) -> dict[str, CheckResult]:
    replay_input = from_cluster(root)
    partitions = read_replicas(replay_input.nodes)
    known = partition_history(replay_input.node(1), None)
    writes = None
    if history is not None:
        path = root / "history.jsonl"
        path.write_text("\n".join(history) + "\n", encoding="utf-8")
        writes = read_history(path)
    results = [check_replicas_agree(partitions, known),
               check_offsets_contiguous(partitions, known),
               check_epochs_match(partitions, known),
               check_acknowledged(writes, partitions, known)]
    return {r.name: r for r in results}


def _acked(offsets: range) -> list[str]:
    return [history_line(o, f"v{o}".encode(), key=f"k{o % 3}".encode()) for o in offsets]


def _failed(results: dict[str, CheckResult]) -> set[str]:
    return {name for name, result in results.items() if not result.passed}


def test_a_clean_cluster_passes_every_partition_check(tmp_path: Path) -> None:
    root = write_partition_cluster(tmp_path / "c", {4: clean_log(), 5: clean_log()},
                                   high_watermarks={4: END, 5: END})
    results = _checks(root, _acked(range(END)))
    assert set(results) == set(PARTITION_CHECKS)  # each listed, with its description
    assert _failed(results) == set()
    assert results["partition-replicas-agree"].counts["partitions_compared"] == 1
    assert results["partition-replicas-agree"].counts["batches_compared"] == 6
    assert results["partition-offsets-contiguous"].counts == {"replicas": 2, "batches": 12}
    assert results["partition-epochs-match-metadata"].counts["batches"] == 12
    assert results["acknowledged-writes-present"].counts["checked"] == END


def test_a_cluster_without_partitions_passes_with_counts_zero(tmp_path: Path) -> None:
    root = write_partition_cluster(tmp_path / "c", {}, high_watermarks={})
    results = _checks(root)
    assert _failed(results) == set()
    assert results["partition-replicas-agree"].counts["replicas"] == 0
    assert results["partition-offsets-contiguous"].skipped
    assert results["acknowledged-writes-present"].note == "no --history given"


def test_a_diverging_replica_below_the_high_watermark_fails(tmp_path: Path) -> None:
    diverged = clean_log()
    diverged[2] = replace(diverged[2], records=((b"k1", b"other"), (b"k2", b"v5")))
    root = write_partition_cluster(tmp_path / "c", {4: clean_log(), 5: diverged},
                                   high_watermarks={4: END, 5: END})
    result = _checks(root)["partition-replicas-agree"]
    assert result.violations == 1
    example = result.examples[0]
    assert example["offset"] == 4
    assert example["batch"]["crc"] != example["reference_batch"]["crc"]


def test_a_stale_tail_above_the_lowest_high_watermark_is_legal(tmp_path: Path) -> None:
    """A follower's tail from an older epoch above its checkpoint is not yet truncated."""
    stale = [*clean_log()[:3], StoredWrite(6, 0, ((b"k1", b"lost"), (b"k2", b"lost")))]
    root = write_partition_cluster(tmp_path / "c", {4: clean_log(), 5: stale},
                                   high_watermarks={4: END, 5: 6})
    assert _failed(_checks(root)) == set()


def test_a_log_ending_below_its_checkpoint_lost_committed_records(tmp_path: Path) -> None:
    root = write_partition_cluster(tmp_path / "c", {4: clean_log(), 5: clean_log()[:4]},
                                   high_watermarks={4: END, 5: END})
    result = _checks(root)["partition-replicas-agree"]
    assert [e["broker"] for e in result.examples] == [5]
    assert "below its high-watermark checkpoint" in result.examples[0]["reason"]


def test_a_replica_whose_log_starts_later_is_compared_from_its_start(tmp_path: Path) -> None:
    root = write_partition_cluster(tmp_path / "c", {4: clean_log(), 5: clean_log()[4:]},
                                   high_watermarks={4: END, 5: END})
    results = _checks(root)
    assert _failed(results) == set()
    assert results["partition-replicas-agree"].counts["batches_compared"] == 2


def test_a_gap_between_batches_fails_offsets_contiguous(tmp_path: Path) -> None:
    gapped = clean_log()
    del gapped[1]  # offsets 2..3 missing inside the first segment
    root = write_partition_cluster(tmp_path / "c", {4: gapped},
                                   high_watermarks={4: END})
    result = _checks(root)["partition-offsets-contiguous"]
    assert result.violations == 1
    assert result.examples[0]["reason"] == "gap: 2..3 missing"


def test_overlapping_batches_fail_offsets_contiguous(tmp_path: Path) -> None:
    overlapping = clean_log()
    overlapping[2] = replace(overlapping[2], base_offset=3)
    root = write_partition_cluster(tmp_path / "c", {4: overlapping}, high_watermarks={})
    result = _checks(root)["partition-offsets-contiguous"]
    assert "overlaps" in result.examples[0]["reason"]


def test_a_compacted_topic_may_have_gaps_but_never_overlaps(tmp_path: Path) -> None:
    cleaned = clean_log()
    cleaned[1] = replace(cleaned[1], records=((b"k0", b"v3"),))  # offset 2 cleaned away
    cleaned[1] = replace(cleaned[1], base_offset=3)
    del cleaned[2]  # a whole batch cleaned away: a gap between batches
    root = write_partition_cluster(tmp_path / "c", {4: cleaned, 5: clean_log()},
                                   high_watermarks={4: END, 5: END}, compacted=True)
    assert _failed(_checks(root)) == set()
    root = write_partition_cluster(tmp_path / "d", {4: cleaned, 5: clean_log()},
                                   high_watermarks={4: END, 5: END})
    assert _failed(_checks(root)) == {"partition-offsets-contiguous",
                                      "partition-replicas-agree"}


def test_an_epoch_the_metadata_never_gave_fails(tmp_path: Path) -> None:
    foreign = clean_log()
    foreign[4] = replace(foreign[4], epoch=7)
    root = write_partition_cluster(tmp_path / "c", {4: foreign}, high_watermarks={4: END})
    result = _checks(root)["partition-epochs-match-metadata"]
    assert result.violations == 1
    assert result.examples[0]["reason"] == "leader epoch 7 never given to the partition"


def test_a_decreasing_epoch_fails(tmp_path: Path) -> None:
    backwards = clean_log()
    backwards[5] = replace(backwards[5], epoch=0)
    root = write_partition_cluster(tmp_path / "c", {4: backwards}, high_watermarks={4: END})
    result = _checks(root)["partition-epochs-match-metadata"]
    assert [e["reason"] for e in result.examples] == ["leader epoch 0 after 1"]


def test_a_missing_acknowledged_write_fails(tmp_path: Path) -> None:
    root = write_partition_cluster(tmp_path / "c", {4: clean_log(), 5: clean_log()},
                                   high_watermarks={4: END, 5: END})
    history = [*_acked(range(END)), history_line(5, b"never stored")]
    result = _checks(root, history)["acknowledged-writes-present"]
    assert result.violations == 1
    assert result.examples[0]["reason"] == "offset 5 holds another value"


def test_a_duplicated_acknowledged_write_fails(tmp_path: Path) -> None:
    twice = [*clean_log(), StoredWrite(END, 1, ((b"k0", b"v3"), (b"k1", b"new")))]
    root = write_partition_cluster(tmp_path / "c", {4: twice, 5: twice},
                                   high_watermarks={4: END + 2, 5: END + 2})
    result = _checks(root, _acked(range(END)))["acknowledged-writes-present"]
    assert result.violations == 1
    assert result.examples[0]["offset"] == 3
    assert "stored 2 times, acknowledged 1" in result.examples[0]["reason"]


def test_writes_retention_or_compaction_removed_are_legally_gone(tmp_path: Path) -> None:
    root = write_partition_cluster(tmp_path / "c", {4: clean_log()[2:]},
                                   high_watermarks={4: END})
    assert _checks(root, _acked(range(END)))["acknowledged-writes-present"].passed
    cleaned = clean_log()
    cleaned[1] = replace(cleaned[1], records=((b"k0", b"v3"),), base_offset=3)  # k2 later
    root = write_partition_cluster(tmp_path / "d", {4: cleaned}, high_watermarks={4: END},
                                   compacted=True)
    assert _checks(root, _acked(range(END)))["acknowledged-writes-present"].passed
    root = write_partition_cluster(tmp_path / "e", {4: cleaned}, high_watermarks={4: END})
    failed = _checks(root, _acked(range(END)))["acknowledged-writes-present"]
    assert [e["offset"] for e in failed.examples] == [2]


def test_writes_above_the_checkpointed_high_watermark_are_counted_not_checked(
        tmp_path: Path) -> None:
    root = write_partition_cluster(tmp_path / "c", {4: clean_log()[:3]},
                                   high_watermarks={4: 6})
    result = _checks(root, _acked(range(END)))["acknowledged-writes-present"]
    assert result.passed
    assert result.counts["checked"] == 6
    assert result.counts["not_checked_above_high_watermark"] == 6


def test_history_entries_by_digest_are_checked_like_values(tmp_path: Path) -> None:
    root = write_partition_cluster(tmp_path / "c", {4: clean_log()}, high_watermarks={4: END})
    good = json.dumps({"topic": "orders", "partition": 0, "offset": 4,
                       "value_sha256": hashlib.sha256(b"v4").hexdigest()})
    bad = json.dumps({"topic": "orders", "partition": 0, "offset": 6,
                      "value_sha256": hashlib.sha256(b"v4").hexdigest()})
    assert _checks(root, [good])["acknowledged-writes-present"].passed
    assert not _checks(root, [bad])["acknowledged-writes-present"].passed


def test_a_write_naming_its_topic_id_is_read_from_that_topic(tmp_path: Path) -> None:
    """`topic_id` picks the topic (a name deleted and reused since); an ID no broker holds
    is counted as not checked, never as missing."""
    root = write_partition_cluster(tmp_path / "c", {4: clean_log()}, high_watermarks={4: END})
    named = json.loads(history_line(4, b"v5"))
    result = _checks(root, [json.dumps({**named, "topic_id": str(ORDERS_ID)})])
    assert result["acknowledged-writes-present"].violations == 1
    result = _checks(root, [json.dumps({**named, "topic_id": str(Uuid(42))})])
    assert result["acknowledged-writes-present"].passed
    assert result["acknowledged-writes-present"].counts["not_checked_no_agreed_log"] == 1


@pytest.mark.parametrize(("line", "message"), [
    (json.dumps({"topic": "orders", "partition": 0, "offset": 0, "value": "",
                 "topic_id": "nope"}), "invalid Uuid"),
    ("not json", "line 2: "),
    (json.dumps({"topic": "orders", "partition": -1, "offset": 0, "value": ""}),
     "`partition` and `offset` must be integers >= 0"),
    (json.dumps({"topic": "orders", "partition": 0, "offset": 0}),
     "exactly one of `value` and `value_sha256`"),
    (json.dumps({"topic": "orders", "partition": 0, "offset": 0, "value": "%%"}),
     "line 2: "),
    (json.dumps({"topic": "orders", "partition": 0, "offset": 0, "value_sha256": "ab"}),
     "64 lowercase hex digits"),
])
def test_a_bad_history_line_is_one_error_naming_it(tmp_path: Path, line: str,
                                                   message: str) -> None:
    path = tmp_path / "history.jsonl"
    good = json.dumps({"topic": "orders", "partition": 0, "offset": 0,
                       "value": base64.b64encode(b"x").decode()})
    path.write_text(f"{good}\n{line}\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 2") as caught:
        read_history(path)
    assert message in str(caught.value)


def test_epochs_before_a_snapshot_base_count_as_given_up_to_its_own(tmp_path: Path) -> None:
    """Replayed from a snapshot taken after the partition's creation (epoch 0), epochs
    up to the snapshot's count as given, the later change's (1) too, and 2 never was."""
    log = clean_log()
    log[-1] = replace(log[-1], epoch=2)
    root = write_partition_cluster(tmp_path / "c", {4: log}, high_watermarks={4: END})
    batches = metadata_batches()
    end = batches[0].next_offset
    snapshot = write_snapshot_of(root / "node-1" / "data", batches, end)
    node = from_cluster(root).node(1)
    known = partition_history(node, ReplayBase(end_offset=end, path=str(snapshot)))
    assert known.from_snapshot
    assert known.floor == {(ORDERS_ID, 0): 0}
    assert known.given == {(ORDERS_ID, 0): {1}}
    result = check_epochs_match(read_replicas(from_cluster(root).nodes), known)
    assert [e["offset"] for e in result.examples] == [10]
    assert "taken as given" in result.note


def test_an_unreadable_partition_segment_is_input_error_naming_it(tmp_path: Path) -> None:
    root = write_partition_cluster(tmp_path / "c", {4: clean_log()}, high_watermarks={4: END})
    (root / "node-4" / "data" / "orders-0" / "00000000000000000099.log").mkdir()
    with pytest.raises(InputError, match=r"00000000000000000099\.log: unreadable partition"):
        read_replicas(from_cluster(root).nodes)
