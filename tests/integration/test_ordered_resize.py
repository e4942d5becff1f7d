"""Per-key order across partition-count changes, end to end with real processes.

Three ordered producers write per-key sequence numbers while the topic goes
2 → 3 → 4 → 8 → 5 → 3 partitions; two ordered consumers in one group deliver them. Every
key's values must be delivered in increasing order, none missing (tools/order_check.py).
The same run with the gates switched off must show order violations: without that the
first test proves nothing. The faults are in test_ordered_resize_faults.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ordered_resize import assert_in_order, resize_cluster, run
from tools.cluster import Cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with resize_cluster(tmp_path_factory.mktemp("ordered") / "cluster") as started:
        yield started


def test_keys_stay_in_order_while_the_topic_grows_and_shrinks(cluster: Cluster,
                                                             tmp_path: Path) -> None:
    result = run(cluster, tmp_path, process_delay_ms=5)
    assert_in_order(result)
    assert result.report.redeliveries == 0, result.report.summary()
    producer_codes = {n: c for n, c in result.exit_codes.items() if n.startswith("producer")}
    assert all(code == 0 for code in producer_codes.values()), result.exit_codes


def test_without_the_gates_keys_go_out_of_order(cluster: Cluster, tmp_path: Path) -> None:
    # the consumers lag (a slow per-record step), so when a key moves to a new partition
    # its older records still wait in the old one: only the gates hold the new ones back
    result = run(cluster, tmp_path, gates=False, process_delay_ms=40, rate=30.0)
    assert result.report.out_of_order_count > 0, result.report.summary()
