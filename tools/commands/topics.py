"""`kraft topics`: create, describe, delete, alter and list topics (like kafka-topics.sh).

    kraft topics (--bootstrap-server HOST:PORT[,...] | --bootstrap-controller HOST:PORT[,...]
                  | --cluster DIR)
        --create --topic NAME [--partitions N] [--replication-factor R] [--ordered]
                 [--config KEY=VALUE ...]
      | --describe [--topic NAME | --topic-id ID]
      | --delete (--topic NAME | --topic-id ID)
      | --alter (--topic NAME | --topic-id ID) (--partitions N | --new-name NAME)
        (N below the current count shrinks a topic with enable.ordered.delivery: the
        partitions above N are marked for deletion and removed once empty, KIP-253)
      | --list
      [--json] [--timeout SECONDS]

As in Kafka's tools, `--bootstrap-server` names brokers: the tool speaks the Kafka
protocol to a broker's Kafka listener (Metadata, CreateTopics, DeleteTopics,
CreatePartitions; `tools.client.admin`), which forwards writes to the active controller.
`--bootstrap-controller` (and `--cluster`) speak the controllers' admin protocol: a
request goes to any controller, and a non-controller answers NOT_CONTROLLER with the
leader's address, which the request follows. The output is the same either way, except
that a rename (`--alter --new-name`) needs the controllers: Kafka's protocol has none.
A refused request exits 1 with the Kafka error name and code; bad usage exits 2. A write
retried after an attempt whose answer was lost (it may have been applied) and then
refused as done already, TOPIC_ALREADY_EXISTS to a create or INVALID_PARTITIONS to a
grow or shrink, is reported done when the topic now has the partition count asked for.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Protocol

from metadata.admin import (
    DEFAULT,
    CreatableTopic,
    CreatableTopicConfig,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
    DescribeTopicsRequest,
    DescribeTopicsResponse,
    RenameTopicRequest,
    RenameTopicResponse,
    TopicDescription,
)
from metadata.topic_configs import ORDERED_DELIVERY
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from tools.addresses import broker_addresses
from tools.admin_client import (
    CREATE_DONE_ALREADY,
    GROW_DONE_ALREADY,
    AdminClient,
    earlier_attempt_applied,
    fail_on_error,
    may_prove_applied,
)
from tools.cluster import Cluster, ClusterError
from tools.errors import CommandError, unknown_topic, usage_error


def add_controller_target(parser: argparse.ArgumentParser, *, brokers: bool = False) -> None:
    """The options `admin_client` reads: which controllers (or, with `brokers`, which
    brokers) to ask."""
    target = parser.add_mutually_exclusive_group(required=True)
    if brokers:
        target.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                            help="broker addresses (their Kafka listeners), as in Kafka's "
                            "tools")
    target.add_argument("--bootstrap-controller", metavar="HOST:PORT[,...]",
                        help="controller addresses")
    target.add_argument("--cluster", metavar="DIR", help="a local cluster's controllers")


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    add_controller_target(parser, brokers=True)
    action = parser.add_mutually_exclusive_group(required=True)
    for name, text in (("create", "create a topic"), ("describe", "describe topics"),
                       ("delete", "delete a topic (by name or by ID)"),
                       ("alter", "change the partition count or rename a topic"),
                       ("list", "list topics")):
        action.add_argument(f"--{name}", action="store_true", help=text)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--topic", metavar="NAME", help="the topic, by name")
    which.add_argument("--topic-id", metavar="ID", help="a topic ID (22 base64url characters)")
    parser.add_argument("--partitions", type=int, metavar="N",
                        help="partitions to create, or to grow or shrink to with --alter")
    parser.add_argument("--replication-factor", type=int, metavar="R",
                        help="replicas of each partition, with --create")
    parser.add_argument("--ordered", action="store_true",
                        help="with --create: enable.ordered.delivery=true, per-key order "
                        "kept as the count grows and shrinks (KIP-253)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="with --create: a topic config (repeatable), as "
                        "kafka-topics.sh's; `kraft config-keys` lists them")
    parser.add_argument("--new-name", metavar="NAME",
                        help="with --alter: rename the topic (its ID stays)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                        help="give up after this long (leader elections included)")


# --- the client ---------------------------------------------------------------------------


class Client(Protocol):
    """AdminClient (controllers) or tools.client.admin.BrokerAdminClient (a broker)."""

    maybe_applied_before: bool  # the last call's answer came after an attempt of unknown outcome

    def call(self, request_message: Any) -> Any: ...


def _topic_id(text: str) -> Uuid:
    try:
        return Uuid.from_string(text)
    except ValueError as exc:
        raise usage_error(f"--topic-id: {exc}") from None


# --- actions ------------------------------------------------------------------------------


def through_broker(args: argparse.Namespace) -> bool:
    """--bootstrap-server was given."""
    return getattr(args, "bootstrap_server", None) is not None


def admin_client(args: argparse.Namespace) -> Client:
    """The controllers' admin client named by `--cluster` or `--bootstrap-controller`, or
    the Kafka-protocol one of the brokers named by `--bootstrap-server`."""
    if through_broker(args):
        from tools.client.admin import BrokerAdminClient  # kio and trio: only when used
        return BrokerAdminClient(broker_addresses(None, args.bootstrap_server),
                                 ssl_context=args.client_ssl, sasl=args.client_sasl,
                                 timeout_s=args.timeout)
    if args.cluster:
        try:
            cluster = Cluster.load(args.cluster)
        except (ClusterError, OSError) as exc:
            raise usage_error(f"--cluster {args.cluster}: {exc}") from None
        addresses, cluster_id = cluster.controller_addresses(), cluster.cluster_id
    else:
        from tools.commands.quorum import controller_addresses  # its raft RPCs: only here
        addresses, cluster_id = controller_addresses(args), ""
    return AdminClient(addresses, cluster_id=cluster_id, timeout_s=args.timeout,
                       ssl_context=args.client_ssl)


def run(args: argparse.Namespace) -> int:
    _validate(args)
    if not through_broker(args):
        return _run(admin_client(args), args)
    from tools.client.connection import ClientError
    try:
        return _run(admin_client(args), args)
    except ClientError as exc:  # through a broker: unreachable, or an API it lacks
        raise CommandError(str(exc)) from None


def _run(client: Client, args: argparse.Namespace) -> int:
    if args.create:
        return _create(client, args)
    if args.delete:
        return _delete(client, args)
    if args.alter:
        return _alter(client, args)
    return _describe(client, args)


def _validate(args: argparse.Namespace) -> None:
    named = args.topic is not None or args.topic_id is not None
    if args.topic_id is not None:
        args.topic_id = _topic_id(args.topic_id)
    if args.create and args.topic is None:
        raise usage_error("--create needs --topic NAME")
    if (args.delete or args.alter) and not named:
        raise usage_error("--delete and --alter need --topic NAME or --topic-id ID")
    if args.list and named:
        raise usage_error("--list takes no --topic or --topic-id")
    if args.alter and (args.partitions is None) == (args.new_name is None):
        raise usage_error("--alter needs exactly one of --partitions N and --new-name NAME")
    if args.new_name is not None and not args.alter:
        raise usage_error("--new-name goes with --alter")
    if args.new_name is not None and through_broker(args):
        raise usage_error("--new-name needs --bootstrap-controller or --cluster: Kafka's "
                          "protocol has no topic rename")
    if args.partitions is not None and not (args.create or args.alter):
        raise usage_error("--partitions goes with --create or --alter")
    if args.replication_factor is not None and not args.create:
        raise usage_error("--replication-factor goes with --create")
    if args.ordered and not args.create:
        raise usage_error("--ordered goes with --create")
    _validate_configs(args)


def _validate_configs(args: argparse.Namespace) -> None:
    if args.config and not args.create:
        raise usage_error("--config goes with --create (kraft configs alters a topic's)")
    for config in args.config:
        if not config.partition("=")[0].strip() or "=" not in config:
            raise usage_error(f"--config {config!r}: expected KEY=VALUE")


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.json or text:  # an empty listing prints nothing, not a blank line
        print(json.dumps(data) if args.json else text)


def fail_unless_found(client: Client, what: str, name: str | None, code: int,
                      message: str | None) -> None:
    """`fail_on_error`, but a topic asked for by `name` that does not exist is one line
    naming it, with the closest existing name (a typo)."""
    if name is not None and code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        listing = client.call(DescribeTopicsRequest())
        assert isinstance(listing, DescribeTopicsResponse)
        raise unknown_topic(name, [str(t.name) for t in listing.topics])
    fail_on_error(what, code, message)


def _create_configs(args: argparse.Namespace) -> tuple[CreatableTopicConfig, ...] | None:
    """--config KEY=VALUE pairs (each validated by the controller) and --ordered's."""
    pairs = [config.partition("=")[::2] for config in args.config]
    if args.ordered:
        pairs.append((ORDERED_DELIVERY, "true"))
    return tuple(CreatableTopicConfig(name=k.strip(), value=v) for k, v in pairs) or None


