"""`kraft chaos --secure`: after healing, check that the security the run claims is in
force, by requests that must be refused (a secured run that passed with the authorizer
or SASL silently off would prove nothing):
- `admin_delete_stable`: the admin certificate deletes a stable topic (it has DELETE on
  the churned topics only): TOPIC_AUTHORIZATION_FAILED from the controller;
- `consumer_produce`: `chaos-consumer` produces to a stable topic (it may read the
  group's topic only): TOPIC_AUTHORIZATION_FAILED;
- `wrong_password`: `chaos-checker` logs in with a wrong password: no metadata, and
  librdkafka reports _AUTHENTICATION;
- `plaintext_client`: a client without TLS or SASL: no broker answers its metadata
  request.
(confluent-kafka: it reports a failed login within the probe's 5 s, where kafka-python
retries its bootstrap for 30 s.)
Each probe's outcome is `refused` (as it must be), `allowed` (a hole: the run fails) or
`inconclusive: ...` (neither, e.g. a timeout; reported, not failed). A probe that was
allowed changed nothing the checker would miss: a deleted stable topic or a stray record
in it is a violation of its own."""

from __future__ import annotations

import logging
import ssl
from typing import Any

from metadata.admin import DeleteTopicsRequest, DeleteTopicsResponse, DeleteTopicState
from raft.common.errors import ErrorCode
from tools.chaos.security import CHECKER_USER, CONSUMER_USER, ClientSecurity
from tools.chaos.workload import AdminCaller, error_name

log = logging.getLogger(__name__)

REFUSED = "refused"
ALLOWED = "allowed"
PROBE_BLOCK_MS = 5000


def probe(*, bootstrap: str, controllers: list[str], cluster_id: str, stable_topic: str,
          clients: ClientSecurity, admin_ssl: ssl.SSLContext) -> dict[str, str]:
    """Every probe's outcome, by name."""
    return {"admin_delete_stable": _admin_delete(controllers, cluster_id, stable_topic,
                                                 admin_ssl),
            "consumer_produce": _produce(bootstrap, stable_topic,
                                         clients.confluent(CONSUMER_USER)),
            "wrong_password": _connect(bootstrap, {**clients.confluent(CHECKER_USER),
                                                   "sasl.password": "not-it"},
                                       refusal="_AUTHENTICATION"),
            "plaintext_client": _connect(bootstrap, {}, refusal=None)}


def _admin_delete(controllers: list[str], cluster_id: str, topic: str,
                  admin_ssl: ssl.SSLContext) -> str:
    caller = AdminCaller(controllers, cluster_id, admin_ssl)
    response, _ = caller.call(DeleteTopicsRequest(topics=(DeleteTopicState(name=topic),)),
                              is_write=True)
    code = getattr(response, "top_level_error", None)
    if isinstance(response, DeleteTopicsResponse):
        code = response.responses[0].error_code
    if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
        return REFUSED
    if code == 0:
        return ALLOWED
    return f"inconclusive: {'no answer' if code is None else error_name(code)}"


def _client(bootstrap: str, login: dict[str, Any], errors: list[str]) -> Any:
    import confluent_kafka
    return confluent_kafka.Producer({
        **login, "bootstrap.servers": bootstrap, "acks": "all", "log_level": 0,
        "message.timeout.ms": PROBE_BLOCK_MS, "error_cb": lambda e: errors.append(e.name())})


def _produce(bootstrap: str, topic: str, login: dict[str, Any]) -> str:
    """One acks=all send to `topic` with these librdkafka login settings."""
    errors: list[str] = []
    producer = _client(bootstrap, login, errors)
    delivered: list[str | None] = []
    producer.produce(topic, value=b"probe: must be refused",
                     on_delivery=lambda error, message: delivered.append(
                         None if error is None else error.name()))
    producer.flush(PROBE_BLOCK_MS / 1000 + 5)
    if delivered == ["TOPIC_AUTHORIZATION_FAILED"]:
        return REFUSED
    if delivered == [None]:
        return ALLOWED
    return f"inconclusive: {delivered or 'no delivery report'} {sorted(set(errors))}"


def _connect(bootstrap: str, login: dict[str, Any], *, refusal: str | None) -> str:
    """Ask for metadata: an answer is ALLOWED; none is REFUSED when `refusal` (the
    error librdkafka must report, e.g. _AUTHENTICATION) was seen or none is required."""
    from confluent_kafka import KafkaException
    errors: list[str] = []
    producer = _client(bootstrap, login, errors)
    try:
        producer.list_topics(timeout=PROBE_BLOCK_MS / 1000)
    except KafkaException:
        producer.poll(1.0)  # serves the error callbacks (they are not called otherwise)
        if refusal is None or refusal in errors:
            return REFUSED
        return f"inconclusive: {sorted(set(errors))}"
    return ALLOWED
