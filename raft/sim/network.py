"""The simulated network: per-message latency drawn from a distribution (so messages
reorder), loss, duplication, long delays (a message held for up to several election
timeouts, so it arrives long after the epoch it was sent in), corruption on the wire,
and partitions as a set of cut directed links.

A corrupted message goes through the real wire path (`wire_outcome`): encoded into a
frame as `raft.node` sends it, a few bytes flipped, then decoded by the real frame and
message decoders. They must refuse it with their own errors (`FrameError`,
`MessageError`: the receiver closes the connection), never raise anything else; one
that still decodes, to another message, is what TCP's and TLS's checksums drop below
the frame. Either way it is never applied.

A link is checked twice, when a message is sent and when it would arrive: a partition
also swallows what was in flight, as a broken TCP connection would.

Faults that overlap `hold` and `release` their cuts: a link cut by two faults comes back
only once both are over.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from raft import messages
from raft.common.framing import FrameDecoder, FrameError, encode_frame
from raft.types import Envelope

Link = tuple[int, int]  # (src, dst): one direction


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkConfig:
    """Latency is uniform in [min, max] ms, plus with `tail_probability` an extra
    exponential delay of mean `tail_mean_ms` (a slow link, a GC pause on the receiver)."""

    latency_min_ms: float = 0.5
    latency_max_ms: float = 5.0
    tail_probability: float = 0.02
    tail_mean_ms: float = 40.0
    loss_probability: float = 0.0
    duplicate_probability: float = 0.0


class Network:
    """Decides when (and whether, and how many times) a message arrives."""

    def __init__(self, config: NetworkConfig, rng: random.Random) -> None:
        self.config = config
        self._rng = rng
        self._cut: set[Link] = set()
        self._holds: Counter[Link] = Counter()  # how many faults hold each link cut
        self.loss_probability = config.loss_probability
        self.duplicate_probability = config.duplicate_probability
        self.slowdown = 1.0  # latency multiplier while the network is congested
        self.long_delay_probability = 0.0  # a fault sets these
        self.long_delay_max_ms = 0.0
        self.corruption_probability = 0.0
        self.sent = 0
        self.dropped = 0
        self.duplicated = 0
        self.long_delayed = 0
        self.corrupted: Counter[str] = Counter()  # by `wire_outcome`

    # ---- partitions ----------------------------------------------------------------

    def is_up(self, src: int, dst: int) -> bool:
        return (src, dst) not in self._cut

    def cut(self, src: int, dst: int, *, both_ways: bool = True) -> None:
        self._cut.add((src, dst))
        if both_ways:
            self._cut.add((dst, src))

    def restore(self, src: int, dst: int, *, both_ways: bool = True) -> None:
        self._cut.discard((src, dst))
        if both_ways:
            self._cut.discard((dst, src))

    def partition(self, *groups: Iterable[int]) -> None:
        """Cut every link between nodes of different groups (both ways)."""
        self._cut |= partition_links(*groups)

    def isolate(self, node: int, others: Iterable[int], *, inbound: bool = True,
                outbound: bool = True) -> None:
        self._cut |= isolation_links(node, others, inbound=inbound, outbound=outbound)

    def hold(self, links: Iterable[Link]) -> None:
        """A fault cuts `links`; they stay cut until every fault holding them released
        them (or the network heals)."""
        for link in links:
            self._holds[link] += 1
            self._cut.add(link)

    def release(self, links: Iterable[Link]) -> None:
        for link in links:
            if self._holds[link] <= 1:
                self._holds.pop(link, None)
                self._cut.discard(link)
            else:
                self._holds[link] -= 1

    def only_links(self, nodes: Iterable[int], links: Iterable[tuple[int, int]]) -> None:
        """Cut every link among `nodes` except the listed (undirected) ones."""
        keep = {frozenset(link) for link in links}
        members = sorted(set(nodes))
        for a in members:
            for b in members:
                if a != b and frozenset((a, b)) not in keep:
                    self._cut.add((a, b))

    def heal(self) -> None:
        self._cut.clear()
        self._holds.clear()
        self.slowdown = 1.0
        self.loss_probability = self.config.loss_probability
        self.duplicate_probability = self.config.duplicate_probability
        self.long_delay_probability = self.long_delay_max_ms = 0.0
        self.corruption_probability = 0.0

    @property
    def cut_links(self) -> frozenset[Link]:
        return frozenset(self._cut)

    @property
    def is_healed(self) -> bool:
        return (not self._cut and self.slowdown == 1.0
                and self.loss_probability == self.config.loss_probability
                and self.duplicate_probability == self.config.duplicate_probability
                and not self.long_delay_probability and not self.corruption_probability)

    # ---- delivery --------------------------------------------------------------------

    def latency_us(self) -> int:
        cfg, rng = self.config, self._rng
        ms = rng.uniform(cfg.latency_min_ms, cfg.latency_max_ms)
        if cfg.tail_probability and rng.random() < cfg.tail_probability:
            ms += rng.expovariate(1.0 / cfg.tail_mean_ms)
        return max(1, int(ms * 1000 * self.slowdown))

    def delivery_delays_us(self, src: int, dst: int) -> list[int]:
        """Delays after which copies of one message arrive: none if lost or cut, two if
        duplicated; each copy has its own latency, so copies and messages reorder."""
        self.sent += 1
        if (src, dst) in self._cut or (
                self.loss_probability and self._rng.random() < self.loss_probability):
            self.dropped += 1
            return []
        delays = [self._delay_us()]
        if self.duplicate_probability and self._rng.random() < self.duplicate_probability:
            self.duplicated += 1
            delays.append(self._delay_us())
        return delays

    def _delay_us(self) -> int:
        delay = self.latency_us()
        if self.long_delay_probability and self._rng.random() < self.long_delay_probability:
            self.long_delayed += 1
            delay += int(self._rng.uniform(0, self.long_delay_max_ms) * 1000)
        return delay

    def corrupts(self) -> bool:
        """Whether the next message is corrupted on the wire (no draw while none is)."""
        return bool(self.corruption_probability) and (
            self._rng.random() < self.corruption_probability)

    def corrupt(self, envelope: Envelope, cluster_id: str) -> bool:
        """Corrupt `envelope` on the wire; whether it arrives intact all the same (the
        flipped bytes changed nothing it says)."""
        outcome = wire_outcome(envelope, cluster_id, self._rng)
        self.corrupted[outcome] += 1
        return outcome == INTACT


REFUSED, CHECKSUM, INTACT = "refused by the decoders", "decoded: TCP/TLS drop it", "intact"


def wire_outcome(envelope: Envelope, cluster_id: str, rng: random.Random) -> str:
    """Frame `envelope` as the shell sends it, flip 1-3 of its bytes, decode it as the
    receiving shell would: `REFUSED` (a FrameError or MessageError, or no whole frame
    at all), `CHECKSUM` (it decodes to another message) or `INTACT`. Any other exception
    out of the decoders is a bug, and propagates."""
    api, body = messages.encode_message(envelope.message)
    frame = bytearray(encode_frame({"api": api, "version": 0, "cluster_id": cluster_id,
                                    "correlation_id": envelope.correlation_id,
                                    "body": body, "src": envelope.src}))
    for _ in range(rng.randint(1, 3)):
        frame[rng.randrange(len(frame))] ^= 1 << rng.randrange(8)
    try:
        decoded = FrameDecoder().feed(frame)
        if len(decoded) != 1:
            return REFUSED  # a length no longer whole: the stream stalls, then resets
        received = messages.decode_message(decoded[0]["api"], decoded[0]["body"])
    except (FrameError, messages.MessageError):
        return REFUSED
    same = (received == envelope.message and decoded[0]["correlation_id"]
            == envelope.correlation_id)
    return INTACT if same else CHECKSUM


def partition_links(*groups: Iterable[int]) -> set[Link]:
    """Every link, both ways, between nodes of different groups."""
    sets = [set(g) for g in groups]
    links: set[Link] = set()
    for i, left in enumerate(sets):
        for right in sets[i + 1:]:
            for a in left:
                for b in right:
                    links.add((a, b))
                    links.add((b, a))
    return links


def isolation_links(node: int, others: Iterable[int], *, inbound: bool = True,
                    outbound: bool = True) -> set[Link]:
    """The links between `node` and each of `others` (to it, from it, or both)."""
    links: set[Link] = set()
    for other in others:
        if other != node:
            if outbound:
                links.add((node, other))
            if inbound:
                links.add((other, node))
    return links
