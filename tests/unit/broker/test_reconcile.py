"""broker.reconcile: the pure decision that replaces LeaderAndIsr/StopReplica."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.hosting import assignment_for, hosted_partitions, led_partitions
from broker.reconcile import (
    Action,
    Assignment,
    CreatePartition,
    DeleteStaged,
    HostedPartition,
    LocalPartition,
    RenamePartitionDir,
    ScheduleDeletion,
    StagedDeletion,
    StageForDeletion,
    WriteMetadataFile,
    parse_partition_dir_name,
    reconcile,
)
from metadata import records as rec
from metadata.delta import replay
from raft.common.uuid import ZERO_UUID, Uuid

OLD = Uuid(0x1111 << 64)
NEW = Uuid(0x2222 << 64)
OTHER = Uuid(0x3333 << 64)
DELAY_MS = 4 * 3600 * 1000
NOW_MS = 1_000_000


def hosted(topic: str, topic_id: Uuid, partition: int = 0) -> HostedPartition:
    return HostedPartition(topic=topic, topic_id=topic_id, partition=partition,
                           replicas=(4, 5), leader=4)


def run(local: list[LocalPartition], image: dict[str, Uuid],
        hosts: tuple[HostedPartition, ...] = (), staged: tuple[StagedDeletion, ...] = (),
        now_ms: int = NOW_MS) -> list[Action]:
    return reconcile(local=local, staged=staged,
                     assignment=Assignment(topic_ids=image, hosted=hosts),
                     now_ms=now_ms, delete_delay_ms=DELAY_MS)


def test_creates_hosted_partition_when_directory_is_missing() -> None:
    """Topic IDs: the image replaces LeaderAndIsr; a hosted partition gets its directory."""
    actions = run([], {"A": NEW}, (hosted("A", NEW, 0), hosted("A", NEW, 2)))
    assert actions == [CreatePartition(topic="A", partition=0, topic_id=NEW),
                       CreatePartition(topic="A", partition=2, topic_id=NEW)]


def test_stages_old_id_and_creates_new_when_topic_was_recreated() -> None:
    """Topic IDs, a stale directory: A-0 with the old ID is moved to deleting/<old id>_0 and
    A-0 is created with the new ID."""
    actions = run([LocalPartition(topic="A", partition=0, topic_id=OLD)], {"A": NEW},
                  (hosted("A", NEW),))
    assert len(actions) == 2
    stage, create = actions
    assert isinstance(stage, StageForDeletion)
    assert (stage.dir_name, stage.staged_name, stage.topic_id) == ("A-0", f"{OLD}_0", OLD)
    assert stage.due_ms == NOW_MS + DELAY_MS
    assert str(NEW) in stage.reason
    assert create == CreatePartition(topic="A", partition=0, topic_id=NEW)


def test_stages_partition_when_topic_id_is_absent_from_image() -> None:
    """Topic IDs, deletion: a topic deleted while the broker was down is staged."""
    actions = run([LocalPartition(topic="A", partition=1, topic_id=OLD)], {})
    assert [type(a) for a in actions] == [StageForDeletion]
    assert actions[0].staged_name == f"{OLD}_1"  # type: ignore[union-attr]


def test_keeps_live_partition_when_it_is_hosted_here() -> None:
    """Topic IDs: a directory of a partition this broker hosts is kept as it is."""
    actions = run([LocalPartition(topic="A", partition=0, topic_id=NEW)], {"A": NEW},
                  (hosted("A", NEW),))
    assert actions == []


def test_stages_stray_when_live_partition_is_not_hosted_here() -> None:
    """Strays: a live topic's partition whose replicas do not include this broker (copied
    here, or left behind when its replicas moved) is staged with the delay, never served."""
    actions = run([LocalPartition(topic="A", partition=0, topic_id=NEW),
                   LocalPartition(topic="A", partition=1, topic_id=NEW)], {"A": NEW},
                  (hosted("A", NEW, 1),))
    assert len(actions) == 1
    stage = actions[0]
    assert isinstance(stage, StageForDeletion)
    assert (stage.dir_name, stage.staged_name, stage.topic_id, stage.due_ms) == \
        ("A-0", f"{NEW}_0", NEW, NOW_MS + DELAY_MS)
    assert "not assigned to this broker" in stage.reason


def test_completes_directory_without_file_or_data_when_partition_is_hosted() -> None:
    """A new partition's directory that a crash left without partition.metadata (and so
    without data): the image's ID is written and no partition is created twice."""
    actions = run([LocalPartition(topic="A", partition=0, topic_id=None, holds_data=False)],
                  {"A": NEW}, (hosted("A", NEW),))
    assert actions == [WriteMetadataFile(topic="A", partition=0, topic_id=NEW)]