def _create(client: Client, args: argparse.Namespace) -> int:
    response = client.call(CreateTopicsRequest(topics=(CreatableTopic(
        name=args.topic,
        num_partitions=DEFAULT if args.partitions is None else args.partitions,
        replication_factor=DEFAULT if args.replication_factor is None
        else args.replication_factor,
        configs=_create_configs(args)),)))
    assert isinstance(response, CreateTopicsResponse)
    result = response.topics[0]
    if (topic := _applied_before(client, args, result.error_code, args.partitions,
                                 CREATE_DONE_ALREADY)) is not None:
        assert topic.name is not None
        result = CreatableTopicResult(
            name=topic.name, topic_id=topic.topic_id, num_partitions=len(topic.partitions),
            replication_factor=len(topic.partitions[0].replicas) if topic.partitions else 0,
            assignment=tuple(p.replicas for p in topic.partitions))
    fail_on_error(f"create topic {args.topic!r}", result.error_code, result.error_message)
    _emit(args, {"name": result.name, "topic_id": str(result.topic_id),
                 "partitions": result.num_partitions,
                 "replication_factor": result.replication_factor,
                 "assignment": [list(r) for r in result.assignment]},
          f"Created topic {result.name} (TopicId: {result.topic_id}).")
    return 0


def _applied_before(client: Client, args: argparse.Namespace, code: int,
                    requested: int | None, proof: ErrorCode) -> TopicDescription | None:
    """The topic as it is now, when the write just refused was retried after an attempt
    of unknown outcome (the leader-redirect policy's call) and the refusal proves that
    attempt applied (`earlier_attempt_applied`); None otherwise (the refusal stands, also
    when the topic cannot be looked up)."""
    if not (client.maybe_applied_before and may_prove_applied(code, requested, proof)):
        return None
    try:
        now = _lookup(client, args)
    except CommandError:
        return None
    return now if earlier_attempt_applied(code, requested=requested, proof=proof,
                                          partitions_now=_undeleted(now)) else None


