"""The nemesis schedule is a pure function of its seed: one fault at a time, each healed
before the run ends. A wipe waits for the voters' log starts (formatted directories, no
process started)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from raft.log import METADATA_PARTITION_DIR
from raft.storage import write_log_start
from tools.chaos.nemesis import (
    CLOCK_RATES,
    FSYNC_DELAYS_MS,
    LEADER,
    NET_DELAYS_MS,
    NET_KINDS,
    NET_LOSS_RATES,
    Nemesis,
    schedule,
)
from tools.cluster import Cluster

NODES = [1, 2, 3, 4, 5, 6]
# schedule(3, 60, ["slow-disk", "clock", "kill"], NODES) before slow-net and lossy-net
EXPECTED_SEED_3_PREFIX = [("slow-disk", 4, 300), ("clock", 3, 1.5), ("clock", 5, 1.5)]


def test_schedule_is_identical_when_seed_is_the_same() -> None:
    assert schedule(7, 60, ["kill", "pause", "leader"], NODES) == \
        schedule(7, 60, ["kill", "pause", "leader"], NODES)
    assert schedule(7, 60, ["kill", "pause", "leader"], NODES) != \
        schedule(8, 60, ["kill", "pause", "leader"], NODES)


@pytest.mark.parametrize("seed", range(20))
def test_faults_never_overlap_and_heal_before_the_end_when_scheduled(seed: int) -> None:
    faults = schedule(seed, 60, ["kill", "pause", "leader"], NODES)
    assert faults
    for before, after in zip(faults, faults[1:], strict=False):
        assert before.at_s + before.hold_s < after.at_s
    assert faults[-1].at_s + faults[-1].hold_s <= 60
    assert all(f.kind in ("kill", "pause") for f in faults)
    assert all(f.target == LEADER or f.target in NODES for f in faults)


def test_only_requested_kinds_are_scheduled_when_faults_are_restricted() -> None:
    faults = schedule(3, 120, ["pause"], NODES)
    assert {f.kind for f in faults} == {"pause"}
    assert all(f.target != LEADER for f in faults)
    assert schedule(3, 120, [], NODES) == []
    with pytest.raises(ValueError, match="flood"):
        schedule(3, 120, ["flood"], NODES)


def test_partitions_are_symmetric_or_one_way_when_requested() -> None:
    faults = schedule(5, 300, ["partition"], NODES)
    assert {f.kind for f in faults} == {"partition", "partition-one-way"}
    assert all(f.target in NODES for f in faults)


def test_slow_disk_and_clock_faults_are_scheduled_with_their_amounts_when_requested() -> None:
    faults = schedule(3, 300, ["slow-disk", "clock", "kill"], NODES)
    assert {f.kind for f in faults} == {"slow-disk", "clock", "kill"}
    assert all(f.target in NODES for f in faults)
    assert {f.amount for f in faults if f.kind == "slow-disk"} <= set(FSYNC_DELAYS_MS)
    assert {f.amount for f in faults if f.kind == "clock"} <= set(CLOCK_RATES)
    assert all(f.amount is None for f in faults if f.kind == "kill")
    assert all(r != 1.0 and r > 0 for r in CLOCK_RATES)
    assert all(d > 0 for d in FSYNC_DELAYS_MS)
    for before, after in zip(faults, faults[1:], strict=False):
        assert before.at_s + before.hold_s < after.at_s
    assert faults[-1].at_s + faults[-1].hold_s <= 300



def test_slow_and_lossy_net_faults_are_scheduled_with_their_amounts_when_requested() -> None:
    faults = schedule(3, 300, ["slow-net", "lossy-net", "partition"], NODES)
    assert {f.kind for f in faults} == {"slow-net", "lossy-net", "partition",
                                        "partition-one-way"}
    assert all(f.target in NODES for f in faults)
    assert {f.amount for f in faults if f.kind == "slow-net"} <= set(NET_DELAYS_MS)
    assert {f.amount for f in faults if f.kind == "lossy-net"} <= set(NET_LOSS_RATES)
    assert all(f.amount is None for f in faults if f.kind.startswith("partition"))
    assert all(d > 0 for d in NET_DELAYS_MS)
    assert all(0 < loss < 1 for loss in NET_LOSS_RATES)  # at 1 nothing would get through
    for before, after in zip(faults, faults[1:], strict=False):
        assert before.at_s + before.hold_s < after.at_s
    assert faults[-1].at_s + faults[-1].hold_s <= 300
    assert NET_KINDS == {"partition", "slow-net", "lossy-net"}
    with pytest.raises(ValueError, match="lossy-disk"):
        schedule(3, 300, ["lossy-net", "lossy-disk"], NODES)


def test_existing_kinds_schedule_as_before_when_net_kinds_are_added() -> None:
    """Adding kinds to KINDS does not change the schedule of a run that does not ask for
    them (a recorded seed still reproduces)."""
    faults = schedule(3, 60, ["slow-disk", "clock", "kill"], NODES)
    assert [(f.kind, f.target, f.amount) for f in faults][:3] == EXPECTED_SEED_3_PREFIX


def _voters_log_start(cluster: Cluster, offset: int) -> None:
    for node_id in cluster.voter_ids:
        partition = Path(cluster.node(node_id).data_dir) / METADATA_PARTITION_DIR
        partition.mkdir(parents=True, exist_ok=True)
        write_log_start(partition, offset, 1)


def test_a_wipe_waits_for_every_voters_log_start_then_deletes_the_metadata_log(
        tmp_path: Path) -> None:
    """With snapshots on, a broker is wiped once no voter's log starts at 0 (so it must
    catch up by FetchSnapshot), or when the wait is over, or the run stops."""
    cluster = Cluster.create(tmp_path / "c", voters=3, brokers=1)
    broker = Path(cluster.node(4).data_dir) / METADATA_PARTITION_DIR
    broker.mkdir(parents=True, exist_ok=True)
    nemesis = Nemesis(cluster, [], wipe_wait_s=0.5)
    began = time.monotonic()
    nemesis.wipe(4)  # no voter advanced: the whole wait, then the wipe
    assert time.monotonic() - began >= 0.5
    assert not broker.exists()
    _voters_log_start(cluster, 150)
    broker.mkdir()
    patient = Nemesis(cluster, [], wipe_wait_s=3600.0)
    patient.wipe(4)  # every voter advanced: at once
    assert not broker.exists()
    _voters_log_start(cluster, 0)
    broker.mkdir()
    patient.stop()  # a run that stops ends the wait
    patient.wipe(4)
    assert not broker.exists()
