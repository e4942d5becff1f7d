"""3-voter multi-process quorum with fsync: commit throughput and latency, next to the raw
fsync rate and latency of the same disk measured in the same run and to PySyncObj (default
and tuned); failover times.

    python -m bench quorum_bench [-- --kills N --pauses N --no-pysyncobj --no-short]

Throughput: `Append` of NoOp records with up to 64 batches waiting for their commit.
Latency: one batch at a time (propose on the leader -> committed, measured on the leader).

PySyncObj baseline (`pip install pysyncobj`, in the `dev` extra): three processes on
127.0.0.1 without fsync (PySyncObj keeps its log in memory). Every process is started with
`--drive`; each waits until a leader is known and only the leader's process runs the load
(so no call is forwarded from a follower) and prints JSON. Run twice: with PySyncObj's
default `SyncObjConf()` (commands are batched into append_entries sent every
`appendEntriesPeriod`, 100 ms) and tuned as its users tune it for latency,
`SyncObjConf(appendEntriesUseBatch=False)` (every command is sent at once). Both at
batch 1 (one replicated call per record), 64 calls in flight and one sync call at a time.

Failover with Kafka's default timeouts (election 1000 ms, fetch 2000 ms): SIGKILL of the
leader (median over 10), SIGSTOP of the leader (its connections stay open; SIGCONT once a
new leader is known, or after a bound), each timed from the signal until a new leader
answers DescribeQuorum and until an append commits on it. Graceful hand-over: SIGTERM the
leader (it resigns with EndQuorumEpoch). Then kills and hand-overs with the integration
tests' short timeouts (tests/support/quorum_support.py).

Bounded: every phase checks a budget, so the whole bench stops by itself within about
three minutes (a phase cut short says so); only processes it started are ended, by pid.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.stats import percentile, verdict
from raft.log import METADATA_PARTITION_DIR
from raft.storage import read_high_watermark_checkpoint
from tools.cluster import Cluster, ClusterError

BATCH_SIZES = (1, 100, 1000)
THROUGHPUT_SECONDS = 2.0  # target duration of each throughput run
LATENCY_SAMPLES = 200
LATENCY_SAMPLES_BATCH_1 = 500  # the p99 target is judged on these
FSYNC_SECONDS = 1.5
FAILOVER_KILLS = 10
PAUSES = 3
HANDOVERS = 3
SHORT_KILLS = 5
BUDGET_S = 170.0  # the whole bench, pysyncobj and both clusters included
# what a later phase is expected to take at most, kept in reserve by the phases before it
PAUSE_RESERVE_S = 6.0  # per SIGSTOP: a fetch timeout, an election, the catch-up
HANDOVER_RESERVE_S = 3.0  # per SIGTERM: a resign, a restart, the catch-up
SHORT_RESERVE_S = 35.0  # the test-timeouts cluster: start, 5 kills, 3 hand-overs
POLL_S = 0.01  # DescribeQuorum polling while a leader is awaited
PAUSE_BOUND_S = 10.0  # a SIGSTOPped leader gets SIGCONT by then at the latest
DEFAULT_ELECTION_TIMEOUT_S = 1.0
DEFAULT_FETCH_TIMEOUT_S = 2.0
# the integration tests' timeouts (tests/support/quorum_support.py FAST_SETTINGS)
TEST_SETTINGS = {"controller.quorum.election.timeout.ms": 300,
                 "controller.quorum.fetch.timeout.ms": 600,
                 "controller.quorum.election.backoff.max.ms": 200,
                 "controller.quorum.request.timeout.ms": 400,
                 "controller.quorum.fetch.max.wait.ms": 150}
TEST_ELECTION_TIMEOUT_S = 0.3
TEST_FAILOVER_TARGET_S = 3.0  # the bound the failover test once asserted
# targets
TARGET_P50_MS = 1.0  # 1-by-1 commit p50, with fsync
TARGET_FAILOVER_RATIO = 0.3  # SIGKILL: median new leader / election timeout
TARGET_PYSYNCOBJ_FACTOR = 2.0  # 64 in flight, batch 1: ours >= 2 x tuned PySyncObj


@dataclass
class Budget:
    """The bench's deadline: phases ask how much is left before they start a step."""

    deadline: float

    @classmethod
    def of(cls, seconds: float) -> Budget:
        return cls(time.monotonic() + seconds)

    def left(self) -> float:
        return self.deadline - time.monotonic()


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
    if batch == 1:
        samples = LATENCY_SAMPLES_BATCH_1
    else:
        samples = max(20, LATENCY_SAMPLES // max(1, batch // 100))
    reply = cluster.append(batch * samples, batch=batch, in_flight=1, timeout_s=30)
    latencies = reply["latencies_ms"]
    return percentile(latencies, 0.5), percentile(latencies, 0.99)


# -- leader changes --------------------------------------------------------------------


def _all_caught_up(cluster: Cluster, timeout_s: float = 15.0) -> dict[str, Any]:
    """Append one record and wait until every voter's last Fetch (as the leader sees it)
    is past it and every voter has replayed the log up to it (its high-watermark
    checkpoint, written as its layers above are handed the committed records): a node
    started again just before is up, following and done with its start-up replay, so
    the next measurement does not wait for its start-up. Returns the leader's
    description."""
    last_offset = cluster.append(1, timeout_s=timeout_s)["last_offset"]
    deadline = time.monotonic() + timeout_s
    while True:
        state = cluster.describe()
        if all(v["log_end_offset"] > last_offset for v in state["voters"]) and all(
                (read_high_watermark_checkpoint(
                    Path(cluster.node(v["replica_id"]).data_dir) / METADATA_PARTITION_DIR) or 0)
                > last_offset for v in state["voters"]):
            return state
        if time.monotonic() > deadline:
            raise ClusterError(f"voters not caught up within {timeout_s} s: {state['voters']}")
        time.sleep(0.05)


def _await_new_leader(cluster: Cluster, old_leader: int, above_epoch: int,
                      timeout_s: float) -> None:
    """Poll DescribeQuorum every POLL_S (not Cluster.wait_for_leader's 50 ms: the failover
    target is a few hundred ms) until a leader other than `old_leader`, in an epoch above
    `above_epoch`, answers."""
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    while time.monotonic() < deadline:
        try:
            state = cluster.describe(exclude=[old_leader], timeout_s=0.5)
            if state["leader_epoch"] > above_epoch and state["leader_id"] >= 0 \
                    and state["leader_id"] != old_leader:
                return
            last = f"leader {state['leader_id']} epoch {state['leader_epoch']}"
        except ClusterError as exc:
            last = str(exc)
        time.sleep(POLL_S)
    raise ClusterError(f"no new leader within {timeout_s} s ({last})")


def _leader_change(cluster: Cluster, signum: int) -> tuple[float, float]:
    """Signal the leader; (seconds to a new leader, to the next committed append). A
    killed or terminated leader is started again; a stopped one gets SIGCONT as soon as
    the new leader is known (or after PAUSE_BOUND_S) and rejoins as it is."""
    before = _all_caught_up(cluster)
    leader = before["leader_id"]
    began = time.monotonic()
    cluster.send_signal(leader, signum)
    try:
        bound = PAUSE_BOUND_S if signum == signal.SIGSTOP else 15.0
        _await_new_leader(cluster, leader, before["leader_epoch"], bound)
        elected = time.monotonic() - began
        if signum == signal.SIGSTOP:
            cluster.send_signal(leader, signal.SIGCONT)
        cluster.append(1, exclude=[leader], timeout_s=15)
        committed = time.monotonic() - began
    finally:
        if signum == signal.SIGSTOP and cluster.is_running(leader):
            cluster.send_signal(leader, signal.SIGCONT)  # bounded pause, whatever happened
    if signum != signal.SIGSTOP:
        cluster.stop_node(leader)  # gone already, or going: only the pid is forgotten
        cluster.start_node(leader)
    return elected, committed


def leader_changes(cluster: Cluster, signum: int, count: int, budget: Budget,
                   reserve_s: float) -> list[tuple[float, float]]:
    """Up to `count` leader changes by `signum`, while more than `reserve_s` (what the
    phases after this one need) plus one step's worst case is left of the budget."""
    times: list[tuple[float, float]] = []
    worst_step = 0.0
    while len(times) < count and budget.left() > reserve_s + max(worst_step, 3.0):
        started = time.monotonic()
        times.append(_leader_change(cluster, signum))
        worst_step = max(worst_step, time.monotonic() - started)
    return times


def spread(values: list[float]) -> str:
    return (f"median {statistics.median(values):.3f} s (min {min(values):.3f}, "
            f"max {max(values):.3f})")


def print_leader_changes(what: str, times: list[tuple[float, float]], wanted: int) -> None:
    if not times:
        print(f"{what}: skipped (no time left in the bench's budget)")
        return
    elected, committed = [t[0] for t in times], [t[1] for t in times]
    cut = f" (budget: {len(times)} of {wanted})" if len(times) < wanted else ""
    print(f"{what} over {len(times)}{cut}: new leader {spread(elected)}; next committed "
          f"append {spread(committed)}")


def default_timeout_failovers(cluster: Cluster, budget: Budget, kills: int, pauses: int,
                              reserve_s: float) -> None:
    """SIGKILL, SIGSTOP and SIGTERM of the leader with Kafka's default timeouts."""
    killed = leader_changes(cluster, signal.SIGKILL, kills, budget,
                            reserve_s + PAUSE_RESERVE_S * pauses
                            + HANDOVER_RESERVE_S * HANDOVERS)
    print_leader_changes("failover, default timeouts (election 1000 ms, fetch 2000 ms), "
                         "SIGKILL leader", killed, kills)
    if killed:
        median = statistics.median(t[0] for t in killed)
        ratio = median / DEFAULT_ELECTION_TIMEOUT_S
        print(f"target: SIGKILL median new leader / election timeout = {median:.3f} s / "
              f"{DEFAULT_ELECTION_TIMEOUT_S:.1f} s = {ratio:.2f} < {TARGET_FAILOVER_RATIO}: "
              f"{verdict(ratio < TARGET_FAILOVER_RATIO)}")
    paused = leader_changes(cluster, signal.SIGSTOP, pauses, budget,
                            reserve_s + HANDOVER_RESERVE_S * HANDOVERS)
    print_leader_changes("failover, default timeouts, SIGSTOP leader (SIGCONT once a new "
                         "leader is known)", paused, pauses)
    if paused:
        worst = max(t[0] for t in paused)
        bound = DEFAULT_FETCH_TIMEOUT_S + 1
        print(f"target: SIGSTOP worst new leader < fetch timeout + 1 s = {bound:.1f} s: "
              f"{worst:.3f} s (ratio {worst / bound:.2f}): {verdict(worst < bound)}")
    print_handovers(cluster, "default", DEFAULT_ELECTION_TIMEOUT_S, budget, reserve_s)


def print_handovers(cluster: Cluster, timeouts: str, election_timeout_s: float,
                    budget: Budget, reserve_s: float, qualifier: str = "") -> None:
    """Graceful hand-overs (SIGTERM of the leader) with the cluster's `timeouts`, against
    the target of a new leader within one election timeout."""
    graceful = leader_changes(cluster, signal.SIGTERM, HANDOVERS, budget, reserve_s)
    print_leader_changes(f"graceful hand-over, {timeouts} timeouts, SIGTERM leader", graceful,
                         HANDOVERS)
    if graceful:
        worst = max(t[0] for t in graceful)
        print(f"target: new leader before one election timeout ({election_timeout_s:.2f} s) "
              f"after SIGTERM{qualifier} (worst {worst:.3f} s): "
              f"{verdict(worst < election_timeout_s)}")


def short_timeouts(directory: Path, budget: Budget) -> None:
    """Failover and hand-over with the integration tests' timeouts."""
    if budget.left() < 15:
        print("failover with the test timeouts: skipped (no time left in the bench's budget)")
        return
    cluster = Cluster.create(directory / "short-timeouts", voters=3, settings=TEST_SETTINGS)
    try:
        cluster.start()
        cluster.wait_for_leader(20)
        kills = leader_changes(cluster, signal.SIGKILL, SHORT_KILLS, budget,
                               HANDOVER_RESERVE_S * HANDOVERS)
        print_leader_changes("failover, test timeouts (election 300 ms, fetch 600 ms), "
                             "SIGKILL leader", kills, SHORT_KILLS)
        if kills:
            worst = max(t[0] for t in kills)
            print(f"target: new leader < {TEST_FAILOVER_TARGET_S:.1f} s after SIGKILL with "
                  f"the test timeouts (worst {worst:.3f} s): "
                  f"{verdict(worst < TEST_FAILOVER_TARGET_S)}")
        print_handovers(cluster, "test", TEST_ELECTION_TIMEOUT_S, budget, 0.0,
                        " with the test timeouts")
    except ClusterError as exc:
        print(f"quorum bench (test timeouts) failed: {exc}")
    finally:
        cluster.shut_down(timeout_s=5)


# -- PySyncObj baseline (pip install pysyncobj; in the dev extra) -----------------------

PEER_FLAG = "--pysyncobj-peer"
PYSYNCOBJ_CONFIGS = ("default", "tuned")
PYSYNCOBJ_LOAD_S = 1.5  # 64 in flight
PYSYNCOBJ_SYNC_S = 1.5  # one sync call at a time (default config: ~10 per second)
PYSYNCOBJ_TIMEOUT_S = 30.0


def _pysyncobj_conf(name: str) -> Any:
    from pysyncobj import SyncObjConf

    if name == "tuned":
        # What PySyncObj's users set for latency: every command goes out at once instead
        # of in the next batched append_entries (appendEntriesPeriod, 100 ms).
        return SyncObjConf(appendEntriesUseBatch=False)
    return SyncObjConf()


def pysyncobj_peer(argv: list[str]) -> None:
    """One PySyncObj process: `SELF PARTNER PARTNER --conf NAME --drive`. Waits until a
    leader is known; the leader's process runs the load and prints one JSON line, the
    others serve until they are killed."""
    import json
    import threading

    from pysyncobj import SyncObj, replicated

    class RecordLog(SyncObj):  # type: ignore[misc]
        def __init__(self, me: str, partners: list[str], conf: Any) -> None:
            super().__init__(me, partners, conf)
            self.count = 0

        @replicated  # type: ignore[untyped-decorator]
        def append(self, records: list[bytes]) -> int:
            self.count += len(records)
            return self.count

    me, partners = argv[0], argv[1:3]
    conf_name = argv[argv.index("--conf") + 1] if "--conf" in argv else "default"
    node = RecordLog(me, partners, _pysyncobj_conf(conf_name))
    deadline = time.monotonic() + 20
    while node._getLeader() is None or not node.isReady():
        if time.monotonic() > deadline:
            raise SystemExit("pysyncobj: no leader")
        time.sleep(0.01)
    if "--drive" not in argv or not node._isLeader():
        threading.Event().wait()  # a follower: serve until killed
    records = [b"\x82\xa4type\n\xa7version\x00"]  # batch 1: a NoOp's bytes
    window, done = threading.Semaphore(64), threading.Semaphore(0)

    def finished(result: Any, error: Any) -> None:
        window.release()
        done.release()

    issued, end = 0, time.monotonic() + PYSYNCOBJ_LOAD_S
    begin = time.monotonic()
    while time.monotonic() < end:
        window.acquire()
        node.append(records, callback=finished)
        issued += 1
    for _ in range(issued):
        done.acquire()
    async_rate = issued / (time.monotonic() - begin)
    latencies: list[float] = []
    end = time.monotonic() + PYSYNCOBJ_SYNC_S
    while time.monotonic() < end and len(latencies) < LATENCY_SAMPLES_BATCH_1:
        started = time.perf_counter()
        node.append(records, sync=True)
        latencies.append((time.perf_counter() - started) * 1000)
    print(json.dumps({"config": conf_name, "leader": me, "async_rate": async_rate,
                      "sync_rate": len(latencies) / (sum(latencies) / 1000),
                      "samples": len(latencies), "p50": percentile(latencies, 0.5),
                      "p99": percentile(latencies, 0.99)}), flush=True)


def pysyncobj_run(conf_name: str) -> dict[str, Any] | None:
    """Three PySyncObj processes on 127.0.0.1, all with --drive: the leader's prints.
    None when pysyncobj is not installed, {} when no leader reported in time."""
    import importlib.util
    import json
    import selectors
    import subprocess
    import sys

    from tools.ports import free_ports

    if importlib.util.find_spec("pysyncobj") is None:
        return None
    addresses = [f"127.0.0.1:{p}" for p in free_ports(3)]
    processes: list[subprocess.Popen[str]] = []
    selector = selectors.DefaultSelector()
    try:
        for me in addresses:
            partners = [a for a in addresses if a != me]
            command = [sys.executable, "-m", "bench.quorum_bench", PEER_FLAG, me, *partners,
                       "--conf", conf_name, "--drive"]
            process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, text=True)
            processes.append(process)
            assert process.stdout is not None
            selector.register(process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + PYSYNCOBJ_TIMEOUT_S
        while time.monotonic() < deadline:
            for key, _ in selector.select(timeout=max(0.0, deadline - time.monotonic())):
                line = key.fileobj.readline()  # type: ignore[union-attr]
                if not line:  # that process exited (e.g. no leader): stop watching it
                    selector.unregister(key.fileobj)
                    continue
                try:
                    result: dict[str, Any] = json.loads(line)
                    return result
                except ValueError:
                    continue
            if not selector.get_map():
                break
        return {}
    finally:
        selector.close()
        for process in processes:  # only the processes started here, by pid
            process.kill()
            process.wait()


def pysyncobj_baselines(budget: Budget) -> dict[str, dict[str, Any]] | None:
    results: dict[str, dict[str, Any]] = {}
    for name in PYSYNCOBJ_CONFIGS:
        if budget.left() < PYSYNCOBJ_TIMEOUT_S + 60:
            print(f"PySyncObj {name}: skipped (no time left in the bench's budget)")
            continue
        result = pysyncobj_run(name)
        if result is None:
            print("PySyncObj baseline: skipped (pip install pysyncobj)")
            return None
        if not result:
            print(f"PySyncObj {name}: failed (no result within {PYSYNCOBJ_TIMEOUT_S:.0f} s)")
            continue
        results[name] = result
    return results


def print_comparison(ours_rate: float, ours_p50: float, ours_p99: float,
                     baselines: dict[str, dict[str, Any]] | None) -> None:
    """Batch 1 side by side: 64 in flight (ops/s), one at a time (ops/s, p50, p99)."""
    print("batch 1 side by side (PySyncObj without fsync, kraft-py with fsync; a PySyncObj "
          "op is one replicated call):")
    print(f"{'':<42}{'64 in flight':>14}{'1-by-1':>10}{'p50':>10}{'p99':>10}")
    ours_sync = 1000 / ours_p50 if ours_p50 else 0.0
    print(f"{'kraft-py (fsync)':<42}{ours_rate:>10,.0f}/s {ours_sync:>7,.0f}/s "
          f"{ours_p50:>7.2f}ms {ours_p99:>7.2f}ms")
    labels = {"default": "PySyncObj SyncObjConf() (default)",
              "tuned": "PySyncObj appendEntriesUseBatch=False"}
    for name, row in (baselines or {}).items():
        print(f"{labels[name]:<42}{row['async_rate']:>10,.0f}/s {row['sync_rate']:>7,.0f}/s "
              f"{row['p50']:>7.2f}ms {row['p99']:>7.2f}ms")
    tuned = (baselines or {}).get("tuned")
    if tuned:
        ratio = ours_rate / tuned["async_rate"] if tuned["async_rate"] else 0.0
        print(f"target: 64 in flight batch 1 >= {TARGET_PYSYNCOBJ_FACTOR:.0f} x tuned PySyncObj:"
              f" {ours_rate:,.0f} / {tuned['async_rate']:,.0f} ops/s = {ratio:.2f} x: "
              f"{verdict(ratio >= TARGET_PYSYNCOBJ_FACTOR)}")
    else:
        print("target: 64 in flight batch 1 >= 2 x tuned PySyncObj: not measured")


# -- main --------------------------------------------------------------------------------


def commit_path(cluster: Cluster, fsync: tuple[float, float, float]
                ) -> tuple[dict[int, float], dict[int, tuple[float, float]]]:
    """The table per batch size; returns the throughputs and the 1-by-1 (p50, p99)."""
    fsync_rate, fsync_p50, fsync_p99 = fsync
    print(f"raw fsync (4 KiB append + fsync, same disk): {fsync_rate:,.0f} fsyncs/s, "
          f"p50 {fsync_p50:.2f} ms, p99 {fsync_p99:.2f} ms")
    print(f"{'batch':>6} {'records/s':>11} {'% of fsync/s x batch':>21} "
          f"{'p50 loaded':>11} {'p99 loaded':>11} {'p50 1-by-1':>11} {'p99 1-by-1':>11}")
    rates: dict[int, float] = {}
    one_by_one: dict[int, tuple[float, float]] = {}
    for batch in BATCH_SIZES:
        rate, loaded_p50, loaded_p99 = throughput(cluster, batch)
        p50, p99 = latency(cluster, batch)
        rates[batch], one_by_one[batch] = rate, (p50, p99)
        share = rate / (fsync_rate * batch) * 100
        print(f"{batch:>6} {rate:>11,.0f} {share:>20.0f}% {loaded_p50:>9.2f}ms "
              f"{loaded_p99:>9.2f}ms {p50:>9.2f}ms {p99:>9.2f}ms")
    return rates, one_by_one


def print_latency_targets(one_by_one: dict[int, tuple[float, float]],
                          rates: dict[int, float], fsync: tuple[float, float, float]) -> None:
    fsync_rate, _, fsync_p99 = fsync
    p50, p99 = one_by_one[1]
    print(f"target batch 1: p50 commit (1-by-1, with fsync) <= {TARGET_P50_MS:.1f} ms: "
          f"{p50:.2f} ms = {p50 / TARGET_P50_MS:.2f} x the target: "
          f"{verdict(p50 <= TARGET_P50_MS)}")
    bound = 3 * fsync_p99 + 1
    print(f"target batch 1: p99 commit (1-by-1) <= 3 x p99 fsync + 1 ms = {bound:.2f} ms: "
          f"{p99:.2f} ms = {p99 / bound:.2f} x the bound: {verdict(p99 <= bound)}")
    print(f"target batch 100: {rates[100]:,.0f} records/s >= 50% of fsyncs/s x 100 = "
          f"{fsync_rate * 50:,.0f}: {rates[100] / (fsync_rate * 50):.2f} x: "
          f"{verdict(rates[100] >= fsync_rate * 50)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench quorum_bench --")
    parser.add_argument("--kills", type=int, default=FAILOVER_KILLS)
    parser.add_argument("--pauses", type=int, default=PAUSES)
    parser.add_argument("--no-pysyncobj", action="store_true")
    parser.add_argument("--no-short", action="store_true", help="skip the test timeouts")
    args = parser.parse_args(argv or [])
    started = time.monotonic()
    budget = Budget.of(BUDGET_S)
    with tempfile.TemporaryDirectory(prefix="quorum-bench-") as temp:
        directory = Path(temp)
        fsync = raw_fsync(directory)
        cluster = Cluster.create(directory / "cluster", voters=3)
        try:
            cluster.start()
            cluster.wait_for_leader(20)
            rates, one_by_one = commit_path(cluster, fsync)
            print_latency_targets(one_by_one, rates, fsync)
            baselines = None if args.no_pysyncobj else pysyncobj_baselines(budget)
            print_comparison(rates[1], *one_by_one[1], baselines)
            reserve = 0.0 if args.no_short else SHORT_RESERVE_S
            default_timeout_failovers(cluster, budget, args.kills, args.pauses, reserve)
        except ClusterError as exc:
            print(f"quorum bench failed: {exc}")
        finally:
            cluster.shut_down(timeout_s=5)
        if not args.no_short:
            short_timeouts(directory, budget)
    print(f"(quorum bench took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == [PEER_FLAG]:
        pysyncobj_peer(sys.argv[2:])
    else:
        main(sys.argv[1:])