def _delete(client: Client, args: argparse.Namespace) -> int:
    entry = (DeleteTopicState(topic_id=args.topic_id) if args.topic_id is not None
             else DeleteTopicState(name=args.topic))
    response = client.call(DeleteTopicsRequest(topics=(entry,)))
    assert isinstance(response, DeleteTopicsResponse)
    result = response.responses[0]
    what = args.topic if args.topic_id is None else str(args.topic_id)
    fail_unless_found(client, f"delete topic {what!r}", args.topic, result.error_code,
                      result.error_message)
    _emit(args, {"name": result.name, "topic_id": str(result.topic_id)},
          f"Deleted topic {result.name} (TopicId: {result.topic_id}).")
    return 0


def _lookup(client: Client, args: argparse.Namespace) -> TopicDescription:
    request_message = (DescribeTopicsRequest(topic_ids=(args.topic_id,))
                       if args.topic_id is not None
                       else DescribeTopicsRequest(names=(args.topic,)))
    response = client.call(request_message)
    assert isinstance(response, DescribeTopicsResponse)
    fail_on_error("describe", response.error_code, response.error_message)
    topic = response.topics[0]
    what = args.topic if args.topic_id is None else str(args.topic_id)
    fail_unless_found(client, f"topic {what!r}", args.topic, topic.error_code,
                      topic.error_message)
    return topic


