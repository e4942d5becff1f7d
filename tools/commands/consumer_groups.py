"""`kraft consumer-groups`: list, describe, delete and reset consumer groups, as
kafka-consumer-groups.sh does.

    kraft consumer-groups (--bootstrap-server H:P[,...] | --cluster DIR)
        --list [--state [STATE,...]]
        --describe --group G [--members | --state | --offsets]
        --delete --group G [--group G2 ...]
        --delete-offsets --group G --topic T[:P,...]
        --reset-offsets --group G (--topic T[:P,...] ... | --all-topics)
            (--to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N
             | --to-datetime YYYY-MM-DDTHH:mm:SS[.sss][Z|+HH:MM]) [--dry-run | --execute]

Tables are Kafka's columns; `--json` prints the same rows as objects. A reset is shown
and not applied unless `--execute`, and only an inactive group (Empty, or unknown) is
reset: an active one is one line naming its state, exit 1, nothing written. Exit 2 for
bad usage (no action, a reset without its target, a malformed topic or time).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

import trio

from tools.addresses import add_broker_target, broker_addresses
from tools.client import errors
from tools.client.connection import ClientError, KafkaClient
from tools.client.groups_admin import (
    INACTIVE,
    GroupDescription,
    GroupsAdmin,
    Member,
    ResetError,
    ResetSpec,
    TopicPartition,
    reset_offsets,
)
from tools.errors import CommandError, usage_error

ACTIONS = ("list", "describe", "delete", "delete_offsets", "reset_offsets")
RESETS = {"to_earliest": "earliest", "to_latest": "latest", "to_current": "current",
          "to_offset": "offset", "shift_by": "shift", "to_datetime": "datetime"}


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    add_broker_target(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list every group")
    action.add_argument("--describe", action="store_true", help="describe --group")
    action.add_argument("--delete", action="store_true", help="delete the --group(s)")
    action.add_argument("--delete-offsets", action="store_true",
                        help="delete --group's committed offsets of --topic")
    action.add_argument("--reset-offsets", action="store_true",
                        help="set --group's committed offsets (shown only, unless --execute)")
    parser.add_argument("--group", action="append", default=[], metavar="G",
                        help="the group (--delete takes several)")
    parser.add_argument("--topic", action="append", default=[], metavar="T[:P,...]",
                        help="a topic, or some of its partitions")
    parser.add_argument("--all-topics", action="store_true",
                        help="every topic the group has committed offsets for")
    parser.add_argument("--state", nargs="?", const="", default=None, metavar="STATE,...",
                        help="with --list: show states (only these when given); with "
                        "--describe: the group's state")
    parser.add_argument("--members", action="store_true", help="with --describe: members")
    parser.add_argument("--offsets", action="store_true",
                        help="with --describe: offsets and lag (the default)")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true", help="to the log start")
    target.add_argument("--to-latest", action="store_true", help="to the log end")
    target.add_argument("--to-current", action="store_true",
                        help="to the committed offset (the log end where none)")
    target.add_argument("--to-offset", type=int, metavar="N", help="to offset N")
    target.add_argument("--shift-by", type=int, metavar="N",
                        help="the committed offset plus N (N may be negative)")
    target.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                        help="to the first record at or after this time (local time "
                        "unless a zone is given)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the reset (the default)")
    mode.add_argument("--execute", action="store_true", help="apply the reset")
    parser.add_argument("--json", action="store_true")


def parse_topic(text: str) -> tuple[str, list[int] | None]:
    """`T` or `T:0,2` -> (topic, partitions or None for all of them)."""
    name, _, parts = text.partition(":")
    if not name:
        raise usage_error(f"--topic {text!r}: no topic name")
    if not parts:
        return name, None
    try:
        return name, sorted({int(p) for p in parts.split(",")})
    except ValueError:
        raise usage_error(f"--topic {text!r}: partitions must be numbers, as T:0,1") \
            from None


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime format (local time when no zone is given) -> epoch ms."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise usage_error(f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss") \
            from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.astimezone(UTC).timestamp() * 1000)


def reset_spec(args: argparse.Namespace) -> ResetSpec:
    for option, kind in RESETS.items():
        value = getattr(args, option)
        if value is None or value is False:
            continue
        if kind == "datetime":
            return ResetSpec(kind, parse_datetime(value))
        return ResetSpec(kind, 0 if value is True else int(value))
    raise usage_error("--reset-offsets needs one of --to-earliest, --to-latest, "
                      "--to-current, --to-offset, --shift-by, --to-datetime")


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """Kafka's padded columns; None shows as '-'."""
    cells = [header, *[["-" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [" ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in cells]


OFFSET_COLUMNS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "CONSUMER-ID", "HOST", "CLIENT-ID"]


async def _describe_offsets(admin: GroupsAdmin, group: GroupDescription
                            ) -> list[list[Any]]:
    committed = await admin.committed(group.group_id)
    owner: dict[TopicPartition, Member] = {}
    for member in group.members:
        for topic, parts in member.assignment.items():
            owner.update({(topic, p): member for p in parts})
    partitions = sorted(set(committed) | set(owner))
    ends = await admin.log_ends(partitions)
    rows = []
    for tp in partitions:
        current, end, holder = committed.get(tp), ends.get(tp), owner.get(tp)
        lag = end - current if current is not None and end is not None else None
        rows.append([group.group_id, tp[0], tp[1], current, end, lag,
                     holder.member_id if holder else None, holder.host if holder else None,
                     holder.client_id if holder else None])
    return rows


async def _reset(admin: GroupsAdmin, args: argparse.Namespace) -> list[list[Any]]:
    (group,) = args.group
    spec = reset_spec(args)
    description = await admin.describe(group)
    if description.state not in INACTIVE:
        raise CommandError(f"consumer-groups: assignments can only be reset if the group "
                           f"'{group}' is inactive, but the current state is "
                           f"{description.state}.")
    committed = await admin.committed(group)
    if args.all_topics:
        partitions = sorted(committed)
    else:
        partitions = []
        for topic, parts in map(parse_topic, args.topic):
            partitions += [(topic, p) for p in
                           (parts if parts is not None else await admin.partitions(topic))]
    starts = await admin.log_starts(partitions)
    ends = await admin.log_ends(partitions)
    by_time = await admin.offsets(partitions, spec.value) if spec.kind == "datetime" else None
    try:
        targets = reset_offsets(spec, partitions, committed, starts, ends, by_time)
    except ResetError as exc:
        raise CommandError(f"consumer-groups: {exc}") from None
    if args.execute and targets:
        await admin.commit(group, targets)
    return [[group, topic, partition, offset]
            for (topic, partition), offset in sorted(targets.items())]


async def _run(args: argparse.Namespace) -> tuple[list[str], list[list[Any]]]:
    """(header, rows) of the action's table."""
    client = KafkaClient(broker_addresses(args.cluster, args.bootstrap_server),
                         client_id="kraft-consumer-groups", ssl_context=args.client_ssl,
                         sasl=args.client_sasl)
    admin = GroupsAdmin(client)
    try:
        if args.list:
            states = [s for s in (args.state or "").split(",") if s]
            listed = await admin.list_groups(states)
            if args.state is None:
                return ["GROUP"], [[group] for group, _ in listed]
            return ["GROUP", "STATE"], [list(entry) for entry in listed]
        if args.delete:
            deleted = await admin.delete(args.group)
            return ["GROUP", "ERROR"], [[g, _error(c)] for g, c in deleted.items()]
        if args.delete_offsets:
            (group,) = args.group
            (topic_arg,) = args.topic
            topic, parts = parse_topic(topic_arg)
            codes = await admin.delete_offsets(
                group, topic, parts if parts is not None else await admin.partitions(topic))
            return ["TOPIC", "PARTITION", "STATUS"], [
                [topic, p, "Successful" if c == 0 else f"Error: {_error(c)}"]
                for p, c in sorted(codes.items())]
        if args.reset_offsets:
            return ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], await _reset(admin, args)
        (group,) = args.group
        description = await admin.describe(group)
        if args.members:
            return ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"], [
                [group, m.member_id, m.host, m.client_id,
                 sum(map(len, m.assignment.values()))] for m in description.members]
        if args.state is not None:
            coordinator = f"{description.coordinator[1]} ({description.coordinator[0]})"
            return ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                    "#MEMBERS"], [[group, coordinator, description.protocol or None,
                                   description.state, len(description.members)]]
        rows = await _describe_offsets(admin, description)
        if description.state == "Dead" and not rows:
            raise CommandError(f"consumer-groups: consumer group '{group}' does not exist.")
        return OFFSET_COLUMNS, rows
    finally:
        await client.aclose()


