"""`kraft metadata-shell`'s pure parts: an image as a tree (`tools/metadata_shell/tree.py`),
paths (`paths.py`), the commands (`commands.py`) and the line loop (`session.py`)."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from metadata import records as rec
from metadata.delta import replay
from metadata.image import MetadataImage
from metadata.topic_names import invalid_topic_name_reason
from raft.common.uuid import RESERVED, Uuid
from tools.metadata_shell.commands import FAILED, HELP, OK, USAGE, Shell
from tools.metadata_shell.paths import resolve
from tools.metadata_shell.session import run_interactive, run_one_shot, stream_reader
from tools.metadata_shell.tree import Provenance, build_image_tree

ORDERS = Uuid.from_string("fmja9INwQxClI4eKGWbfrQ")
AUDIT = Uuid.from_string("vS74fSS5RByP4NQw-tYbkQ")
INCARNATION = Uuid.from_string("AIoFpsRkQVmDJMmFm4EOdg")


def image_of(records: Sequence[rec.Record]) -> MetadataImage:
    return replay(enumerate(records))


def shell_of(records: Sequence[rec.Record], provenance: Provenance | None = None) -> Shell:
    image = image_of(records)
    return Shell(build_image_tree(image, provenance or Provenance(offset=len(records) - 1,
                                                                  epoch=1)))


def partition(topic_id: Uuid, number: int, replicas: tuple[int, ...] = (1, 2)) -> rec.Partition:
    return rec.Partition(topic_id=topic_id, partition=number, replicas=replicas,
                         isr=replicas, leader=replicas[0])


def cluster_records() -> list[rec.Record]:
    """Two brokers (4 unfenced, 5 fenced), `orders` with 11 partitions (so 10 must sort
    after 9) and `audit` with one."""
    return [
        rec.RegisterBroker(broker_id=5, incarnation_id=INCARNATION, broker_epoch=0),
        rec.RegisterBroker(broker_id=4, incarnation_id=INCARNATION, broker_epoch=1,
                           endpoints=("PLAINTEXT://127.0.0.1:9092",), rack="r1"),
        rec.UnfenceBroker(broker_id=4, broker_epoch=1),
        rec.Topic(name="orders", topic_id=ORDERS, initial_partition_count=11),
        *(partition(ORDERS, p, (4, 5)) for p in range(11)),
        rec.PartitionChange(topic_id=ORDERS, partition=3, leader=5, isr=(5,)),
        rec.Topic(name="audit", topic_id=AUDIT),
        partition(AUDIT, 0, (5,)),
    ]


def run(shell: Shell, line: str) -> tuple[str, ...]:
    """The output lines of a command that must succeed."""
    outcome = shell.execute(line.split())
    assert (outcome.status, outcome.err) == (OK, ()), outcome
    return outcome.out


def cat_json(shell: Shell, path: str) -> object:
    return json.loads("\n".join(run(shell, f"cat {path}")))


# --- the tree --------------------------------------------------------------------------


def test_ls_shows_the_image_layout() -> None:
    shell = shell_of(cluster_records())
    assert run(shell, "ls") == ("image",)
    assert run(shell, "ls /image") == ("acls", "cluster", "features", "provenance", "scram",
                                       "topics")
    assert run(shell, "ls /image/topics") == ("byId", "byName")
    assert run(shell, "ls /image/cluster") == ("brokers",)
    assert run(shell, "ls /image/features") == ()  # no FeatureLevel record in this log


def test_features_hold_each_finalized_level() -> None:
    shell = shell_of([rec.FeatureLevel(name="metadata.version", feature_level=1)])
    assert run(shell, "ls /image/features") == ("metadata.version",)
    assert run(shell, "cat /image/features/metadata.version") == ("1",)


def test_topics_are_listed_by_name_and_by_id_with_id_name_and_numbered_partitions() -> None:
    shell = shell_of(cluster_records())
    assert run(shell, "ls /image/topics/byName") == ("audit", "orders")
    assert run(shell, "ls /image/topics/byId") == tuple(sorted([str(ORDERS), str(AUDIT)]))
    expected = ("id", "name", *(str(p) for p in range(11)))
    assert run(shell, "ls /image/topics/byName/orders") == expected
    assert run(shell, f"ls /image/topics/byId/{ORDERS}") == expected
    assert run(shell, "cat /image/topics/byName/orders/id") == (str(ORDERS),)
    assert run(shell, f"cat /image/topics/byId/{ORDERS}/name") == ("orders",)


def test_cat_partition_prints_its_state_as_json_after_changes() -> None:
    shell = shell_of(cluster_records())
    assert cat_json(shell, "/image/topics/byName/orders/3") == {
        "partition": 3, "replicas": [4, 5], "isr": [5], "leader": 5, "leader_epoch": 1,
        "partition_epoch": 1, "leader_epoch_after_creation": None,
        "leader_epoch_before_deletion": None}
    assert cat_json(shell, f"/image/topics/byId/{ORDERS}/3") == \
        cat_json(shell, "/image/topics/byName/orders/3")
    assert cat_json(shell, "/image/topics/byName/audit/0")["replicas"] == [5]  # type: ignore[index]


def test_cat_partition_shows_an_ongoing_reassignment() -> None:
    shell = shell_of([*cluster_records(), rec.PartitionChange(
        topic_id=AUDIT, partition=0, replicas=(4, 5), adding_replicas=(4,),
        removing_replicas=(5,))])
    shown = cat_json(shell, "/image/topics/byName/audit/0")
    assert isinstance(shown, dict)
    assert (shown["replicas"], shown["adding_replicas"], shown["removing_replicas"]) == \
        ([4, 5], [4], [5])


def test_cat_broker_prints_registration_and_fenced_state() -> None:
    shell = shell_of(cluster_records())
    assert run(shell, "ls /image/cluster/brokers") == ("4", "5")
    assert cat_json(shell, "/image/cluster/brokers/4") == {
        "broker_id": 4, "incarnation_id": str(INCARNATION), "broker_epoch": 1,
        "endpoints": ["PLAINTEXT://127.0.0.1:9092"], "rack": "r1", "fenced": False}
    assert cat_json(shell, "/image/cluster/brokers/5")["fenced"] is True  # type: ignore[index]


def test_provenance_is_the_offset_and_epoch_given() -> None:
    shell = shell_of(cluster_records(), Provenance(offset=41, epoch=7))
    assert cat_json(shell, "/image/provenance") == {"offset": 41, "epoch": 7}


def test_removed_topic_is_gone_and_renamed_topic_moves_to_its_new_name() -> None:
    shell = shell_of([*cluster_records(), rec.RemoveTopic(topic_id=AUDIT),
                      rec.RenameTopic(topic_id=ORDERS, new_name="sales")])
    assert run(shell, "ls /image/topics/byName") == ("sales",)
    assert run(shell, "ls /image/topics/byId") == (str(ORDERS),)
    assert run(shell, f"cat /image/topics/byId/{ORDERS}/name") == ("sales",)
    assert shell.execute(["ls", "/image/topics/byName/orders"]).status == FAILED


def test_an_empty_image_still_has_the_layout() -> None:
    shell = Shell(build_image_tree(MetadataImage.empty(), Provenance(offset=-1, epoch=-1)))
    assert run(shell, "ls /image/topics/byName") == ()
    assert run(shell, "ls /image/cluster/brokers") == ()
    assert cat_json(shell, "/image/provenance") == {"offset": -1, "epoch": -1}


def test_entries_have_one_name_only() -> None:
    """A number or ID spelled another way ("04", " 4", a lower-case ID) names nothing."""
    shell = shell_of(cluster_records())
    for path in ("/image/cluster/brokers/04", "/image/cluster/brokers/+4",
                 "/image/topics/byName/orders/01", f"/image/topics/byId/{str(ORDERS).lower()}",
                 "/image/topics/byId/not-an-id"):
        assert shell.execute(["cat", path]).status == FAILED, path


# --- paths and commands ----------------------------------------------------------------


def test_relative_paths_with_dot_and_dotdot() -> None:
    shell = shell_of(cluster_records())
    run(shell, "cd /image/topics/byName")
    assert run(shell, "pwd") == ("/image/topics/byName",)
    assert run(shell, "ls ./orders/../audit") == ("id", "name", "0")
    assert run(shell, f"cat ../byId/{AUDIT}/name") == ("audit",)
    run(shell, "cd ..")
    assert run(shell, "pwd") == ("/image/topics",)
    run(shell, "cd ../../../..")  # never above the root
    assert run(shell, "pwd") == ("/",)
    run(shell, "cd image//cluster/")
    assert run(shell, "pwd") == ("/image/cluster",)
    run(shell, "cd")
    assert run(shell, "pwd") == ("/",)


def test_resolve_is_textual() -> None:
    assert resolve("/image/topics", "byName/./x/..//y/") == "/image/topics/byName/y"
    assert resolve("/image", "/image/provenance/../topics") == "/image/topics"
    assert resolve("/image", "") == "/image"
    assert resolve("/", "..") == "/"


def test_unknown_path_is_one_error_line_naming_command_and_path() -> None:
    shell = shell_of(cluster_records())
    run(shell, "cd /image")
    for command in ("ls", "cat", "cd", "find", "tree"):
        outcome = shell.execute([command, "topics/byName/nope"])
        assert outcome.err == (f"{command}: topics/byName/nope: no such file or directory",)
        assert (outcome.status, outcome.out) == (FAILED, ())
    assert run(shell, "pwd") == ("/image",)  # a failed cd moves nowhere


def test_cat_of_a_directory_and_cd_into_a_file_fail() -> None:
    shell = shell_of(cluster_records())
    outcome = shell.execute(["cat", "/image/topics"])
    assert (outcome.status, outcome.err) == (FAILED, ("cat: /image/topics: is a directory",))
    outcome = shell.execute(["cd", "/image/provenance"])
    assert (outcome.status, outcome.err) == (FAILED, ("cd: /image/provenance: not a directory",))
    assert run(shell, "pwd") == ("/",)


def test_cat_and_ls_take_several_paths_and_go_on_after_a_bad_one() -> None:
    shell = shell_of(cluster_records())
    outcome = shell.execute(["cat", "/image/topics/byName/audit/name", "/nope",
                             "/image/topics/byName/orders/name"])
    assert outcome.out == ("audit", "orders")
    assert outcome.err == ("cat: /nope: no such file or directory",)
    assert outcome.status == FAILED
    outcome = shell.execute(["ls", "/image/provenance", "/image/topics", "/image/cluster"])
    assert outcome.out == ("/image/provenance", "", "/image/topics:", "byId", "byName", "",
                           "/image/cluster:", "brokers")


def test_find_lists_absolute_paths_depth_first() -> None:
    shell = shell_of([rec.RegisterBroker(broker_id=1, incarnation_id=INCARNATION,
                                         broker_epoch=0),
                      rec.Topic(name="a", topic_id=ORDERS), partition(ORDERS, 0)])
    run(shell, "cd /image/topics")
    assert run(shell, "find byName") == ("/image/topics/byName", "/image/topics/byName/a",
                                         "/image/topics/byName/a/id",
                                         "/image/topics/byName/a/name",
                                         "/image/topics/byName/a/0")
    assert run(shell, "find /image/provenance") == ("/image/provenance",)
    assert len(run(shell, "find /")) == 21


def test_tree_draws_the_subtree() -> None:
    shell = shell_of([rec.RegisterBroker(broker_id=1, incarnation_id=INCARNATION,
                                         broker_epoch=0),
                      rec.Topic(name="a", topic_id=ORDERS), partition(ORDERS, 0)])
    assert "\n".join(run(shell, "tree /image")) == f"""/image