def test_stages_data_without_file_and_creates_fresh_when_name_is_known() -> None:
    """Strays: data without a valid partition.metadata is never adopted by the live
    topic of that name (it may be a deleted topic's, the name reused); it is staged and
    the hosted partition gets a new, empty directory."""
    actions = run([LocalPartition(topic="A", partition=0, topic_id=None)], {"A": NEW},
                  (hosted("A", NEW),))
    assert len(actions) == 2
    stage, create = actions
    assert isinstance(stage, StageForDeletion)
    assert (stage.dir_name, stage.topic_id) == ("A-0", ZERO_UUID)
    assert "never adopted by name" in stage.reason
    assert create == CreatePartition(topic="A", partition=0, topic_id=NEW)


def test_stages_directory_without_file_when_name_is_unknown() -> None:
    """Topic IDs: a leftover without partition.metadata is stale, never a start-up crash."""
    actions = run([LocalPartition(topic="gone", partition=3, topic_id=None)], {"A": NEW})
    assert len(actions) == 1
    assert isinstance(actions[0], StageForDeletion)
    assert actions[0].staged_name == f"{ZERO_UUID}_3"


def test_renames_directory_when_topic_was_renamed() -> None:
    """Renames: the directory follows the name and keeps its ID and data."""
    actions = run([LocalPartition(topic="A", partition=0, topic_id=NEW)], {"B": NEW},
                  (hosted("B", NEW),))
    assert actions == [RenamePartitionDir(from_dir="A-0", to_dir="B-0", topic_id=NEW)]


def test_finishes_rename_chain_when_targets_free_up_in_order() -> None:
    """A->B while B->C: both renames in one pass (reconciliation reaches a fixpoint)."""
    actions = run([LocalPartition(topic="A", partition=0, topic_id=NEW),
                   LocalPartition(topic="B", partition=0, topic_id=OTHER)],
                  {"B": NEW, "C": OTHER}, (hosted("B", NEW), hosted("C", OTHER)))
    assert actions == [RenamePartitionDir(from_dir="B-0", to_dir="C-0", topic_id=OTHER),
                       RenamePartitionDir(from_dir="A-0", to_dir="B-0", topic_id=NEW)]


def test_stages_stale_directory_before_renaming_onto_its_name() -> None:
    """Topic IDs: the stale B-0 leaves first, then the renamed topic takes the name."""
    actions = run([LocalPartition(topic="A", partition=0, topic_id=NEW),
                   LocalPartition(topic="B", partition=0, topic_id=OLD)], {"B": NEW},
                  (hosted("B", NEW),))
    assert [type(a) for a in actions] == [StageForDeletion, RenamePartitionDir]
    assert actions[0].dir_name == "B-0"  # type: ignore[union-attr]


def test_deletes_staged_directory_only_when_delay_has_passed() -> None:
    """Topic IDs, deletion: removed after delete.topic.delay.ms, not before."""
    staged = (StagedDeletion(name=f"{OLD}_0", due_ms=NOW_MS),
              StagedDeletion(name=f"{OTHER}_0", due_ms=NOW_MS + 1))
    assert run([], {}, staged=staged) == [DeleteStaged(staged_name=f"{OLD}_0", due_ms=NOW_MS)]


def test_schedules_deletion_when_staged_directory_has_no_due_time() -> None:
    """Topic IDs: an unknown due time is never read as "delete now"."""
    actions = run([], {}, staged=(StagedDeletion(name="x", due_ms=None),))
    assert actions == [ScheduleDeletion(staged_name="x", due_ms=NOW_MS + DELAY_MS)]


