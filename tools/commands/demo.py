"""`kraft demo`: format a node directory, append and flush a few hundred metadata records,
reopen the log and print it with dump-log. Later issues grow this into a cluster run;
`build_demo_records` and `write_demo_log` are the pieces to reuse."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

from metadata.records import (
    LeaderChange,
    MetadataTopic,
    NoOp,
    Partition,
    PartitionChange,
    Record,
    RegisterBroker,
    RemoveTopic,
    RenameTopic,
    Topic,
    UnfenceBroker,
)
from metadata.uuid import Uuid
from raft.log import DiskLog
from raft.storage import StorageError, format_log_dir, open_log_dir
from tools.commands.dump_log import dump_lines
from tools.errors import CommandError

BROKERS = (1, 2, 3)


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--dir", help="node log directory (default: a new temp directory)")
    parser.add_argument("--records", type=int, default=300, help="about how many records")
    parser.add_argument("--seed", type=int, default=None, help="seed for the random IDs")
    parser.add_argument("--json", action="store_true", help="dump records as JSON lines")
    parser.add_argument("--skip-quorum", action="store_true",
                        help="skip the 3-voter cluster part (always skipped with --json, "
                             "which prints only the dump)")


def build_demo_records(rng: random.Random, count: int) -> list[Record]:
    """A plausible metadata history: a leader, brokers, topics created, grown, moved,
    renamed and removed (names reused with new IDs, as KIP-516 allows)."""
    out: list[Record] = [LeaderChange(leader_id=1, voters=BROKERS, granting_voters=BROKERS),
                         MetadataTopic(topic_id=Uuid.random(rng))]
    for broker in BROKERS:
        out.append(RegisterBroker(broker_id=broker, incarnation_id=Uuid.random(rng),
                                  broker_epoch=len(out),
                                  endpoints=(f"PLAINTEXT://127.0.0.1:{9091 + broker}",)))
        out.append(UnfenceBroker(broker_id=broker, broker_epoch=len(out) - 1))
    live: dict[str, Uuid] = {}
    generation = 0
    while len(out) < count:
        action = rng.random()
        if action < 0.45 or not live:
            name = f"topic-{rng.randrange(20)}"
            if name in live:
                continue
            topic_id, partitions = Uuid.random(rng), rng.randint(1, 4)
            live[name] = topic_id
            out.append(Topic(name=name, topic_id=topic_id, initial_partition_count=partitions))
            for p in range(partitions):
                replicas = tuple(rng.sample(BROKERS, 2))
                out.append(Partition(topic_id=topic_id, partition=p, replicas=replicas,
                                     isr=replicas, leader=replicas[0]))
        elif action < 0.75:
            topic_id = live[rng.choice(sorted(live))]
            leader = rng.choice(BROKERS)
            out.append(PartitionChange(topic_id=topic_id, partition=0, leader=leader,
                                       isr=(leader,)))
        elif action < 0.8:
            old = rng.choice(sorted(live))
            generation += 1
            new = f"{old}-r{generation}"
            live[new] = live.pop(old)
            out.append(RenameTopic(topic_id=live[new], new_name=new))
        elif action < 0.95:
            out.append(RemoveTopic(topic_id=live.pop(rng.choice(sorted(live)))))
        else:
            out.append(NoOp())
    return out


def write_demo_log(log_dir: Path, records: list[Record], *, epoch: int = 1,
                   batch_size: int = 16) -> int:
    """Append `records` in batches, flushing each; returns the log end offset."""
    with DiskLog.open_metadata_log(log_dir) as log:
        for start in range(0, len(records), batch_size):
            log.append(epoch, [r.encode() for r in records[start:start + batch_size]])
            log.flush()
        return log.end_offset


def run(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    print(f"# kraft demo --seed {seed}", file=sys.stderr)
    log_dir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kraft-demo-"))
    rng = random.Random(seed)
    cluster_id = str(Uuid.random(rng))
    try:
        format_log_dir(log_dir, cluster_id=cluster_id, node_id=1)
        open_log_dir(log_dir, cluster_id=cluster_id, node_id=1)
    except StorageError as exc:
        raise CommandError(str(exc), exit_code=1) from None
    end = write_demo_log(log_dir, build_demo_records(rng, args.records))
    print(f"# wrote and flushed {end} records to {log_dir} (cluster {cluster_id}); "
          "reopening and dumping", file=sys.stderr)
    with DiskLog.open_metadata_log(log_dir) as log:  # recovery pass over what we wrote
        if log.end_offset != end:
            raise CommandError(f"reopened log ends at {log.end_offset}, expected {end}")
        directory = log.directory
    for line in dump_lines(directory, as_json=args.json):
        print(line)
    if not (args.json or args.skip_quorum):  # the real quorum: tools.commands.quorum
        from tools.commands.quorum import run_demo
        print("\n# a 3-voter quorum, each voter its own process, survives losing its leader")
        run_demo(str(log_dir.parent / f"{log_dir.name}-cluster"), say=print)
    return 0
