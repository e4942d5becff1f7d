"""Bootstrap records: what `kraft format` asks the metadata log to start with (the
metadata.version's `FeatureLevel`, `--add-scram`'s credentials), and the rule by which
they reach it exactly once.

Kafka's kafka-storage.sh writes them into a `bootstrap.checkpoint` that the first active
controller replays into the log. Here `kraft format` writes `DIR/bootstrap.records` (next
to `meta.properties`, outside the metadata partition, so no log or snapshot reader
mistakes it for one of theirs): the records, each in the metadata log's own encoding,
framed by a small header and a sha256 of the rest (`encode` / `decode`).

The controller shell (`metadata.controller_shell`) loads the file at start. A node that
becomes the active controller while the committed log holds nothing but raft's control
records (LeaderChange, MetadataTopic, NoOp: `is_fresh_record`) puts the bootstrap
records first in its first proposal. Activation waits for the leader's own LeaderChange
to commit, which commits every record before it, so the check sees the whole log: once
the bootstrap records commit no later leader appends them again, and if they were lost
with their leader, the next leader finds the log still fresh and appends them. A node
that starts from a snapshot counts as fresh only when the snapshot's image holds nothing
(`is_fresh_image`). Like Kafka, format every controller with the same `--add-scram`:
whichever wins the first election appends them. Brokers ignore the file.

The records are validated when written and when read (they must replay onto an empty
image without an anomaly): never a password, only the salted SCRAM values.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import msgpack

from metadata import records as rec
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from raft.common.durable import write_atomically

BOOTSTRAP_FILE = "bootstrap.records"
_MAGIC = "kraft-py bootstrap records"
_VERSION = 0
# (a dynamic quorum's first leader writes KRaftVersionRecord and VotersRecord too, KIP-853)
_CONTROL_RECORDS = (rec.LeaderChange, rec.MetadataTopic, rec.NoOp, rec.KRaftVersionRecord,
                    rec.VotersRecord)
ALLOWED = (rec.FeatureLevel, rec.UserScramCredential)  # what kraft format may bootstrap


class BootstrapError(ValueError):
    """The bootstrap file is damaged or holds records that do not apply; names the file."""


def is_fresh_record(record: rec.Record | bytes) -> bool:
    """A record a fresh log may hold (raft's control records); bytes that do not decode
    are not."""
    return isinstance(record, _CONTROL_RECORDS)


def is_fresh_image(image: MetadataImage) -> bool:
    """An image (a snapshot's) that holds nothing a metadata record made."""
    return not (len(image.topics) or len(image.brokers) or len(image.scram_credentials)
                or len(image.acls) or image.anomaly_count or image.finalized_features
                or len(image.used_topic_ids) > (image.metadata_topic_id is not None))


def check(records: Sequence[rec.Record]) -> None:
    """BootstrapError unless every record is allowed and they replay onto an empty image
    without an anomaly."""
    delta = MetadataDelta(MetadataImage.empty())
    for index, record in enumerate(records):
        if not isinstance(record, ALLOWED):
            raise BootstrapError(f"bootstrap record {index} is a {type(record).__name__}; "
                                 "only FeatureLevel and UserScramCredential records are "
                                 "bootstrapped")
        reason = delta.apply(record, index)
        if reason is not None:
            raise BootstrapError(f"bootstrap record {index} does not apply: {reason}")


def encode(records: Sequence[rec.Record]) -> bytes:
    body: bytes = msgpack.packb([r.encode() for r in records], use_bin_type=True)
    head: bytes = msgpack.packb({"magic": _MAGIC, "version": _VERSION,
                                 "sha256": hashlib.sha256(body).digest()}, use_bin_type=True)
    return head + body


def decode(data: bytes, source: str = BOOTSTRAP_FILE) -> list[rec.Record]:
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(data)
    try:
        head = unpacker.unpack()
        offset = unpacker.tell()
        items = unpacker.unpack()
        extra = unpacker.tell() != len(data)
    except Exception as exc:  # msgpack raises several unrelated types on bad input
        raise BootstrapError(f"{source}: unreadable: {type(exc).__name__}") from None
    if not isinstance(head, dict) or head.get("magic") != _MAGIC or \
            head.get("version") != _VERSION or extra:
        raise BootstrapError(f"{source}: not a version {_VERSION} bootstrap file")
    if head.get("sha256") != hashlib.sha256(data[offset:]).digest():
        raise BootstrapError(f"{source}: checksum mismatch")
    if not isinstance(items, list) or not all(isinstance(i, bytes) for i in items):
        raise BootstrapError(f"{source}: not a list of records")
    try:
        records = [rec.decode(item) for item in items]
    except rec.RecordError as exc:
        raise BootstrapError(f"{source}: {exc}") from None
    try:
        check(records)
    except BootstrapError as exc:
        raise BootstrapError(f"{source}: {exc}") from None
    return records


def write_bootstrap_records(log_dir: str | os.PathLike[str],
                            records: Sequence[rec.Record]) -> None:
    """Write (durably, atomically) the records a fresh log starts with; none: no file."""
    check(records)
    path = Path(log_dir) / BOOTSTRAP_FILE
    if records:
        write_atomically(path, encode(records))


def read_bootstrap_records(log_dir: str | os.PathLike[str]) -> list[rec.Record]:
    """The node's bootstrap records ([] without a file); BootstrapError when damaged."""
    path = Path(log_dir) / BOOTSTRAP_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return decode(data, str(path))
