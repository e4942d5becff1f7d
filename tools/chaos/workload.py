"""The chaos workload: client threads that record every operation in a history.

- admin threads create, delete and recreate a small set of names and describe them by
  name and by ID (the IDs they have seen, deleted ones included), through the admin
  RPCs of the controllers;
- producer threads produce unique values with acks=all through the Kafka protocol
  (kafka-python, no retries, so an outcome is never hidden behind a resend).

The stable topics live as partition logs that live for years do, in small segments:
`compacted_names` compacted (keyed records, a few keys, so later records supersede
earlier ones), the others with a short retention (whole segments deleted), so the checks
must tell what retention and compaction may remove from what was lost.

On a secured cluster (`kraft chaos --secure`, tools/chaos/security.py) the admin calls
go over mutual TLS with the admin certificate (`admin_ssl`) and the producers log in
with SASL_SSL as `chaos-producer` (`clients`).

Outcomes are classified conservatively: `failed` only when the cluster definitely did
not apply the operation (an error code that rules it out, with no earlier ambiguous
attempt); timeouts, dropped connections and NOT_CONTROLLER after a proposal are
`unknown`. Every loop ends at `deadline` (and each call has its own bounded timeout).
"""

from __future__ import annotations

import logging
import random
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from metadata.admin import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
    DescribeTopicsRequest,
    DescribeTopicsResponse,
    api_of,
    encode_body,
)
from raft.common.errors import ErrorCode
from raft.common.leader_redirect import Done, Unknown
from raft.common.uuid import Uuid
from tools.admin_client import LeaderClient, admin_outcome
from tools.chaos.history import FAILED, OK, UNKNOWN, HistoryWriter
from tools.chaos.security import PRODUCER_USER, ClientSecurity
from tools.quorum_client import ClusterError

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 4.0
ATTEMPT_TIMEOUT_S = 1.5
BACKOFF_S = 0.1
# errors after which a write certainly did not apply (when no attempt was ambiguous)
DEFINITE = frozenset({ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.INVALID_REPLICATION_FACTOR,
                      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                      ErrorCode.INVALID_REQUEST})


# Segments roll at 4 KiB or after 5 s, whichever comes first: by time too, so retention
# and cleaning remove records in every run however few records a loaded host lets the
# producers write (by size alone, a slow run rolled no segment and removed nothing)
SEGMENT_BYTES, SEGMENT_MS = "4096", "5000"
RETAINED = {"segment.bytes": SEGMENT_BYTES, "segment.ms": SEGMENT_MS, "retention.ms": "20000"}
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": SEGMENT_BYTES,
             "segment.ms": SEGMENT_MS, "min.cleanable.dirty.ratio": "0.1"}
COMPACTED_KEYS = 8  # per compacted topic: each key rewritten many times a run


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadConfig:
    churn_names: tuple[str, ...] = ("c0", "c1", "c2")
    stable_names: tuple[str, ...] = ("s0", "s1", "k0")
    compacted_names: tuple[str, ...] = ("k0",)  # among the stable ones; the others: RETAINED
    partitions: int = 2
    replication_factor: int = 3  # stable topics, created while every broker runs
    churn_replication_factor: int = 2  # churned topics: creatable with one broker down
    admin_threads: int = 2
    producer_threads: int = 2

    def topic_configs(self, name: str) -> tuple[CreatableTopicConfig, ...] | None:
        """The configs a stable topic is created with (None: a churned one, defaults)."""
        if name not in self.stable_names:
            return None
        configs = COMPACTED if name in self.compacted_names else RETAINED
        return tuple(CreatableTopicConfig(name=k, value=v) for k, v in configs.items())


@dataclass(slots=True)
class Outcome:
    status: str
    result: dict[str, Any] = field(default_factory=dict)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