def test_picks_free_staged_name_when_same_id_and_partition_is_already_staged() -> None:
    """deleting/<topic_id>_<partition> must not collide with a pending deletion."""
    actions = run([LocalPartition(topic="A", partition=0, topic_id=OLD)], {},
                  staged=(StagedDeletion(name=f"{OLD}_0", due_ms=NOW_MS + 5),))
    assert [a.staged_name for a in actions] == [f"{OLD}_0.1"]  # type: ignore[union-attr]


def test_parses_only_topic_dash_partition_names_when_scanning() -> None:
    """Log dir layout: <topic>-<partition>; anything else is not a partition dir."""
    assert parse_partition_dir_name("a-b-12") == ("a-b", 12)
    assert parse_partition_dir_name("A-0") == ("A", 0)
    for name in ("A", "-0", "A-", "A-01", "A-x", "A-١"):
        assert parse_partition_dir_name(name) is None, name


def test_hosts_exactly_the_partitions_whose_replicas_name_the_broker_when_image_replayed() -> None:
    """In place of LeaderAndIsr: the assignment comes from the metadata image,
    with the current leader after a PartitionChange, and follows renames and deletes."""
    image = replay(enumerate([
        rec.Topic(name="A", topic_id=OLD),
        rec.Partition(topic_id=OLD, partition=0, replicas=(4, 5), isr=(4, 5), leader=4),
        rec.Partition(topic_id=OLD, partition=1, replicas=(5, 6), isr=(5, 6), leader=5),
        rec.Topic(name="B", topic_id=NEW),
        rec.Partition(topic_id=NEW, partition=0, replicas=(6, 4), isr=(6, 4), leader=6),
        rec.PartitionChange(topic_id=NEW, partition=0, leader=4),
    ]))
    hosts = hosted_partitions(image, 4)
    assert [(h.topic, h.partition, h.topic_id, h.leader) for h in hosts] == [
        ("A", 0, OLD, 4), ("B", 0, NEW, 4)]
    assert hosts[1].leader_epoch == 1
    assert [h.dir_name for h in led_partitions(image, 5)] == ["A-1"]
    assert hosted_partitions(image, 7) == ()

    later = replay([(6, rec.RemoveTopic(topic_id=OLD)),
                    (7, rec.RenameTopic(topic_id=NEW, new_name="A"))], base=image)
    assignment = assignment_for(later, 4)
    assert dict(assignment.topic_ids) == {"A": NEW}
    assert [h.dir_name for h in assignment.hosted] == ["A-0"]


# --- property: a model disk, the actions applied to it --------------------------------


@dataclass
class ModelDisk:
    """Directories as the reconciler sees them, each with a data token that must survive
    unless the directory is stale; `empty`: file-less directories holding nothing."""

    live: dict[str, tuple[Uuid | None, int]] = field(default_factory=dict)
    staged: dict[str, tuple[int | None, int]] = field(default_factory=dict)
    empty: set[str] = field(default_factory=set)
    next_token: int = 1000

    def local(self) -> list[LocalPartition]:
        out = []
        for name, (topic_id, _) in self.live.items():
            parsed = parse_partition_dir_name(name)
            assert parsed is not None
            out.append(LocalPartition(topic=parsed[0], partition=parsed[1], topic_id=topic_id,
                                      holds_data=name not in self.empty))
        return out

    def staged_list(self) -> list[StagedDeletion]:
        return [StagedDeletion(name=n, due_ms=due) for n, (due, _) in self.staged.items()]

    def apply(self, action: Action) -> None:
        if isinstance(action, CreatePartition):
            assert action.dir_name not in self.live
            self.next_token += 1
            self.live[action.dir_name] = (action.topic_id, self.next_token)
        elif isinstance(action, WriteMetadataFile):
            topic_id, token = self.live[action.dir_name]
            assert topic_id is None
            assert action.dir_name in self.empty
            self.live[action.dir_name] = (action.topic_id, token)
            self.empty.discard(action.dir_name)
        elif isinstance(action, StageForDeletion):
            assert action.staged_name not in self.staged
            _, token = self.live.pop(action.dir_name)
            self.empty.discard(action.dir_name)
            self.staged[action.staged_name] = (action.due_ms, token)
        elif isinstance(action, RenamePartitionDir):
            assert action.to_dir not in self.live
            assert action.from_dir not in self.empty
            self.live[action.to_dir] = self.live.pop(action.from_dir)
        elif isinstance(action, ScheduleDeletion):
            _, token = self.staged[action.staged_name]
            self.staged[action.staged_name] = (action.due_ms, token)
        elif isinstance(action, DeleteStaged):
            del self.staged[action.staged_name]


