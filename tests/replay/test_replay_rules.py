"""Every replay check fires on a minimal planted log (a few records on three voters), and
is then the only check that fails.

The checks (tools/replay/checks.py, sequential.py, crossnode.py, checkpoint.py), each
followed by the planted cases (`PLANTS`) that make it fire:
- records_decodable: a record with a good CRC is not msgpack, or not a known record
  (records_decodable:not_msgpack, records_decodable:unknown_type).
- offsets_contiguous: a gap, or an offset repeated (offsets_contiguous:gap,
  offsets_contiguous:repeated).
- epochs_monotonic: an epoch below an earlier one (epochs_monotonic:falling).
- one_leader_per_epoch: two leaders claim one epoch, or the leader is not a voter
  (one_leader_per_epoch:two_leaders, one_leader_per_epoch:not_a_voter).
- log_matching: the same (offset, epoch) holds different bytes on two nodes, or two nodes
  sharing an epoch at some offset hold different epochs below it
  (log_matching:same_epoch_other_bytes, log_matching:prefix_epochs_differ).
- committed_prefix: a later epoch replaces a committed record; the holders'
  checkpoints commit two different records at one offset; a log ends below its own
  checkpoint (committed_prefix:later_epoch_overwrites, committed_prefix:two_committed,
  committed_prefix:log_below_checkpoint).
- topic_ids_valid: the metadata topic ID is ZERO_UUID or the sentinel; the metadata
  topic takes a topic's ID; a topic ID is ZERO_UUID or the sentinel; a topic takes the
  metadata topic's ID; a topic ID is reused after RemoveTopic
  (topic_ids_valid:metadata_zero, topic_ids_valid:metadata_sentinel,
  topic_ids_valid:metadata_takes_topic_id, topic_ids_valid:topic_zero,
  topic_ids_valid:topic_sentinel, topic_ids_valid:topic_takes_metadata_id,
  topic_ids_valid:reused_after_remove).
- metadata_topic_once: the metadata topic ID is assigned twice, or never though topics
  are created (metadata_topic_once:reassigned, metadata_topic_once:missing).
- name_one_live_id: a Topic record, or a rename, gives a live name a second ID
  (name_one_live_id:created_again, name_one_live_id:renamed_onto).
- records_name_live_topic: a PartitionChange, or a RemoveTopic, names no live topic
  (records_name_live_topic:partition, records_name_live_topic:remove).
- partition_counts_consistent, partition_removals_valid, no_growth_while_marked (KIP-253,
  planted in tests/replay/test_replay_resize.py): a growth batch that bumps no epochs, a
  mark without a PartitionCount, a removal of an unmarked partition, growth while a
  partition is marked (partition_counts_consistent:growth_unbumped,
  partition_counts_consistent:mark_without_count, partition_removals_valid:unmarked,
  no_growth_while_marked:grown).
- broker_checkpoints: a broker's image hash differs from the replayed image's, or the
  broker checkpointed an offset the log does not reach
  (broker_checkpoints:wrong_hash, broker_checkpoints:beyond_log).
- snapshot_valid: a snapshot file whose bytes were damaged after it was written
  (snapshot_valid:corrupt).
- snapshot_at_log_start: a log cut above offset 0 with no snapshot at its start
  (snapshot_at_log_start:no_snapshot).
- snapshot_matches_log: a snapshot holding a broker the log never registered, one named
  with an epoch above its last record's, one ending above every high-watermark
  checkpoint (snapshot_matches_log:other_content, snapshot_matches_log:other_epoch,
  snapshot_matches_log:uncommitted).
- images_agree: every log cut at a snapshot (so none can be checked against a replay
  from offset 0), and one node's snapshot holding another image (images_agree:other_base).

The snapshots are written by the snapshot writer and the logs cut by DiskLog
(tests/replay/snapshot_logs.py). The checks and the places they report a violation are
read from the source (tests.support.rule_sites): a
check, or a place reporting one, without a plant here fails
`test_every_check_of_the_replay_has_a_plant` (names, no Spark),
`test_every_scan_site_is_reached_by_a_plant` (tools/replay/sequential.py, by line, no
Spark) or `test_every_reported_reason_is_one_site_and_every_site_is_reported` (Spark).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import pytest

from metadata.records import (
    LeaderChange,
    MetadataTopic,
    NoOp,
    PartitionChange,
    Record,
    RegisterBroker,
    RemoveTopic,
    RenameTopic,
    Topic,
)
from raft.common.uuid import METADATA_TOPIC_ID, ZERO_UUID, Uuid
from raft.types import Batch
from tests.replay.snapshot_logs import (
    CORRUPT,
    GOOD,
    OTHER_CONTENT,
    OTHER_EPOCH,
    cut_log,
    drop_log,
    epoch_before,
    write_snapshot_of,
)
from tests.replay.test_replay_resize import RESIZE_PLANTS
from tests.support.rule_sites import (
    REPLAY_SOURCES,
    Site,
    replay_check_names,
    replay_sites,
)
from tests.support.serial_spark import SerialSpark
from tests.support.synthetic_logs import write_cluster
from tools.replay.checkpoint import write_checkpoint
from tools.replay.inputs import from_cluster
from tools.replay.job import ReplayResult, run_replay
from tools.replay.sequential import NodeScan

VOTERS = (1, 2, 3)
A, B, META, META2 = Uuid(2), Uuid(3), Uuid(4), Uuid(5)
SOURCES = REPLAY_SOURCES  # the checkers' sources rule_sites reads
SITES = replay_sites(SOURCES)


def _batch(offset: int, epoch: int, *records: Record | bytes) -> Batch:
    return Batch(base_offset=offset, epoch=epoch, records=tuple(
        r if isinstance(r, bytes) else r.encode() for r in records))


def _leader(leader: int = 1) -> LeaderChange:
    return LeaderChange(leader_id=leader, voters=VOTERS)


def _broker(broker_id: int) -> RegisterBroker:
    return RegisterBroker(broker_id=broker_id, incarnation_id=Uuid(100 + broker_id),
                          broker_epoch=1)


def _log(*records: Record | bytes, epoch: int = 1) -> list[Batch]:
    """One record per batch from offset 0, all in `epoch`, the first a LeaderChange."""
    return [_batch(i, epoch, r) for i, r in enumerate((_leader(), *records))]


def _everywhere(log: Sequence[Batch]) -> dict[int, Sequence[Batch]]:
    return dict.fromkeys(VOTERS, log)


# offsets 0-5: LeaderChange, MetadataTopic, Topic a, PartitionChange and RemoveTopic of
# a, Topic a again with another ID
TOPIC_LOG = _log(MetadataTopic(topic_id=META), Topic(name="a", topic_id=A),
                 PartitionChange(topic_id=A, partition=0), RemoveTopic(topic_id=A),
                 Topic(name="a", topic_id=B))


@dataclass(frozen=True, slots=True, kw_only=True)
class Plant:
    rule: str  # check:case, as listed in the module docstring
    logs: dict[int, Sequence[Batch]]
    says: str  # in the reason of every example
    violations: int = 1
    nodes: tuple[int, ...] = VOTERS  # the nodes of the (first) example
    high_watermarks: dict[int, int] | None = None
    # broker -> (applied offset, image hash; None: the right one)
    checkpoints: dict[int, tuple[int, str | None]] = field(default_factory=dict)
    disk: Disk = field(default_factory=lambda: Disk())

    @property
    def check(self) -> str:
        return self.rule.split(":")[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class Disk:
    """What else is in the nodes' partition directories (tests/replay/snapshot_logs.py):
    node -> snapshots of its log ((end offset, kind)), node -> where its log is cut
    (`DiskLog.advance_start`), node -> (offset, epoch) its log was reset to for a
    fetched snapshot (`DiskLog.reset_to`), and records per segment file."""

    snapshots: dict[int, tuple[tuple[int, str], ...]] = field(default_factory=dict)
    cuts: dict[int, int] = field(default_factory=dict)
    resets: dict[int, tuple[int, int]] = field(default_factory=dict)
    segment_records: int = 1000

    def write(self, root: Path, logs: dict[int, Sequence[Batch]]) -> None:
        for node, snapshots in self.snapshots.items():
            for end, kind in snapshots:
                write_snapshot_of(root / f"node-{node}" / "data", logs[node], end, kind)
        for node, start in self.cuts.items():
            cut_log(root / f"node-{node}" / "data", start)
        for node, (start, epoch) in self.resets.items():
            drop_log(root / f"node-{node}" / "data", start, epoch)


PLANTS = [
    Plant(rule="records_decodable:not_msgpack", logs=_everywhere(_log(b"\xc1")),
          says="not msgpack"),
    Plant(rule="records_decodable:unknown_type",
          logs=_everywhere(_log(msgpack.packb({"type": 250}))), says="unknown record"),
    Plant(rule="offsets_contiguous:gap",
          logs=_everywhere([_batch(0, 1, _leader()), _batch(2, 1, NoOp())]),
          says="gap: previous record is at offset 0"),
    Plant(rule="offsets_contiguous:repeated",
          logs=_everywhere([_batch(0, 1, _leader()), _batch(1, 1, NoOp()),
                            _batch(1, 1, NoOp())]), says="duplicate offset"),
    Plant(rule="epochs_monotonic:falling",
          logs=_everywhere([_batch(0, 2, _leader(2)), _batch(1, 1, NoOp())]),
          says="epoch 1 after epoch 2"),
    Plant(rule="one_leader_per_epoch:two_leaders", logs=_everywhere(_log(_leader(2))),
          says="2 different leaders claim epoch 1", violations=2),
    Plant(rule="one_leader_per_epoch:not_a_voter",
          logs=_everywhere([_batch(0, 1, LeaderChange(leader_id=9, voters=VOTERS))]),
          says="leader 9 is not a voter"),
    # node 3 lags: neither copy of offset 1 is committed, so only log matching is broken
    Plant(rule="log_matching:same_epoch_other_bytes",
          logs={1: _log(_broker(7)), 2: _log(_broker(8)), 3: _log()},
          says="same offset and epoch, different bytes", violations=2, nodes=(1,)),
    Plant(rule="log_matching:prefix_epochs_differ",
          logs={1: [_batch(0, 1, _leader()), _batch(1, 2, NoOp()), _batch(2, 3, NoOp())],
                2: [_batch(0, 1, _leader()), _batch(1, 1, NoOp()), _batch(2, 3, NoOp())],
                3: _log()},
          says="epochs 2 vs 1 below offset 2", nodes=(1, 2)),
    Plant(rule="committed_prefix:later_epoch_overwrites",
          logs={1: _log(_broker(7)), 2: _log(_broker(7)),
                3: [_batch(0, 1, _leader()), _batch(1, 2, _leader(3))]},
          says="epoch 2 where the committed record has epoch 1", nodes=(3,)),
    Plant(rule="committed_prefix:two_committed",
          logs={1: [_batch(0, 1, _leader()), _batch(1, 2, NoOp())], 2: _log(),
                3: [_batch(0, 1, _leader()), _batch(1, 1, NoOp())]},
          high_watermarks={1: 2, 2: 1, 3: 2}, says="2 different committed records",
          violations=2, nodes=(3,)),
    Plant(rule="committed_prefix:log_below_checkpoint",
          logs={1: _log(NoOp()), 2: _log(), 3: _log(NoOp())},
          high_watermarks=dict.fromkeys(VOTERS, 2), says="committed records lost",
          nodes=(2,)),
    Plant(rule="topic_ids_valid:metadata_zero",
          logs=_everywhere(_log(MetadataTopic(topic_id=ZERO_UUID))),
          says="metadata topic ID is missing, ZERO_UUID or the sentinel"),
    Plant(rule="topic_ids_valid:metadata_sentinel",
          logs=_everywhere(_log(MetadataTopic(topic_id=METADATA_TOPIC_ID))),
          says="metadata topic ID is missing, ZERO_UUID or the sentinel"),
    Plant(rule="topic_ids_valid:metadata_takes_topic_id",
          logs=_everywhere(_log(Topic(name="a", topic_id=A), MetadataTopic(topic_id=A))),
          says="metadata topic takes the ID of the topic created at offset 1"),
    Plant(rule="topic_ids_valid:topic_zero",
          logs=_everywhere(_log(MetadataTopic(topic_id=META),
                                Topic(name="a", topic_id=ZERO_UUID))),
          says="topic ID is missing, ZERO_UUID or the sentinel"),
    Plant(rule="topic_ids_valid:topic_sentinel",
          logs=_everywhere(_log(MetadataTopic(topic_id=META),
                                Topic(name="a", topic_id=METADATA_TOPIC_ID))),
          says="topic ID is missing, ZERO_UUID or the sentinel"),
    Plant(rule="topic_ids_valid:topic_takes_metadata_id",
          logs=_everywhere(_log(MetadataTopic(topic_id=META), Topic(name="a", topic_id=META))),
          says="topic takes the metadata topic's ID (assigned at offset 1)"),
    Plant(rule="topic_ids_valid:reused_after_remove",
          logs=_everywhere(_log(MetadataTopic(topic_id=META), Topic(name="a", topic_id=A),
                                RemoveTopic(topic_id=A), Topic(name="b", topic_id=A))),
          says="topic ID reused after RemoveTopic: first assigned at offset 2"),
    Plant(rule="metadata_topic_once:reassigned",
          logs=_everywhere(_log(MetadataTopic(topic_id=META), MetadataTopic(topic_id=META2))),
          says="metadata topic ID assigned again (first at offset 1)"),
    Plant(rule="metadata_topic_once:missing",
          logs=_everywhere(_log(Topic(name="a", topic_id=A))),
          says="never assigns the metadata topic ID"),
    Plant(rule="name_one_live_id:created_again",
          logs=_everywhere(_log(MetadataTopic(topic_id=META), Topic(name="a", topic_id=A),
                                Topic(name="a", topic_id=B))),
          says="name already maps to live topic ID"),
    Plant(rule="name_one_live_id:renamed_onto",
          logs=_everywhere(_log(MetadataTopic(topic_id=META), Topic(name="a", topic_id=A),
                                Topic(name="b", topic_id=B),
                                RenameTopic(topic_id=B, new_name="a"))),
          says="new name already maps to live topic ID"),
    Plant(rule="records_name_live_topic:partition",
          logs=_everywhere(_log(MetadataTopic(topic_id=META),
                                PartitionChange(topic_id=A, partition=0))),
          says="no live topic with this ID here"),
    Plant(rule="records_name_live_topic:remove",
          logs=_everywhere(_log(MetadataTopic(topic_id=META), RemoveTopic(topic_id=A))),
          says="no live topic with this ID here"),
    Plant(rule="broker_checkpoints:wrong_hash", logs=_everywhere(_log(_broker(4))),
          checkpoints={4: (1, None), 5: (1, "0" * 64)},
          says="but the replayed image has", nodes=(5,)),
    Plant(rule="broker_checkpoints:beyond_log", logs=_everywhere(_log(_broker(4))),
          checkpoints={4: (1, None), 5: (7, "0" * 64)},
          says="ends before offset 7", nodes=(5,)),
    Plant(rule="snapshot_valid:corrupt", logs=_everywhere(_log(_broker(7), NoOp())),
          disk=Disk(snapshots={2: ((2, CORRUPT),)}), says="bad snapshot at byte offset",
          nodes=(2,)),
    Plant(rule="snapshot_at_log_start:no_snapshot", logs=_everywhere(_log(_broker(7), NoOp())),
          disk=Disk(cuts={3: 2}), says="the log starts at offset 2 and no valid snapshot",
          nodes=(3,)),
    Plant(rule="snapshot_matches_log:other_content", logs=_everywhere(_log(_broker(7), NoOp())),
          disk=Disk(snapshots={2: ((2, OTHER_CONTENT),)}),
          says="its image differs from node 1's log replayed from offset 0 up to offset 2",
          nodes=(2,)),
    Plant(rule="snapshot_matches_log:other_epoch", logs=_everywhere(_log(_broker(7), NoOp())),
          disk=Disk(snapshots={2: ((2, OTHER_EPOCH),)}),
          says="its epoch is 2, but the record at offset 1 has epoch 1", nodes=(2,)),
    Plant(rule="snapshot_matches_log:uncommitted", logs=_everywhere(_log(_broker(7), NoOp())),
          high_watermarks=dict.fromkeys(VOTERS, 2), disk=Disk(snapshots={1: ((3, GOOD),)}),
          says="ends at offset 3, above the committed end 2", nodes=(1,)),
    Plant(rule="images_agree:other_base", logs=_everywhere(_log(_broker(7), NoOp())),
          disk=Disk(snapshots={1: ((2, GOOD),), 2: ((2, GOOD),), 3: ((2, OTHER_CONTENT),)},
                    cuts=dict.fromkeys(VOTERS, 2), segment_records=1),
          says="differs from the one replayed from snapshot", nodes=(3,)),
    *(Plant(rule=rule, logs=_everywhere(log), says=says)
      for rule, (log, says) in RESIZE_PLANTS.items()),
]

# The same logs without their anomaly (what each plant is built on): every check passes.
CLEAN: dict[str, dict[int, Sequence[Batch]]] = {
    "a leader": _everywhere(_log()),
    "a lagging follower": {1: _log(_broker(7)), 2: _log(_broker(7)), 3: _log()},
    "topics created, renamed, changed and removed": _everywhere(_log(
        MetadataTopic(topic_id=META), Topic(name="a", topic_id=A),
        Topic(name="b", topic_id=B), RenameTopic(topic_id=B, new_name="c"),
        PartitionChange(topic_id=A, partition=0), RemoveTopic(topic_id=A),
        Topic(name="a", topic_id=Uuid(6)))),
    "checkpointed voters and brokers": _everywhere(_log(_broker(4))),
    **dict.fromkeys(("a log cut at its snapshot", "a log cut inside its first segment",
                     "a follower that loaded a snapshot"), _everywhere(TOPIC_LOG)),
}
CLEAN_HIGH_WATERMARKS = {"checkpointed voters and brokers": dict.fromkeys(VOTERS, 2),
                         "a log cut at its snapshot": dict.fromkeys(VOTERS, 6),
                         "a log cut inside its first segment": dict.fromkeys(VOTERS, 6),
                         "a follower that loaded a snapshot": {1: 6, 2: 6, 3: 4}}
CLEAN_CHECKPOINTS: dict[str, dict[int, tuple[int, str | None]]] = {
    "checkpointed voters and brokers": {4: (1, None), 5: (0, None)}}
# Topic a (A) is created below each cut and named after it: only a scan starting from
# the snapshot's image knows it is live there.
CLEAN_DISKS = {
    "a log cut at its snapshot": Disk(snapshots={3: ((3, GOOD),)}, cuts={3: 3},
                                      segment_records=1),
    "a log cut inside its first segment": Disk(
        snapshots={1: ((5, GOOD),), 2: ((1, GOOD), (4, GOOD))}, cuts={2: 2}),
    "a follower that loaded a snapshot": Disk(
        snapshots={3: ((4, GOOD),)}, resets={3: (4, epoch_before(TOPIC_LOG, 4))}),
}


def _image_hash(log: Sequence[Batch], applied: int) -> str:
    from metadata.delta import replay_bytes

    entries = [(b.base_offset + i, r) for b in log for i, r in enumerate(b.records)
               if b.base_offset + i <= applied]
    return replay_bytes(entries).content_hash()


def _replay(spark: Any, root: Path, logs: dict[int, Sequence[Batch]],
            high_watermarks: dict[int, int] | None,
            checkpoints: dict[int, tuple[int, str | None]], disk: Disk) -> ReplayResult:
    write_cluster(root, logs, voters=VOTERS, high_watermarks=high_watermarks,
                  segment_records=disk.segment_records)
    disk.write(root, logs)
    for broker, (applied, digest) in checkpoints.items():
        log_dir = root / f"broker-{broker}" / "data"
        log_dir.mkdir(parents=True)
        write_checkpoint(log_dir, applied, digest or _image_hash(logs[VOTERS[0]], applied))
    return run_replay(spark, from_cluster(root), with_analysis=False)


class _Results:
    """Each plant replayed once, when a test first asks for it."""

    def __init__(self, spark: Any, root: Path) -> None:
        self.spark, self.root = spark, root
        self.done: dict[str, ReplayResult] = {}

    def __call__(self, plant: Plant) -> ReplayResult:
        if plant.rule not in self.done:
            self.done[plant.rule] = _replay(self.spark, self.root / plant.rule.replace(":", "-"),
                                            plant.logs, plant.high_watermarks,
                                            plant.checkpoints, plant.disk)
        return self.done[plant.rule]


@pytest.fixture(scope="module", params=[pytest.param("spark", marks=pytest.mark.spark),
                                        "in-process"])
def runner(request: pytest.FixtureRequest) -> Any:
    """A real local SparkSession, or the same calls run in this process
    (tests.support.serial_spark): fast, and where `make mutation` sees the checks run."""
    return request.getfixturevalue("spark") if request.param == "spark" else SerialSpark()


@pytest.fixture(scope="module")
def replayed(runner: Any, tmp_path_factory: pytest.TempPathFactory) -> _Results:
    return _Results(runner, tmp_path_factory.mktemp("plants"))


def _site_groups() -> dict[tuple[str, str], list[Site]]:
    """Sites by (check, reason pattern): two places writing the same reason for the same
    check cannot be told apart from a report (`test_every_scan_site_is_reached_by_a_plant`
    tells them apart by line)."""
    groups: dict[tuple[str, str], list[Site]] = {}
    for site in SITES:
        groups.setdefault((site.rule, site.pattern), []).append(site)
    return groups


def _groups_matching(check: str, reason: str) -> list[tuple[str, str]]:
    return [key for key, sites in _site_groups().items() if sites[0].matches(check, reason)]


@pytest.mark.parametrize("plant", PLANTS, ids=lambda p: p.rule)
def test_planted_fault_fails_its_check_alone(plant: Plant, replayed: _Results) -> None:
    result = replayed(plant)
    assert result.failed == [plant.check]
    check = result.check(plant.check)
    assert check.violations == plant.violations, check.examples
    assert len(check.examples) == plant.violations
    assert tuple(check.examples[0]["nodes"]) == plant.nodes
    for example in check.examples:
        assert plant.says in example["reason"]
        assert len(_groups_matching(plant.check, example["reason"])) == 1, example


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_plants_pass_every_check_without_their_fault(name: str, runner: Any,
                                                    tmp_path: Path) -> None:
    """The logs the plants are built on, without the planted record: nothing fails,
    so what fails in a plant is its planted fault."""
    result = _replay(runner, tmp_path / "clean", CLEAN[name], CLEAN_HIGH_WATERMARKS.get(name),
                     CLEAN_CHECKPOINTS.get(name, {}), CLEAN_DISKS.get(name, Disk()))
    assert result.passed, [(c.name, c.examples) for c in result.checks if not c.passed]
    assert result.check("broker_checkpoints").skipped == (name not in CLEAN_CHECKPOINTS)
    assert result.check("snapshot_matches_log").skipped == (name not in CLEAN_DISKS)


def test_every_reported_reason_is_one_site_and_every_site_is_reported(
        replayed: _Results) -> None:
    """Every place a check reports a violation (by its reason text) is reported by some
    plant, through the whole replay."""
    examples = [(check.name, example["reason"]) for plant in PLANTS
                for check in replayed(plant).checks for example in check.examples]
    assert [e for e in examples if not _groups_matching(*e)] == []  # no unknown reason
    reported = {key for example in examples for key in _groups_matching(*example)}
    assert not set(_site_groups()) - reported, sorted(set(_site_groups()) - reported)


def test_every_check_of_the_replay_has_a_plant() -> None:
    assert {p.check for p in PLANTS} == replay_check_names(SOURCES)
    assert {s.rule for s in SITES} == replay_check_names(SOURCES)
    assert len(SITES) >= 30  # the site reader still finds the replay's checks


def test_every_plant_is_listed_in_the_module_docstring() -> None:
    assert __doc__ is not None
    cases = set(re.findall(r"\b[a-z_]+:[a-z_]+\b", __doc__))
    assert cases == {p.rule for p in PLANTS}
    assert len(cases) == len(PLANTS)


def _scan_flags(logs: dict[int, Sequence[Batch]]) -> Iterator[tuple[int, str, str]]:
    """(line in sequential.py, check, reason) of every violation a scan of each log
    flags, without Spark."""
    seen: list[tuple[int, str, str]] = []
    flag = NodeScan.flag

    def recording(scan: NodeScan, check: str, offset: int, epoch: int, data: bytes,
                  kind: int, fields: Any, reason: str) -> None:
        seen.append((sys._getframe(1).f_lineno, check, reason))
        flag(scan, check, offset, epoch, data, kind, fields, reason)

    for log in logs.values():
        scan = NodeScan()
        scan.flag = recording.__get__(scan)  # type: ignore[method-assign]
        for seq, batch in enumerate(log):
            scan.batch(seq, batch.base_offset, batch.epoch, list(batch.records))
    yield from seen


def test_every_scan_site_is_reached_by_a_plant() -> None:
    """Each place in sequential.py that flags a violation, told apart by its line, is
    reached by the scan of some plant; and no plant's scan flags another check than
    the plant's."""
    scan_sites = [s for s in SITES if s.path == "tools/replay/sequential.py"]
    reached: set[Site] = set()
    for plant in PLANTS:
        flagged = list(_scan_flags(plant.logs))
        for line, check, reason in flagged:
            reached |= {s for s in scan_sites if s.line == line and s.matches(check, reason)}
        assert {check for _, check, _ in flagged} <= {plant.check}, plant.rule
    missing = [str(s) for s in scan_sites if s not in reached]
    assert not missing
    assert len(scan_sites) >= 14  # the site reader still finds the scan's flags

