"""AlterUserScramCredentials (API 51) and DescribeUserScramCredentials (API 50) on the
broker's Kafka listener (KIP-554), forwarded to the active controller as
`metadata.admin` RPCs, as Kafka's brokers forward them.

The client sends, per upsertion, a salt, an iteration count and the salted password
(PBKDF2 of the password; the password itself never leaves the client). The broker turns
the salted password into the two keys a SCRAM server keeps (`broker.kafka.sasl.scram`) before
forwarding, so neither the controller nor the metadata log ever sees what a client could
log in with. The answer waits until this broker's own image shows the change, as
CreateTopics does (`broker.kafka.admin.admin_api`), so a client that logs in right after
finds its credential here.

With the authorizer on (`broker.kafka.authz`), as in Kafka: altering needs ALTER on the
cluster, describing DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED, and
nothing is forwarded).
"""

from __future__ import annotations

from typing import Any

from broker.kafka import authz
from broker.kafka import response_shapes as shapes
from broker.kafka.admin.admin_api import forward_to_controller, kafka_error, request_timeout_s
from broker.kafka.context import BrokerContext
from broker.kafka.sasl.scram import MECHANISMS_BY_TYPE, credential_from_salted_password
from metadata.admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from metadata.scram_credentials import SCRAM_MECHANISMS

UNKNOWN_MECHANISM = "UNKNOWN"  # Kafka's ScramMechanism.UNKNOWN (type 0)


def _mechanism_name(kafka_type: int) -> str:
    mechanism = MECHANISMS_BY_TYPE.get(int(kafka_type))
    return UNKNOWN_MECHANISM if mechanism is None else mechanism.name


def _upsertion(entry: Any) -> ScramCredentialUpsertion:
    name = _mechanism_name(entry.mechanism)
    mechanism = MECHANISMS_BY_TYPE.get(int(entry.mechanism))
    if mechanism is None or not entry.salted_password:  # the controller refuses it
        return ScramCredentialUpsertion(name=entry.name, mechanism=name,
                                        iterations=int(entry.iterations), salt=entry.salt,
                                        stored_key=b"", server_key=b"")
    credential = credential_from_salted_password(
        mechanism, salt=entry.salt, salted=entry.salted_password,
        iterations=int(entry.iterations))
    return ScramCredentialUpsertion(
        name=entry.name, mechanism=name, iterations=int(entry.iterations), salt=entry.salt,
        stored_key=credential.stored_key, server_key=credential.server_key)


async def handle_alter_user_scram_credentials_request(
        context: BrokerContext, request: Any, version: int
        ) -> shapes.AlterUserScramCredentialsResponse:
    admin = AlterUserScramCredentialsRequest(
        deletions=tuple(ScramCredentialDeletion(name=d.name,
                                                mechanism=_mechanism_name(d.mechanism))
                        for d in request.deletions),
        upsertions=tuple(_upsertion(u) for u in request.upsertions))
    timeout_s = request_timeout_s(request, context)
    response: Any
    message: str | None
    results: list[shapes.UserResult]
    if not authz.cluster_allowed(context, authz.Op.ALTER):
        response, error, message = (
            None, authz.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is not allowed")
    else:
        response, error, message = await forward_to_controller(context, admin, timeout_s)
    if response is None:
        users = dict.fromkeys([d.name for d in admin.deletions]
                              + [u.name for u in admin.upsertions])
        results = [{"user": user, "error_code": error, "error_message": message}
                   for user in users]
    else:
        assert isinstance(response, AlterUserScramCredentialsResponse)
        done = {r.user for r in response.results if r.error_code == 0}
        wanted = {(u.name, u.mechanism): u.stored_key for u in admin.upsertions
                  if u.name in done}
        gone = {(d.name, d.mechanism) for d in admin.deletions if d.name in done}
        if wanted or gone:
            await context.wait_image(lambda image: all(
                (c := image.scram_credentials.get(key)) is not None and c.stored_key == value
                for key, value in wanted.items()) and not any(
                key in image.scram_credentials for key in gone), timeout_s)
        results = [{"user": r.user, "error_code": kafka_error(r.error_code),
                    "error_message": r.error_message} for r in response.results]
    return {"throttle_time": 0, "results": results}


async def handle_describe_user_scram_credentials_request(
        context: BrokerContext, request: Any, version: int
        ) -> shapes.DescribeUserScramCredentialsResponse:
    users = None if request.users is None else tuple(u.name for u in request.users)
    response: Any
    message: str | None
    if not authz.cluster_allowed(context, authz.Op.DESCRIBE):
        response, error, message = (
            None, authz.CLUSTER_AUTHORIZATION_FAILED, "DESCRIBE on the cluster is not allowed")
    else:
        response, error, message = await forward_to_controller(
            context, DescribeUserScramCredentialsRequest(users=users or None),
            request_timeout_s(request, context))
    if response is None:
        return {"throttle_time": 0, "error_code": error, "error_message": message,
                "results": []}
    assert isinstance(response, DescribeUserScramCredentialsResponse)
    return {
        "throttle_time": 0, "error_code": kafka_error(response.error_code),
        "error_message": response.error_message,
        "results": [{"user": r.user, "error_code": kafka_error(r.error_code),
                     "error_message": r.error_message,
                     "credential_infos": [
                         {"mechanism": SCRAM_MECHANISMS[c.mechanism][0],
                          "iterations": c.iterations}
                         for c in r.credential_infos if c.mechanism in SCRAM_MECHANISMS]}
                    for r in response.results]}
