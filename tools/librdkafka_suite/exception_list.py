"""The librdkafka tests this project does not run against its clusters, each with why
(test number or full test name -> reason). Tests test.c itself flags as needing no
broker, a manual run, a scenario `scenarios.py` does not set up or a known librdkafka
fix are exceptions without a row here (`outcomes.derived_exception`). A reason names
what the test needs that no kraft-py cluster started by
`tools/librdkafka_suite/__main__.py` gives it (Kafka's shell scripts from KAFKA_PATH,
transactions, which are refused on purpose, a SASL mechanism the brokers lack, a race
in librdkafka's client).
"""

from __future__ import annotations

TRANSACTIONS = ("transactions, which this project refuses (TRANSACTIONAL_ID_AUTHORIZATION_"
                "FAILED, docs/kafka-compatibility.md)")


def kafka_topics_sh(purpose: str) -> str:
    return (f"runs Kafka's bin/kafka-topics.sh from KAFKA_PATH (test_kafka_topics) to "
            f"{purpose}; there is no Kafka installation here")


KAFKA_ACLS_SH = ("runs Kafka's bin/kafka-acls.sh from KAFKA_PATH (test_kafka_cmd) to grant "
                 "and revoke ACLs, on a cluster with an authorizer; there is no Kafka "
                 "installation here and this cluster runs without one")

EXCEPTIONS: dict[str, str] = {
    "0052": kafka_topics_sh("create its topic") + " (message.timestamp.type=LogAppendTime)",
    "0077": kafka_topics_sh("create its topic") + " (cleanup.policy=compact, segment.bytes)",
    "0097_ssl_verify": (
        "runs on the ssl scenario's cluster and passed 3 of 5 runs (2026-11-29, a loaded "
        "host): when the broker's first TLS flight arrives before the client's first "
        "SSL_connect returns, librdkafka reports its own refusal of the broker's "
        "certificate as a transport failure, not an SSL error, and the test's error "
        "callback fails on that code (docs/librdkafka-suite.md)"),
    "0098": ("transactions (init_transactions, read_committed), which this project "
             "refuses (docs/kafka-compatibility.md); also needs RapidJSON and "
             "KAFKA_PATH's Java test producer"),
    "0115": KAFKA_ACLS_SH + " (WRITE denied to the producer)",
    "0119": KAFKA_ACLS_SH + " (READ denied to the consumer)",
    "0126": ("SASL/OAUTHBEARER with an OIDC token endpoint: the brokers have no "
             "OAUTHBEARER (PLAIN and SCRAM only, broker/kafka/sasl/sasl_settings.py). "
             "Without a SASL security.protocol and sasl.oauthbearer.method=OIDC in "
             "test.conf the test skips itself; its sub-tests are all full-mode ones, and "
             "without VALID_OIDC_URL (INVALID_OIDC_URL, EXPIRED_TOKEN_OIDC_URL) those "
             "that fetch a token skip themselves"),
    "0129": ("transactions: a transactional producer writes aborted records; this "
             "project refuses transactional producers (TRANSACTIONAL_ID_AUTHORIZATION_"
             "FAILED, docs/kafka-compatibility.md)"),
}

# with --full only: tests whose quick sub-tests run here but a full-mode one does not
FULL_MODE_EXCEPTIONS: dict[str, str] = {
    "0061": "do_test_consumer_lag(with_txns) produces aborted transactions: " + TRANSACTIONS,
    "0137": ("do_test_consume_batch_control_msgs produces transactional control records: "
             + TRANSACTIONS),
    # on the noautocreate cluster both subscribe before their topics exist and get their
    # assignment once they are created; then they change the topics with kafka-topics.sh
    "0045_subscribe_update_topic_remove": kafka_topics_sh("delete its topics"),
    "0045_subscribe_update_non_exist_and_partchange": kafka_topics_sh(
        "add partitions to its topic"),
}
