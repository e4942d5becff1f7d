"""`kraft chaos --secure`: the secured chaos cluster's settings, users, ACLs and client
configurations (pure: everything here is a function of its arguments; the shell that
writes and applies them is tools/commands/chaos.py).

The cluster is the launcher's `--tls` one (tools/cluster.py, tools/tls_certs.py): mutual
TLS between every node, each node's certificate `CN=kraft-node-<id>` bound to the node id
it claims. On top of it:
- the brokers' Kafka listener (named SSL by the launcher) is SASL_SSL with SCRAM-SHA-512
  only, and takes no client certificate (Kafka's default for a SASL_SSL listener since
  KIP-684): clients prove who they are by SCRAM, over TLS checked against the cluster's
  CA; the brokers replicate over it as the user `broker`;
- the StandardAuthorizer is on, without `allow.everyone.if.no.acl.found`. super.users:
  the nodes' certificates, `broker` (the replica fetchers' login) and the operator's
  client certificate (`CN=kraft-admin`, DIR/admin.properties: the harness's own
  DescribeQuorum, BrokerStatus, final topic listing and the ACL set-up);
- the workload's principals get exactly the ACLs they use (`workload_acls`):
  `chaos-producer` WRITE and DESCRIBE on the topics it produces to and IDEMPOTENT_WRITE
  on the cluster (the idempotent producers' InitProducerId); `chaos-consumer` READ on
  the group's topic and its group; `chaos-checker` (the final read) READ on every
  workload topic; the admin churn, which speaks the controllers' admin RPCs under mutual
  TLS, is its own certificate `CN=chaos-admin,O=kraft-py` with CREATE on every workload
  topic, DESCRIBE on the stable and churned ones and DELETE on the churned ones.
  Nothing else is granted: a request outside these ACLs is refused and shows up in the
  history as a failed or unknown operation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from metadata.authorizer import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

MECHANISM = "SCRAM-SHA-512"
BROKER_USER = "broker"  # the brokers' inter-broker login (a super user)
PRODUCER_USER = "chaos-producer"
CONSUMER_USER = "chaos-consumer"
CHECKER_USER = "chaos-checker"
USERS = (BROKER_USER, PRODUCER_USER, CONSUMER_USER, CHECKER_USER)
ADMIN_CN = "chaos-admin"  # the admin churn's client certificate
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# the launcher names a TLS cluster's broker listener SSL; secured, it carries SASL_SSL
KAFKA_LISTENER = "SSL"
PROTOCOL_MAP = f"CONTROLLER:SSL,{KAFKA_LISTENER}:SASL_SSL,STATUS:SSL"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientSecurity:
    """How a workload client reaches the brokers: SASL_SSL, one SCRAM user, the CA."""

    ca_file: str
    passwords: Mapping[str, str]  # user -> password
    mechanism: str = MECHANISM

    def kafka_python(self, user: str) -> dict[str, Any]:
        """kafka-python's keyword arguments (hostname checked: the certificates name
        IP 127.0.0.1, which the clients dial)."""
        return {"security_protocol": "SASL_SSL", "sasl_mechanism": self.mechanism,
                "sasl_plain_username": user, "sasl_plain_password": self.passwords[user],
                "ssl_cafile": self.ca_file, "ssl_check_hostname": True}

    def confluent(self, user: str) -> dict[str, Any]:
        """librdkafka's configuration keys (confluent-kafka)."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": self.mechanism,
                "sasl.username": user, "sasl.password": self.passwords[user],
                "ssl.ca.location": self.ca_file,
                "ssl.endpoint.identification.algorithm": "https"}


def jaas_config(user: str, password: str) -> str:
    """Kafka's JAAS line for a SCRAM login (the brokers' own, for replication)."""
    return ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{user}" password="{password}";')


def node_settings(*, node_principals: Iterable[str], operator_principal: str,
                  broker_password: str) -> dict[str, Any]:
    """The settings every node of the secured chaos cluster gets on top of the
    launcher's TLS ones (they replace its super.users, which names the nodes only)."""
    super_users = [*node_principals, f"User:{BROKER_USER}", operator_principal]
    return {
        "listener.security.protocol.map": PROTOCOL_MAP,
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        f"listener.name.{KAFKA_LISTENER.lower()}.{MECHANISM.lower()}.sasl.jaas.config":
            jaas_config(BROKER_USER, broker_password),
        "authorizer.class.name": AUTHORIZER,
        "super.users": ";".join(dict.fromkeys(super_users)),
    }


def _allow(resource_type: ResourceType, name: str, principal: str,
           operation: AclOperation) -> AclBinding:
    return AclBinding(resource_type=int(resource_type), resource_name=name,
                      pattern_type=int(PatternType.LITERAL), principal=principal, host="*",
                      operation=int(operation), permission_type=int(AclPermissionType.ALLOW))


def workload_acls(*, admin_principal: str, churn_topics: Iterable[str],
                  stable_topics: Iterable[str], group_topic: str, group: str
                  ) -> list[AclBinding]:
    """Every ACL the workload needs, literal, ALLOW, any host; nothing more."""
    churn, stable = list(churn_topics), list(stable_topics)
    produced = [*stable, *churn, group_topic]
    topic, op = ResourceType.TOPIC, AclOperation
    producer, consumer = f"User:{PRODUCER_USER}", f"User:{CONSUMER_USER}"
    acls = [_allow(topic, t, producer, o) for t in produced for o in (op.WRITE, op.DESCRIBE)]
    acls.append(_allow(ResourceType.CLUSTER, CLUSTER_NAME, producer, op.IDEMPOTENT_WRITE))
    # READ implies DESCRIBE (Metadata, ListOffsets, OffsetFetch), as in Kafka
    acls.append(_allow(topic, group_topic, consumer, op.READ))
    acls.append(_allow(ResourceType.GROUP, group, consumer, op.READ))
    acls += [_allow(topic, t, f"User:{CHECKER_USER}", op.READ) for t in produced]
    # the admin churn creates every topic (the group's in its set-up), describes the
    # stable and churned ones by name and by ID, and deletes the churned ones
    acls += [_allow(topic, t, admin_principal, op.CREATE) for t in produced]
    acls += [_allow(topic, t, admin_principal, op.DESCRIBE) for t in [*stable, *churn]]
    acls += [_allow(topic, t, admin_principal, op.DELETE) for t in churn]
    return acls

