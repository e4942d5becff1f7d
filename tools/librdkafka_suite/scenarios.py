"""The clusters librdkafka's tests run against. A scenario is a cluster's broker settings
(and whether its listeners are TLS) plus what a test gets to reach it: test.conf lines
and the test-runner's environment (its own scenario name, `TEST_SCENARIO`, and for SSL
the certificate files trivup would have made, `SSL_*`).

The rule of which test runs where: the scenario `RUNNER_SCENARIOS` names for it (by full
name, then by number), else the first of test.c's own scenarios for it that has a
cluster here (`default`, `noautocreate`); a test none fits is an exception
(`outcomes.derived_exception`). The runner starts one cluster per scenario in turn, in
the order of `SCENARIOS` (the default first), and stops it by pid before the next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT = "default"
# librdkafka's default scenario (its tests/scenarios/default.json): auto-created topics
# with 4 partitions of 3 replicas; Kafka's built-in group.initial.rebalance.delay.ms, which
# its tests' clusters run with (consumers started together share a first round); fewer
# offsets partitions than Kafka's 50, as each is a replicated log on two shared cores
BROKER_SETTINGS: Mapping[str, object] = {
    "auto.create.topics.enable": True, "num.partitions": 4, "default.replication.factor": 3,
    "group.initial.rebalance.delay.ms": 3000, "offsets.topic.num.partitions": 10}

# trivup's SASL user (its `sasl_users` default) and the brokers' own login, which they
# replicate from each other with
SASL_USER, SASL_PASSWORD = "testuser", "testpass"
BROKER_SASL_USER, BROKER_SASL_PASSWORD = "admin", "admin-secret"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              f'username="{BROKER_SASL_USER}" password="{BROKER_SASL_PASSWORD}" '
              f'user_{BROKER_SASL_USER}="{BROKER_SASL_PASSWORD}" '
              f'user_{SASL_USER}="{SASL_PASSWORD}";')


@dataclass(frozen=True)
class Scenario:
    name: str
    settings: Mapping[str, object]  # every node's, over the launcher's own
    runner_scenario: str = DEFAULT  # test-runner's TEST_SCENARIO: which tests it runs
    client_conf: Mapping[str, str] = field(default_factory=dict)  # test.conf lines
    tls: bool = False  # every listener SSL (`tools.cluster`), and trivup's SSL_* files


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario(DEFAULT, BROKER_SETTINGS),
    # librdkafka's tests/scenarios/noautocreate.json
    Scenario("noautocreate", {**BROKER_SETTINGS, "auto.create.topics.enable": False},
             runner_scenario="noautocreate"),
    # the brokers' Kafka listener on SSL with mutual TLS (ssl.client.auth=required, as
    # trivup's), the client's certificate signed by the cluster's CA
    Scenario("ssl", BROKER_SETTINGS, client_conf={"security.protocol": "SSL"}, tls=True),
    # the launcher's PLAINTEXT-named listener mapped to SASL_PLAINTEXT, PLAIN users from
    # the JAAS entry (Kafka's PlainLoginModule options)
    Scenario("sasl_plain", {
        **BROKER_SETTINGS,
        "listener.security.protocol.map":
            "CONTROLLER:PLAINTEXT,PLAINTEXT:SASL_PLAINTEXT,STATUS:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config": PLAIN_JAAS},
        client_conf={"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                     "sasl.username": SASL_USER, "sasl.password": SASL_PASSWORD}),
)}

# what librdkafka's own harness (tests/LibrdkafkaTestApp.py) writes into test.conf: each
# test's own timeout doubled (0081_admin's 180 s are too few for its sub-tests here)
TIMEOUT_MULTIPLIER = 2

# tests that run on a scenario test.c does not give them (it leaves that to trivup's
# command line): test number or full name -> scenario
RUNNER_SCENARIOS: dict[str, str] = {
    "0097": "ssl",  # SSL_* files and an SSL listener, or it skips itself
    "0135": "sasl_plain",  # sasl.username/sasl.password, or it skips itself
}


def scenario_for(name: str, test_c_scenarios: str) -> str | None:
    """The scenario test `name` runs on, given test.c's scenario list for it
    (`default,ak23`); None when no cluster here fits it."""
    listed = RUNNER_SCENARIOS.get(name) or RUNNER_SCENARIOS.get(name[:4])
    if listed is not None:
        return listed
    return next((s for s in test_c_scenarios.split(",") if s in SCENARIOS), None)


@dataclass(frozen=True)
class ClientFiles:
    """A client's certificate files in trivup's forms (`client_certs.write_client_files`):
    the key and certificate as PEM and DER, a PKCS#12 of key, certificate and CA under
    `password`, the CA as PEM and DER, and a PEM of two CAs (an unused one first)."""
    priv_pem: Path
    priv_der: Path
    pub_pem: Path  # the certificate, then the CA's
    pub_der: Path
    pkcs: Path
    ca_pem: Path
    ca_der: Path
    all_cas_pem: Path
    password: str

    def conf(self) -> dict[str, str]:
        """The test.conf lines trivup writes for them."""
        return {"ssl.ca.location": str(self.ca_pem),
                "ssl.certificate.location": str(self.pub_pem),
                "ssl.key.location": str(self.priv_pem), "ssl.key.password": self.password}

    def environment(self) -> dict[str, str]:
        """trivup's SSL_* variables naming them (what 0097_ssl_verify reads), and
        SSL_client_auth as the brokers have it."""
        return {"SSL_priv_pem": str(self.priv_pem), "SSL_priv_der": str(self.priv_der),
                "SSL_pub_pem": str(self.pub_pem), "SSL_pub_der": str(self.pub_der),
                "SSL_pkcs": str(self.pkcs), "SSL_ca_pem": str(self.ca_pem),
                "SSL_ca_der": str(self.ca_der), "SSL_all_cas_pem": str(self.all_cas_pem),
                "SSL_password": self.password, "SSL_client_auth": "required"}


def conf_text(scenario: Scenario, brokers: Sequence[str],
                   client: ClientFiles | None = None) -> str:
    """The test.conf of a run on `scenario`'s cluster, whose brokers are `brokers`."""
    if scenario.tls and client is None:
        raise ValueError(f"scenario {scenario.name} needs the client's certificate files")
    lines = {"metadata.broker.list": ",".join(brokers),
             "test.timeout.multiplier": str(TIMEOUT_MULTIPLIER), **scenario.client_conf,
             **(client.conf() if client is not None else {})}
    return "".join(f"{key}={value}\n" for key, value in lines.items())


def runner_environment(scenario: Scenario, client: ClientFiles | None = None
                       ) -> dict[str, str]:
    """What the test-runner's environment adds on `scenario`: its scenario name, and the
    SSL_* files."""
    return {"TEST_SCENARIO": scenario.runner_scenario,
            **(client.environment() if client is not None else {})}


def file_suffix(scenario: str) -> str:
    """What a scenario's cluster directory, test.conf and logs carry after their names
    (`cluster-ssl`, `test-ssl.conf`, `test-0097-ssl.log`): nothing for the default
    scenario, so that its files keep the names they had before there were others."""
    return "" if scenario == DEFAULT else f"-{scenario}"
