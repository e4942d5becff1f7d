"""The client checks of the chaos group workload (tools/chaos/client_checks.py): a clean
history of idempotent produces, two members handing a partition over through a commit,
and the topic's final contents passes; each rule then fires on one planted violation (a
duplicate in the log, a reordering, a lost acknowledged record, a record never consumed,
a consumed record the log does not hold, a skipped offset after a rebalance or within an
assignment, a commit above unconsumed records, a committed offset going backwards), and
is the only rule that fires."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tools.chaos.checker import ReadRecord
from tools.chaos.client_checks import (
    ClientResult,
    check_clients,
    parse_value,
    resent_after_epoch_bump,
)
from tools.chaos.history import FAILED, INVOKE, OK, UNKNOWN, Event

TOPIC_ID = "T"


@dataclass
class History:
    events: list[Event] = field(default_factory=list)
    now: float = 0.0

    def op(self, process: str, op: str, args: dict[str, Any], status: str = OK,
           result: dict[str, Any] | None = None) -> None:
        index = len(self.events)
        self.now += 1.0
        self.events.append(Event(index=index, process=process, type=INVOKE, op=op,
                                 time=self.now, args=args))
        self.now += 1.0
        self.events.append(Event(index=index, process=process, type=status, op=op,
                                 time=self.now, result=result or {}))

    def produce(self, seq: int, offset: int, partition: int = 0, status: str = OK,
                producer: str = "idem-0.0") -> None:
        self.op(producer, "idem_produce", {"producer": producer, "seq": seq,
                                           "value": f"{producer}:{seq}"},
                status, {"partition": partition, "offset": offset} if status == OK else {})

    def assign(self, member: str, session: int, committed: int | None,
               partition: int = 0) -> None:
        self.op(member, "assign", {"session": session, "partitions": [partition]},
                OK, {"partitions": [partition], "committed": {str(partition): committed}})

    def consume(self, member: str, session: int, offset: int, value: str,
                partition: int = 0) -> None:
        self.op(member, "consume", {"session": session, "partition": partition,
                                    "offset": offset, "value": value})

    def commit(self, member: str, session: int, offset: int, partition: int = 0,
               status: str = OK) -> None:
        self.op(member, "commit", {"session": session, "offsets": {str(partition): offset}},
                status)

    def committed(self, member: str, offset: int | None, partition: int = 0) -> None:
        self.op(member, "committed", {"partitions": [partition]}, OK,
                {"committed": {str(partition): offset}})


def log_of(*values: str, partition: int = 0) -> list[ReadRecord]:
    return [ReadRecord(topic_id=TOPIC_ID, partition=partition, offset=o, value=v)
            for o, v in enumerate(values)]


VALUES = [f"idem-0.0:{seq}" for seq in range(4)]


def clean() -> History:
    """Four acknowledged records at offsets 0-3; member-0 consumes 0-1 and commits 2; after
    a rebalance member-1 reads committed 2, consumes 2-3 and commits 4."""
    h = History()
    for seq in range(4):
        h.produce(seq, seq)
    h.assign("member-0.0", 1, None)
    h.consume("member-0.0", 1, 0, VALUES[0])
    h.consume("member-0.0", 1, 1, VALUES[1])
    h.commit("member-0.0", 1, 2)
    h.committed("member-0.0", 2)
    h.assign("member-1.0", 1, 2)
    h.consume("member-1.0", 1, 2, VALUES[2])
    h.consume("member-1.0", 1, 3, VALUES[3])
    h.commit("member-1.0", 1, 4)
    h.committed("drain", 4)
    return h


def run(h: History, reads: list[ReadRecord] | None = None,
        read_complete: bool = True) -> ClientResult:
    return check_clients(h.events, log_of(*VALUES) if reads is None else reads,
                         read_complete=read_complete, member_kills=1)


def kinds(result: ClientResult) -> set[str]:
    return {v.kind for v in result.violations}


def test_a_clean_history_passes_with_its_counts() -> None:
    result = run(clean())
    assert result.violations == ()
    assert result.counts == {
        "produced": 4, "acked": 4, "acked_without_offset": 0, "produce_unknown": 0, "consumed": 4,
        "consumed_distinct": 4, "redelivered": 0, "log_records": 4, "log_duplicates": 0,
        "duplicates_after_epoch_bump": 0, "rebalances": 2, "member_kills": 1, "commits": 2,
            "commits_ok": 2,
        "committed_reads": 4, "producer_fatal": 0}


def test_redelivery_after_a_rebalance_is_allowed_and_counted() -> None:
    h = History()
    for seq in range(4):
        h.produce(seq, seq)
    h.assign("member-0.0", 1, None)
    for offset in range(3):
        h.consume("member-0.0", 1, offset, VALUES[offset])
    h.commit("member-0.0", 1, 3, status=UNKNOWN)  # killed before the answer
    h.assign("member-1.0", 1, None)  # the commit did not apply: consume again from 0
    for offset in range(4):
        h.consume("member-1.0", 1, offset, VALUES[offset])
    h.commit("member-1.0", 1, 4)
    result = run(h)
    assert result.violations == ()
    assert result.counts["redelivered"] == 3


def test_idem_duplicate_when_a_record_is_in_the_log_twice() -> None:
    assert kinds(run(clean(), log_of(*VALUES, VALUES[3]))) == {"idem_duplicate"}
    assert run(clean(), log_of(*VALUES, VALUES[3])).counts["log_duplicates"] == 1


def test_a_duplicate_under_a_later_epoch_of_one_producer_id_is_counted_not_flagged() -> None:
    """librdkafka re-sends unacknowledged records under a bumped epoch after a message
    timeout: copies under two epochs of one producer id are counted; copies under one
    epoch, under two producer ids, or of unknown producer still flag."""
    def log_with(first: tuple[int, int] | None, second: tuple[int, int] | None
                 ) -> list[ReadRecord]:
        reads = log_of(*VALUES, VALUES[3])
        return [replace(r, producer=first if r.offset < 4 else second) for r in reads]

    result = run(clean(), log_with((7, 0), (7, 1)))
    assert "idem_duplicate" not in kinds(result)
    assert result.counts["duplicates_after_epoch_bump"] == 1
    for first, second in (((7, 0), (7, 0)), ((7, 0), (8, 1)), (None, (7, 1)),
                          ((7, 0), None), ((-1, -1), (-1, 0))):
        flagged = run(clean(), log_with(first, second))
        assert kinds(flagged) == {"idem_duplicate"}, (first, second)
        assert flagged.counts["duplicates_after_epoch_bump"] == 0


def test_resent_values_are_those_stored_under_two_epochs_of_one_producer_id() -> None:
    reads = [replace(r, producer=(7, 0) if r.offset < 4 else (7, 1))
             for r in log_of(*VALUES, VALUES[3])]
    assert resent_after_epoch_bump(reads) == {VALUES[3]}
    same_epoch = [replace(r, producer=(7, 0)) for r in reads]
    assert resent_after_epoch_bump(same_epoch) == frozenset()
    assert resent_after_epoch_bump(log_of(*VALUES)) == frozenset()


def test_idem_order_when_a_producers_sequence_goes_down_in_a_partition() -> None:
    reads = log_of(VALUES[0], VALUES[2], VALUES[1])
    assert kinds(check_clients([], reads, read_complete=True)) == {"idem_order"}
    # other producers and other partitions do not order each other
    reads = log_of(VALUES[0], "idem-1.0:0") + log_of(VALUES[1], partition=1)
    assert kinds(check_clients([], reads, read_complete=True)) == set()


def test_idem_lost_when_an_acknowledged_record_is_not_at_its_offset() -> None:
    h = clean()
    h.produce(4, 4)
    h.consume("member-1.0", 1, 4, "idem-0.0:4")
    assert kinds(run(h, log_of(*VALUES))) == {"idem_lost", "consumed_phantom"}
    # not lost when the log could not be read to its end
    assert kinds(run(h, log_of(*VALUES), read_complete=False)) == set()


def test_idem_lost_when_acknowledged_without_an_offset_and_not_in_its_partition() -> None:
    """librdkafka may acknowledge a batch without its offset (one it knows persisted):
    then the record must be somewhere in its partition."""
    h = History()
    for seq in range(4):
        h.produce(seq, seq)
    h.op("idem-0.0", "idem_produce", {"producer": "idem-0.0", "seq": 4,
                                      "value": "idem-0.0:4"}, OK,
         {"partition": 0, "offset": None})
    h.assign("member-0.0", 1, None)
    for offset, value in enumerate([*VALUES, "idem-0.0:4"]):
        h.consume("member-0.0", 1, offset, value)
    result = run(h, log_of(*VALUES, "idem-0.0:4"))
    assert result.violations == ()
    assert result.counts["acked_without_offset"] == 1
    in_other_partition = log_of(*VALUES) + log_of("idem-0.0:4", partition=1)
    assert "idem_lost" in kinds(run(h, in_other_partition))


def test_unconsumed_when_an_acknowledged_record_was_never_consumed() -> None:
    h = clean()
    h.produce(4, 4)
    result = run(h, log_of(*VALUES, "idem-0.0:4"))
    assert kinds(result) == {"unconsumed"}
    # an unacknowledged one need not be
    h = clean()
    h.produce(4, 4, status=UNKNOWN)
    assert kinds(run(h, log_of(*VALUES, "idem-0.0:4"))) == set()


def test_consumed_phantom_when_a_member_read_what_the_log_does_not_hold() -> None:
    h = clean()
    h.consume("member-1.0", 1, 4, "idem-9.0:0")  # e.g. above a later truncation
    assert kinds(run(h)) == {"consumed_phantom"}


def test_skipped_when_the_first_record_after_a_rebalance_is_past_the_committed_offset(
        ) -> None:
    h = History()
    for seq in range(4):
        h.produce(seq, seq)
    h.assign("member-0.0", 1, None)
    h.consume("member-0.0", 1, 0, VALUES[0])
    h.consume("member-0.0", 1, 1, VALUES[1])
    h.commit("member-0.0", 1, 2)
    h.assign("member-1.0", 1, 2)
    h.consume("member-1.0", 1, 3, VALUES[3])  # offset 2 jumped over
    h.consume("member-0.0", 1, 2, VALUES[2])  # (consumed, so only the skip is reported)
    assert kinds(run(h)) == {"skipped"}


def test_skipped_when_a_member_jumps_over_a_record_within_an_assignment() -> None:
    h = History()
    for seq in range(4):
        h.produce(seq, seq)
    h.assign("member-0.0", 1, None)
    h.consume("member-0.0", 1, 0, VALUES[0])
    h.consume("member-0.0", 1, 2, VALUES[2])  # offset 1 jumped over
    h.consume("member-0.0", 1, 3, VALUES[3])
    h.assign("member-1.0", 1, None)
    h.consume("member-1.0", 1, 0, VALUES[0])
    h.consume("member-1.0", 1, 1, VALUES[1])
    assert kinds(run(h)) == {"skipped"}


def test_committed_unconsumed_when_the_group_commits_past_records_none_consumed() -> None:
    h = History()
    for seq in range(4):
        h.produce(seq, seq)
    h.assign("member-0.0", 1, None)
    h.consume("member-0.0", 1, 0, VALUES[0])
    h.commit("member-0.0", 1, 4)  # offsets 1-3 never consumed
    assert "committed_unconsumed" in kinds(run(h))
    assert kinds(run(h)) == {"committed_unconsumed", "unconsumed"}


def test_commit_backwards_when_a_later_read_returns_less_than_a_commit() -> None:
    h = clean()
    h.committed("member-1.0", 2)  # after 4 was committed and read
    assert kinds(run(h)) == {"commit_backwards"}
    h = clean()
    h.committed("member-1.0", None)  # the commit vanished altogether
    assert kinds(run(h)) == {"commit_backwards"}


def test_commit_backwards_also_from_the_committed_offset_an_assignment_reads() -> None:
    h = clean()
    h.assign("member-2.0", 1, 1)
    h.consume("member-2.0", 1, 1, VALUES[1])
    assert kinds(run(h)) == {"commit_backwards"}


def test_commit_backwards_needs_real_time_order() -> None:
    """A read overlapping a commit may return the value before it; failed or unknown
    commits set no floor."""
    h = clean()
    index = len(h.events)
    h.events += [
        Event(index=index, process="member-1.0", type=INVOKE, op="commit", time=100.0,
              args={"session": 1, "offsets": {"0": 9}}),
        Event(index=index + 1, process="drain", type=INVOKE, op="committed", time=101.0,
              args={"partitions": [0]}),
        Event(index=index + 1, process="drain", type=OK, op="committed", time=102.0,
              result={"committed": {"0": 4}}),
        Event(index=index, process="member-1.0", type=OK, op="commit", time=103.0)]
    h.now = 104.0
    assert kinds(run(h)) == set()  # (every record below 9 was consumed)
    h = clean()
    h.commit("member-1.0", 1, 9, status=FAILED)
    h.commit("member-1.0", 1, 9, status=UNKNOWN)
    h.committed("drain", 4)
    assert kinds(run(h)) == set()


def test_parse_value() -> None:
    assert parse_value("idem-0.1:17") == ("idem-0.1", 17)
    assert parse_value("producer-0-3") is None
    assert parse_value(":3") is None
