"""`kraft produce` then `kraft consume` as a newcomer runs them, on real processes (1 voter +
1 broker): 3 keyed records (`--key-separator`) and 3 unkeyed ones are all read back by a
plain `kraft consume --from-beginning --max-messages 6`, which then stops by itself with
rc 0; `--property print.key=true` prints the keys (`null` for none); `--ordered` delivers
the unkeyed records too; without `--from-beginning` a new group starts at the end; a
mistyped topic is one line naming it and the close match, rc 1, in every verb; `--list`
on a cluster without topics prints nothing; the plaintext broker named by address, with
no client properties or a PLAINTEXT file, takes and gives records with nothing on
stderr."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.quorum_support import FAST_SETTINGS, kraft, running_cluster
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

TOPIC = "orders"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("console") / "cluster", FAST_SETTINGS,
                         voters=1, brokers=1) as started:
        empty = kraft("topics", "--cluster", str(started.directory), "--list")
        assert (empty.returncode, empty.stdout) == (0, "")  # no blank line
        created = kraft("topics", "--cluster", str(started.directory), "--create",
                        "--topic", TOPIC, "--partitions", "1", "--replication-factor", "1",
                        "--ordered")
        assert created.returncode == 0, created.stderr
        directory = str(started.directory)
        keyed = kraft("produce", "--cluster", directory, "--topic", TOPIC,
                      "--key-separator", ":", "k1:v1", "k2:v2", "k3:v3")
        assert keyed.returncode == 0, keyed.stderr
        unkeyed = kraft("produce", "--cluster", directory, "--topic", TOPIC, "u1", "u2", "u3")
        assert unkeyed.returncode == 0, unkeyed.stderr
        yield started


def test_plain_consume_reads_keyed_and_unkeyed_records(cluster: Cluster) -> None:
    # stopped at the 6th record: given an hour, it ends within the harness's guard
    consumed = kraft("consume", "--cluster", str(cluster.directory), "--topic", TOPIC,
                     "--from-beginning", "--max-messages", "6", "--property", "print.key=true",
                     "--duration", "3600", timeout=120)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [
        "k1\tv1", "k2\tv2", "k3\tv3", "null\tu1", "null\tu2", "null\tu3"]


def test_ordered_consume_delivers_unkeyed_records(cluster: Cluster) -> None:
    consumed = kraft("consume", "--cluster", str(cluster.directory), "--topic", TOPIC,
                     "--group", "ordered-g", "--ordered", "--json", "--max-messages", "6",
                     "--duration", "25")
    assert consumed.returncode == 0, consumed.stderr
    rows = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert [(r["key"], r["value"]) for r in rows] == [
        ("k1", "v1"), ("k2", "v2"), ("k3", "v3"), (None, "u1"), (None, "u2"), (None, "u3")]


def test_new_group_without_from_beginning_starts_at_the_end(cluster: Cluster) -> None:
    consumed = kraft("consume", "--cluster", str(cluster.directory), "--topic", TOPIC,
                     "--duration", "3")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == ""


def test_a_mistyped_topic_is_one_line_with_the_close_match(cluster: Cluster) -> None:
    consumed = kraft("consume", "--cluster", str(cluster.directory), "--topic", "ordres",
                     "--duration", "3600", timeout=120)  # refused at once, not waited out
    assert consumed.returncode == 1
    assert consumed.stderr.strip() == \
        "error: UNKNOWN_TOPIC_OR_PARTITION (3): no topic named 'ordres' (did you mean 'orders'?)"


@pytest.mark.parametrize("verb", [
    ["topics", "--describe", "--topic", "ordres"],
    ["topics", "--delete", "--topic", "ordres"],
    ["configs", "--entity-type", "topics", "--entity-name", "ordres", "--describe"],
    ["produce", "--topic", "ordres", "v"],
])
def test_every_verb_names_a_mistyped_topic_in_one_line(cluster: Cluster,
                                                       verb: list[str]) -> None:
    result = kraft(verb[0], "--cluster", str(cluster.directory), *verb[1:])
    assert result.returncode == 1
    assert result.stderr.strip() == ("error: UNKNOWN_TOPIC_OR_PARTITION (3): no topic named "
                                     "'ordres' (did you mean 'orders'?)")


def test_a_value_without_the_key_separator_is_a_usage_error(cluster: Cluster) -> None:
    produced = kraft("produce", "--cluster", str(cluster.directory), "--topic", TOPIC,
                     "--key-separator", ":", "k:v", "novalue")
    assert produced.returncode == 2
    assert "record 2 ('novalue') has no key separator ':'" in produced.stderr


@pytest.mark.parametrize("command_config", [None, "security.protocol=PLAINTEXT\n",
                                            "security.protocol=PLAINTEXT\n"
                                            "sasl.mechanism=PLAIN\n"])
def test_plaintext_brokers_by_address_take_records_without_any_login(
        cluster: Cluster, tmp_path: Path, command_config: str | None) -> None:
    """No SASL on the listener and none configured (or a PLAINTEXT file whose stray
    sasl.* keys Kafka's clients ignore too): no login, no warning, records round-trip."""
    broker = cluster.node(2).client_address
    assert broker is not None
    extra = []
    if command_config is not None:
        (tmp_path / "client.properties").write_text(command_config)
        extra = ["--command-config", str(tmp_path / "client.properties")]
    value = f"plain-{len(extra)}-{len(command_config or '')}"
    produced = kraft("produce", "--bootstrap-server", broker, "--topic", TOPIC, value, *extra,
                     "--json")
    assert (produced.returncode, produced.stderr) == (0, "")
    records = json.loads(produced.stdout)["base_offset"] + 1  # the partition's, ours last
    consumed = kraft("consume", "--bootstrap-server", broker, "--topic", TOPIC,
                     "--from-beginning", "--max-messages", str(records), "--duration", "25",
                     *extra)
    assert (consumed.returncode, consumed.stderr) == (0, "")
    assert consumed.stdout.splitlines()[-1] == value
