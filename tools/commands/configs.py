"""`kraft configs`: describe and alter topic configs (like kafka-configs.sh).

    kraft configs (--bootstrap-controller HOST:PORT[,...] | --cluster DIR)
        --entity-type topics --entity-name NAME
        (--describe | --alter [--add-config k=v[,k2=v2]] [--delete-config k[,k2]])
        [--json] [--timeout SECONDS]

It speaks the controllers' admin protocol (the client of `kraft topics
--bootstrap-controller`, which follows NOT_CONTROLLER to the leader), so it needs no
broker and no Kafka client library; it takes no `--bootstrap-server` (in Kafka's tools
that names a broker, and this tool does not speak a broker's DescribeConfigs):
--describe reads the committed image through DescribeTopics (the configs set, plus every
other supported key with its default, marked as such); --alter sends
IncrementalAlterConfigs (SET for --add-config, DELETE for --delete-config; all or
nothing). Kafka clients reach the same data through a broker's DescribeConfigs and
IncrementalAlterConfigs. A refusal exits 1 with the Kafka error name and code (e.g.
INVALID_CONFIG for an unknown key); bad usage exits 2.
"""

from __future__ import annotations

import argparse
import json

from metadata.admin import (
    OP_DELETE,
    OP_SET,
    TOPIC_RESOURCE,
    AlterableConfig,
    AlterConfigsResource,
    DescribeTopicsRequest,
    DescribeTopicsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from metadata.topic_configs import KEYS
from tools.commands.topics import add_controller_target, admin_client, fail_unless_found
from tools.errors import usage_error


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    add_controller_target(parser)
    parser.add_argument("--entity-type", required=True, choices=("topics",),
                        help="only topics have configs here")
    parser.add_argument("--entity-name", required=True, metavar="NAME",
                        help="the topic")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="show the topic's configs")
    action.add_argument("--alter", action="store_true", help="set or delete configs")
    parser.add_argument("--add-config", metavar="k=v[,k2=v2]", default="",
                        help="with --alter: configs to set")
    parser.add_argument("--delete-config", metavar="k[,k2]", default="",
                        help="with --alter: configs to return to their defaults")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS")


def parse_add_config(text: str) -> list[tuple[str, str]]:
    """`k=v,k2=v2` (kafka-configs.sh's syntax; a value holding commas goes in [...])."""
    pairs: list[tuple[str, str]] = []
    depth, current = 0, ""
    parts: list[str] = []
    for char in text:
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current:
        parts.append(current)
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise usage_error(f"--add-config: {part!r} is not key=value")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        pairs.append((key.strip(), value))
    return pairs


def run(args: argparse.Namespace) -> int:
    adds = parse_add_config(args.add_config)
    deletes = [k.strip() for k in args.delete_config.split(",") if k.strip()]
    if args.describe and (adds or deletes):
        raise usage_error("--add-config and --delete-config go with --alter")
    if args.alter and not (adds or deletes):
        raise usage_error("--alter needs --add-config or --delete-config")
    client = admin_client(args)
    name = args.entity_name
    if args.alter:
        configs = tuple(AlterableConfig(name=k, config_operation=OP_SET, value=v)
                        for k, v in adds) + tuple(
            AlterableConfig(name=k, config_operation=OP_DELETE) for k in deletes)
        response = client.call(IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=name, configs=configs),)))
        assert isinstance(response, IncrementalAlterConfigsResponse)
        result = response.responses[0]
        fail_unless_found(client, f"altering the configs of topic {name!r}", name,
                          result.error_code, result.error_message)
        print(json.dumps({"topic": name, "altered": True}) if args.json
              else f"Completed updating config for topic {name}.")
        return 0
    described = client.call(DescribeTopicsRequest(names=(name,)))
    assert isinstance(described, DescribeTopicsResponse)
    topic = described.topics[0]
    fail_unless_found(client, f"describing topic {name!r}", name, topic.error_code,
                      topic.error_message)
    own = {c.name: c.value for c in topic.configs or ()}
    rows = [{"name": key, "value": own.get(key, spec.default), "default": key not in own}
            for key, spec in sorted(KEYS.items())]
    if args.json:
        print(json.dumps({"topic": name, "configs": rows}))
    else:
        print(f"Dynamic configs for topic {name} are:")
        for row in rows:
            source = "DEFAULT_CONFIG" if row["default"] else "DYNAMIC_TOPIC_CONFIG"
            print(f"  {row['name']}={row['value']} sensitive=false synonyms={{{source}}}")
    return 0
