"""DescribeConfigs (v1-v4), IncrementalAlterConfigs (v0-v1, KIP-339) and the legacy
AlterConfigs (v0-v2, each resource's configs replacing its whole set) for topics.

Describe answers from this broker's image: every supported key (metadata.topic_configs)
with the topic's value (source DYNAMIC_TOPIC_CONFIG), else this broker's default where it
differs from Kafka's (STATIC_BROKER_CONFIG: `log.retention.*`, `log.roll.*`,
`unclean.leader.election.enable`), else the
default (DEFAULT_CONFIG, `is_default` in v0's sense), filtered by `configuration_keys`.
Topics are named, as on Kafka's wire; an unknown one is UNKNOWN_TOPIC_OR_PARTITION. A
broker resource answers as Kafka's broker does: its own id, every dynamic broker key
(`metadata.broker_configs`) and every other key set on it or the default, with the
value and source it resolves to (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
STATIC_BROKER_CONFIG, DEFAULT_CONFIG) and, when asked (v1+ include_synonyms), every
level that sets it; a PASSWORD key is sensitive, its values null; "" (the cluster-wide
default), the keys set there; another broker's id,
INVALID_REQUEST "Unexpected broker id, expected <own> or empty string, but received
<id>".

Alter is forwarded to the active controller (`metadata.admin`
IncrementalAlterConfigsRequest, with `replace` for the legacy call), which validates
and writes TopicConfig records (ConfigRecords for a broker resource); the answer is held
until this broker's image shows the change, so a describe right after sees it.

ListClientMetricsResources (API 74 v0, KIP-714's client metrics subscriptions; Kafka 4.1
renamed it ListConfigResources): none here, an empty list.

With the authorizer on (`broker.kafka.authz`): DESCRIBE_CONFIGS (describe, and the
client metrics list: on the cluster, CLUSTER_AUTHORIZATION_FAILED) or
ALTER_CONFIGS (alter) on the topic, or on the cluster for a broker resource; a refused
resource answers TOPIC_ or CLUSTER_AUTHORIZATION_FAILED and is not forwarded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from broker.kafka import authz
from broker.kafka import response_shapes as shapes
from broker.kafka.admin.admin_api import forward_to_controller, kafka_error, request_timeout_s
from broker.kafka.context import BrokerContext
from broker.kafka.partitions.segments import topic_defaults
from metadata.admin import (
    BROKER_RESOURCE,
    OP_DELETE,
    OP_SET,
    TOPIC_RESOURCE,
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from metadata.broker_configs import (
    DEFAULT_CONFIG,
    DEFAULT_RESOURCE,
    DYNAMIC_KEYS,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
    resolve,
    resource_configs,
    spec_of,
)
from metadata.image import MetadataImage
from metadata.topic_configs import KEYS, UNCLEAN_LEADER_ELECTION, InvalidConfig
from raft.common.errors import ErrorCode

log = logging.getLogger(__name__)

CONFIG_TYPES = {"UNKNOWN": 0, "BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5,
                "DOUBLE": 6, "LIST": 7, "CLASS": 8, "PASSWORD": 9}


def describe_topic_configs(image: MetadataImage, name: str, keys: tuple[str, ...] | None,
                           documentation: bool = False,
                           broker_defaults: Mapping[str, str] | None = None
                           ) -> shapes.ResourceResult:
    """One DescribeConfigs result; `broker_defaults`: the topic configs this broker
    gives a topic that sets none."""
    topic = image.topic_by_name(name)
    if topic is None:
        return {"error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                "error_message": f"no topic named {name!r}", "resource_type": TOPIC_RESOURCE,
                "resource_name": name, "configs": []}
    own = dict(topic.configs)
    configs: list[shapes.ConfigEntry] = []
    for key in sorted(KEYS):
        if keys is not None and key not in keys:
            continue
        spec = KEYS[key]
        broker_value = (broker_defaults or {}).get(key, spec.default)
        if key in own:
            value, source = own[key], DYNAMIC_TOPIC_CONFIG
        elif broker_value != spec.default:
            value, source = broker_value, STATIC_BROKER_CONFIG
        else:
            value, source = spec.default, DEFAULT_CONFIG
        configs.append({
            "name": key, "value": value, "read_only": False,
            "is_default": source == DEFAULT_CONFIG, "config_source": source,
            "is_sensitive": False, "synonyms": [], "config_type": CONFIG_TYPES[spec.type],
            "documentation": spec.documentation if documentation else None})
    return {"error_code": 0, "error_message": None, "resource_type": TOPIC_RESOURCE,
            "resource_name": name, "configs": configs}


def describe_broker_configs(configs: tuple[tuple[str, str, str], ...], broker_id: int,
                            name: str, keys: tuple[str, ...] | None, *, synonyms: bool,
                            documentation: bool) -> shapes.ResourceResult:
    """One DescribeConfigs result for a BROKER resource (see the module's docstring)."""
    if name not in (DEFAULT_RESOURCE, str(broker_id)):
        return {"error_code": int(ErrorCode.INVALID_REQUEST),
                "error_message": f"Unexpected broker id, expected {broker_id} or empty "
                                 f"string, but received {name}",
                "resource_type": BROKER_RESOURCE, "resource_name": name, "configs": []}
    listed = set(resource_configs(configs, DEFAULT_RESOURCE))
    if name != DEFAULT_RESOURCE:
        listed |= set(DYNAMIC_KEYS) | set(resource_configs(configs, name))
    entries: list[shapes.ConfigEntry] = []
    for key in sorted(listed):
        if keys is not None and key not in keys:
            continue
        resolved = resolve(configs, None if name == DEFAULT_RESOURCE else broker_id, key)
        spec = spec_of(key)
        sensitive = spec.type == "PASSWORD"
        entries.append({
            "name": key, "value": None if sensitive else resolved.value, "read_only": False,
            "is_default": resolved.source == DEFAULT_CONFIG,
            "config_source": resolved.source, "is_sensitive": sensitive,
            "synonyms": [{"name": key, "value": None if sensitive else value,
                          "source": source}
                         for value, source in resolved.synonyms] if synonyms else [],
            "config_type": CONFIG_TYPES[spec.type],
            "documentation": spec.documentation if documentation else None})
    return {"error_code": 0, "error_message": None, "resource_type": BROKER_RESOURCE,
            "resource_name": name, "configs": entries}


async def handle_describe_configs_request(context: BrokerContext, request: Any,
                                          version: int) -> shapes.DescribeConfigsResponse:
    image = context.image
    results: list[shapes.ResourceResult] = []
    for resource in request.resources:
        keys = resource.configuration_keys
        keys = None if keys is None or len(keys) == 0 else tuple(keys)
        denied = _denied(context, authz.Op.DESCRIBE_CONFIGS, int(resource.resource_type),
                         resource.resource_name)
        if denied is not None:
            results.append({**denied, "configs": []})
        elif int(resource.resource_type) == TOPIC_RESOURCE:
            results.append(describe_topic_configs(
                image, resource.resource_name, keys,
                bool(getattr(request, "include_documentation", False)),
                {**topic_defaults(context.replicas.log_defaults), UNCLEAN_LEADER_ELECTION:
                 str(context.unclean_election_default).lower()}))
        elif int(resource.resource_type) == BROKER_RESOURCE:
            results.append(describe_broker_configs(
                image.broker_configs, context.broker_id, resource.resource_name, keys,
                synonyms=bool(getattr(request, "include_synonyms", False)),
                documentation=bool(getattr(request, "include_documentation", False))))
        else:
            results.append({"error_code": int(ErrorCode.INVALID_REQUEST),
                            "error_message": f"unsupported resource type "
                                             f"{int(resource.resource_type)}",
                            "resource_type": int(resource.resource_type),
                            "resource_name": resource.resource_name, "configs": []})
    return {"throttle_time": 0, "results": results}


def _denied(context: BrokerContext, operation: int, resource_type: int, name: str
            ) -> shapes.ResourceResult | None:
    """The result for a resource the caller may not describe or alter (DESCRIBE_CONFIGS
    or ALTER_CONFIGS on the topic, or on the cluster for a broker), or None."""
    if resource_type == TOPIC_RESOURCE:
        if authz.topic_allowed(context, operation, name):
            return None
        code = authz.TOPIC_AUTHORIZATION_FAILED
    elif resource_type == BROKER_RESOURCE:
        if authz.cluster_allowed(context, operation):
            return None
        code = authz.CLUSTER_AUTHORIZATION_FAILED
    else:
        return None
    return {"error_code": code, "error_message": f"{authz.Op(operation).name} is not allowed",
            "resource_type": resource_type, "resource_name": name}


def _expected(resource: AlterConfigsResource) -> dict[str, str | None]:
    """What the resource's configs hold once an accepted alter is applied (for a legacy
    replace, the named keys: every other key is then unset)."""
    broker = resource.resource_type == BROKER_RESOURCE
    expected: dict[str, str | None] = {}
    for config in resource.configs:
        if config.config_operation == OP_DELETE or config.value is None:
            expected[config.name] = None
        elif config.config_operation == OP_SET and (broker or config.name in KEYS):
            try:
                expected[config.name] = (spec_of(config.name) if broker
                                         else KEYS[config.name]).parse(config.value)
            except InvalidConfig:
                pass  # the controller accepted it: nothing to wait for here
    return expected


def _shows(image: MetadataImage, resource: AlterConfigsResource,
           expected: dict[str, str | None], replace: bool) -> bool:
    if resource.resource_type == BROKER_RESOURCE:
        configs: dict[str, str] = resource_configs(image.broker_configs,
                                                   resource.resource_name)
    else:
        topic = image.topic_by_name(resource.resource_name)
        if topic is None:
            return True
        configs = dict(topic.configs)
    return all(configs.get(k) == v for k, v in expected.items()) and (
        not replace or all(k in expected for k in configs))


def _unanswered(resource: Any) -> shapes.ResourceResult:
    return {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR), "error_message": "no answer",
            "resource_type": int(resource.resource_type),
            "resource_name": resource.resource_name}