IDS = [Uuid((i + 1) << 80) for i in range(5)]
NAMES = ["A", "B", "a-b", "C"]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[ModelDisk, Assignment]:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4))
    ids = draw(st.lists(st.sampled_from(IDS), unique=True, min_size=len(names),
                        max_size=len(names)))
    image = dict(zip(names, ids, strict=True))
    # a shrink may have removed a topic's last partitions (the disk has 0 and 1)
    counts = {topic_id: draw(st.integers(1, 3)) for topic_id in ids}
    hosts = tuple(hosted(name, image[name], p) for name in names
                  for p in range(counts[image[name]]) if draw(st.booleans()))
    disk = ModelDisk()
    dirs = draw(st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 1)), unique=True,
                         max_size=8))
    for token, (name, partition) in enumerate(dirs):
        # mostly IDs the image knows, so renames, chains and duplicates are common
        choices = st.sampled_from(ids) if ids else st.sampled_from(IDS)
        topic_id = draw(st.one_of(st.none(), choices, choices, st.sampled_from(IDS)))
        disk.live[f"{name}-{partition}"] = (topic_id, token)
        if topic_id is None and draw(st.booleans()):
            disk.empty.add(f"{name}-{partition}")
    for token, staged_id in enumerate(draw(st.lists(st.sampled_from(IDS), max_size=3))):
        due = draw(st.one_of(st.none(), st.integers(NOW_MS - 10, NOW_MS + 10)))
        disk.staged.setdefault(f"{staged_id}_0", (due, 500 + token))
    return disk, Assignment(topic_ids=image, hosted=hosts, partition_counts=counts)


def _live_groups(disk: ModelDisk, assignment: Assignment
                 ) -> dict[tuple[Uuid, int], set[int]]:
    """Data tokens of every (topic id, partition) on disk that this broker keeps by the
    image alone: a live ID proven by partition.metadata, a partition the topic still
    has, hosted here (data without partition.metadata is never adopted)."""
    image, counts = assignment.topic_ids, assignment.partition_counts
    hosted_keys = {(h.topic_id, h.partition) for h in assignment.hosted}
    groups: dict[tuple[Uuid, int], set[int]] = {}
    for name, (topic_id, token) in disk.live.items():
        number = int(name.rpartition("-")[2])
        if topic_id in image.values() and topic_id is not None and \
                number < counts[topic_id] and (topic_id, number) in hosted_keys:
            groups.setdefault((topic_id, number), set()).add(token)
    return groups


@settings(max_examples=300)
@given(scenarios())
def test_never_stages_live_data_and_reaches_fixpoint_when_actions_are_applied(
        scenario: tuple[ModelDisk, Assignment]) -> None:
    """Topic IDs, deletion: for any disk and image, reconciling never stages or deletes
    the data of a hosted live partition (one copy of each hosted topic id + partition
    stays), every directory ends under its topic's current name with the image's ID, a
    partition number the topic still has, and hosted here (strays are staged), every
    hosted partition exists, and a second reconciliation finds nothing to do."""
    disk, assignment = scenario
    image = dict(assignment.topic_ids)
    names_by_id = {v: k for k, v in image.items()}
    groups = _live_groups(disk, assignment)
    actions = reconcile(local=disk.local(), staged=disk.staged_list(), assignment=assignment,
                        now_ms=NOW_MS, delete_delay_ms=DELAY_MS)
    for action in actions:
        disk.apply(action)

    surviving = {token for _, token in disk.live.values()}
    for key, tokens in groups.items():
        assert tokens & surviving, f"live partition {key} lost all its data"
    for name, (topic_id, _) in disk.live.items():
        assert topic_id in names_by_id, f"{name} holds {topic_id}, not in the image"
        assert name.rpartition("-")[0] == names_by_id[topic_id], name
        assert int(name.rpartition("-")[2]) < assignment.partition_counts[topic_id], name
    hosted_dirs = {h.dir_name for h in assignment.hosted}
    assert set(disk.live) == hosted_dirs, "a stray was kept or a hosted partition is missing"
    for h in assignment.hosted:
        assert disk.live[h.dir_name][0] == h.topic_id
    assert all(due is not None and due > NOW_MS for due, _ in disk.staged.values())

    again = reconcile(local=disk.local(), staged=disk.staged_list(), assignment=assignment,
                      now_ms=NOW_MS, delete_delay_ms=DELAY_MS)
    assert again == []


