"""What the authorization gate (broker/access_table.py) costs on the commit path: the
quorum bench's 1-by-1 commit p50 and 64-in-flight throughput on a 3-voter `--tls`
cluster with the authorizer off and with it on (every Raft Fetch and every Append then
passes the gate), in the same run, alternating off/on twice so that a drift of the host
shows; and one gate decision in process (a super user, a refused principal)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.quorum_bench import TEST_SETTINGS, latency, throughput
from bench.stats import percentile
from broker.access_table import CONTROLLER, gate_refusal
from metadata.authorizer import AuthorizerSettings, acl_image_of
from raft.common.session import KafkaPrincipal
from tools import tls_certs
from tools.cluster import Cluster

ROUNDS = 2
DECISIONS = 100_000


def _settings(authorizer: bool) -> dict[str, object]:
    if not authorizer:
        return dict(TEST_SETTINGS)
    nodes = [tls_certs.node_principal(n) for n in (1, 2, 3)]
    client = f"User:CN={tls_certs.CLIENT_CN},O={tls_certs.ORGANIZATION}"
    return {**TEST_SETTINGS, "authorizer.class.name": "standard",
            "super.users": ";".join([*nodes, client])}


def _measure(directory: Path, authorizer: bool) -> tuple[float, float]:
    """(1-by-1 commit p50 ms, records/s at 64 in flight)."""
    cluster = Cluster.create(directory, voters=3, settings=_settings(authorizer), tls=True)
    try:
        cluster.start()
        cluster.wait_for_leader(20)
        cluster.append(200)  # warm: connections, first fsyncs
        p50, _ = latency(cluster, 1)
        rate, _, _ = throughput(cluster, 1)
        return p50, rate
    finally:
        cluster.kill_all_started()


def _decision_us(principal: str) -> float:
    settings = AuthorizerSettings(enabled=True, super_users=frozenset({"User:node"}))
    who, acls = KafkaPrincipal.parse(principal), acl_image_of({})
    samples = []
    for _ in range(5):
        begin = time.perf_counter()
        for _ in range(DECISIONS // 5):
            gate_refusal(CONTROLLER, "FetchRequest", acls, who, "127.0.0.1", settings)
        samples.append((time.perf_counter() - begin) / (DECISIONS // 5) * 1e6)
    return percentile(samples, 0.5)


def main() -> None:
    print("## authorization gate on the commit path (3 voters, --tls, same run)")
    results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="gate-bench-") as tmp:
        for round_ in range(ROUNDS):
            for authorizer in (False, True):
                where = Path(tmp) / f"{'on' if authorizer else 'off'}-{round_}"
                results[authorizer].append(_measure(where, authorizer))
    for authorizer, runs in results.items():
        p50s = ", ".join(f"{p:.2f}" for p, _ in runs)
        rates = ", ".join(f"{r:,.0f}" for _, r in runs)
        print(f"authorizer {'on ' if authorizer else 'off'}: 1-by-1 commit p50 {p50s} ms; "
              f"64 in flight {rates} records/s")
    print(f"one gate decision: super user {_decision_us('User:node'):.2f} us, "
          f"refused {_decision_us('User:other'):.2f} us")


if __name__ == "__main__":
    main()
