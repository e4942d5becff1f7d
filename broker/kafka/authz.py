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
# the operations each resource type has, as Kafka reports them in `authorized_operations`
TOPIC_OPERATIONS = (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE,
                    Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
CLUSTER_OPERATIONS = (Op.CREATE, Op.ALTER, Op.DESCRIBE, Op.CLUSTER_ACTION,
                      Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE)
GROUP_OPERATIONS = (Op.READ, Op.DELETE, Op.DESCRIBE)
_OPERATIONS = {ResourceType.TOPIC: TOPIC_OPERATIONS, ResourceType.GROUP: GROUP_OPERATIONS,
               ResourceType.CLUSTER: CLUSTER_OPERATIONS}
NOT_ASKED = -(2**31)  # Kafka's `authorized_operations` when the request did not ask
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


def authorized_operations(context: BrokerContext, resource_type: ResourceType,
                          name: str) -> int:
    """Kafka's bit field of the operations the caller may perform on the resource (bit
    N: the operation whose code is N)."""
    return sum(1 << int(op) for op in _OPERATIONS[resource_type]
               if allowed(context, op, resource_type, name))


def every_operation(resource_type: ResourceType) -> int:
    """The bit field with every operation of the resource type (no authorizer)."""
    return sum(1 << int(op) for op in _OPERATIONS[resource_type])


def any_topic_allowed(context: BrokerContext, operation: int) -> bool:
    """`operation` on at least one topic (Kafka 3: an idempotent producer with WRITE on
    some topic needs no IDEMPOTENT_WRITE on the cluster)."""
    settings = context.authorizer
    if not settings.enabled:
        return True
    session = current_session()
    return authorize_any(context.image.acls, session.principal, session.client_host,
                         operation, ResourceType.TOPIC, settings)
