"""`kraft reassign-partitions`: move partition replicas, like kafka-reassign-partitions.sh.

    kraft reassign-partitions (--bootstrap-server HOST:PORT[,...] | --cluster DIR)
        [--command-config FILE]
        (--reassignment-json-file FILE (--execute [--throttle BYTES] | --verify | --cancel)
         | --generate --topics-to-move-json-file FILE --broker-list 1,2,3) [--json]

FILE is Kafka's: {"version": 1, "partitions": [{"topic": "orders", "partition": 0,
"replicas": [3, 4, 5]}]} ("log_dirs", if there, must be "any": one log dir per broker).
- --execute prints the current assignment of those partitions (Kafka's rollback
  document) and sends one AlterPartitionReassignments (the controllers decide:
  `metadata.reassignments`); the brokers then copy the data and the controller
  completes each partition once its new replicas are in sync.
- --execute --throttle BYTES first throttles the copy, as kafka-reassign-partitions.sh
  does: leader.replication.throttled.rate and follower.replication.throttled.rate set
  to BYTES (bytes/s) on every broker the moves involve (the partitions' current and
  target replicas), and on each topic leader.replication.throttled.replicas naming the
  current replicas of its moved partitions, follower.replication.throttled.replicas the
  new ones (`broker.kafka.partitions.replication_quota` applies them).
- --verify says per partition whether its reassignment is still in progress
  (ListPartitionReassignments), completed (its replicas are the target) or neither;
  once none of the file's partitions is in progress it removes the throttles: the two
  rate keys on every broker and the two replicas keys on the file's topics.
- --cancel cancels the ongoing reassignments of the file's partitions.
- --generate proposes moving the topics of {"version": 1, "topics": [{"topic": T}]} onto
  --broker-list, each partition keeping its replication factor (replicas placed round
  robin over the list, shifted by the partition number: deterministic, unlike Kafka's
  random start), printed as Kafka prints it: "Current partition replica assignment" and
  "Proposed partition reassignment configuration", each followed by its JSON.
--json prints one JSON document instead of the lines.

Bad input (a file that is not such a document, a repeated partition or replica, a topic
or partition that does not exist, a broker that is not registered, options that do not
go together): one line on stderr, exit 2, nothing sent. A partition the controller
refuses: its line with Kafka's error name, exit 1; so does a throttle a broker refuses
(nothing is reassigned then).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from metadata.admin import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignableTopic,
)
from metadata.broker_configs import FOLLOWER_RATE, LEADER_RATE
from metadata.topic_configs import FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS
from raft.common.errors import ErrorCode
from tools.addresses import add_broker_target, broker_addresses
from tools.client.admin import BrokerAdminClient
from tools.client.configs import Alteration, alter
from tools.client.connection import ClientError
from tools.errors import CommandError, usage_error
from tools.kafka_json import partition_entries

TIMEOUT_S = 30.0
Key = tuple[str, int]
Assignment = dict[Key, tuple[int, ...]]  # (topic, partition) -> replicas
SHAPE = '{"version": 1, "partitions": [{"topic": T, "partition": P, "replicas": [...]}]}'


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    add_broker_target(parser)
    parser.add_argument("--reassignment-json-file", metavar="FILE", help=SHAPE)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--execute", action="store_true", help="start the reassignments")
    actions.add_argument("--verify", action="store_true", help="whether they completed")
    actions.add_argument("--cancel", action="store_true", help="cancel the ongoing ones")
    actions.add_argument("--generate", action="store_true",
                         help="propose moving --topics-to-move-json-file onto --broker-list")
    parser.add_argument("--topics-to-move-json-file", metavar="FILE",
                        help='{"version": 1, "topics": [{"topic": T}, ...]}')
    parser.add_argument("--broker-list", metavar="1,2,3", help="the brokers to move onto")
    parser.add_argument("--throttle", type=int, default=-1, metavar="BYTES",
                        help="with --execute: the replication throttle, bytes/s per broker")
    parser.add_argument("--json", action="store_true")


def parse_reassignment(text: str) -> Assignment:
    """The target replicas of a kafka-reassign-partitions.sh file; ValueError naming what
    is wrong."""
    targets: Assignment = {}
    for number, entry in enumerate(partition_entries(text, SHAPE)):
        topic, partition, replicas = (entry.get("topic"), entry.get("partition"),
                                      entry.get("replicas"))
        if not isinstance(topic, str) or not topic or type(partition) is not int or \
                partition < 0 or not isinstance(replicas, list) or not replicas or \
                any(type(r) is not int or r < 0 for r in replicas):
            raise ValueError(f"partitions[{number}]: expected a topic name, a partition "
                             ">= 0 and a non-empty list of broker ids")
        dirs = entry.get("log_dirs", ["any"] * len(replicas))
        if dirs != ["any"] * len(replicas):
            raise ValueError(f"partitions[{number}]: log_dirs other than \"any\" are not "
                             "served (one log dir per broker)")
        if len(set(replicas)) != len(replicas):
            raise ValueError(f"{topic}-{partition}: replica {replicas} repeats a broker")
        if (topic, partition) in targets:
            raise ValueError(f"{topic}-{partition} is given more than once")
        targets[topic, partition] = tuple(replicas)
    return targets


def parse_topics(text: str) -> list[str]:
    """The topics of a --topics-to-move-json-file; ValueError naming what is wrong."""
    entries = partition_entries(text, '{"version": 1, "topics": [{"topic": T}, ...]}',
                                key="topics")
    topics = [entry.get("topic") for entry in entries]
    if not all(isinstance(t, str) and t for t in topics):
        raise ValueError("every entry needs a topic name")
    return list(dict.fromkeys(t for t in topics if isinstance(t, str)))


def parse_brokers(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",")]
    except ValueError:
        raise ValueError(f"--broker-list {text!r}: expected broker ids like 1,2,3") from None
    if len(set(brokers)) != len(brokers):
        raise ValueError(f"--broker-list {text!r} repeats a broker")
    return brokers


def unknown_error(targets: Assignment, current: Assignment, brokers: set[int]) -> str | None:
    """What the file names that the cluster does not have, or None."""
    for (topic, partition), replicas in targets.items():
        if (topic, partition) not in current:
            return f"{topic}-{partition}: no such partition"
        strangers = sorted(set(replicas) - brokers)
        if strangers:
            return f"{topic}-{partition}: brokers {strangers} are not registered"
    return None


def propose(current: Assignment, topics: list[str], brokers: list[int]) -> Assignment:
    """Each partition of `topics` over `brokers`, keeping its replication factor;
    ValueError when a topic is unknown or needs more brokers than given."""
    proposal: Assignment = {}
    for topic in topics:
        partitions = sorted(p for t, p in current if t == topic)
        if not partitions:
            raise ValueError(f"no topic named {topic!r}")
        for p in partitions:
            factor = len(current[topic, p])
            if factor > len(brokers):
                raise ValueError(f"{topic}-{p} has {factor} replicas, more than the "
                                 f"{len(brokers)} brokers of --broker-list")
            proposal[topic, p] = tuple(brokers[(p + i) % len(brokers)] for i in range(factor))
    return proposal


def document(assignment: Assignment) -> dict[str, Any]:
    """Kafka's reassignment JSON for `assignment`."""
    return {"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}


def request_for(targets: dict[Key, tuple[int, ...] | None]
                ) -> AlterPartitionReassignmentsRequest:
    topics: dict[str, list[ReassignablePartition]] = {}
    for (topic, partition), replicas in sorted(targets.items()):
        topics.setdefault(topic, []).append(
            ReassignablePartition(partition_index=partition, replicas=replicas))
    return AlterPartitionReassignmentsRequest(topics=tuple(
        ReassignableTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()))


def failures(response: AlterPartitionReassignmentsResponse) -> dict[str, str]:
    """partition name -> Kafka's error name and message, of each refused partition."""
    return {f"{t.name}-{p.partition_index}": ErrorCode(p.error_code).name +
            (f": {p.error_message}" if p.error_message else "")
            for t in response.responses for p in t.partitions if p.error_code}


def verify_lines(targets: Assignment, current: Assignment, ongoing: set[Key]) -> list[str]:
    """Each partition's state, in Kafka's tool's words."""
    lines = []
    for (topic, partition), replicas in sorted(targets.items()):
        name, now = f"{topic}-{partition}", current.get((topic, partition), ())
        if (topic, partition) in ongoing:
            lines.append(f"Reassignment of partition {name} is still in progress.")
        elif now == replicas:
            lines.append(f"Reassignment of partition {name} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {name}, but "
                         f"replica set is {list(now)} rather than {list(replicas)}.")
    return lines


def throttles(targets: Assignment, current: Assignment, rate: int) -> list[Alteration]:
    """Kafka's throttles of a reassignment: the rate on every broker involved, and per
    topic the current replicas (leader side) and new ones (follower side) of its moved
    partitions, as PARTITION:BROKER lists."""
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for (topic, partition), replicas in sorted(targets.items()):
        now = current.get((topic, partition), ())
        brokers |= set(now) | set(replicas)
        leader.setdefault(topic, []).extend(f"{partition}:{b}" for b in now)
        follower.setdefault(topic, []).extend(f"{partition}:{b}" for b in replicas
                                              if b not in now)
    rates: list[Alteration] = [
        (BROKER_RESOURCE, str(b), [(LEADER_RATE, str(rate)), (FOLLOWER_RATE, str(rate))])
        for b in sorted(brokers)]
    return rates + [
        (TOPIC_RESOURCE, topic, [(LEADER_THROTTLED_REPLICAS, ",".join(leader[topic])),
                                 (FOLLOWER_THROTTLED_REPLICAS, ",".join(follower[topic]))])
        for topic in sorted(leader)]


def cleared_throttles(targets: Assignment, brokers: set[int]) -> list[Alteration]:
    """What --verify deletes once the reassignment is done: the rates on every broker,
    the throttled replicas on the file's topics."""
    rates: list[Alteration] = [
        (BROKER_RESOURCE, str(b), [(LEADER_RATE, None), (FOLLOWER_RATE, None)])
        for b in sorted(brokers)]
    return rates + [
        (TOPIC_RESOURCE, topic, [(LEADER_THROTTLED_REPLICAS, None),
                                 (FOLLOWER_THROTTLED_REPLICAS, None)])
        for topic in sorted({t for t, _ in targets})]


def _read(path: str, option: str) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise usage_error(f"{option} {path}: {exc}") from None


def _client(args: argparse.Namespace) -> BrokerAdminClient:
    return BrokerAdminClient(broker_addresses(args.cluster, args.bootstrap_server),
                             ssl_context=args.client_ssl, sasl=args.client_sasl,
                             timeout_s=TIMEOUT_S)


def _cluster(client: BrokerAdminClient) -> tuple[Assignment, set[int]]:
    metadata = client.metadata()
    current = {(t.name, int(p.partition_index)): tuple(map(int, p.replica_nodes))
               for t in metadata.topics if int(t.error_code) == 0 for p in t.partitions}
    return current, {int(b.node_id) for b in metadata.brokers}


def run(args: argparse.Namespace) -> int:
    if args.generate:
        if args.topics_to_move_json_file is None or args.broker_list is None:
            raise usage_error("--generate needs --topics-to-move-json-file and --broker-list")
    elif args.reassignment_json_file is None:
        raise usage_error("--execute, --verify and --cancel need --reassignment-json-file")
    if args.throttle >= 0 and not args.execute:
        raise usage_error("--throttle goes with --execute")
    try:
        if args.generate:
            topics = parse_topics(_read(args.topics_to_move_json_file,
                                        "--topics-to-move-json-file"))
            brokers = parse_brokers(args.broker_list)
            targets: Assignment = {}
        else:
            targets = parse_reassignment(_read(args.reassignment_json_file,
                                               "--reassignment-json-file"))
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    client = _client(args)
    try:
        current, registered = _cluster(client)
        if args.generate:
            return _generate(args, current, registered, topics, brokers)
        error = unknown_error(targets, current, registered)
        if error is not None:
            raise usage_error(error)
        if args.verify:
            return _verify(args, client, targets, current, registered)
        return _alter(args, client, targets, current)
    except ClientError as exc:
        raise CommandError(f"reassign-partitions: {exc}") from None


def _generate(args: argparse.Namespace, current: Assignment, registered: set[int],
              topics: list[str], brokers: list[int]) -> int:
    strangers = sorted(set(brokers) - registered)
    if strangers:
        raise usage_error(f"--broker-list: brokers {strangers} are not registered")
    try:
        proposal = propose(current, topics, brokers)
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    before = document({k: current[k] for k in proposal})
    if args.json:
        print(json.dumps({"current": before, "proposed": document(proposal)}))
    else:
        print(f"Current partition replica assignment\n{json.dumps(before)}\n\n"
              f"Proposed partition reassignment configuration\n"
              f"{json.dumps(document(proposal))}")
    return 0


def _verify(args: argparse.Namespace, client: BrokerAdminClient, targets: Assignment,
            current: Assignment, brokers: set[int]) -> int:
    ongoing = set(client.list_reassignments())
    lines = verify_lines(targets, current, ongoing)
    done = not ongoing & set(targets)
    if done:  # as Kafka's tool: the throttles go once nothing of the file is moving
        alter(client, cleared_throttles(targets, brokers))
        lines += [f"Clearing broker-level throttles on brokers "
                  f"{','.join(map(str, sorted(brokers)))}",
                  *(f"Clearing topic-level throttles on topic {t}"
                    for t in sorted({t for t, _ in targets}))]
    print(json.dumps({"partitions": lines, "throttles_cleared": done}) if args.json
          else "\n".join(["Status of partition reassignment:", *lines]))
    return 0


def _alter(args: argparse.Namespace, client: BrokerAdminClient, targets: Assignment,
           current: Assignment) -> int:
    if args.throttle >= 0:  # before the moves, so that the copy starts throttled
        alter(client, throttles(targets, current, args.throttle))
        if not args.json:
            print("Warning: You must run --verify periodically, until the reassignment "
                  "completes, to ensure the throttle is removed.\n"
                  f"The inter-broker throttle limit was set to {args.throttle} B/s")
    wanted: dict[Key, tuple[int, ...] | None] = dict(targets) if args.execute else \
        dict.fromkeys(targets)
    response = client.call(request_for(wanted))
    refused = failures(response)
    done = [f"{t}-{p}" for t, p in sorted(targets) if f"{t}-{p}" not in refused]
    verb = "started" if args.execute else "cancelled"
    if args.json:
        print(json.dumps({verb: done, "errors": refused,
                          "current": document({k: current[k] for k in targets})}))
    else:
        if args.execute:
            print("Current partition replica assignment\n\n"
                  f"{json.dumps(document({k: current[k] for k in targets}))}\n\n"
                  "Save this to use as the --reassignment-json-file option during rollback")
        if done:
            print(f"Successfully {verb} partition reassignments for {', '.join(done)}")
        for name, why in refused.items():
            print(f"Error {'starting' if args.execute else 'cancelling'} partition "
                  f"reassignment for {name}: {why}")
    if refused:
        raise CommandError(f"{len(refused)} partition reassignment(s) were refused")
    return 0