async def handle_incremental_alter_configs_request(
        context: BrokerContext, request: Any, version: int
        ) -> shapes.IncrementalAlterConfigsResponse:
    return await _alter(context, request, [tuple(
        AlterableConfig(name=c.name, config_operation=int(c.config_operation), value=c.value)
        for c in r.configs) for r in request.resources], replace=False)


async def handle_alter_configs_request(context: BrokerContext, request: Any, version: int
                                       ) -> shapes.IncrementalAlterConfigsResponse:
    """Kafka's legacy AlterConfigs: each resource's configs replace its whole set (the
    controller unsets the keys left out, `metadata.controller`)."""
    return await _alter(context, request, [tuple(
        AlterableConfig(name=c.name, value=c.value) for c in r.configs)
        for r in request.resources], replace=True)


async def _alter(context: BrokerContext, request: Any,
                 configs: list[tuple[AlterableConfig, ...]], *, replace: bool
                 ) -> shapes.IncrementalAlterConfigsResponse:
    """Both alters: authorize each resource (ALTER_CONFIGS), forward the allowed ones,
    and hold an accepted resource's answer until this broker's image shows it."""
    timeout_s = request_timeout_s(request, context)
    denied = [_denied(context, authz.Op.ALTER_CONFIGS, int(r.resource_type), r.resource_name)
              for r in request.resources]
    admin = IncrementalAlterConfigsRequest(
        resources=tuple(AlterConfigsResource(
            resource_type=int(r.resource_type), resource_name=r.resource_name,
            configs=wanted)
            for r, wanted, d in zip(request.resources, configs, denied, strict=True)
            if d is None),
        validate_only=bool(request.validate_only), replace=replace or None)
    if not admin.resources:
        response, error, message = IncrementalAlterConfigsResponse(responses=()), 0, None
    else:
        response, error, message = await forward_to_controller(context, admin, timeout_s)
    results: list[shapes.ResourceResult]
    if response is None:
        results = [{"error_code": error, "error_message": message,
                    "resource_type": r.resource_type, "resource_name": r.resource_name}
                   for r in admin.resources]
    else:
        assert isinstance(response, IncrementalAlterConfigsResponse)
        if not admin.validate_only:
            wanted = [(r, _expected(r)) for r, answer in
                      zip(admin.resources, response.responses, strict=False)
                      if answer.error_code == 0]
            if wanted:
                await context.wait_image(lambda image: all(
                    _shows(image, r, expected, replace) for r, expected in wanted),
                    timeout_s)
        results = [{"error_code": kafka_error(r.error_code), "error_message": r.error_message,
                    "resource_type": r.resource_type, "resource_name": r.resource_name}
                   for r in response.responses]
    answers = iter(results)  # the forwarded ones, in order, between the refused ones
    results = [d if d is not None else next(answers, _unanswered(r))
               for r, d in zip(request.resources, denied, strict=True)]
    log.info("alter configs", extra={"resources": [r["resource_name"] for r in results],
                                     "errors": [r["error_code"] for r in results],
                                     "replace": replace})
    return {"throttle_time": 0, "responses": results}


async def handle_list_config_resources_request(
        context: BrokerContext, request: Any, version: int
) -> shapes.ListConfigResourcesResponse:
    allowed = authz.cluster_allowed(context, authz.Op.DESCRIBE_CONFIGS)
    return {"throttle_time": 0, "config_resources": [],
            "error_code": 0 if allowed else authz.CLUSTER_AUTHORIZATION_FAILED}
