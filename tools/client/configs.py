"""Config resources over Kafka's protocol, as Kafka's Admin client reaches them:
DescribeConfigs (v4, with synonyms) and IncrementalAlterConfigs (v1), for `kraft
configs --bootstrap-server` and the throttles of `kraft reassign-partitions`.

A broker's own configs are described by that broker (Kafka's brokers answer only for
their own id): `describe` finds its address through Metadata first. The cluster-wide
default ("") and topics are described by any broker; alters go to any broker, which
forwards them to the active controller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema

from metadata.admin import BROKER_RESOURCE, OP_DELETE, OP_SET
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from tools.client.admin import BrokerAdminClient, KafkaAdmin
from tools.client.connection import ClientError

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
DESCRIBE_VERSION, ALTER_VERSION = 4, 1
SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
           3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG"}

# (resource type, resource name, [(key, value or None to delete)]): one resource's alter
Alteration = tuple[int, str, Sequence[tuple[str, str | None]]]


class ConfigRefused(ClientError):
    """The broker answered a resource with an error; the message names it."""


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    value: str | None
    source: str
    sensitive: bool
    synonyms: tuple[tuple[str, str, str | None], ...]  # (source, name, value)


def _refusal(result: Any, what: str) -> ConfigRefused | None:
    code = int(result.error_code)
    if code == 0:
        return None
    return ConfigRefused(f"{what}: {ErrorCode(code).name} ({code})"
                         + (f": {result.error_message}" if result.error_message else ""))


async def _broker_address(admin: KafkaAdmin, broker_id: str) -> str:
    metadata = await admin.metadata([])
    for broker in metadata.brokers:
        if str(int(broker.node_id)) == broker_id:
            return f"{broker.host}:{int(broker.port)}"
    raise ConfigRefused(f"broker {broker_id} is not registered")


def describe(client: BrokerAdminClient, resource_type: int, name: str) -> list[Entry]:
    """Every config the resource's broker describes, with its synonyms."""
    values = {"resources": [{"resource_type": resource_type, "resource_name": name,
                             "configuration_keys": None}],
              "include_synonyms": True, "include_documentation": False}

    async def work(admin: KafkaAdmin) -> Any:
        if resource_type != BROKER_RESOURCE or not name:
            return await admin.send(DESCRIBE_CONFIGS, values, version=DESCRIBE_VERSION)
        await admin.negotiate()
        body = build(load_request_schema(DESCRIBE_CONFIGS, DESCRIBE_VERSION), values)
        return await admin.client.call(await _broker_address(admin, name), body)
    (result,) = client.run(work).results
    refused = _refusal(result, f"describing {name!r}")
    if refused is not None:
        raise refused
    return [Entry(name=c.name, value=c.value, source=SOURCES.get(int(c.config_source),
                                                                  "UNKNOWN"),
                  sensitive=bool(c.is_sensitive),
                  synonyms=tuple((SOURCES.get(int(s.source), "UNKNOWN"), s.name, s.value)
                                 for s in c.synonyms))
            for c in result.configs]


def alter(client: BrokerAdminClient, alterations: list[Alteration]) -> None:
    """One IncrementalAlterConfigs of every resource (SET, or DELETE for a None value);
    ConfigRefused naming the first resource refused."""
    values = {"validate_only": False, "resources": [
        {"resource_type": resource_type, "resource_name": name, "configs": [
            {"name": key, "config_operation": OP_DELETE if value is None else OP_SET,
             "value": value} for key, value in configs]}
        for resource_type, name, configs in alterations]}
    response = client.run(lambda admin: admin.send(INCREMENTAL_ALTER_CONFIGS, values,
                                                   version=ALTER_VERSION))
    for result in response.responses:
        refused = _refusal(result, f"altering the configs of {result.resource_name!r}")
        if refused is not None:
            raise refused
