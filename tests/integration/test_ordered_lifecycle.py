"""An ordered topic's whole life, end to end with real processes (docs/kip-253.md).

Three ordered producers write keyed per-key sequences and records without a key; two
ordered consumers in one group deliver them, a little slower than they arrive (a
per-record processing time), while the topic goes 2 → 3 → 4 → 8 → 5 → 3: records land
in partitions 3-7 before they are marked. The topic's short `retention.ms` then empties
the marked partitions, the controller removes them, and the topic grows again to 6
(growth is refused while any is marked), re-creating partitions 3, 4 and 5 under the
same indexes. Every key's records must be delivered in strictly increasing order and
every record, keyed or not, must arrive.

The control: the same run with the gates off, at the same producer rate and consumer
delay, must reorder keys at least MIN_VIOLATIONS times; without it the gated run proves
nothing. The pair takes about three minutes, and a shorter life (2 → 4 → 3, removal,
3 → 4: a removed partition's index re-created while the group still holds the removed
one's committed offset) about one: both run under `make soak` (the default run keeps
the schedule tests of tests/integration/test_ordered_resize.py and
test_ordered_growth_chain.py, and tests/unit/client/test_gates.py's decision).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.quorum_support import FAST_SETTINGS, running_cluster
from tests.support.resize_run import ResizeRun, ResizeRunConfig, ResizeRunResult, write_outputs
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "broker.session.timeout.ms": 3000, "log.retention.check.interval.ms": 500}
# The consumers' per-record delay keeps them just behind the producers (2 × 1000/45 =
# 44 records/s against 3 × 15), so each rebalance leaves a backlog of seconds that drains
# slowly, and a moved key's next record meets it in its new partition. In tuning runs of
# 2 → ... → 3 the ungated peer reordered 0-6 times while the consumers kept up (20 records/s
# per producer, 25-30 ms) and 26-34 times this close to saturation. 8 keys per producer
# put keyed records in every partition that gets marked (3-7).
RATE = 15.0  # records per second per producer
PROCESS_DELAY_MS = 45
# above the consumers' lag (at most 9 s gated, 14 s ungated in the run measured): retention
# must not expire records before they are read
RETENTION_MS = 30_000
REMOVAL_TIMEOUT_S = 60.0  # retention, then a heartbeat and a RemovePartition per partition
MIN_VIOLATIONS = 20
LIFE = (2, 3, 4, 8, 5, 3, 6)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("lifecycle") / "cluster", SETTINGS,
                         voters=3, brokers=3) as started:
        yield started


def live(cluster: Cluster, tmp_path: Path, name: str, counts: tuple[int, ...], *,
         retention_ms: int = RETENTION_MS, **overrides: Any) -> tuple[ResizeRunResult, float]:
    """A run through `counts`, waiting before the last (a growth) until every marked
    partition is removed; the result and how long the removal took."""
    settings: dict[str, Any] = {"rate": RATE, "process_delay_ms": PROCESS_DELAY_MS,
                                **overrides}
    config = ResizeRunConfig(cluster_dir=cluster.directory, topic=name, group=f"g-{name}",
                             counts=counts, unkeyed_per_producer=1,
                             topic_configs=(f"retention.ms={retention_ms}",), **settings)
    logs = tmp_path / name
    logs.mkdir()
    removal: list[float] = []

    def wait_for_removal(at: int, resize: ResizeRun) -> None:
        removal.append(resize.wait_for_removal(REMOVAL_TIMEOUT_S))

    result = ResizeRun(config, logs).run({len(counts) - 1: wait_for_removal})
    write_outputs(result, logs / "outputs")  # kept in tmp_path for a failed run
    return result, removal[0]


def acknowledged_partitions(result: ResizeRunResult, *, keyed: bool) -> set[int]:
    return {row["partition"] for rows in result.produced for row in rows
            if (row["key"] is not None) == keyed}


def assert_whole_and_in_order(result: ResizeRunResult, marked: set[int]) -> None:
    report = result.report
    assert report.acknowledged > 0, report.summary()
    assert report.out_of_order_count == 0, "\n".join(report.out_of_order)
    assert report.missing_count == 0, \
        f"{report.summary()}: {list(report.missing.items())[:5]} {report.unkeyed_missing[:5]}"
    # records were in the partitions that got marked, keyed and not
    assert marked <= acknowledged_partitions(result, keyed=True), report.summary()
    assert marked <= acknowledged_partitions(result, keyed=False), report.summary()
    producers = {n: c for n, c in result.exit_codes.items() if n.startswith("producer")}
    assert all(code == 0 for code in producers.values()), result.exit_codes


@pytest.mark.soak
def test_a_whole_life_keeps_every_key_in_order_and_the_ungated_peer_does_not(
        cluster: Cluster, tmp_path: Path) -> None:
    gated, removal_s = live(cluster, tmp_path, "life-gated", LIFE)
    assert_whole_and_in_order(gated, marked={3, 4, 5, 6, 7})
    assert removal_s < REMOVAL_TIMEOUT_S
    ungated, _ = live(cluster, tmp_path, "life-ungated", LIFE, gates=False)
    assert ungated.report.out_of_order_count >= MIN_VIOLATIONS, ungated.report.summary()


@pytest.mark.soak
def test_a_removed_partition_added_again_delivers_in_order(cluster: Cluster,
                                                          tmp_path: Path) -> None:
    # consumers that keep up (5 ms a record), so a short retention cannot expire unread
    # records
    result, _ = live(cluster, tmp_path, "short-life", (2, 4, 3, 4), retention_ms=8000,
                     process_delay_ms=5, records_per_step=30)
    assert_whole_and_in_order(result, marked={3})
    assert 3 in {row["partition"] for rows in result.consumed for row in rows}