def test_breaks_rename_cycle_through_temporary_name_when_topics_swap_names() -> None:
    """Renames keep data: A<->B swapped while the broker was down still ends with
    each directory under its topic's current name."""
    disk = ModelDisk(live={"A-0": (NEW, 1), "B-0": (OTHER, 2)})
    assignment = Assignment(topic_ids={"A": OTHER, "B": NEW},
                            hosted=(hosted("A", OTHER), hosted("B", NEW)))
    actions = reconcile(local=disk.local(), staged=[], assignment=assignment,
                        now_ms=NOW_MS, delete_delay_ms=DELAY_MS)
    assert all(isinstance(a, RenamePartitionDir) for a in actions)
    for action in actions:
        disk.apply(action)
    assert disk.live == {"B-0": (NEW, 1), "A-0": (OTHER, 2)}


def test_stages_second_copy_when_live_partition_exists_twice() -> None:
    """Topic IDs: one live copy per topic id + partition; the copy already under the
    topic's name keeps serving, the other is staged (not deleted before the delay)."""
    actions = run([LocalPartition(topic="A", partition=0, topic_id=NEW),
                   LocalPartition(topic="old", partition=0, topic_id=NEW)], {"A": NEW},
                  (hosted("A", NEW),))
    assert len(actions) == 1
    assert isinstance(actions[0], StageForDeletion)
    assert actions[0].dir_name == "old-0"


def test_stages_removed_partition_when_live_topic_has_fewer_partitions() -> None:
    """A shrink removed A-2 (RemovePartition): its directory is staged like a deleted
    topic's, with the delay and a reason naming the removal; A-0 and A-1 are kept."""
    local = [LocalPartition(topic="A", partition=p, topic_id=NEW) for p in range(3)]
    actions = reconcile(local=local, staged=(), now_ms=NOW_MS, delete_delay_ms=DELAY_MS,
                        assignment=Assignment(
                            topic_ids={"A": NEW}, partition_counts={NEW: 2},
                            hosted=(hosted("A", NEW, 0), hosted("A", NEW, 1))))
    assert len(actions) == 1
    staged = actions[0]
    assert isinstance(staged, StageForDeletion)
    assert (staged.dir_name, staged.staged_name, staged.due_ms) == \
        ("A-2", f"{NEW}_2", NOW_MS + DELAY_MS)
    assert "removed" in staged.reason


def test_stages_removed_partition_when_directory_lacks_metadata_file() -> None:
    """Completion meets removal: an empty file-less A-1 of a topic now down to one
    partition is not given the live ID; it is staged."""
    actions = reconcile(local=[LocalPartition(topic="A", partition=1, topic_id=None,
                                              holds_data=False)],
                        staged=(), now_ms=NOW_MS, delete_delay_ms=DELAY_MS,
                        assignment=Assignment(topic_ids={"A": NEW}, hosted=(),
                                              partition_counts={NEW: 1}))
    assert [type(a) for a in actions] == [StageForDeletion]


def test_assignment_counts_partitions_when_built_from_image() -> None:
    """broker.hosting gives reconcile each live topic's partition count."""
    image = replay(enumerate([
        rec.Topic(name="A", topic_id=NEW),
        rec.Partition(topic_id=NEW, partition=0, replicas=(4,), isr=(4,), leader=4),
        rec.Partition(topic_id=NEW, partition=1, replicas=(5,), isr=(5,), leader=5)]))
    assert assignment_for(image, 4).partition_counts == {NEW: 2}
