"""The librdkafka tests this project does not run against its cluster, each with why
(test number or full test name -> reason). Tests test.c itself flags as needing no
broker, a manual run, another scenario or a known librdkafka fix are exceptions without
a row here (`outcomes.derived_exception`). A reason names what the test needs that a
kraft-py cluster started by `tools/librdkafka_suite/__main__.py` does not give it.
"""

from __future__ import annotations

TRANSACTIONS = ("transactions, which this project refuses (TRANSACTIONAL_ID_AUTHORIZATION_"
                "FAILED, docs/kafka-compatibility.md)")
KAFKA_TOPICS_SH = ("runs Kafka's bin/kafka-topics.sh from KAFKA_PATH (test_kafka_topics) to "
                   "create its topic; there is no Kafka installation here")
KAFKA_ACLS_SH = ("runs Kafka's bin/kafka-acls.sh from KAFKA_PATH (test_kafka_cmd) to grant "
                 "and revoke ACLs, on a cluster with an authorizer; there is no Kafka "
                 "installation here and this cluster runs without one")

EXCEPTIONS: dict[str, str] = {
    "0052": KAFKA_TOPICS_SH + " (message.timestamp.type=LogAppendTime)",
    "0077": KAFKA_TOPICS_SH + " (cleanup.policy=compact, segment.bytes)",
    "0097": ("needs SSL listeners and the certificates trivup makes (SSL_* environment "
             "variables); this cluster's listeners are PLAINTEXT"),
    "0098": ("transactions (init_transactions, read_committed), which this project "
             "refuses (docs/kafka-compatibility.md); also needs RapidJSON and "
             "KAFKA_PATH's Java test producer"),
    "0115": KAFKA_ACLS_SH + " (WRITE denied to the producer)",
    "0119": KAFKA_ACLS_SH + " (READ denied to the consumer)",
    "0126": ("SASL/OAUTHBEARER with an OIDC token endpoint (trivup's); this cluster has "
             "no SASL listener and no OAUTHBEARER"),
    "0129": ("transactions: a transactional producer writes aborted records; this "
             "project refuses transactional producers (TRANSACTIONAL_ID_AUTHORIZATION_"
             "FAILED, docs/kafka-compatibility.md)"),
    "0135": ("SASL PLAIN or SCRAM credentials set at run time; this cluster's listeners "
             "are PLAINTEXT"),
}

# with --full only: tests whose quick sub-tests run here but a full-mode one does not
FULL_MODE_EXCEPTIONS: dict[str, str] = {
    "0061": "do_test_consumer_lag(with_txns) produces aborted transactions: " + TRANSACTIONS,
    "0137": ("do_test_consume_batch_control_msgs produces transactional control records: "
             + TRANSACTIONS),
}
