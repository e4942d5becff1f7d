"""`kraft configs`: describe and alter topic and broker configs (like kafka-configs.sh).

    kraft configs (--bootstrap-controller HOST:PORT[,...] | --cluster DIR
                   | --bootstrap-server HOST:PORT[,...])
        --entity-type topics|brokers (--entity-name NAME | --entity-default)
        (--describe [--all] | --alter [--add-config k=v[,k2=v2]] [--delete-config k[,k2]])
        [--json] [--timeout SECONDS]

Topics through the controllers (--bootstrap-controller, or --cluster) speak the
controllers' admin protocol (the client of `kraft topics --bootstrap-controller`, which
follows NOT_CONTROLLER to the leader), so they need no broker: --describe reads the
committed image through DescribeTopics (the configs set, plus every other supported key
with its default, marked as such); --alter sends IncrementalAlterConfigs (SET for
--add-config, DELETE for --delete-config; all or nothing).

Through brokers (--bootstrap-server, or --cluster for brokers) it speaks Kafka's
DescribeConfigs and IncrementalAlterConfigs, as kafka-configs.sh does, and prints its
lines: "Dynamic configs for broker 5 are:" (only the keys set on that broker; --all:
every key, "All configs for broker 5 are:"), "Default configs for brokers in the
cluster are:" (--entity-default: the cluster-wide defaults), each key as
`  name=value sensitive=false synonyms={SOURCE:name=value, ...}`. A broker's own
configs are described by that broker (Kafka's rule), found through Metadata. Broker
configs are the dynamic keys of `metadata.broker_configs`.

A refusal exits 1 with the Kafka error name and code (e.g. INVALID_CONFIG for an
unknown key); bad usage exits 2.
"""

from __future__ import annotations

import argparse
import json

from metadata.admin import (
    BROKER_RESOURCE,
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
from tools.addresses import broker_addresses
from tools.commands.topics import add_controller_target, admin_client, fail_unless_found
from tools.errors import CommandError, usage_error


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    add_controller_target(parser, brokers=True)
    parser.add_argument("--entity-type", required=True, choices=("topics", "brokers"),
                        help="topics, or brokers (their dynamic configs)")
    entity = parser.add_mutually_exclusive_group(required=True)
    entity.add_argument("--entity-name", metavar="NAME", help="the topic, or the broker id")
    entity.add_argument("--entity-default", action="store_true",
                        help="brokers: the cluster-wide default")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="show the configs")
    action.add_argument("--alter", action="store_true", help="set or delete configs")
    parser.add_argument("--all", action="store_true",
                        help="with --describe through brokers: every key, not only those set")
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
    if args.entity_type == "topics" and args.entity_default:
        raise usage_error("--entity-default goes with --entity-type brokers")
    if args.entity_type == "brokers" or args.bootstrap_server is not None:
        if args.bootstrap_controller is not None:
            raise usage_error("broker configs are described by the brokers: give "
                              "--bootstrap-server or --cluster")
        return through_brokers(args, adds, deletes)
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


def through_brokers(args: argparse.Namespace, adds: list[tuple[str, str]],
                    deletes: list[str]) -> int:
    """Kafka's DescribeConfigs / IncrementalAlterConfigs through a broker, with
    kafka-configs.sh's lines."""
    from tools.client.admin import BrokerAdminClient  # kio and trio: only when used
    from tools.client.configs import alter, describe
    from tools.client.connection import ClientError
    broker = args.entity_type == "brokers"
    name = "" if args.entity_default else args.entity_name
    if broker and name and not name.isdigit():
        raise usage_error(f"--entity-name {name!r}: a broker id (or --entity-default)")
    resource_type = BROKER_RESOURCE if broker else TOPIC_RESOURCE
    client = BrokerAdminClient(broker_addresses(args.cluster, args.bootstrap_server),
                               ssl_context=args.client_ssl, sasl=args.client_sasl,
                               timeout_s=args.timeout)
    entity = ("default config for brokers in the cluster" if broker and not name
              else f"config for {'broker' if broker else 'topic'} {name}")
    try:
        if args.alter:
            alter(client, [(resource_type, name, [*adds, *((k, None) for k in deletes)])])
            print(json.dumps({"entity_type": args.entity_type, "entity_name": name,
                              "altered": True}) if args.json
                  else f"Completed updating {entity}.")
            return 0
        entries = describe(client, resource_type, name)
    except ClientError as exc:
        raise CommandError(f"configs: {exc}") from None
    own = ("DYNAMIC_BROKER_CONFIG" if name else "DYNAMIC_DEFAULT_BROKER_CONFIG") if broker \
        else "DYNAMIC_TOPIC_CONFIG"
    shown = [e for e in entries if args.all or e.source == own]
    if args.json:
        print(json.dumps({"entity_type": args.entity_type, "entity_name": name, "configs": [
            {"name": e.name, "value": e.value, "source": e.source, "sensitive": e.sensitive,
             "synonyms": [{"source": s, "name": n, "value": v} for s, n, v in e.synonyms]}
            for e in shown]}))
        return 0
    what = f"{'broker' if broker else 'topic'} {name}"
    print("Default configs for brokers in the cluster are:" if broker and not name
          else f"{'All' if args.all else 'Dynamic'} configs for {what} are:")
    for e in shown:
        synonyms = ", ".join(f"{s}:{n}={_text(v)}" for s, n, v in e.synonyms)
        print(f"  {e.name}={_text(e.value)} sensitive={str(e.sensitive).lower()} "
              f"synonyms={{{synonyms}}}")
    return 0


def _text(value: str | None) -> str:
    """A value as kafka-configs.sh prints it: a missing one (no default, or sensitive) is
    `null`."""
    return "null" if value is None else value
