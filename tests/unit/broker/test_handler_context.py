"""broker.kafka.handler_context: the handlers' context carries one group coordinator,
built from the broker's context and its settings, and every setting is given at
construction (nothing is bound onto the context afterwards)."""

from __future__ import annotations

from pathlib import Path

from broker.kafka.groups.coordinator import GroupCoordinator
from broker.kafka.handler_context import HandlerContext
from broker.kafka.replication.replica import ReplicaManager
from metadata.authorizer import AuthorizerSettings
from metadata.image import MetadataImage


def test_the_group_coordinator_is_built_once_from_the_context(tmp_path: Path) -> None:
    image, enabled = MetadataImage(), AuthorizerSettings(enabled=True)
    context = HandlerContext(
        broker_id=1, cluster_id="c", image=lambda: image,
        replicas=ReplicaManager(log_dir=tmp_path, broker_id=1, image=lambda: image),
        controller=None, broker_epoch=lambda: 9, kraft_version=lambda: 1, authorizer=enabled,
        offsets_topic_num_partitions=3, clock=lambda: 7.0)
    groups = context.groups
    assert isinstance(groups, GroupCoordinator)
    assert context.groups is groups
    assert groups.context is context
    assert (groups.num_partitions, groups.clock()) == (3, 7.0)
    assert (context.broker_epoch(), context.kraft_version()) == (9, 1)
    assert context.authorizer is enabled
