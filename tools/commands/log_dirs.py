"""`kraft log-dirs`: each broker's log directory and the size of every partition in it,
like kafka-log-dirs.sh.

    kraft log-dirs (--bootstrap-server HOST:PORT[,...] | --cluster DIR) --describe
        [--topic-list T1,T2] [--broker-list 4,5]

One DescribeLogDirs (broker.kafka.admin.log_dirs_api) per broker named by the cluster's
metadata (or by --broker-list), printed as Kafka's tool prints it: two lines, then one
JSON document, {"version": 1, "brokers": [{"broker": 4, "logDirs": [{"logDir": ...,
"error": null, "partitions": [{"partition": "orders-0", "size": 1234, "offsetLag": 0,
"isFuture": false}]}]}]}. Exit 0 when every broker answered; 1 when one did not (named
on stderr) or refused (CLUSTER_AUTHORIZATION_FAILED); 2 for a malformed list.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
from typing import Any

import trio
from kio.index import load_request_schema

from broker.kafka.sasl.sasl_settings import SaslClientSettings
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from tools.addresses import add_broker_target, broker_addresses
from tools.client.connection import ClientError, KafkaClient
from tools.errors import CommandError, usage_error

DESCRIBE_LOG_DIRS, VERSION = 35, 4
METADATA, METADATA_VERSION = 3, 12


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    add_broker_target(parser)
    parser.add_argument("--describe", action="store_true", required=True,
                        help="describe the brokers' log directories")
    parser.add_argument("--topic-list", metavar="T1,T2",
                        help="only these topics' partitions (default: every topic)")
    parser.add_argument("--broker-list", metavar="ID1,ID2",
                        help="only these brokers (default: every broker)")


def parse_list(text: str | None, what: str) -> list[str] | None:
    if text is None:
        return None
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise usage_error(f"--{what}: an empty entry in {text!r}")
    return items


def parse_brokers(text: str | None) -> list[int] | None:
    items = parse_list(text, "broker-list")
    if items is None:
        return None
    if not all(item.isdigit() for item in items):
        raise usage_error(f"--broker-list: expected broker ids, got {text!r}")
    return [int(item) for item in items]


def document(answers: dict[int, Any]) -> dict[str, Any]:
    """Kafka's kafka-log-dirs.sh JSON from each broker's DescribeLogDirs answer."""
    return {"version": 1, "brokers": [
        {"broker": broker, "logDirs": [
            {"logDir": str(result.log_dir),
             "error": None if int(result.error_code) == 0
             else ErrorCode(int(result.error_code)).name,
             "partitions": [
                 {"partition": f"{topic.name}-{int(p.partition_index)}",
                  "size": int(p.partition_size), "offsetLag": int(p.offset_lag),
                  "isFuture": bool(p.is_future_key)}
                 for topic in result.topics for p in topic.partitions]}
            for result in answer.results]}
        for broker, answer in sorted(answers.items())]}


async def describe(addresses: list[str], topics: list[str] | None,
                   brokers: list[int] | None, ssl_context: ssl.SSLContext | None = None,
                   sasl: SaslClientSettings | None = None
                   ) -> tuple[dict[int, Any], dict[int, str]]:
    """(answers by broker id, failures by broker id)."""
    client = KafkaClient(addresses, client_id="kraft-log-dirs", ssl_context=ssl_context,
                         sasl=sasl)
    try:
        _, metadata = await client.call_any(build(
            load_request_schema(METADATA, METADATA_VERSION),
            {"topics": None, "allow_auto_topic_creation": False,
             "include_topic_authorized_operations": False}))
        known = {int(b.node_id): f"{b.host}:{b.port}" for b in metadata.brokers}
        if topics is None:
            wanted = None
        else:
            partitions = {str(t.name): [int(p.partition_index) for p in t.partitions]
                          for t in metadata.topics}
            wanted = [{"topic": name, "partitions": partitions.get(name, [])}
                      for name in topics]
        request = build(load_request_schema(DESCRIBE_LOG_DIRS, VERSION), {"topics": wanted})
        answers: dict[int, Any] = {}
        failures: dict[int, str] = {}
        for broker in brokers if brokers is not None else sorted(known):
            if broker not in known:
                failures[broker] = "no such broker in the cluster's metadata"
                continue
            try:
                answer = await client.call(known[broker], request)
            except ClientError as exc:
                failures[broker] = str(exc)
                continue
            if int(answer.error_code) != 0:
                failures[broker] = ErrorCode(int(answer.error_code)).name
            else:
                answers[broker] = answer
        return answers, failures
    finally:
        await client.aclose()


def run(args: argparse.Namespace) -> int:
    topics = parse_list(args.topic_list, "topic-list")
    brokers = parse_brokers(args.broker_list)
    addresses = broker_addresses(args.cluster, args.bootstrap_server)
    print("Querying brokers for log directories information")
    try:
        answers, failures = trio.run(describe, addresses, topics, brokers, args.client_ssl,
                                     args.client_sasl)
    except ClientError as exc:
        raise CommandError(f"log-dirs: {exc}") from None
    print("Received log directory information from brokers "
          + ",".join(map(str, sorted(answers))))
    print(json.dumps(document(answers)))
    for broker, reason in sorted(failures.items()):
        print(f"error: broker {broker}: {reason}", file=sys.stderr)
    return 1 if failures else 0