def _alter(client: Client, args: argparse.Namespace) -> int:
    topic = _lookup(client, args)
    assert topic.name is not None
    if args.partitions is not None:
        response = client.call(CreatePartitionsRequest(topics=(CreatePartitionsTopic(
            name=topic.name, count=args.partitions),)))
        assert isinstance(response, CreatePartitionsResponse)
        result = response.results[0]
        if (now := _applied_before(client, args, result.error_code, args.partitions,
                                   GROW_DONE_ALREADY)) is not None:
            result = CreatePartitionsTopicResult(name=topic.name, topic_id=topic.topic_id,
                                                 assignment=tuple(
                p.replicas for p in now.partitions[len(topic.partitions):]))
        fail_on_error(f"alter topic {topic.name!r}", result.error_code, result.error_message)
        shrunk = args.partitions < _undeleted(topic)
        _emit(args, {"name": topic.name, "topic_id": str(topic.topic_id),
                     "partitions": args.partitions,
                     "new_assignment": [list(r) for r in result.assignment]},
              f"Topic {topic.name} (TopicId: {topic.topic_id}) now has "
              f"{args.partitions} partitions" + (
                  f"; partitions {args.partitions} and up are marked for deletion and "
                  "removed once empty." if shrunk else "."))
        return 0
    renamed = client.call(RenameTopicRequest(topic_id=topic.topic_id, new_name=args.new_name))
    assert isinstance(renamed, RenameTopicResponse)
    fail_on_error(f"rename topic {topic.name!r}", renamed.error_code, renamed.error_message)
    _emit(args, {"old_name": renamed.old_name, "name": renamed.new_name,
                 "topic_id": str(renamed.topic_id)},
          f"Renamed topic {renamed.old_name} to {renamed.new_name} "
          f"(TopicId: {renamed.topic_id}).")
    return 0


def _describe(client: Client, args: argparse.Namespace) -> int:
    if args.topic is not None or args.topic_id is not None:
        topics = [_lookup(client, args)]
    else:
        response = client.call(DescribeTopicsRequest())
        assert isinstance(response, DescribeTopicsResponse)
        fail_on_error("describe", response.error_code, response.error_message)
        topics = list(response.topics)
    if args.list:
        _emit(args, {"topics": [{"name": t.name, "topic_id": str(t.topic_id)} for t in topics]},
              "\n".join(str(t.name) for t in topics))
        return 0
    _emit(args, {"topics": [_topic_json(t) for t in topics]},
          "\n".join(_topic_text(t) for t in topics))
    return 0


def _undeleted(topic: TopicDescription) -> int:
    """Partitions producers hash over (KIP-253); all of them from an older controller."""
    count = topic.undeleted_partition_count
    return len(topic.partitions) if count is None else count


def _epochs_json(epochs: tuple[tuple[int, int], ...] | None) -> dict[str, int] | None:
    """A leader-epoch map as a JSON object keyed by partition (text, as JSON wants)."""
    return None if epochs is None else {str(p): e for p, e in epochs}


def _topic_json(topic: TopicDescription) -> dict[str, Any]:
    return {"name": topic.name, "topic_id": str(topic.topic_id),
            "partition_count": len(topic.partitions),
            "replication_factor": len(topic.partitions[0].replicas) if topic.partitions else 0,
            "initial_partition_count": topic.initial_partition_count,
            "undeleted_partition_count": _undeleted(topic),
            "partitions": [{"partition": p.partition, "leader": p.leader,
                            "leader_epoch": p.leader_epoch, "replicas": list(p.replicas),
                            "isr": list(p.isr),
                            "marked_for_deletion": bool(p.leader_epoch_before_deletion),
                            "leader_epoch_after_creation":
                                _epochs_json(p.leader_epoch_after_creation),
                            "leader_epoch_before_deletion":
                                _epochs_json(p.leader_epoch_before_deletion)}
                           for p in topic.partitions]}


def _topic_text(topic: TopicDescription) -> str:
    """kafka-topics.sh --describe: a topic line, then one line per partition (a marked
    one says so: it takes no new records and goes once empty)."""
    factor = len(topic.partitions[0].replicas) if topic.partitions else 0
    initial = "none" if topic.initial_partition_count is None \
        else str(topic.initial_partition_count)
    lines = [f"Topic: {topic.name}\tTopicId: {topic.topic_id}\t"
             f"PartitionCount: {len(topic.partitions)}\tReplicationFactor: {factor}\t"
             f"InitialPartitionCount: {initial}\tUndeletedPartitionCount: {_undeleted(topic)}"]
    for p in topic.partitions:
        leader = "none" if p.leader < 0 else str(p.leader)
        marked = "\tMarkedForDeletion: true" if p.leader_epoch_before_deletion else ""
        lines.append(f"\tTopic: {topic.name}\tPartition: {p.partition}\tLeader: {leader}\t"
                     f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}{marked}")
    return "\n".join(lines)


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in ids)