|-- acls
|   `-- byId
|-- cluster
|   `-- brokers
|       `-- 1
|-- features
|-- provenance
|-- scram
`-- topics
    |-- byId
    |   `-- {ORDERS}
    |       |-- id
    |       |-- name
    |       `-- 0
    `-- byName
        `-- a
            |-- id
            |-- name
            `-- 0"""


def test_misuse_is_status_2_and_help_lists_only_real_commands() -> None:
    shell = shell_of(cluster_records())
    for words in (["frob"], ["cat"], ["cd", "a", "b"], ["pwd", "x"], ["find", "a", "b"]):
        outcome = shell.execute(words)
        assert outcome.status == USAGE, words
        assert outcome.err, words
    assert shell.execute(["frob"]).err == ("frob: command not found (try help)",)
    listed = [line.split()[0] for line in run(shell, "help")]
    assert listed == sorted(HELP) == ["cat", "cd", "exit", "find", "help", "ls", "pwd", "tree"]
    for command in listed:
        assert "command not found" not in "".join(shell.execute([command]).err)
    assert shell.execute(["exit"]).exit
    assert shell.execute([]).status == OK


# --- the front ends --------------------------------------------------------------------


def test_piped_session_prints_no_prompt_keeps_going_after_errors_and_stops_at_exit() -> None:
    shell = shell_of(cluster_records())
    script = ("cd /image/topics/byName  # comments are allowed\n\n"
              "cat nope\nls 'audit'\ncat \"unclosed\nexit\nls /\n")
    stdout, stderr = io.StringIO(), io.StringIO()
    code = run_interactive(shell, stream_reader(io.StringIO(script)), stdout, stderr,
                           prompt=False)
    assert code == 0
    assert stdout.getvalue() == "id\nname\n0\n"  # nothing after exit, and no prompt
    assert stderr.getvalue().splitlines() == ["cat: nope: no such file or directory",
                                              "metadata-shell: No closing quotation"]


def test_terminal_session_prompts_with_the_working_directory() -> None:
    shell = shell_of(cluster_records())
    lines = iter(["cd /image", "pwd"])
    prompts: list[str] = []

    def read_line(prompt: str) -> str:
        prompts.append(prompt)
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    stdout = io.StringIO()
    assert run_interactive(shell, read_line, stdout, io.StringIO(), prompt=True) == 0
    assert prompts == ["/ >> ", "/image >> ", "/image >> "]
    assert stdout.getvalue() == "/image\n\n"  # a newline after Ctrl-D


def test_one_shot_exit_code_is_the_command_status() -> None:
    shell = shell_of(cluster_records())
    stdout, stderr = io.StringIO(), io.StringIO()
    assert run_one_shot(shell, ["cat", "/image/topics/byName/audit/name"], stdout, stderr) == 0
    assert stdout.getvalue() == "audit\n"
    assert run_one_shot(shell, ["cat", "/x"], stdout, stderr) == 1
    assert stderr.getvalue() == "cat: /x: no such file or directory\n"
    assert run_one_shot(shell, ["frob"], stdout, stderr) == 2


# --- every path find lists is usable ---------------------------------------------------

topic_names = st.from_regex(r"[a-zA-Z0-9._-]{1,12}", fullmatch=True).filter(
    lambda name: invalid_topic_name_reason(name) is None)
topic_ids = st.builds(Uuid, st.integers(0, (1 << 128) - 1)).filter(
    lambda topic_id: topic_id not in RESERVED)


@st.composite
def images(draw: st.DrawFn) -> MetadataImage:
    broker_ids = draw(st.lists(st.integers(0, 2000), unique=True, max_size=4))
    records: list[rec.Record] = []
    for broker_id in broker_ids:
        records.append(rec.RegisterBroker(broker_id=broker_id, incarnation_id=INCARNATION,
                                          broker_epoch=broker_id))
        if draw(st.booleans()):
            records.append(rec.UnfenceBroker(broker_id=broker_id, broker_epoch=broker_id))
    names = draw(st.lists(topic_names, unique=True, max_size=4))
    ids = draw(st.lists(topic_ids, unique=True, min_size=len(names), max_size=len(names)))
    for name, topic_id in zip(names, ids, strict=True):
        records.append(rec.Topic(name=name, topic_id=topic_id))
        for number in range(draw(st.integers(0, 12))):
            records.append(partition(topic_id, number, (number, number + 1)))
        if draw(st.integers(0, 4)) == 0:
            records.append(rec.RemoveTopic(topic_id=topic_id))
    return image_of(records)


@given(images(), st.integers(-1, 100))
def test_every_path_find_lists_can_be_read_and_cd_pwd_round_trips(
        image: MetadataImage, offset: int) -> None:
    shell = Shell(build_image_tree(image, Provenance(offset=offset, epoch=3)))
    paths = run(shell, "find /")
    assert len(paths) == len(set(paths))
    directories = []
    for path in paths:
        listed = shell.execute(["ls", path])
        read = shell.execute(["cat", path])
        assert listed.status == OK, path
        if read.status == OK:  # a file: ls names it, cat prints it
            assert listed.out == (path,)
            assert read.out
        else:
            assert read.err == (f"cat: {path}: is a directory",)
            directories.append(path)
            assert {f"{path.rstrip('/')}/{name}" for name in listed.out} <= set(paths)
    assert len(paths) == 12 + 3 * len(image.topics) * 2 + len(image.brokers) + \
        2 * image.partition_count()
    for path in directories:
        run(shell, f"cd {path}")
        assert run(shell, "pwd") == (path,)
        # the same place reached relatively, through `.`, `..` and doubled slashes
        detour = "/".join(f"{part}/./x/..//" for part in path.split("/") if part)
        run(shell, "cd /image/topics/byName")
        run(shell, f"cd ../../..//{detour}")
        assert run(shell, "pwd") == (path,)
