"""The verbs that only ask the controllers start without the heavy imports.

`kraft quorum describe` and `kraft topics --describe` with `--cluster DIR` speak the
controllers' msgpack protocol: neither the Kafka codec (kio), Trio, cryptography nor the
node configuration (tools.config) is needed, and importing them cost each verb's start
about 0.4 s. SASL settings in a
`--command-config` file are read without the codec too (it is loaded on the first SASL
connection). The cluster here is laid out but not started, so each verb runs its whole
path up to a refused connection (exit 1); tests/integration/test_cli_startup.py runs them
against a live cluster.
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.support.cli_imports import run_verb
from tools.cluster import Cluster

SASL_PROPERTIES = """\
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-256
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="alice" password="alice-secret";
"""


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    cluster = Cluster.create(tmp_path_factory.mktemp("startup") / "c", voters=3, brokers=1)
    return str(cluster.directory)


@pytest.mark.parametrize("verb", [
    ["quorum", "describe", "--cluster", "DIR", "--status", "--timeout", "1"],
    ["quorum", "describe", "--cluster", "DIR", "--replication", "--timeout", "1"],
    ["topics", "--cluster", "DIR", "--describe", "--timeout", "1"],
    ["topics", "--cluster", "DIR", "--list", "--timeout", "1"]])
def test_a_controller_verb_loads_no_kafka_codec_nor_trio(cluster_dir: str,
                                                         verb: list[str]) -> None:
    run = run_verb(*(cluster_dir if a == "DIR" else a for a in verb))
    assert run.exit_code == 1, run.stderr  # the nodes are not running: refused
    assert run.stderr.startswith("error: ")
    assert run.loaded == []


def test_sasl_settings_are_read_without_the_kafka_codec(tmp_path: Path) -> None:
    properties = tmp_path / "sasl.properties"
    properties.write_text(SASL_PROPERTIES)
    probe = ("import sys; from tools.cli import build_parser, _client_tls; "
             "args = build_parser('topics').parse_args(sys.argv[1:]); _client_tls(args); "
             "login = args.client_sasl; "
             "print(login.mechanism, login.username, 'kio' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe, "topics", "--bootstrap-server",
                           "127.0.0.1:9", "--command-config", str(properties), "--describe"],
                          capture_output=True, text=True, check=False, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["SCRAM-SHA-256", "alice", "False"]


def test_a_bad_sasl_command_config_is_still_one_error_line(tmp_path: Path,
                                                          cluster_dir: str) -> None:
    properties = tmp_path / "sasl.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")
    run = run_verb("topics", "--cluster", cluster_dir, "--command-config", str(properties),
                   "--describe", "--timeout", "1")
    assert run.exit_code == 2
    assert run.stderr.strip().splitlines() == [
        f"error: --command-config: {properties}: sasl.jaas.config is required with "
        "security.protocol=SASL_PLAINTEXT"]


def test_version_is_looked_up_when_asked_for() -> None:
    done = subprocess.run([sys.executable, "-m", "tools.cli", "--version"],
                          capture_output=True, text=True, check=False, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"kraft {metadata.version('kraft-py')}\n"


def test_a_verb_that_loads_kio_leaves_hypothesis_out(tmp_path: Path) -> None:
    """kio registers hypothesis strategies at import when hypothesis is importable, and
    hypothesis then builds (and caches in ./.hypothesis) a map of every code point: 1.5 s
    at each broker's start. A `kraft` process keeps it out (`tools.cli`)."""
    run = run_verb("produce", "--bootstrap-server", "127.0.0.1:9", "--topic", "t",
                   "--timeout", "1", "v", cwd=tmp_path)
    assert run.exit_code == 1, run.stderr  # nothing listens on port 9
    assert "kio" in run.loaded
    assert "hypothesis" not in run.loaded
    assert list(tmp_path.iterdir()) == []
