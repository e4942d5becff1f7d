"""3-voter multi-process quorum with fsync: commit throughput and latency, next to the raw
fsync rate and latency of the same disk measured in the same run; failover time.

    python -m bench quorum_bench

Throughput: `Append` of NoOp records with up to 64 batches waiting for their commit.
Latency: one batch at a time (propose on the leader -> committed, measured on the leader).
Failover: SIGKILL the leader, time until a new leader answers DescribeQuorum and until an
append commits on it. Graceful hand-over: SIGTERM the leader (it resigns with
EndQuorumEpoch), the same two times; its successor campaigns at once, so the new leader
should come well before an election timeout. Both with Kafka's default timeouts
(election 1000 ms, fetch 2000 ms), then with the integration tests' short ones
(tests/support/quorum_support.py). Bounded: about a minute and a half.
"""

from __future__ import annotations

import os
import signal
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tools.cluster import Cluster, ClusterError

BATCH_SIZES = (1, 100, 1000)
THROUGHPUT_SECONDS = 2.0  # target duration of each throughput run
LATENCY_SAMPLES = 200
FAILOVER_KILLS = 5
FSYNC_SECONDS = 1.5
HANDOVERS = 3
DEFAULT_ELECTION_TIMEOUT_S = 1.0
# the integration tests' timeouts (tests/support/quorum_support.py FAST_SETTINGS)
TEST_SETTINGS = {"controller.quorum.election.timeout.ms": 300,
                 "controller.quorum.fetch.timeout.ms": 600,
                 "controller.quorum.election.backoff.max.ms": 200,
                 "controller.quorum.request.timeout.ms": 400,
                 "controller.quorum.fetch.max.wait.ms": 150}
