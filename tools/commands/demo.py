"""`kraft demo` (what `make demo` runs): a local 3-voter + 3-broker cluster, each node its
own process, through topic churn, a stale broker and a leader kill, then a Spark replay.

Every visible step is a real `kraft` command run as a subprocess and echoed like a shell
session; the waits in between poll an observable condition under a deadline. On a
terminal, a progress line on stderr (tools/progress.py) shows the section, how many of
the sections are done and the command running. A `--cluster` directory that already
holds a cluster is refused at once (exit 2): the demo's fixed topic names would collide
with the earlier run's halfway through.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tools.cluster import CLUSTER_FILE, Cluster
from tools.commands.replay import require_extra
from tools.errors import CommandError, usage_error
from tools.progress import ProgressDisplay

DELETE_DELAY_MS = 4000  # delete.topic.delay.ms, shortened so the demo sees the removal
STEP_TIMEOUT_S = 60.0


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--cluster", metavar="DIR",
                        help="a new cluster directory (default: a new temp directory); "
                        "one that holds a cluster is refused")
    parser.add_argument("--skip-replay", action="store_true", help="skip the Spark replay")


# short: the progress line is one terminal line
SECTIONS = ("cluster start", "stale topic ID", "topic churn", "leader loss", "dump-log",
            "Spark replay")


class _Session:
    """Runs `kraft` verbs as subprocesses and echoes them with their output; tells the
    progress display which section and command it is at."""

    def __init__(self, directory: Path, display: ProgressDisplay, sections: int) -> None:
        self.directory = directory
        self.display = display
        self.sections = sections
        self.done = -1
        self.commands = 0

    def section(self, name: str) -> None:
        self.done += 1
        self.display.phase(name, total=self.sections)
        self.display.update(completed=self.done, commands=self.commands)

    def kraft(self, *args: str, expect_exit: int = 0, tail: int | None = None) -> str:
        shown = " ".join(shlex.quote(a) for a in args)
        self.commands += 1
        self.display.update(commands=self.commands, running=_short(args))
        print(f"\n$ kraft {shown}", flush=True)
        done = subprocess.run([sys.executable, "-m", "tools.cli", *args], text=True,
                              capture_output=True, timeout=600, check=False)
        output = (done.stdout + done.stderr).rstrip()
        lines = output.splitlines()
        if tail is not None and len(lines) > tail:
            print(f"  ... ({len(lines) - tail} lines above)")
            lines = lines[-tail:]
        for line in lines:
            print(f"  {line}")
        if done.returncode != expect_exit:
            raise CommandError(f"`kraft {shown}` exited {done.returncode}, "
                               f"expected {expect_exit}")
        return done.stdout


def _short(args: tuple[str, ...]) -> str:
    """`topics --create` for `topics --cluster D --create ...`: the verb and its action."""
    if len(args) > 1 and not args[1].startswith("-"):
        return f"{args[0]} {args[1]}"
    action = next((a for a in args[1:] if a.startswith("--") and a != "--cluster"), "")
    return f"{args[0]} {action}".strip()


def _wait(what: str, condition: Callable[[], bool], timeout_s: float = STEP_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise CommandError(f"demo: timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.1)
    print(f"  ({what})", flush=True)


def _topic_id_on_disk(partition_dir: Path) -> str | None:
    try:
        text = (partition_dir / "partition.metadata").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("topic_id:"):
            return line.split(":", 1)[1].strip()
    return None


def _readable(log_line: str) -> str:
    """A JSON log event as `LEVEL message key=value ...`."""
    try:
        event = json.loads(log_line)
    except ValueError:
        return log_line
    fields = " ".join(f"{k}={v}" for k, v in event.items()
                      if k not in ("ts", "logger", "level", "msg"))
    return f"{event.get('level')} {event.get('msg')} {fields}"


def _topic_id(output: str) -> str:
    for field in output.split():
        if len(field) == 22 and field.isascii():
            return field
    raise CommandError(f"demo: no topic ID in {output!r}")


def run(args: argparse.Namespace) -> int:
    if not args.skip_replay:  # before the cluster starts, not at the replay
        require_extra("replay", "kraft demo (without --skip-replay)",
                      ("pyspark", "matplotlib"))
    directory = Path(args.cluster or tempfile.mkdtemp(prefix="kraft-demo-"))
    if (directory / CLUSTER_FILE).exists():  # its topics would collide halfway through
        raise usage_error(f"--cluster {directory} already holds a cluster: the demo needs a "
                          "new directory (remove that one, or give another)")
    sections = len(SECTIONS) - args.skip_replay
    with ProgressDisplay("demo", unit="sections") as display:  # stderr, when a terminal
        _run(_Session(directory, display, sections), directory, args.skip_replay)
    return 0


def _run(session: _Session, directory: Path, skip_replay: bool) -> None:
    d = str(directory)
    print(f"# kraft demo: cluster in {d}")
    session.section(SECTIONS[0])
    session.kraft("quorum", "start", "--cluster", d, "--voters", "3", "--brokers", "3",
                  "--set", f"delete.topic.delay.ms={DELETE_DELAY_MS}")
    cluster = Cluster.load(directory)
    try:
        _scenario(session, cluster, d)
    finally:
        Cluster.load(directory).shut_down(timeout_s=10)
    session.section(SECTIONS[4])
    session.kraft("dump-log", "--dir", f"{d}/node-1/data", tail=8)
    if not skip_replay:
        session.section(SECTIONS[5])
        report = f"{d}/replay-report"
        session.kraft("replay", "--cluster", d, "--master", "local[2]", "--out", report)
        print(f"\n# replay report: {report}/report.html")
    print(f"# demo done; the cluster's files stay in {d}")


def _scenario(session: _Session, cluster: Cluster, d: str) -> None:
    session.section(SECTIONS[1])
    session.kraft("quorum", "describe", "--cluster", d, "--status")
    session.kraft("topics", "--cluster", d, "--create", "--topic", "orders",
                  "--partitions", "3", "--replication-factor", "2")
    old_id = _topic_id(session.kraft("topics", "--cluster", d, "--describe",
                                     "--topic", "orders"))
    broker = max(n for n in cluster.nodes if not cluster.node(n).is_voter)
    broker_dir = Path(cluster.node(broker).data_dir)
    _wait(f"broker {broker} hosts partitions of orders",
          lambda: any(_topic_id_on_disk(p) == old_id for p in broker_dir.glob("orders-*")))
    hosted = sorted(p.name for p in broker_dir.glob("orders-*"))
    print(f"  broker {broker} hosts {', '.join(hosted)} with topic_id {old_id}")

    print(f"\n# KIP-516 stale state: broker {broker} is down while `orders` is recreated")
    session.kraft("quorum", "kill", "--cluster", d, "--node", str(broker), "--signal", "TERM")
    session.kraft("topics", "--cluster", d, "--delete", "--topic-id", old_id)
    session.kraft("topics", "--cluster", d, "--create", "--topic", "orders",
                  "--partitions", "3", "--replication-factor", "2")
    new_id = _topic_id(session.kraft("topics", "--cluster", d, "--describe",
                                     "--topic", "orders"))
    session.kraft("topics", "--cluster", d, "--describe", "--topic-id", old_id, expect_exit=1)
    session.kraft("quorum", "restart", "--cluster", d, "--node", str(broker))
    staged = broker_dir / "deleting"
    _wait(f"broker {broker} staged the old replicas for deletion",
          lambda: any(p.name.startswith(old_id) for p in staged.glob("*")))
    print(f"  {staged.name}/: {', '.join(sorted(p.name for p in staged.iterdir()))}")
    for line in cluster.node(broker).log_path.read_text().splitlines():
        if "WARN" in line and old_id in line:
            print(f"  node-{broker}/node.log: {_readable(line)}")
            break
    _wait(f"the staged copies are removed after delete.topic.delay.ms={DELETE_DELAY_MS}",
          lambda: not any(p.name.startswith(old_id) for p in staged.glob("*")))
    current = {p.name: _topic_id_on_disk(p) for p in broker_dir.glob("orders-*")}
    held = ", ".join(f"{k} -> {v}" for k, v in sorted(current.items()))
    print(f"  broker {broker} now: {held or 'no orders partition (none placed here)'}")
    if any(v != new_id for v in current.values()):
        raise CommandError(f"demo: broker {broker} still holds a stale orders partition")

    cluster.wait_for_brokers(STEP_TIMEOUT_S)

    session.section(SECTIONS[2])
    print("\n# topic churn: names deleted and created again get new IDs")
    for round_ in range(3):
        for name in ("payments", "audit"):
            if round_:
                session.kraft("topics", "--cluster", d, "--delete", "--topic", name)
            session.kraft("topics", "--cluster", d, "--create", "--topic", name,
                          "--partitions", "2", "--replication-factor", "3")
    session.kraft("topics", "--cluster", d, "--list")
    session.kraft("quorum", "append", "--cluster", d, "--count", "1000", "--batch", "100")

    session.section(SECTIONS[3])
    print("\n# the quorum loses its leader")
    leader = cluster.wait_for_leader(30)
    session.kraft("quorum", "kill", "--cluster", d, "--node", str(leader["leader_id"]))
    new = cluster.wait_for_leader(30, above_epoch=leader["leader_epoch"],
                                  exclude=[leader["leader_id"]])
    print(f"  (node {new['leader_id']} leads epoch {new['leader_epoch']})")
    session.kraft("quorum", "describe", "--cluster", d, "--status")
    session.kraft("topics", "--cluster", d, "--describe", "--topic", "orders")
    session.kraft("quorum", "restart", "--cluster", d, "--node", str(leader["leader_id"]))
    session.kraft("quorum", "append", "--cluster", d, "--count", "10")
    _wait("every node caught up with the leader", lambda: _caught_up(cluster))
    session.kraft("quorum", "describe", "--cluster", d, "--replication")
    session.kraft("quorum", "stop", "--cluster", d)


def _caught_up(cluster: Cluster) -> bool:
    try:
        state = cluster.describe(timeout_s=1.0)
    except Exception:  # an election in progress: ask again
        return False
    replicas = state.get("voters", []) + state.get("observers", [])
    ends = {r.get("log_end_offset") for r in replicas}
    return len(replicas) == len(cluster.nodes) and len(ends) == 1