def _error(code: int) -> str | None:
    return None if code == 0 else errors.name(code)


def _check_usage(args: argparse.Namespace) -> None:
    needs_one_group = args.describe or args.reset_offsets or args.delete_offsets
    if needs_one_group and len(args.group) != 1:
        raise usage_error("give exactly one --group")
    if args.delete and not args.group:
        raise usage_error("--delete needs --group")
    if args.delete_offsets and len(args.topic) != 1:
        raise usage_error("--delete-offsets needs one --topic")
    if args.reset_offsets:
        reset_spec(args)
        if bool(args.topic) == args.all_topics:
            raise usage_error("--reset-offsets needs --topic T[:P,...] or --all-topics")
        for topic in args.topic:
            parse_topic(topic)


def run(args: argparse.Namespace) -> int:
    _check_usage(args)
    try:
        header, rows = trio.run(_run, args)
    except ClientError as exc:
        raise CommandError(f"consumer-groups: {exc}") from None
    if args.json:
        keys = [h.lower().replace("#", "").replace(" (id)", "") for h in header]
        print(json.dumps([dict(zip(keys, row, strict=True)) for row in rows]))
    elif args.delete:
        deleted = [group for group, error in rows if error is None]
        if deleted:
            print("Deletion of requested consumer groups ("
                  + ", ".join(f"'{g}'" for g in deleted) + ") was successful.")
        if len(deleted) < len(rows):
            print("Deletion of some consumer groups failed:")
            for group, error in rows:
                if error is not None:
                    print(f"* Group '{group}' could not be deleted due to: {error}")
    else:
        if args.describe and not args.members and args.state is None and rows and \
                all(row[6] is None for row in rows):
            print(f"\nConsumer group '{args.group[0]}' has no active members.\n")
        print("\n".join(table(header, rows)))
    if args.delete:
        return 1 if any(error for _, error in rows) else 0
    if args.delete_offsets:
        return 1 if any(status != "Successful" for _, _, status in rows) else 0
    return 0