TEST_ELECTION_TIMEOUT_S = 0.3
TEST_FAILOVER_TARGET_S = 3.0  # the bound the failover test once asserted


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def raw_fsync(directory: Path, seconds: float = FSYNC_SECONDS) -> tuple[float, float, float]:
    """(fsyncs/s, p50 ms, p99 ms) of appending 4 KiB + fsync to one file."""
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    latencies = []
    try:
        chunk = b"x" * 4096
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            begin = time.perf_counter()
            os.write(fd, chunk)
            os.fsync(fd)
            latencies.append((time.perf_counter() - begin) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return len(latencies) / seconds, percentile(latencies, 0.5), percentile(latencies, 0.99)


def throughput(cluster: Cluster, batch: int) -> tuple[float, float, float]:
    """(records/s, p50 ms, p99 ms) with 64 batches in flight, sized to take ~2 s."""
    probe = cluster.append(batch * 20, batch=batch)
    rate = probe["count"] / max(probe["elapsed_ms"], 1) * 1000
    count = max(batch * 20, min(int(rate * THROUGHPUT_SECONDS), 200_000) // batch * batch)
    reply = cluster.append(count, batch=batch, timeout_s=30)
    latencies = reply["latencies_ms"]
    return (reply["count"] / reply["elapsed_ms"] * 1000, percentile(latencies, 0.5),
            percentile(latencies, 0.99))


def latency(cluster: Cluster, batch: int) -> tuple[float, float]:
    """(p50 ms, p99 ms) of one batch at a time."""
    samples = max(20, LATENCY_SAMPLES // max(1, batch // 100))
    reply = cluster.append(batch * samples, batch=batch, in_flight=1, timeout_s=30)
    latencies = reply["latencies_ms"]
    return percentile(latencies, 0.5), percentile(latencies, 0.99)


def failovers(cluster: Cluster, kills: int) -> list[tuple[float, float]]:
    """Per SIGKILL of the leader: (seconds to a new leader, to the next committed append)."""
    return [_leader_change(cluster, signal.SIGKILL) for _ in range(kills)]


def handovers(cluster: Cluster, count: int) -> list[tuple[float, float]]:
    """Per SIGTERM of the leader (a graceful resign): (seconds to a new leader, to the
    next committed append)."""
    return [_leader_change(cluster, signal.SIGTERM) for _ in range(count)]


def _all_caught_up(cluster: Cluster, timeout_s: float = 15.0) -> dict[str, Any]:
    """Append one record and wait until every voter's last Fetch (as the leader sees it)
    is past it: a node started again just before is up and following, so the next
    measurement does not wait for its start-up. Returns the leader's description."""
    last_offset = cluster.append(1)["last_offset"]
    deadline = time.monotonic() + timeout_s
    while True:
        state = cluster.describe()
        if all(v["log_end_offset"] > last_offset for v in state["voters"]):
            return state
        if time.monotonic() > deadline:
            raise ClusterError(f"voters not caught up within {timeout_s} s: {state['voters']}")
        time.sleep(0.05)


def _leader_change(cluster: Cluster, signum: int) -> tuple[float, float]:
    before = _all_caught_up(cluster)
    leader = before["leader_id"]
    began = time.monotonic()
    cluster.send_signal(leader, signum)
    cluster.wait_for_leader(15, above_epoch=before["leader_epoch"], exclude=[leader])
    elected = time.monotonic() - began
    cluster.append(1, exclude=[leader], timeout_s=15)
    committed = time.monotonic() - began
    cluster.stop_node(leader)  # gone already, or going: only the pid is forgotten
    cluster.start_node(leader)
    return elected, committed


def spread(values: list[float]) -> str:
    return (f"median {statistics.median(values):.2f} s (min {min(values):.2f}, "
            f"max {max(values):.2f})")


def print_leader_changes(what: str, times: list[tuple[float, float]]) -> None:
    elected, committed = [t[0] for t in times], [t[1] for t in times]
    print(f"{what} over {len(times)}: new leader {spread(elected)}; next committed append "
          f"{spread(committed)}")


def print_handovers(cluster: Cluster, timeouts: str, election_timeout_s: float,
                    qualifier: str = "") -> None:
    """Graceful hand-overs (SIGTERM of the leader) with the cluster's `timeouts`, against
    the target of a new leader within one election timeout."""
    graceful = handovers(cluster, HANDOVERS)
    print_leader_changes(f"graceful hand-over, {timeouts} timeouts, SIGTERM leader", graceful)
    worst = max(t[0] for t in graceful)
    print(f"target: new leader before one election timeout ({election_timeout_s:.2f} s) "
          f"after SIGTERM{qualifier} (worst {worst:.2f} s): "
          f"{verdict(worst < election_timeout_s)}")


def short_timeouts(directory: Path) -> None:
    """Failover and hand-over with the integration tests' timeouts."""
    cluster = Cluster.create(directory / "short-timeouts", voters=3, settings=TEST_SETTINGS)
    try:
        cluster.start()
        cluster.wait_for_leader(20)
        kills = failovers(cluster, FAILOVER_KILLS)
        print_leader_changes("failover, test timeouts (election 300 ms, fetch 600 ms), "
                             "SIGKILL leader", kills)
        worst = max(t[0] for t in kills)
        print(f"target: new leader < {TEST_FAILOVER_TARGET_S:.1f} s after SIGKILL with the "
              f"test timeouts (worst {worst:.2f} s): {verdict(worst < TEST_FAILOVER_TARGET_S)}")
        print_handovers(cluster, "test", TEST_ELECTION_TIMEOUT_S, " with the test timeouts")
    except ClusterError as exc:
        print(f"quorum bench (test timeouts) failed: {exc}")
    finally:
        cluster.shut_down(timeout_s=5)


# -- PySyncObj baseline (optional: `pip install pysyncobj`) ------------------------------

PEER_FLAG = "--pysyncobj-peer"


def pysyncobj_peer(argv: list[str]) -> None:
    """One PySyncObj process: `SELF PARTNER PARTNER [--drive]`; the driver prints JSON."""
    import json
    import threading

    from pysyncobj import SyncObj, SyncObjConf, replicated

    class RecordLog(SyncObj):  # type: ignore[misc]
        def __init__(self, me: str, partners: list[str]) -> None:
            super().__init__(me, partners, SyncObjConf())
            self.count = 0

        @replicated  # type: ignore[untyped-decorator]
        def append(self, records: list[bytes]) -> int:
            self.count += len(records)
            return self.count

    me, partners, drive = argv[0], argv[1:3], "--drive" in argv
    node = RecordLog(me, partners)
    if not drive:
        threading.Event().wait()
    deadline = time.monotonic() + 20
    while node._getLeader() is None or not node.isReady():
        if time.monotonic() > deadline:
            raise SystemExit("pysyncobj: no leader")
        time.sleep(0.05)
    results = {}
    for batch in BATCH_SIZES:
        records = [b"\x82\xa4type\n\xa7version\x00"] * batch  # a NoOp's bytes
        window, done = threading.Semaphore(64), threading.Semaphore(0)
        issued, end = 0, time.monotonic() + 1.5
        begin = time.monotonic()
        while time.monotonic() < end:
            window.acquire()
            node.append(records, callback=lambda result, error, w=window, d=done: (
                w.release(), d.release()))
            issued += 1
        for _ in range(issued):
            done.acquire()
        async_rate = issued * batch / (time.monotonic() - begin)
        latencies: list[float] = []
        end = time.monotonic() + 1.0
        while time.monotonic() < end and len(latencies) < LATENCY_SAMPLES:
            started = time.perf_counter()
            node.append(records, sync=True)
            latencies.append((time.perf_counter() - started) * 1000)
        results[batch] = {"async_rate": async_rate, "sync_rate":
                          len(latencies) * batch / (sum(latencies) / 1000),
                          "p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99)}
    print(json.dumps(results), flush=True)


def pysyncobj_baseline() -> dict[int, dict[str, float]] | None:
    """Run 3 PySyncObj processes on 127.0.0.1; None when pysyncobj is not installed."""
    import importlib.util
    import json
    import subprocess
    import sys

    from tools.cluster import free_ports

    if importlib.util.find_spec("pysyncobj") is None:
        return None
    addresses = [f"127.0.0.1:{p}" for p in free_ports(3)]
    processes = []
    try:
        for index, me in enumerate(addresses):
            partners = [a for a in addresses if a != me]
            command = [sys.executable, "-m", "bench.quorum_bench", PEER_FLAG, me, *partners]
            if index == 0:
                command.append("--drive")
            processes.append(subprocess.Popen(
                command, stdout=subprocess.PIPE if index == 0 else subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, text=True))
        output, _ = processes[0].communicate(timeout=40)
        return {int(k): v for k, v in json.loads(output).items()}
    except (subprocess.TimeoutExpired, ValueError):
        return {}
    finally:
        for process in processes:
            process.kill()
            process.wait()


def print_pysyncobj() -> dict[int, dict[str, float]] | None:
    baseline = pysyncobj_baseline()
    if baseline is None:
        print("PySyncObj baseline: skipped (pip install pysyncobj)")
        return None
    if not baseline:
        print("PySyncObj baseline: failed (no result within 40 s)")
        return None
    print("PySyncObj 3 processes, no fsync (batch = one replicated call with B records):")
    for batch, row in sorted(baseline.items()):
        print(f"{batch:>6} async {row['async_rate']:>10,.0f} records/s   sync "
              f"{row['sync_rate']:>10,.0f} records/s   sync p50 {row['p50']:.2f} ms "
              f"p99 {row['p99']:.2f} ms")
    return baseline


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="quorum-bench-") as temp:
        directory = Path(temp)
        fsync_rate, fsync_p50, fsync_p99 = raw_fsync(directory)
        cluster = Cluster.create(directory / "cluster", voters=3)
        try:
            cluster.start()
            cluster.wait_for_leader(20)
            print(f"raw fsync (4 KiB append + fsync, same disk): {fsync_rate:,.0f} fsyncs/s, "
                  f"p50 {fsync_p50:.2f} ms, p99 {fsync_p99:.2f} ms")
            print(f"{'batch':>6} {'records/s':>11} {'% of fsync/s x batch':>21} "
                  f"{'p50 loaded':>11} {'p99 loaded':>11} {'p50 1-by-1':>11} "
                  f"{'p99 1-by-1':>11}")
            rates, p99s = {}, {}
            for batch in BATCH_SIZES:
                rate, loaded_p50, loaded_p99 = throughput(cluster, batch)
                p50, p99 = latency(cluster, batch)
                rates[batch], p99s[batch] = rate, p99
                share = rate / (fsync_rate * batch) * 100
                print(f"{batch:>6} {rate:>11,.0f} {share:>20.0f}% {loaded_p50:>9.2f}ms "
                      f"{loaded_p99:>9.2f}ms {p50:>9.2f}ms {p99:>9.2f}ms")
            baseline = print_pysyncobj()
            bound = 3 * fsync_p99 + 2
            print(f"target batch 1: p99 commit (1-by-1) {p99s[1]:.2f} ms <= 3 x p99 fsync + 2 ms"
                  f" = {bound:.2f} ms: {verdict(p99s[1] <= bound)}")
            print(f"target batch 100: {rates[100]:,.0f} records/s >= 50% of fsyncs/s x 100 = "
                  f"{fsync_rate * 50:,.0f}: {verdict(rates[100] >= fsync_rate * 50)}")
            if baseline and 100 in baseline:
                peer = baseline[100]["async_rate"]
                print(f"target batch 100: >= 2 x PySyncObj async ({2 * peer:,.0f} records/s): "
                      f"{verdict(rates[100] >= 2 * peer)}")
            budget = 55 - (time.monotonic() - started)
            kills = max(1, min(FAILOVER_KILLS, int(budget // 6)))
            print_leader_changes("failover, default timeouts, SIGKILL leader",
                                 failovers(cluster, kills))
            print_handovers(cluster, "default", DEFAULT_ELECTION_TIMEOUT_S)
        except ClusterError as exc:
            print(f"quorum bench failed: {exc}")
        finally:
            cluster.shut_down(timeout_s=5)
        short_timeouts(directory)
    print(f"(quorum bench took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == [PEER_FLAG]:
        pysyncobj_peer(sys.argv[2:])
    else:
        main()
