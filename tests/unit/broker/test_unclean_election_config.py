"""`unclean.leader.election.enable` as a broker describes it: a topic's own value is
DYNAMIC_TOPIC_CONFIG; a topic that sets none shows this node's key (the cluster's
default, tools/config/keys.py) as STATIC_BROKER_CONFIG when it is true, Kafka's false
as DEFAULT_CONFIG otherwise."""

from __future__ import annotations

from pathlib import Path

import trio
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.static.primitive import i8

from broker.kafka.admin.configs_api import (
    handle_describe_configs_request,
)
from broker.kafka.context import BrokerContext
from broker.kafka.replication.replica import ReplicaManager
from metadata import records as rec
from metadata.broker_configs import DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG
from metadata.delta import replay
from metadata.image import MetadataImage
from raft.common.uuid import Uuid
from tools.config import from_mapping

KEY = "unclean.leader.election.enable"


def _image() -> MetadataImage:
    own, unset = Uuid(1 << 64 | 1), Uuid(2 << 64 | 1)
    return replay(enumerate([rec.Topic(name="own", topic_id=own),
                             rec.TopicConfig(topic_id=own, key=KEY, value="false"),
                             rec.Topic(name="unset", topic_id=unset)]))


async def _described(tmp_path: Path, cluster_default: bool) -> dict[str, tuple[str, int]]:
    image = _image()
    context = BrokerContext(
        broker_id=1, cluster_id="c", image=lambda: image, controller=None,
        replicas=ReplicaManager(log_dir=tmp_path, broker_id=1, image=lambda: image),
        unclean_election_default=cluster_default)
    request = DescribeConfigsRequest(resources=tuple(DescribeConfigsResource(
        resource_type=i8(2), resource_name=name, configuration_keys=(KEY,))
        for name in ("own", "unset")), include_synonyms=False, include_documentation=False)
    with trio.fail_after(10):
        answer = await handle_describe_configs_request(context, request, 4)
    return {r["resource_name"]: (r["configs"][0]["value"], r["configs"][0]["config_source"])
            for r in answer["results"]}


async def test_the_nodes_default_is_described_where_a_topic_sets_none(tmp_path: Path) -> None:
    assert await _described(tmp_path, True) == {"own": ("false", DYNAMIC_TOPIC_CONFIG),
                                                "unset": ("true", STATIC_BROKER_CONFIG)}
    assert await _described(tmp_path, False) == {"own": ("false", DYNAMIC_TOPIC_CONFIG),
                                                 "unset": ("false", DEFAULT_CONFIG)}


def test_the_key_reaches_the_controller_and_the_broker_settings(tmp_path: Path) -> None:
    config = from_mapping({
        "node.id": 4, "process.roles": "broker,controller",
        "controller.quorum.voters": "4@127.0.0.1:19091",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:19091",
        "log.dirs": str(tmp_path), KEY: "true"})
    assert config.unclean_leader_election_enable
    assert config.broker_settings().unclean_election_default
