"""Replication throttles, as Kafka's ReplicationQuotaManager (KIP-73) applies them.

Which replicas: a topic's `leader.replication.throttled.replicas` (read by the leader)
and `follower.replication.throttled.replicas` (read by the follower) name `*` (every
partition) or `PARTITION:BROKER,...`; a broker throttles the partitions listed with its
own id (`is_throttled`, Kafka's parseThrottledPartitions).

How much: the broker's `leader.replication.throttled.rate` /
`follower.replication.throttled.rate` (`metadata.broker_configs`, from the metadata log;
unset: unlimited) caps the bytes/s of the throttled partitions' replication, measured
as Kafka's Rate over SAMPLES samples of SAMPLE_MS (its replication.quota.window.num and
.size.seconds defaults): the bytes in the live samples over the time they span, counted
as at least SAMPLES - 1 whole samples, so a quiet broker may first send up to that many
seconds' worth at once (`is_exceeded`; `recorded` adds bytes).

What it does, never blocking anything else (a throttled partition gets no records in
this fetch; the others are served as always):
- a leader answers a follower's fetch of a throttled partition with no records while
  the leader quota is exceeded, unless that follower is in the ISR (Kafka's
  shouldLeaderThrottle: throttling an in-sync replica would shrink the ISR), a pending
  addition included (Kafka reads the committed ISR; here the high watermark waits for a
  pending addition, so throttling it would hold every acks=all produce until the
  controller answers); it counts the bytes it sends for every throttled partition,
  in-sync followers' included;
- a follower leaves a throttled partition out of its fetch while the follower quota is
  exceeded, unless it has caught up to the leader's high watermark (Kafka's
  shouldFollowerThrottle) or the image has it in the ISR (Kafka holds back an ISR member
  whose lag it does not know yet, after its fetcher restarts on a leader change, and
  every acks=all produce to that partition waits for the quota), and counts the bytes it
  receives for throttled partitions.

The decisions are pure functions of (window, bytes, now); `ReplicationQuota` holds one
broker's window of one kind.
"""

from __future__ import annotations

from dataclasses import dataclass

from metadata.broker_configs import FOLLOWER_RATE, LEADER_RATE, rate
from metadata.image import MetadataImage, TopicImage
from metadata.topic_configs import FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS

SAMPLES = 11  # Kafka's replication.quota.window.num
SAMPLE_MS = 1000  # Kafka's replication.quota.window.size.seconds, in ms


@dataclass(frozen=True, slots=True)
class Window:
    """The samples of a rate: (start ms, bytes), oldest first, at most SAMPLES."""

    samples: tuple[tuple[int, int], ...] = ()


def _live(window: Window, now_ms: int) -> tuple[tuple[int, int], ...]:
    """The samples not yet expired (Kafka's purgeObsoleteSamples)."""
    return tuple(s for s in window.samples if now_ms - s[0] < SAMPLES * SAMPLE_MS)


def recorded(window: Window, nbytes: int, now_ms: int) -> Window:
    """`window` with `nbytes` counted at `now_ms`: in the current sample, or a new one."""
    samples = list(_live(window, now_ms))
    if samples and now_ms < samples[-1][0] + SAMPLE_MS:
        samples[-1] = (samples[-1][0], samples[-1][1] + nbytes)
    else:
        samples.append((now_ms, nbytes))
    return Window(tuple(samples[-SAMPLES:]))


def observed_rate(window: Window, now_ms: int) -> float:
    """Bytes/s as Kafka's Rate measures it (see the module's docstring)."""
    samples = _live(window, now_ms)
    if not samples:
        return 0.0
    elapsed = now_ms - samples[0][0]
    full = elapsed // SAMPLE_MS
    if full < SAMPLES - 1:
        elapsed += (SAMPLES - 1 - full) * SAMPLE_MS
    return sum(b for _, b in samples) * 1000 / elapsed


def is_exceeded(window: Window, limit: int | None, now_ms: int) -> bool:
    """Over the quota: the measured rate above `limit` bytes/s (None: unlimited)."""
    return limit is not None and observed_rate(window, now_ms) > limit


def caught_up(log_end: int, leader_high_watermark: int | None) -> bool:
    """A follower whose log reaches the leader's high watermark is in sync (Kafka's
    isReplicaInSync: a lag known and <= 0); before any answer it is not."""
    return leader_high_watermark is not None and log_end >= leader_high_watermark


def leader_holds_back(*, throttled: bool, in_isr: bool, exceeded: bool) -> bool:
    """Whether a leader answers a follower's fetch of a partition with no records."""
    return throttled and not in_isr and exceeded


def follower_holds_back(*, throttled: bool, in_isr: bool, exceeded: bool, log_end: int,
                        leader_high_watermark: int | None) -> bool:
    """Whether a follower leaves a partition out of its fetch."""
    return throttled and not in_isr and exceeded and not caught_up(log_end,
                                                                   leader_high_watermark)


def is_throttled(replicas: str | None, partition: int, broker_id: int) -> bool:
    """Whether a `*.replication.throttled.replicas` value throttles `partition` on
    `broker_id` (validated by `metadata.topic_configs`: `*` or PARTITION:BROKER,...)."""
    if not replicas:
        return False
    if replicas.strip() == "*":
        return True
    return any(entry.strip() == f"{partition}:{broker_id}" for entry in replicas.split(","))


class ReplicationQuota:
    """One broker's leader or follower quota: its window and the rate key it obeys."""

    def __init__(self, *, leader: bool) -> None:
        self.rate_key = LEADER_RATE if leader else FOLLOWER_RATE
        self.replicas_key = LEADER_THROTTLED_REPLICAS if leader else FOLLOWER_THROTTLED_REPLICAS
        self.window = Window()

    def throttles(self, broker_id: int, topic: TopicImage, partition: int) -> bool:
        """The partition is one of this broker's throttled replicas of this kind."""
        return is_throttled(topic.config(self.replicas_key), partition, broker_id)

    def exceeded(self, image: MetadataImage, broker_id: int, now_ms: int) -> bool:
        return is_exceeded(self.window, rate(image.broker_configs, broker_id,
                                             self.rate_key), now_ms)

    def record(self, nbytes: int, now_ms: int) -> None:
        self.window = recorded(self.window, nbytes, now_ms)
