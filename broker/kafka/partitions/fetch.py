"""Fetch (v4-v13, by name and from v13 by topic ID), ListOffsets and OffsetForLeaderEpoch.

Fetch reads whole batches from `fetch_offset` up to the high watermark (consumers) or the
log end (followers, `replica_id >= 0`, whose fetch offset also tells the leader how far
they have replicated: the high watermark follows the ISR). When less than `min_bytes`
is ready the request is parked until enough arrives or `max_wait` passes (long poll; a
partition error answers at once). A follower's fetches go through a KIP-227 session
(`broker.kafka.partitions.fetch_sessions`): after the first, a fetch carries only the
partitions whose fetch fields changed and is answered only with the partitions that have
something new, and a partition fetched again unchanged under the same image is recorded
as fetched without being read (`_idle_follower`). Consumers get session_id 0, which tells
them to send full fetches. A follower out of the ISR fetching a throttled replica gets no
records while the leader's replication quota is exceeded
(`broker.kafka.partitions.replication_quota`).

A partition's records are its stored bytes, never decoded: the slice of one segment file
from the batch holding the fetch offset, found through the offset index
(`PartitionLog.read_region`, held to a decode and re-encode by
tests/property/test_fetch_read_props.py). A consumer's, from `SENDFILE_MIN_BYTES` up,
are answered as that region of the file, held open and never read into the process:
the listener sends it with os.sendfile on a plaintext connection, reads and sends it
on TLS (`broker.kafka.framed_response`). They lie below the high watermark, which a
segment is never cut or rewritten under (a truncation cuts only above it, bar an
unclean election; cleaning and deletion replace or unlink files, and the region's
descriptor keeps the old one). A follower's, read up to the log end, which a
truncation may cut and overwrite in place, are read into the response at once, as
they stand when the fetch is answered; so are smaller ones.

A consumer's topic entry carrying an undeleted partition count that differs from the
image's (ordered delivery, `broker.kafka.ordered.rules`) gets INVALID_PARTITION_METADATA on
each of its partitions, without records: the consumer refreshes its metadata and
rejoins its group. Followers' fetches are never checked.

ListOffsets LATEST of a partition marked for deletion answers its log end once committed
(`broker.kafka.ordered.marked_end`; OFFSET_NOT_AVAILABLE, retriable, if it is not within
a few seconds): an ordered consumer's deletion gate waits for the group to consume all
of it, a record still above the high watermark included. Once the high watermark reaches
the log end the two are equal, so any client reads the same offset.

OffsetForLeaderEpoch reads the epoch's end under the partition lock, which a produce
holds from its count check to the end of its append (`broker.kafka.partitions.produce`):
an ordered consumer's creation gate, computed from this answer, never opens below a
record of the old count appended at the same time.

With the authorizer on (`broker.kafka.authz`): a consumer's Fetch needs READ on each
topic, a follower's (`replica_id >= 0`) CLUSTER_ACTION on the cluster, ListOffsets and
OffsetForLeaderEpoch DESCRIBE on the topic (a follower's: CLUSTER_ACTION); otherwise each
of the topic's partitions answers TOPIC_AUTHORIZATION_FAILED, as in Kafka. Fetch checks
it before the partition count, so a caller that may not read a topic learns nothing
else about it; an unknown topic ID answers UNKNOWN_TOPIC_ID before that, as Kafka's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import trio

from broker.dataplane.divergence import ABOVE_LOG_END, BELOW_LOG_START, leader_fetch
from broker.kafka import authz
from broker.kafka import response_shapes as shapes
from broker.kafka.admin.metadata_api import from_kafka_uuid
from broker.kafka.context import BrokerContext
from broker.kafka.ordered.marked_end import committed_log_end
from broker.kafka.ordered.rules import count_mismatch, is_marked_for_deletion
from broker.kafka.partitions.fetch_sessions import FetchSession, SessionPartition, is_news
from broker.kafka.partitions.file_region import FileRegion
from broker.kafka.partitions.replication_quota import leader_holds_back
from broker.kafka.replication.replica import PartitionState, Resolved, check_partition
from raft.common.errors import ErrorCode

EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP = -2, -1, -3
NOT_FOUND = (-1, -1, -1)  # (offset, timestamp, leader epoch): Kafka's "no such record"
# smaller records are read into the response: the copy costs less than a descriptor and
# a sendfile, and a response holds at most one descriptor per this many bytes it carries
SENDFILE_MIN_BYTES = 64 << 10


def _partition_error(index: int, error: ErrorCode, leader: Any = None
                     ) -> shapes.PartitionData:
    # empty records, never null: Kafka sends an empty set with an error, and librdkafka
    # takes a null one for a broken response (invalid MessageSetSize -1)
    out: shapes.PartitionData = {"partition_index": index, "error_code": int(error),
                                 "high_watermark": -1, "last_stable_offset": -1,
                                 "log_start_offset": -1, "records": b""}
    if leader is not None:
        out["current_leader"] = {"leader_id": leader.leader, "leader_epoch": leader.leader_epoch}
    return out


def _observe_follower(context: BrokerContext, state: PartitionState, partition: Any,
                      replica_id: int, offset: int, follower_start: int) -> None:
    now = trio.current_time()
    state.observe_partition(partition, now)  # a new leader epoch: fresh progress
    state.record_follower_fetch(replica_id, offset, now)
    if state.follower_log_starts.get(replica_id) != follower_start:
        state.follower_log_starts[replica_id] = follower_start
        state.notify()  # DeleteRecords waits for the low watermark
    if state.is_expansion_candidate(partition, replica_id):
        context.replicas.request_isr_check()  # it may rejoin the ISR


async def _fetch_partition(context: BrokerContext, *, name: str | None, topic_id: Any,
                           part: Any, replica_id: int, budget: int
                           ) -> tuple[shapes.PartitionData, tuple[Resolved, PartitionState] | None]:
    """The partition's answer, and what it was resolved to when it served the fetch
    (no error, no divergence)."""
    index = int(part.partition)
    resolved = check_partition(context.image, context.broker_id, partition=index, name=name,
                               topic_id=topic_id,
                               current_leader_epoch=int(getattr(part, "current_leader_epoch",
                                                                -1)))
    if resolved.error != ErrorCode.NONE:
        return _partition_error(index, resolved.error, resolved.partition), None
    error, state = await context.replicas.open(resolved)
    if state is None:
        return _partition_error(index, error), None
    assert resolved.partition is not None
    offset = int(part.fetch_offset)
    end = state.log.log_end_offset
    start = state.log.log_start_offset
    answer = leader_fetch(state.log.end_offset_for_epoch, log_start=start, log_end=end,
                          fetch_offset=offset,
                          last_fetched_epoch=int(getattr(part, "last_fetched_epoch", -1)),
                          from_follower=replica_id >= 0)
    if answer == BELOW_LOG_START:  # the follower resets its log to the start it carries
        out = _partition_error(index, ErrorCode.OFFSET_OUT_OF_RANGE)
        out["log_start_offset"] = start
        return out, None
    if isinstance(answer, tuple):  # tell the follower where to truncate, not records
        return {"partition_index": index, "error_code": 0,
                "high_watermark": state.high_watermark,
                "last_stable_offset": state.high_watermark,
                "log_start_offset": start, "records": b"",
                "diverging_epoch": {"epoch": answer[0], "end_offset": answer[1]}}, None
    if answer == ABOVE_LOG_END:
        return _partition_error(index, ErrorCode.OFFSET_OUT_OF_RANGE), None
    if replica_id >= 0:  # SERVE: the follower's log matches ours below `offset`
        _observe_follower(context, state, resolved.partition, replica_id, offset,
                          int(getattr(part, "log_start_offset", -1)))
    if state.maybe_advance_high_watermark(resolved.partition, context.broker_id):
        context.replicas.notify_data()
    max_bytes = max(1, min(int(part.partition_max_bytes), budget))
    now_ms = int(trio.current_time() * 1000)
    throttled = replica_id >= 0 and resolved.topic is not None and \
        context.leader_quota.throttles(context.broker_id, resolved.topic, index)
    records: bytes | FileRegion | None
    try:
        if replica_id < 0:
            region = state.log.read_region(offset, max_bytes, state.high_watermark)
            records = region if region is None or region.size >= SENDFILE_MIN_BYTES \
                else region.read_and_close()
        elif leader_holds_back(
                throttled=throttled, in_isr=replica_id in state.maximal_isr(resolved.partition),
                exceeded=throttled and context.leader_quota.exceeded(context.image,
                                                                     context.broker_id, now_ms)):
            records = b""
        else:
            records = state.log.read(offset, max_bytes, end)
    except OSError:  # the directory was staged for deletion under us
        gone = context.image.topic(state.topic_id) is None
        return _partition_error(index, ErrorCode.UNKNOWN_TOPIC_ID if gone
                                else ErrorCode.KAFKA_STORAGE_ERROR), None
    if throttled:
        context.leader_quota.record(len(records or b""), now_ms)
    return {"partition_index": index, "error_code": 0,
            "high_watermark": state.high_watermark, "last_stable_offset": state.high_watermark,
            "log_start_offset": state.log.log_start_offset, "aborted_transactions": [],
            "records": records or b""}, (resolved, state)


def _idle_follower(context: BrokerContext, entry: SessionPartition, replica_id: int) -> bool:
    """A session partition fetched with the same fields as a fetch it served under this
    same image, with the log end, high watermark and log start unchanged since that
    answer: the answer would be the same, so the fetch is only recorded (it keeps the
    follower caught up, Kafka's lastCaughtUpTime) and nothing is read or answered."""
    if entry.opened is None or entry.opened[0] is not context.image:
        return False
    resolved, state = entry.opened[1]
    offset = int(entry.fetch.fetch_offset)
    if offset != state.log.log_end_offset or \
            entry.answered != (state.high_watermark, state.log.log_start_offset):
        return False
    _observe_follower(context, state, resolved.partition, replica_id, offset,
                      int(entry.fetch.log_start_offset))
    return True


# a topic entry to answer: (topic ID on the wire, name, the request's topic entry or None
# for a session's, [(partition entry, its session partition or None)])
_Fetched = tuple[Any, str | None, Any, list[tuple[Any, SessionPartition | None]]]


def _fetched_topics(request: Any, session: FetchSession | None) -> Iterator[_Fetched]:
    if session is None:
        for topic in request.topics:
            yield (getattr(topic, "topic_id", None), getattr(topic, "topic", None), topic,
                   [(part, None) for part in topic.partitions])
        return
    for raw_id, entries in session.by_topic().items():
        yield raw_id, None, None, [(entry.fetch, entry) for entry in entries]


# a session partition answered, with the (high watermark, log start) it was told
_Answered = tuple[SessionPartition, tuple[int, int]]


async def _collect(context: BrokerContext, request: Any, session: FetchSession | None,
                   full: bool) -> tuple[list[shapes.FetchableTopicResponse], int,
                                        list[_Answered]]:
    """The answer to `request`: every partition of a full fetch; of an incremental
    one, only those with news (`is_news`)."""
    replica_id = int(getattr(request, "replica_id", -1))
    budget = int(getattr(request, "max_bytes", 0x7FFFFFFF))
    responses: list[shapes.FetchableTopicResponse] = []
    answered: list[_Answered] = []
    total = 0
    follower_allowed = replica_id < 0 or authz.cluster_allowed(context,
                                                               authz.Op.CLUSTER_ACTION)
    for raw_id, name, topic, parts in _fetched_topics(request, session):
        topic_id = from_kafka_uuid(raw_id)
        topic_error = _topic_error(context, topic, name, topic_id, replica_id,
                                   follower_allowed)
        partitions: list[shapes.PartitionData] = []
        for part, entry in parts:
            if topic_error is not None:
                data, served = _partition_error(int(part.partition), topic_error), None
            elif entry is not None and _idle_follower(context, entry, replica_id):
                continue
            else:
                image = context.image
                data, served = await _fetch_partition(
                    context, name=name, topic_id=topic_id, part=part, replica_id=replica_id,
                    budget=max(0, budget - total))
                if entry is not None:
                    entry.opened = None if served is None else (image, served)
            if entry is not None:
                if not full and not is_news(entry, data):
                    continue
                answered.append((entry, (data["high_watermark"], data["log_start_offset"])))
            total += len(data["records"] or b"")
            partitions.append(data)
        if partitions or full:
            responses.append({"topic": name, "topic_id": raw_id, "partitions": partitions})
    return responses, total, answered


def _topic_error(context: BrokerContext, topic: Any, name: str | None, topic_id: Any,
                 replica_id: int, follower_allowed: bool) -> ErrorCode | None:
    """The error every partition of a topic entry gets, or None. READ (a follower's
    CLUSTER_ACTION) is checked before anything else is said about the topic: a caller
    without it learns neither the topic's partitions nor its partition count."""
    if name is None and (topic_id is None or context.image.topic(topic_id) is None):
        return ErrorCode.UNKNOWN_TOPIC_ID  # IDs are not secret (Kafka answers this first)
    if not (follower_allowed if replica_id >= 0
            else authz.topic_allowed(context, authz.Op.READ, name, topic_id)):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return _count_error(context, topic, name, topic_id, replica_id)


def _count_error(context: BrokerContext, topic: Any, name: str | None,
                 topic_id: Any, replica_id: int) -> ErrorCode | None:
    """INVALID_PARTITION_METADATA for a consumer whose count differs from the image's."""
    client_count = getattr(topic, "undeleted_partition_count", None)
    if replica_id >= 0 or client_count is None:
        return None
    image = context.image
    known = image.topic(topic_id) if topic_id is not None else image.topic_by_name(name or "")
    return ErrorCode.INVALID_PARTITION_METADATA if count_mismatch(known, client_count) else None


def _has_error(responses: list[shapes.FetchableTopicResponse]) -> bool:
    """A partition error or a divergence: the client must act now, not after max_wait."""
    return any(p["error_code"] != 0 or "diverging_epoch" in p
               for t in responses for p in t["partitions"])


async def handle_fetch_request(context: BrokerContext, request: Any, version: int
                               ) -> shapes.FetchResponse:
    replica_id = int(getattr(request, "replica_id", -1))
    error, session, full = context.fetch_sessions.begin(
        int(getattr(request, "session_id", 0)), int(getattr(request, "session_epoch", -1)),
        replica_id=replica_id, may_open=replica_id >= 0 and version >= 13)
    if error != ErrorCode.NONE:
        return {"throttle_time": 0, "error_code": int(error), "session_id": 0,
                "responses": []}
    if session is not None:
        session.update(request.topics, getattr(request, "forgotten_topics_data", ()))
    max_wait_s = max(0.0, request.max_wait.total_seconds())
    min_bytes = int(request.min_bytes)
    seen: tuple[object, int] | None = None  # (image, data version) of the last collect
    with trio.move_on_after(max_wait_s) as waited:
        while True:
            before = (context.image, context.replicas.data_version)
            responses, total, answered = await _collect(context, request, session, full)
            seen = before
            if total >= min_bytes or _has_error(responses):
                break
            await context.replicas.wait_data()
    if waited.cancelled_caught and (seen is None or seen[0] is not context.image
                                    or seen[1] != context.replicas.data_version):
        # cut short, or something moved since (an idle long poll answers as it came)
        responses, _, answered = await _collect(context, request, session, full)
    for entry, told in answered:  # only what this response tells the follower
        entry.answered = told
    return {"throttle_time": 0, "error_code": 0,
            "session_id": 0 if session is None else session.session_id,
            "responses": responses}


def _described(context: BrokerContext, request: Any, name: str) -> bool:
    """DESCRIBE on the topic for a client, CLUSTER_ACTION for a follower (`replica_id`)."""
    if int(getattr(request, "replica_id", -1)) >= 0:
        return authz.cluster_allowed(context, authz.Op.CLUSTER_ACTION)
    return authz.topic_allowed(context, authz.Op.DESCRIBE, name)


async def _open_led_partition(context: BrokerContext, name: str, index: int, part: Any
                              ) -> tuple[ErrorCode, PartitionState | None, Resolved]:
    """The state of partition `index` of topic `name` when this broker leads it in the
    leader epoch the request `part` names (if it names one); else None and the error to
    answer with."""
    resolved = check_partition(context.image, context.broker_id, partition=index, name=name,
                               current_leader_epoch=int(getattr(part, "current_leader_epoch",
                                                                -1)))
    if resolved.error != ErrorCode.NONE:
        return resolved.error, None, resolved
    error, state = await context.replicas.open(resolved)
    return error, state, resolved


def offset_for_list_offsets(state: PartitionState, target: int, leader_epoch: int
                            ) -> tuple[int, int, int]:
    """Kafka's ListOffsets answer (offset, timestamp, leader epoch) for a consumer (read
    uncommitted): EARLIEST -> the log start, LATEST (and any other negative target) ->
    the high watermark, MAX_TIMESTAMP -> the first record holding the largest timestamp,
    a timestamp -> the first record whose timestamp is >= it. A record found at or above
    the high watermark is not visible: -1/-1, as when none is found."""
    if target == EARLIEST_TIMESTAMP:
        return state.log.log_start_offset, -1, leader_epoch
    if target == MAX_TIMESTAMP:
        found = state.log.max_timestamp()
    elif target < 0:
        return state.high_watermark, -1, leader_epoch
    else:
        found = state.log.offset_for_timestamp(target)
    if found is None or found[0] >= state.high_watermark:
        return NOT_FOUND
    return found


async def _list_offset(context: BrokerContext, name: str, part: Any
                       ) -> shapes.ListOffsetsPartitionResponse:
    index = int(part.partition_index)
    error, state, resolved = await _open_led_partition(context, name, index, part)
    if state is None:
        return {"partition_index": index, "error_code": int(error)}
    assert resolved.partition is not None
    assert resolved.topic is not None
    target = int(part.timestamp)
    offset, timestamp, epoch = offset_for_list_offsets(state, target,
                                                       resolved.partition.leader_epoch)
    if target == LATEST_TIMESTAMP and is_marked_for_deletion(resolved.topic, index):
        end = await committed_log_end(context.replicas, state)
        if end is None:
            return {"partition_index": index,
                    "error_code": int(ErrorCode.OFFSET_NOT_AVAILABLE)}
        offset = end
    return {"partition_index": index, "error_code": 0, "timestamp": timestamp,
            "offset": offset, "leader_epoch": epoch, "old_style_offsets": [offset]}


async def handle_list_offsets_request(context: BrokerContext, request: Any,
                                      version: int) -> shapes.ListOffsetsResponse:
    topics: list[shapes.ListOffsetsTopicResponse] = []
    for topic in request.topics:
        described = _described(context, request, topic.name)
        partitions: list[shapes.ListOffsetsPartitionResponse] = [
            await _list_offset(context, topic.name, part) if described else
            {"partition_index": int(part.partition_index),
             "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
            for part in topic.partitions]
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


async def handle_offset_for_leader_epoch_request(
        context: BrokerContext, request: Any, version: int
        ) -> shapes.OffsetForLeaderEpochResponse:
    topics: list[shapes.OffsetForLeaderTopicResult] = []
    for topic in request.topics:
        partitions: list[shapes.EpochEndOffsetResult] = []
        described = _described(context, request, topic.topic)
        for part in topic.partitions:
            index = int(part.partition)
            if not described:
                partitions.append({"partition": index,
                                   "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)})
                continue
            error, state, _ = await _open_led_partition(context, topic.topic, index, part)
            if state is None:
                partitions.append({"partition": index, "error_code": int(error)})
                continue
            async with state.lock:  # not while an append (of an older count) is in flight
                epoch, end = state.log.end_offset_for_epoch(int(part.leader_epoch))
            partitions.append({"partition": index, "error_code": 0, "leader_epoch": epoch,
                               "end_offset": end})
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
