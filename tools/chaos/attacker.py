"""`kraft chaos --secure`'s attacker: while the workload and the faults run, a
principal with a valid certificate of the cluster's CA and no right at all sends every
attack of tools/access_probes.py (a Vote in a far epoch, a Fetch of the whole log,
RemoveRaftVoter of a voter, kraft.version 1, 20,000 NoOps, a snapshot, the broker
RPCs, ...) to every controller, round after round, until the deadline.

Each answer is one of:
- refused (CLUSTER_AUTHORIZATION_FAILED): as it must be;
- unanswered (the connection closed or timed out: a node killed, paused or cut off by
  the nemesis): counted, not judged;
- anything else: the request was served, a hole: listed in `allowed`, and the run fails.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable

from tools.access_probes import CLOSED, is_refused, probes, send

ROUND_PAUSE_S = 0.5  # between rounds: the attack is steady, not a load test
REQUEST_TIMEOUT_S = 2.0


class Attacker:
    def __init__(self, *, controllers: Callable[[], list[str]], cluster_id: str,
                 ssl_context: ssl.SSLContext, target_voter: int) -> None:
        self._controllers = controllers
        self._cluster_id = cluster_id
        self._ssl = ssl_context
        self._probes = probes(cluster_id, target_voter)
        self.outcomes: Counter[str] = Counter()  # refused / unanswered / allowed
        self.allowed: list[str] = []  # "api at address: error code" of each hole
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, deadline: float) -> None:
        self._thread = threading.Thread(target=self._run, args=(deadline,),
                                        name="chaos-attacker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=REQUEST_TIMEOUT_S * 2 + ROUND_PAUSE_S)

    def _run(self, deadline: float) -> None:
        while not self._stop.is_set() and time.monotonic() < deadline:
            for address in self._controllers():
                for probe in self._probes:
                    if self._stop.is_set() or time.monotonic() >= deadline:
                        return
                    self._judge(address, probe.api, send(
                        address, probe.api, probe.attack, cluster_id=self._cluster_id,
                        ssl_context=self._ssl, timeout_s=REQUEST_TIMEOUT_S))
            self._stop.wait(ROUND_PAUSE_S)

    def _judge(self, address: str, api: str, code: int | str) -> None:
        if is_refused(code):
            self.outcomes["refused"] += 1
        elif code == CLOSED:
            self.outcomes["unanswered"] += 1
        else:
            self.outcomes["allowed"] += 1
            self.allowed.append(f"{api} at {address}: error code {code}")
