"""metadata.version and kraft.version against real processes (1 voter + 1 broker, the
voter formatted at metadata.version 1, as `kraft format --release-version 0.1-IV0`
leaves it): `kraft features` through a broker, the controllers and --cluster, and
kafka-python's `update_features` / `describe_features` through the broker.

What it proves: a cluster started at level 1 refuses a partition reassignment
(UNSUPPORTED_VERSION) until metadata.version is upgraded; a dry run and validate_only
change nothing; an upgrade is a FeatureLevel record in the log and is seen by the next
ApiVersions on the broker; a downgrade that might lose metadata and a level out of range
are refused with Kafka's errors; kraft.version 0 -> 1 through the broker's UpdateFeatures
takes the raft leader's path (the voters move into the log)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metadata import records as rec
from metadata.bootstrap import write_bootstrap_records
from tests.support.quorum_support import FAST_SETTINGS, dump_log, kraft, running_cluster
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

kafka = pytest.importorskip("kafka")
kafka_admin = pytest.importorskip("kafka.admin")

VOTER, BROKER = 1, 2


def _at_level_1(cluster: Cluster) -> None:
    write_bootstrap_records(cluster.node(VOTER).data_dir, [
        rec.FeatureLevel(name="metadata.version", feature_level=1)])


def _features(cluster: Cluster, *args: str) -> Any:
    return kraft("features", "--cluster", str(cluster.directory), *args)


def _finalized(cluster: Cluster) -> dict[str, int]:
    described = _features(cluster, "describe", "--json")
    assert described.returncode == 0, described.stderr
    return {r["feature"]: r["finalized_version_level"] for r in json.loads(described.stdout)}


def _reassign_error(admin: Any) -> int:
    """kafka-python's AlterPartitionReassignments of features-0 onto its one broker (its
    answer per partition: None when accepted, else the error)."""
    partition = kafka.TopicPartition("features", 0)
    error = admin.alter_partition_reassignments({partition: [BROKER]})[partition]
    return 0 if error is None else int(error.errno)


def test_features_move_through_the_cli_and_kafka_python(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "c", dict(FAST_SETTINGS), voters=1, brokers=1,
                         prepare=_at_level_1) as cluster:
        bootstrap = cluster.node(BROKER).client_address
        assert bootstrap is not None
        controller = cluster.node(VOTER).controller_address
        assert controller is not None
        described = kraft("features", "--bootstrap-server", bootstrap, "describe")
        assert described.returncode == 0, described.stderr
        lines = described.stdout.splitlines()
        assert lines[0].startswith("Feature: kraft.version\tSupportedMinVersion: 0\t"
                                   "SupportedMaxVersion: 1\tFinalizedVersionLevel: 0\tEpoch: ")
        assert lines[1].startswith("Feature: metadata.version\tSupportedMinVersion: 0.1-IV0\t"
                                   "SupportedMaxVersion: 0.1-IV2\tFinalizedVersionLevel: "
                                   "0.1-IV0\tEpoch: ")

        admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
        try:
            admin.create_topics([kafka_admin.NewTopic("features", 1, 1)])
            assert _reassign_error(admin) == 35  # UNSUPPORTED_VERSION below level 2

            assert admin.update_features({"metadata.version": 2}, validate_only=True) == {
                "metadata.version": "OK"}
            dry = kraft("features", "--bootstrap-controller", controller, "upgrade",
                        "--metadata", "0.1-IV1", "--dry-run")
            assert (dry.returncode, dry.stdout) == (0, "metadata.version can be upgraded "
                                                       "to 2.\n"), dry.stderr
            assert admin.describe_features()["metadata.version"]["finalized"] == (1, 1)

            assert admin.update_features({"metadata.version": 2}) == {"metadata.version": "OK"}
            # the broker answered once its image held the level: ApiVersions shows it
            assert admin.describe_features()["metadata.version"]["finalized"] == (2, 2)
            assert _reassign_error(admin) == 0

            refused = _features(cluster, "downgrade", "--metadata", "0.1-IV0")
            assert refused.returncode == 1
            assert refused.stdout == (
                "Could not downgrade metadata.version to 1. INVALID_UPDATE_VERSION (95): "
                "Invalid metadata.version 1. Refusing to perform the requested downgrade "
                "because it might delete metadata information.\n")
            assert refused.stderr.strip().endswith("1 out of 1 operation(s) failed.")
            unsafe = admin.update_features({"metadata.version": ("UNSAFE_DOWNGRADE", 1)})
            assert "Unsafe metadata downgrade is not supported" in unsafe["metadata.version"]

            out_of_range = kraft("features", "--bootstrap-server", bootstrap, "upgrade",
                                 "--feature", "metadata.version=4")
            assert out_of_range.returncode == 2
            assert out_of_range.stderr.strip().splitlines() == [
                "error: metadata.version level 4 is outside this build's 1-3"]
            unknown = admin.update_features({"no.such.feature": 1})
            assert "does not support the given feature" in unknown["no.such.feature"]

            assert _finalized(cluster) == {"kraft.version": 0, "metadata.version": 2}
            assert admin.update_features({"kraft.version": 1}) == {"kraft.version": "OK"}
            assert admin.describe_features()["kraft.version"]["finalized"] == (1, 1)
        finally:
            admin.close()
        assert _finalized(cluster) == {"kraft.version": 1, "metadata.version": 2}
        records = dump_log(cluster, VOTER)
        assert [(r["record"]["name"], r["record"]["feature_level"]) for r in records
                if r["type"] == "FeatureLevel"] == [("metadata.version", 1),
                                                    ("metadata.version", 2)]
        assert any(r["type"] == "VotersRecord" for r in records)
