"""The Kafka listener's authorization checks: the caller (`current_session()`: its
principal and host), the broker's image (its ACLs) and settings (`BrokerContext.authorizer`)
in, allowed or not out, by `metadata.authorizer.authorize`.

Each handler calls these where it resolves the resource (a topic by name or ID, a
group, the cluster), and answers Kafka's error for that resource: TOPIC_AUTHORIZATION_FAILED
(29) per topic or partition, GROUP_AUTHORIZATION_FAILED (30), CLUSTER_AUTHORIZATION_FAILED
(31). With the authorizer off (the default) every check is True at once.
"""

from __future__ import annotations

from broker.kafka.context import BrokerContext
from metadata.authorizer import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    authorize,
    authorize_any,
)
from raft.common.session import current_session
from raft.common.uuid import Uuid

Op = AclOperation
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31


def allowed(context: BrokerContext, operation: int, resource_type: int, name: str) -> bool:
    settings = context.authorizer
    if not settings.enabled:
        return True
    session = current_session()
    return authorize(context.image.acls, session.principal, session.client_host, operation,
                     resource_type, name, settings)


def topic_allowed(context: BrokerContext, operation: int, name: str | None,
                  topic_id: Uuid | None = None) -> bool:
    """On the topic `name`, or the one `topic_id` names in the image. A topic ID this
    image does not know is refused: a lagging image cannot tell whose topic it is. A
    handler that answers UNKNOWN_TOPIC_ID checks the ID first; one that forwards to the
    controller lets the controller, which knows every committed ID, decide
    (`broker.kafka.admin.admin_api`)."""
    if not context.authorizer.enabled:
        return True
    if name is None:
        topic = None if topic_id is None else context.image.topic(topic_id)
        if topic is None:
            return False
        name = topic.name
    return allowed(context, operation, ResourceType.TOPIC, name)


def group_allowed(context: BrokerContext, operation: int, group_id: str) -> bool:
    return allowed(context, operation, ResourceType.GROUP, group_id)


def cluster_allowed(context: BrokerContext, operation: int) -> bool:
    return allowed(context, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def any_topic_allowed(context: BrokerContext, operation: int) -> bool:
    """`operation` on at least one topic (Kafka 3: an idempotent producer with WRITE on
    some topic needs no IDEMPOTENT_WRITE on the cluster)."""
    settings = context.authorizer
    if not settings.enabled:
        return True
    session = current_session()
    return authorize_any(context.image.acls, session.principal, session.client_host,
                         operation, ResourceType.TOPIC, settings)
