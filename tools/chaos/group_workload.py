"""The chaos workload of Kafka's client promises: idempotent producers and a consumer group.

- `idem-N` threads (confluent_kafka, `enable.idempotence=True`, acks=all, librdkafka's
  own retries) produce keyed records whose value is `PRODUCER:SEQ`, PRODUCER naming one
  producer instance (`idem-N.I`: a new instance after a fatal error gets a new name, so
  its sequence numbers are checked on their own) and SEQ counting up from 0. Each send is
  an `idem_produce` operation of the main history: ok with the partition and offset of
  the delivery report, unknown on any delivery error (it may be in the log).
- MEMBERS consumer processes (`python -m tools.chaos.group_workload`, confluent_kafka,
  auto-commit off) in one group consume the topic, "process" each record (an instant
  `consume` operation), commit synchronously what they processed (`commit`), read the
  committed offsets back (`committed`, also on every assignment: `assign`), each into its
  own history file (`members/NAME.jsonl`), so a SIGKILL loses nothing recorded. With the
  kill fault, a seeded thread SIGKILLs one member now and then and restarts it (a new
  incarnation: `member-K.I`).
- After the faults heal, `drain` waits (bounded) until the group's committed offsets
  reach every partition's high watermark, then the members stop (SIGTERM, then SIGKILL).

On a secured cluster (`kraft chaos --secure`, tools/chaos/security.py) the producers log
in with SASL_SSL as `chaos-producer`, the members and the drain client as
`chaos-consumer` (a member reads its librdkafka settings from `--client-config FILE`,
a JSON object, so the password is not on its command line), the final read as
`chaos-checker`, and the topic is created over mutual TLS with the admin certificate.

tools/chaos/client_checks.py checks the merged histories against the topic's final
contents. Every loop ends by a deadline and every client call has its own timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metadata.admin import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from tools.chaos.checker import ReadRecord
from tools.chaos.client_checks import ClientResult, check_clients, resent_after_epoch_bump
from tools.chaos.final import FinalTopic, read_all, with_producers
from tools.chaos.history import OK, UNKNOWN, Event, HistoryWriter, read_history
from tools.chaos.security import CHECKER_USER, CONSUMER_USER, PRODUCER_USER, ClientSecurity
from tools.chaos.workload import AdminCaller, error_name
from tools.quorum_client import ClusterError

log = logging.getLogger(__name__)

GROUP_TOPIC = "g0"
OFFSETS_TOPIC = "__consumer_offsets"
GROUP_ID = "chaos-group"
MEMBERS_DIR = "members"
MEMBER_CLIENT_CONFIG = "client-config.json"  # in MEMBERS_DIR, on a secured cluster
MEMBER_INDEX_STRIDE = 10**9  # member file k's indices are shifted by (k + 1) * this


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    topic: str = GROUP_TOPIC
    group: str = GROUP_ID
    partitions: int = 3
    replication_factor: int = 3
    members: int = 3
    producers: int = 2
    send_interval_s: tuple[float, float] = (0.05, 0.15)  # between sends: ~10/s per producer
    kill_every_s: tuple[float, float] = (8.0, 20.0)  # member SIGKILLs (with the kill fault)
    kill_hold_s: tuple[float, float] = (0.5, 4.0)  # down this long before its restart
    session_timeout_ms: int = 6000
    setup_timeout_s: float = 60.0
    stop_timeout_s: float = 15.0


class GroupWorkload:
    def __init__(self, *, directory: Path, history: HistoryWriter, addresses: Sequence[str],
                 cluster_id: str, bootstrap: str, seed: int, kills: bool,
                 config: GroupConfig | None = None, admin_ssl: ssl.SSLContext | None = None,
                 clients: ClientSecurity | None = None) -> None:
        self.directory = directory / MEMBERS_DIR
        self.admin_ssl = admin_ssl
        self.clients = clients
        self.history = history
        self.addresses = list(addresses)
        self.cluster_id = cluster_id
        self.bootstrap = bootstrap
        self.seed = seed
        self.kills = kills
        self.config = config or GroupConfig()
        self.member_kills = 0
        self.producer_fatal = 0
        self.errors: list[str] = []  # while running
        self.final_errors: list[str] = []  # after healing (drain, final read)
        self.final_reads: list[ReadRecord] = []
        self.read_complete = False
        self._members: dict[int, tuple[subprocess.Popen[bytes], str]] = {}
        self._incarnations: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- setup and members -------------------------------------------------------------

    def setup(self) -> None:
        """Create the topic (an acknowledged create in the main history) and start the
        members; wait (bounded) until the group has assigned every partition."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.clients is not None:  # the members' login, readable by this user only
            path = self.directory / MEMBER_CLIENT_CONFIG
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump(self.clients.confluent(CONSUMER_USER), out)
        caller = AdminCaller(self.addresses, self.cluster_id, self.admin_ssl)
        for _ in range(10):
            status, error = self._create(caller)
            if status == OK or error == "TOPIC_ALREADY_EXISTS":
                break
        else:
            raise ClusterError(f"could not create topic {self.config.topic!r}")
        # the members' first FindCoordinator makes a broker create the internal offsets
        # topic: an operation of this workload whose outcome it does not see
        index = self.history.invoke("setup", "create", {"name": OFFSETS_TOPIC})
        self.history.complete(index, "setup", "create", UNKNOWN,
                              {"note": "created by the group coordinator on first use"})
        for slot in range(self.config.members):
            self._start_member(slot)
        deadline = time.monotonic() + self.config.setup_timeout_s
        while time.monotonic() < deadline:
            if self._assigned() >= set(range(self.config.partitions)):
                return
            time.sleep(0.5)
        raise ClusterError(f"group {self.config.group} assigned no partition within "
                           f"{self.config.setup_timeout_s:.0f} s")

    def _create(self, caller: AdminCaller) -> tuple[str, str | None]:
        args = {"name": self.config.topic}
        index = self.history.invoke("setup", "create", args)
        response, ambiguous = caller.call(CreateTopicsRequest(topics=(CreatableTopic(
            name=self.config.topic, num_partitions=self.config.partitions,
            replication_factor=self.config.replication_factor),)), is_write=True)
        if not isinstance(response, CreateTopicsResponse):
            self.history.complete(index, "setup", "create", UNKNOWN, {"error": "no answer"})
            return UNKNOWN, None
        result = response.topics[0]
        if result.error_code == 0:
            self.history.complete(index, "setup", "create", OK,
                                  {"topic_id": str(result.topic_id)})
            return OK, None
        error = error_name(result.error_code)
        # unknown, not failed: an earlier attempt of this create may have applied
        self.history.complete(index, "setup", "create", UNKNOWN, {"error": error})
        return UNKNOWN, error

    def _assigned(self) -> set[int]:
        """Partitions some member's latest assignment holds (from the member files)."""
        latest: dict[str, list[int]] = {}
        for event in self.member_events():
            if event.type == OK and event.op == "assign":
                latest[event.process] = list(event.result.get("partitions", []))
        return {p for parts in latest.values() for p in parts}

    def _start_member(self, slot: int) -> None:
        incarnation = self._incarnations.get(slot, -1) + 1
        self._incarnations[slot] = incarnation
        name = f"member-{slot}.{incarnation}"
        command = [sys.executable, "-m", "tools.chaos.group_workload", "--name", name,
                   "--bootstrap", self.bootstrap, "--topic", self.config.topic,
                   "--group", self.config.group,
                   "--session-timeout-ms", str(self.config.session_timeout_ms),
                   "--history", str(self.directory / f"{name}.jsonl")]
        if self.clients is not None:
            command += ["--client-config", str(self.directory / MEMBER_CLIENT_CONFIG)]
        with open(self.directory / f"{name}.log", "ab") as output:
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL)
        self._members[slot] = (process, name)

    def member_events(self) -> list[Event]:
        return load_member_events(self.directory)

    # -- under faults ------------------------------------------------------------------

    def start(self, deadline: float) -> None:
        self._threads = [threading.Thread(target=self._guard, args=(self._produce_loop, i,
                                                                    deadline),
                                          name=f"idem-{i}", daemon=True)
                         for i in range(self.config.producers)]
        if self.kills:
            self._threads.append(threading.Thread(target=self._guard, args=(
                self._kill_loop, 0, deadline), name="member-killer", daemon=True))
        for thread in self._threads:
            thread.start()

    def join(self, deadline: float) -> None:
        for thread in self._threads:  # each loop ends at `deadline`, its flush soon after
            thread.join(max(1.0, deadline - time.monotonic() + 40))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            self.errors.append(f"group workload threads still running at the end: {alive}")

    def _guard(self, loop: Any, number: int, deadline: float) -> None:
        try:
            loop(number, deadline)
        except Exception as exc:  # reported in the verdict, never silently lost
            log.exception("group workload thread failed")
            self.errors.append(f"{threading.current_thread().name}: {exc!r}")

    def _kill_loop(self, number: int, deadline: float) -> None:
        rng = random.Random(f"member-kills-{self.seed}")
        while not self._stop.wait(min(rng.uniform(*self.config.kill_every_s),
                                      max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                return
            slot = rng.randrange(self.config.members)
            with self._lock:
                process, name = self._members[slot]
                if process.poll() is None:
                    process.kill()  # SIGKILL, our own child
                    process.wait(10)
                    self.member_kills += 1
                    log.warning("member killed", extra={"member": name})
            self._stop.wait(rng.uniform(*self.config.kill_hold_s))
            with self._lock:
                if not self._stop.is_set():
                    self._start_member(slot)

    def _produce_loop(self, number: int, deadline: float) -> None:
        import confluent_kafka

        rng = random.Random(f"idem-{self.seed}-{number}")
        instance = 0
        while time.monotonic() < deadline and not self._stop.is_set():
            name = f"idem-{number}.{instance}"
            fatal = threading.Event()

            def on_error(error: Any, fatal: threading.Event = fatal) -> None:
                if error.fatal():
                    fatal.set()

            producer = confluent_kafka.Producer({
                **self._login(PRODUCER_USER), "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000,
                "request.timeout.ms": 5000, "retry.backoff.ms": 100,
                "topic.metadata.refresh.interval.ms": 2000, "error_cb": on_error,
                # its idempotence state changes (producer id, epoch bumps, drains) go to
                # DIR/members/NAME.rdkafka.log, not stderr: what a stalled producer did
                "debug": "eos", "logger": self._rdkafka_logger(name)})
            try:
                self._produce_instance(producer, name, rng, deadline, fatal)
            finally:
                left = producer.flush(30)
                if left:
                    log.warning("records undelivered at the end", extra={"left": left})
            if fatal.is_set():
                self.producer_fatal += 1
                index = self.history.invoke(name, "producer_fatal", {})
                self.history.complete(index, name, "producer_fatal", OK, {})
                instance += 1

    def _rdkafka_logger(self, name: str) -> logging.Logger:
        """A logger of its own for one producer's librdkafka log, to a file only."""
        logger = logging.getLogger(f"{__name__}.rdkafka.{name}")
        logger.propagate = False
        if not logger.handlers:
            handler = logging.FileHandler(self.directory / f"{name}.rdkafka.log")
            handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.DEBUG)
        return logger

    def _produce_instance(self, producer: Any, name: str, rng: random.Random,
                          deadline: float, fatal: threading.Event) -> None:
        from confluent_kafka import KafkaException

        sequence = 0
        while time.monotonic() < deadline and not self._stop.is_set() and not fatal.is_set():
            value = f"{name}:{sequence}"
            key = f"k{sequence % 7}"
            index = self.history.invoke(name, "idem_produce",
                                        {"producer": name, "seq": sequence, "key": key,
                                         "value": value, "topic": self.config.topic})

            def delivered(error: Any, message: Any, index: int = index) -> None:
                if error is None:
                    self.history.complete(index, name, "idem_produce", OK, {
                        "partition": message.partition(), "offset": message.offset()})
                else:
                    self.history.complete(index, name, "idem_produce", UNKNOWN,
                                          {"error": error.name()})
            try:
                producer.produce(self.config.topic, key=key.encode(), value=value.encode(),
                                 on_delivery=delivered)
            except (BufferError, KafkaException) as exc:
                self.history.complete(index, name, "idem_produce", UNKNOWN,
                                      {"error": repr(exc)})
                producer.poll(0.5)
            sequence += 1
            producer.poll(rng.uniform(*self.config.send_interval_s))

    # -- after healing -----------------------------------------------------------------

    def drain(self, timeout_s: float) -> bool:
        """Wait until the group committed every partition's high watermark (each look a
        `committed` operation of process `drain`); False if it did not in time."""
        import confluent_kafka

        partitions = [confluent_kafka.TopicPartition(self.config.topic, p)
                      for p in range(self.config.partitions)]
        with self._lock:  # a member killed last must run again to drain
            for slot, (process, _) in self._members.items():
                if process.poll() is not None:
                    self._start_member(slot)
        client = confluent_kafka.Consumer({**self._login(CONSUMER_USER),
                                           "bootstrap.servers": self.bootstrap,
                                           "group.id": self.config.group,
                                           "enable.auto.commit": False})
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                try:
                    highs = [client.get_watermark_offsets(tp, timeout=5)[1]
                             for tp in partitions]
                except confluent_kafka.KafkaException:
                    time.sleep(1.0)
                    continue
                committed = _observe(self.history, "drain", client, partitions)
                if committed is not None and all(
                        (committed.get(p) or 0) >= high for p, high in enumerate(highs)):
                    return True
                time.sleep(1.0)
            return False
        finally:
            client.close()

    def observe_final(self, topics: dict[str, FinalTopic], drain_timeout_s: float,
                      read_timeout_s: float, log_dirs: Mapping[int, Path]) -> None:
        """After healing: let the group drain, stop the members, read the topic (each
        record with its batch's producer id and epoch from the brokers' `log_dirs`)."""
        if not self.drain(drain_timeout_s):
            self.final_errors.append(f"group {self.config.group} did not commit every "
                                     f"partition's high watermark within {drain_timeout_s} s")
        self.stop()
        topic = topics.get(self.config.topic)
        if topic is None:
            self.final_errors.append(f"topic {self.config.topic} is not in the final metadata")
            return
        reads, complete, _ = read_all(
            self.bootstrap, {self.config.topic: topic}, read_timeout_s,
            None if self.clients is None else self.clients.kafka_python(CHECKER_USER))
        self.final_reads = with_producers(reads, log_dirs, topic.topic_id)
        self.read_complete = all(complete.values())
        if not self.read_complete:
            self.final_errors.append(f"topic {self.config.topic} was not read to its end "
                                     f"within {read_timeout_s} s")

    def _login(self, user: str) -> dict[str, Any]:
        """librdkafka's SASL_SSL settings for `user` ({} on a plaintext cluster)."""
        return {} if self.clients is None else self.clients.confluent(user)

    def resent(self) -> frozenset[str]:
        """The values librdkafka stored twice, under two epochs (`resent_after_epoch_bump`)."""
        return resent_after_epoch_bump(self.final_reads)

    def check(self) -> ClientResult:
        """The client checks over the main history and the members' histories."""
        return check_clients(self.history.events() + self.member_events(), self.final_reads,
                             read_complete=self.read_complete,
                             member_kills=self.member_kills)

    def stop(self) -> None:
        """End the producers and the killer, then every member: SIGTERM (it commits and
        leaves the group), SIGKILL if it has not exited in time. Idempotent."""
        self._stop.set()
        with self._lock:
            members = list(self._members.values())
        for process, _ in members:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.config.stop_timeout_s
        for process, name in members:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("member did not stop; killed", extra={"member": name})
                process.kill()
                process.wait(10)


def _observe(history: HistoryWriter, process: str, client: Any, partitions: list[Any]
             ) -> dict[int, int | None] | None:
    """One `committed` operation: the group's committed offsets (None: no commit)."""
    from confluent_kafka import KafkaException

    index = history.invoke(process, "committed", {"partitions": [tp.partition
                                                                 for tp in partitions]})
    try:
        answer = client.committed(partitions, timeout=5)
    except KafkaException as exc:
        history.complete(index, process, "committed", UNKNOWN, {"error": repr(exc)})
        return None
    if any(tp.error is not None for tp in answer):
        history.complete(index, process, "committed", UNKNOWN, {"error": str(
            next(tp.error for tp in answer if tp.error is not None))})
        return None
    offsets = {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in answer}
    history.complete(index, process, "committed", OK,
                     {"committed": {str(p): o for p, o in offsets.items()}})
    return offsets


def load_member_events(directory: Path) -> list[Event]:
    """Every member file's events, indices shifted so that they are unique across files
    and the main history (whose indices stay below MEMBER_INDEX_STRIDE)."""
    events: list[Event] = []
    if not directory.is_dir():
        return events
    for number, path in enumerate(sorted(directory.glob("*.jsonl"))):
        shift = (number + 1) * MEMBER_INDEX_STRIDE
        for event in read_history(path):
            events.append(Event(index=event.index + shift, process=event.process,
                                type=event.type, op=event.op, time=event.time,
                                args=event.args, result=event.result))
    return events


# -- a member process ------------------------------------------------------------------


class Member:
    """One group member: poll, process (record), commit synchronously, read back."""

    COMMIT_EVERY_S = 0.5
    COMMIT_EVERY_RECORDS = 50

    def __init__(self, name: str, history: HistoryWriter, topic: str) -> None:
        self.name = name
        self.history = history
        self.topic = topic
        self.session = 0
        self.assigned: list[int] = []
        self.pending: dict[int, int] = {}  # partition -> next offset to commit
        self.uncommitted = 0
        self.last_commit = time.monotonic()

    def on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self.session += 1
        self.assigned = sorted(tp.partition for tp in partitions)
        self.pending.clear()
        index = self.history.invoke(self.name, "assign", {"session": self.session,
                                                          "partitions": self.assigned})
        from confluent_kafka import KafkaException
        try:
            answer = consumer.committed(partitions, timeout=10) if partitions else []
        except KafkaException as exc:
            self.history.complete(index, self.name, "assign", UNKNOWN,
                                  {"error": repr(exc), "partitions": self.assigned})
            return
        errors = [str(tp.error) for tp in answer if tp.error is not None]
        if errors:
            self.history.complete(index, self.name, "assign", UNKNOWN,
                                  {"error": errors[0], "partitions": self.assigned})
            return
        self.history.complete(index, self.name, "assign", OK, {
            "partitions": self.assigned, "committed": {
                str(tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in answer}})

    def on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self.commit(consumer)
        self._instant("revoke", {"session": self.session, "partitions": self.assigned})
        self.assigned, self.pending = [], {}

    def on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        self._instant("lost", {"session": self.session, "partitions": self.assigned})
        self.assigned, self.pending = [], {}

    def _instant(self, op: str, args: dict[str, Any], result: dict[str, Any] | None = None
                 ) -> None:
        index = self.history.invoke(self.name, op, args)
        self.history.complete(index, self.name, op, OK, result or {})

    def consumed(self, message: Any) -> None:
        value = (message.value() or b"").decode()
        self._instant("consume", {"session": self.session, "partition": message.partition(),
                                  "offset": message.offset(), "value": value})
        self.pending[message.partition()] = message.offset() + 1
        self.uncommitted += 1

    def due(self) -> bool:
        return bool(self.pending) and (
            self.uncommitted >= self.COMMIT_EVERY_RECORDS
            or time.monotonic() - self.last_commit >= self.COMMIT_EVERY_S)

    def commit(self, consumer: Any) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        if not self.pending:
            return
        offsets = dict(self.pending)
        index = self.history.invoke(self.name, "commit", {
            "session": self.session, "offsets": {str(p): o for p, o in offsets.items()}})
        self.last_commit, self.uncommitted = time.monotonic(), 0
        try:
            answer = consumer.commit(offsets=[TopicPartition(self.topic, p, o)
                                              for p, o in offsets.items()],
                                     asynchronous=False)
        except KafkaException as exc:
            self.history.complete(index, self.name, "commit", UNKNOWN, {"error": repr(exc)})
            return
        errors = [str(tp.error) for tp in answer or [] if tp.error is not None]
        if errors:
            self.history.complete(index, self.name, "commit", UNKNOWN, {"error": errors[0]})
            return
        self.history.complete(index, self.name, "commit", OK, {})
        for partition, offset in offsets.items():
            if self.pending.get(partition) == offset:
                del self.pending[partition]
        if self.assigned:
            _observe(self.history, self.name, consumer,
                     [TopicPartition(self.topic, p) for p in self.assigned])


def member_main(argv: Sequence[str] | None = None) -> int:
    import confluent_kafka

    parser = argparse.ArgumentParser(prog="group member")
    parser.add_argument("--name", required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--history", required=True, type=Path)
    parser.add_argument("--max-s", type=float, default=4 * 3600.0)
    parser.add_argument("--client-config", type=Path, default=None,
                        help="a JSON object of librdkafka settings (a secured cluster's "
                             "SASL_SSL login)")
    args = parser.parse_args(argv)
    login = json.loads(args.client_config.read_text()) if args.client_config else {}
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    history = HistoryWriter(args.history)
    member = Member(args.name, history, args.topic)
    consumer = confluent_kafka.Consumer({
        **login, "bootstrap.servers": args.bootstrap, "group.id": args.group,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "session.timeout.ms": args.session_timeout_ms, "heartbeat.interval.ms": 500,
        "max.poll.interval.ms": 60000, "partition.assignment.strategy": "range",
        "socket.timeout.ms": 5000, "topic.metadata.refresh.interval.ms": 2000})
    consumer.subscribe([args.topic], on_assign=member.on_assign,
                       on_revoke=member.on_revoke, on_lost=member.on_lost)
    deadline = time.monotonic() + args.max_s
    parent = os.getppid()
    try:  # until SIGTERM, the deadline, or the chaos run that started it is gone
        while not stop.is_set() and time.monotonic() < deadline and os.getppid() == parent:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                member.consumed(message)
            if member.due():
                member.commit(consumer)
        member.commit(consumer)
    finally:
        with contextlib.suppress(Exception):
            consumer.close()  # leaves the group (its on_revoke commits first)
        history.close()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(member_main())