class AdminCaller:
    """One admin operation = attempts to the controllers until an answer or the deadline
    (`tools.admin_client.LeaderClient`); remembers the active controller between
    operations."""

    def __init__(self, addresses: Sequence[str], cluster_id: str,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.addresses = list(addresses)
        self.cluster_id = cluster_id
        self.ssl_context = ssl_context  # None: plaintext
        self._client = LeaderClient(self.addresses, cluster_id=cluster_id,
                                    ssl_context=ssl_context,
                                    attempt_timeout_s=ATTEMPT_TIMEOUT_S, backoff_s=BACKOFF_S)

    def call(self, message: Any, *, is_write: bool) -> tuple[Any, bool]:
        """(response or None without one, ambiguous): `ambiguous` is True when the write
        may have been applied (an attempt lost after it was sent, or NOT_CONTROLLER to it:
        `raft.common.leader_redirect`); None with False: nothing reached a controller."""
        api = api_of(message)
        result = self._client.call(api, encode_body(message), classify=admin_outcome(api),
                                   is_write=is_write,
                                   deadline=time.monotonic() + CALL_TIMEOUT_S)
        if isinstance(result, Done):
            return result.value, result.maybe_applied_before
        return None, isinstance(result, Unknown)


class Workload:
    def __init__(self, *, history: HistoryWriter, addresses: Sequence[str], cluster_id: str,
                 bootstrap: str, config: WorkloadConfig, seed: int,
                 admin_ssl: ssl.SSLContext | None = None,
                 clients: ClientSecurity | None = None) -> None:
        self.history = history
        self.admin_ssl = admin_ssl
        self.clients = clients
        self.addresses = list(addresses)
        self.cluster_id = cluster_id
        self.bootstrap = bootstrap
        self.config = config
        self.seed = seed
        self.seen_ids: list[str] = []  # every ID a create returned: describe by ID
        self.churn_ids: list[str] = []  # those of churned names: delete by ID
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.errors: list[str] = []

    # -- operations --------------------------------------------------------------------

    def _record(self, process: str, op: str, args: dict[str, Any],
                action: Callable[[], Outcome]) -> Outcome:
        index = self.history.invoke(process, op, args)
        try:
            outcome = action()
        except Exception as exc:  # recorded as unknown: the cluster may have applied it
            log.warning("operation raised", extra={"op": op, "error": repr(exc)})
            outcome = Outcome(UNKNOWN, {"error": repr(exc)})
        self.history.complete(index, process, op, outcome.status, outcome.result)
        return outcome

    def create(self, caller: AdminCaller, process: str, name: str) -> Outcome:
        def action() -> Outcome:
            response, ambiguous = caller.call(CreateTopicsRequest(topics=(CreatableTopic(
                name=name, num_partitions=self.config.partitions,
                replication_factor=(self.config.churn_replication_factor
                                    if name in self.config.churn_names
                                    else self.config.replication_factor),
                configs=self.config.topic_configs(name)),)), is_write=True)
            if not isinstance(response, CreateTopicsResponse):
                return _unclear(response, ambiguous)
            result = response.topics[0]
            if result.error_code == 0:
                self._saw(str(result.topic_id), churned=name in self.config.churn_names)
                return Outcome(OK, {"topic_id": str(result.topic_id)})
            return _refused(result.error_code, ambiguous)
        return self._record(process, "create", {"name": name}, action)

    def delete(self, caller: AdminCaller, process: str, name: str | None,
               topic_id: str | None = None) -> Outcome:
        def action() -> Outcome:
            entry = (DeleteTopicState(topic_id=Uuid.from_string(topic_id)) if topic_id
                     else DeleteTopicState(name=name))
            response, ambiguous = caller.call(DeleteTopicsRequest(topics=(entry,)),
                                              is_write=True)
            if not isinstance(response, DeleteTopicsResponse):
                return _unclear(response, ambiguous)
            result = response.responses[0]
            if result.error_code == 0:
                return Outcome(OK, {"topic_id": str(result.topic_id), "name": result.name})
            return _refused(result.error_code, ambiguous)
        args = {"topic_id": topic_id} if topic_id else {"name": name}
        return self._record(process, "delete", args, action)

    def describe(self, caller: AdminCaller, process: str, *, name: str | None = None,
                 topic_id: str | None = None) -> Outcome:
        def action() -> Outcome:
            message = (DescribeTopicsRequest(topic_ids=(Uuid.from_string(topic_id),))
                       if topic_id else DescribeTopicsRequest(names=(str(name),)))
            response, _ = caller.call(message, is_write=False)
            if not isinstance(response, DescribeTopicsResponse):
                return Outcome(FAILED, {"error": "no answer"})
            if response.error_code != 0:
                return Outcome(FAILED, {"error": error_name(response.error_code)})
            topic = response.topics[0]
            if topic.error_code != 0:
                return Outcome(FAILED, {"error": error_name(topic.error_code)})
            return Outcome(OK, {"name": topic.name, "topic_id": str(topic.topic_id)})
        if topic_id:
            return self._record(process, "describe_id", {"topic_id": topic_id}, action)
        return self._record(process, "describe_name", {"name": name}, action)

    def _saw(self, topic_id: str, *, churned: bool) -> None:
        with self._lock:
            self.seen_ids.append(topic_id)
            if churned:
                self.churn_ids.append(topic_id)

    # -- threads -----------------------------------------------------------------------

    def stop(self) -> None:
        """Ask every loop to end after its current call (a run torn down early)."""
        self._stop.set()

    def setup(self) -> None:
        """Create the stable topics (acknowledged creates, or ClusterError)."""
        caller = AdminCaller(self.addresses, self.cluster_id, self.admin_ssl)
        for name in self.config.stable_names:
            for _ in range(10):
                outcome = self.create(caller, "setup", name)
                if outcome.status == OK or outcome.result.get("error") == "TOPIC_ALREADY_EXISTS":
                    break
            else:
                raise ClusterError(f"could not create topic {name!r}")

    def run(self, deadline: float) -> None:
        threads = [threading.Thread(target=self._guard, args=(self._admin_loop, i, deadline),
                                    name=f"admin-{i}", daemon=True)
                   for i in range(self.config.admin_threads)]
        threads += [threading.Thread(target=self._guard, args=(self._produce_loop, i, deadline),
                                     name=f"producer-{i}", daemon=True)
                    for i in range(self.config.producer_threads)]
        for thread in threads:
            thread.start()
        for thread in threads:  # every call is bounded, so each loop ends soon after
            thread.join(max(1.0, deadline - time.monotonic() + 3 * CALL_TIMEOUT_S + 15))
        self._stop.set()
        alive = [t.name for t in threads if t.is_alive()]
        if alive:
            self.errors.append(f"workload threads still running at the end: {alive}")

    def _guard(self, loop: Callable[[int, float], None], number: int, deadline: float) -> None:
        try:
            loop(number, deadline)
        except Exception as exc:  # reported in the verdict, never silently lost
            log.exception("workload thread failed")
            self.errors.append(f"{threading.current_thread().name}: {exc!r}")

    def _admin_loop(self, number: int, deadline: float) -> None:
        rng = random.Random(self.seed * 1000 + number)
        caller = AdminCaller(self.addresses, self.cluster_id, self.admin_ssl)
        process = f"admin-{number}"
        while time.monotonic() < deadline and not self._stop.is_set():
            name = rng.choice(self.config.churn_names)
            choice = rng.random()
            with self._lock:
                known, deletable = list(self.seen_ids), list(self.churn_ids)
            if choice < 0.3:
                self.create(caller, process, name)
            elif choice < 0.5:
                self.delete(caller, process, name)
            elif choice < 0.55 and deletable:
                self.delete(caller, process, None, rng.choice(deletable))
            elif choice < 0.75:
                self.describe(caller, process, name=rng.choice(
                    self.config.churn_names + self.config.stable_names))
            elif known:
                self.describe(caller, process, topic_id=rng.choice(known))
            time.sleep(rng.uniform(0.01, 0.1))

    def _produce_loop(self, number: int, deadline: float) -> None:
        import kafka
        from kafka.errors import KafkaError

        rng = random.Random(self.seed * 1000 + 100 + number)
        process = f"producer-{number}"
        login = {} if self.clients is None else self.clients.kafka_python(PRODUCER_USER)
        producer = kafka.KafkaProducer(**login,
            bootstrap_servers=self.bootstrap, acks="all", retries=0, linger_ms=0,
            enable_idempotence=False, request_timeout_ms=3000, max_block_ms=2000,
            metadata_max_age_ms=1000, reconnect_backoff_max_ms=500)
        try:
            sequence = 0
            while time.monotonic() < deadline and not self._stop.is_set():
                names = self.config.stable_names if rng.random() < 0.8 \
                    else self.config.churn_names
                name, partition = rng.choice(names), rng.randrange(self.config.partitions)
                value = f"{process}-{sequence}"
                sequence += 1
                key = f"key-{rng.randrange(COMPACTED_KEYS)}" \
                    if name in self.config.compacted_names else None

                def action(name: str = name, partition: int = partition,
                           value: str = value, key: str | None = key) -> Outcome:
                    try:
                        future = producer.send(name, value=value.encode(), partition=partition,
                                               key=None if key is None else key.encode())
                    except KafkaError as exc:  # nothing was sent (e.g. no metadata yet)
                        return Outcome(FAILED, {"error": type(exc).__name__})
                    try:
                        metadata = future.get(timeout=CALL_TIMEOUT_S + 2)
                    except KafkaError as exc:
                        status = FAILED if type(exc).__name__ in _DEFINITE_PRODUCE else UNKNOWN
                        return Outcome(status, {"error": type(exc).__name__})
                    return Outcome(OK, {"offset": metadata.offset})
                self._record(process, "produce",
                             {"name": name, "partition": partition, "value": value,
                              **({} if key is None else {"key": key})}, action)
        finally:
            try:
                producer.close(timeout=2)
            except KafkaError:  # close flushes: a batch still unanswered at the end times
                pass  # out here, and its send was already recorded (unknown)


# the broker answered and did not append (kafka-python's names for those error codes).
# Not NotLeaderForPartitionError: as in Kafka, an acks=all produce whose leader is deposed
# after appending gets it too, and the new leader may already hold the records.
_DEFINITE_PRODUCE = frozenset({"UnknownTopicOrPartitionError", "LeaderNotAvailableError",
                               "UnknownTopicIdError"})


def _unclear(response: Any, ambiguous: bool) -> Outcome:
    if response is None and not ambiguous:  # the request never left this client
        return Outcome(FAILED, {"error": "no controller reachable"})
    if response is None:
        return Outcome(UNKNOWN, {"error": "no answer in time"})
    code = getattr(response, "top_level_error", -1)
    return Outcome(UNKNOWN if ambiguous or code == ErrorCode.NOT_CONTROLLER else FAILED,
                   {"error": error_name(code)})


def _refused(code: int, ambiguous: bool) -> Outcome:
    definite = code in DEFINITE and not ambiguous
    return Outcome(FAILED if definite else UNKNOWN, {"error": error_name(code)})
