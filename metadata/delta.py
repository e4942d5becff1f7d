"""MetadataDelta: records applied on top of a base image, then frozen into the next image.

Maps are FrozenMap builders that copy a shard on its first write only, and a topic's
partitions are kept in a list while the delta is open, so a replay of N records is O(N)
and one decision over a large image copies a few shards, not the image. Reads
(`topic`, `broker`, ...) see the records applied so far: the controller decides
several records in a row against one delta (fence broker A, then broker B).

The rules for records that contradict the image are in `metadata.image`'s docstring:
they are skipped and noted as anomalies, never raised. `replay` and `replay_bytes` build
an image from a whole log in one pass; `apply_records` applies a batch of encoded records
in bulk (`metadata.fast_records` decodes the Partition records among them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from msgpack import unpackb

from metadata import records as rec
from metadata.authorizer import (
    AclBinding,
    AclImage,
    AclImageBuilder,
    StandardAcl,
    invalid_binding_reason,
)
from metadata.broker_configs import BrokerConfigs, applied
from metadata.broker_configs import replay_refusal as config_replay_refusal
from metadata.fast_records import PARTITION_PREFIX, PARTITIONS, TAIL, TOPIC_ID
from metadata.features import replay_refusal
from metadata.image import (
    MAX_KEPT_ANOMALIES,
    Anomaly,
    BrokerImage,
    MetadataImage,
    PartitionImage,
    TopicImage,
    new_partition_image,
    new_topic_image,
)
from metadata.persistent import Builder, FrozenKeySet
from metadata.scram_credentials import ScramCredentialImage, invalid_credential_reason
from metadata.scram_credentials import from_record as credential_from_record
from raft.common.gc_pause import gc_paused
from raft.common.uuid import RESERVED, Uuid

_UNSEEN: Any = object()  # not in the tail cache yet
_Handler = Callable[["MetadataDelta", rec.Record, int], "str | None"]


class MetadataDelta:
    def __init__(self, base: MetadataImage) -> None:
        self._reset(base)

    def _reset(self, base: MetadataImage) -> None:
        self._base = base
        self._topics: Builder[Uuid, TopicImage] | None = None
        self._names: Builder[str, Uuid] | None = None
        self._brokers: Builder[int, BrokerImage] | None = None
        self._partitions: dict[Uuid, list[PartitionImage]] = {}  # topics being changed
        self._new_used: set[Uuid] = set()
        self._scram: Builder[tuple[str, str], ScramCredentialImage] | None = None
        self._acls: AclImageBuilder | None = None
        self._metadata_topic_id = base.metadata_topic_id
        self._features = base.finalized_features
        self._broker_configs = base.broker_configs
        self._last_offset = base.last_applied_offset
        self._anomaly_count = base.anomaly_count
        self._anomalies = list(base.anomalies)
        # _take_partitions' memo: the topic ID (16 bytes) of the last Partition
        # record it applied and that topic's open partition list (a topic's partitions
        # follow its Topic record). Cleared by `apply` (any other record may remove the
        # topic), so the list is always the one in `_partitions` of a live topic.
        self._memo_topic_id: bytes | None = None
        self._memo_partitions: list[PartitionImage] = []

    # --- reads (they see every record applied so far) ------------------------------

    @property
    def last_applied_offset(self) -> int:
        return self._last_offset

    @property
    def anomaly_count(self) -> int:
        return self._anomaly_count

    @property
    def metadata_topic_id(self) -> Uuid | None:
        return self._metadata_topic_id

    @property
    def finalized_features(self) -> tuple[tuple[str, int], ...]:
        return self._features

    @property
    def broker_configs(self) -> BrokerConfigs:
        return self._broker_configs

    def topic(self, topic_id: Uuid) -> TopicImage | None:
        topics = self._base.topics if self._topics is None else self._topics
        topic = topics.get(topic_id)
        if topic is not None and topic_id in self._partitions:
            topic = dataclasses.replace(topic, partitions=tuple(self._partitions[topic_id]))
        return topic

    def partitions(self, topic_id: Uuid) -> Sequence[PartitionImage]:
        """The topic's partitions (none for no topic), without building its TopicImage:
        `topic` copies them, a cost that grows with the topic, where a reader of one
        partition per record (`tools.replay.timeline`) needs none. Read-only."""
        topics = self._base.topics if self._topics is None else self._topics
        topic = topics.get(topic_id)
        if topic is None:
            return ()
        return self._partitions.get(topic_id, topic.partitions)

    def topic_partitions(self) -> Iterator[tuple[Uuid, Sequence[PartitionImage]]]:
        """(topic ID, `partitions(topic ID)`) of every topic, in the map's order, with no
        ID looked up: a walk of every topic (an unfence's leaderless partitions) cost two
        lookups a topic. Read-only."""
        topics = self._base.topics if self._topics is None else self._topics
        overrides = self._partitions
        if not overrides:
            return ((topic_id, topic.partitions) for topic_id, topic in topics.entries())
        return ((topic_id, overrides.get(topic_id, topic.partitions))
                for topic_id, topic in topics.entries())

    def topic_id_by_name(self, name: str) -> Uuid | None:
        names = self._base.topic_ids_by_name if self._names is None else self._names
        return names.get(name)

    def topic_ids(self) -> Iterator[Uuid]:
        return iter(self._base.topics if self._topics is None else self._topics)

    def is_topic_id_used(self, topic_id: Uuid) -> bool:
        return (topic_id in self._new_used or topic_id in self._base.used_topic_ids
                or topic_id == self._metadata_topic_id)

    def broker(self, broker_id: int) -> BrokerImage | None:
        return self.brokers().get(broker_id)

    def brokers(self) -> Mapping[int, BrokerImage]:
        return self._base.brokers if self._brokers is None else self._brokers

    def acls(self) -> AclImage:
        """The ACLs as of the records applied so far (an index of its own when changed)."""
        if self._acls is None:
            return self._base.acls
        return self._acls.freeze()

    def scram_credentials(self) -> Mapping[tuple[str, str], ScramCredentialImage]:
        """(user name, mechanism) -> credential, as of the records applied so far."""
        return self._base.scram_credentials if self._scram is None else self._scram

    def unfenced_broker_ids(self) -> tuple[int, ...]:
        if self._brokers is None:  # the base's, remembered there
            return self._base.unfenced_broker_ids()
        return tuple(sorted(b.broker_id for b in self._brokers.values() if not b.fenced))

    # --- writes ---------------------------------------------------------------------

    def apply(self, record: rec.Record, offset: int) -> str | None:
        """Apply one record; returns why it was skipped (and notes the anomaly), or None."""
        if offset <= self._last_offset:
            raise ValueError(f"offset {offset} is not after the last applied offset "
                             f"{self._last_offset}")
        self._last_offset = offset
        self._memo_topic_id = None
        handler = _HANDLERS.get(type(record))
        reason = handler(self, record, offset) if handler is not None else None
        if reason is not None:
            self._note(offset, type(record).__name__, reason)
        return reason

    def apply_bytes(self, data: bytes, offset: int) -> str | None:
        """Apply one encoded record: `apply_bytes_reference`'s result, faster. A Partition
        record in the common shape is applied from its bytes (`_take_partitions`);
        any other map goes through `rec.from_dict` and `apply`, and bytes that are no
        map through `rec.decode` (for its error)."""
        if self._take_partitions(iter((data,)), offset) is None:
            return None
        return self._apply_decoded(data, offset)

    def _apply_decoded(self, data: bytes, offset: int) -> str | None:
        """`apply_bytes_reference`, with msgpack's map decoded once."""
        try:
            obj = unpackb(data)
        except Exception:  # msgpack raises several unrelated types; rec.decode says which
            obj = None
        if type(obj) is dict:
            try:
                record = rec.from_dict(obj)  # what rec.decode does after msgpack
            except rec.RecordError as exc:
                return self._undecodable(offset, exc)
            return self.apply(record, offset)
        return self.apply_bytes_reference(data, offset)

    def apply_records(self, records: Iterable[bytes], base_offset: int,
                      other: Callable[[bytes, int], object] | None = None) -> None:
        """`apply_bytes` of each of `records` at `base_offset`, `base_offset + 1`, ...:
        a bulk replay (a committed batch, a log read from disk, a snapshot), with the
        garbage collector paused throughout (`raft.common.gc_pause`: what replay keeps
        is the image, and what it throws away holds no cycles). `other(data, offset)`
        applies each record `_take_partitions` leaves (by default as `apply_bytes`
        does; a snapshot load raises on any record that does not apply)."""
        if other is None:
            other = self._apply_decoded
        remaining = iter(records)
        with gc_paused():
            while (left := self._take_partitions(remaining, base_offset)) is not None:
                base_offset, data = left
                other(data, base_offset)
                base_offset += 1

    def apply_bytes_reference(self, data: bytes, offset: int) -> str | None:
        """Apply one encoded record the plain way: `rec.decode`, then `apply`; bytes that
        do not decode are an anomaly. `apply_bytes` is tested against it."""
        try:
            record = rec.decode(data)
        except rec.RecordError as exc:
            return self._undecodable(offset, exc)
        return self.apply(record, offset)

    def _take_partitions(self, records: Iterator[bytes],
                         offset: int) -> tuple[int, bytes] | None:
        """Apply the records `records` yields, at `offset`, `offset + 1`, ..., while each
        is a Partition record in the common shape (`metadata.fast_records`) that applies
        cleanly (a live topic, a partition number at most its count, an offset after the
        last); the first that is not, changing nothing for it, is returned with its
        offset (the caller applies it by `apply`, whose rules and messages are the only
        ones); None once `records` ran out. Replay of a million partitions spends most
        of its time here: no record is decoded but the first with each tail, and the
        topic's Uuid and partition list are looked up once per topic, not per record
        (the memo: `apply` clears it)."""
        prefix, by_tail, decode_tail = PARTITION_PREFIX, PARTITIONS.by_tail, PARTITIONS.image
        memo_id, parts, last = self._memo_topic_id, self._memo_partitions, self._last_offset
        try:
            for data in records:
                if offset <= last or not data.startswith(prefix):
                    return offset, data
                image = by_tail.get(data[TAIL], _UNSEEN)
                if image is _UNSEEN:
                    image = decode_tail(data)
                if image is None:
                    return offset, data
                topic_id = data[TOPIC_ID]
                if topic_id != memo_id:
                    opened = self._w_partitions(Uuid.from_bytes(topic_id))
                    if opened is None:
                        return offset, data
                    memo_id, parts = topic_id, opened
                partition = image.partition
                if partition == len(parts):
                    parts.append(image)
                elif 0 <= partition < len(parts):  # a full replacement, as `_partition` does
                    parts[partition] = image
                else:
                    return offset, data
                last = offset
                offset += 1
            return None
        finally:
            self._memo_topic_id, self._memo_partitions = memo_id, parts
            self._last_offset = last

    def _undecodable(self, offset: int, exc: rec.RecordError) -> str:
        """Note bytes that do not decode as a record (an anomaly at `offset`)."""
        if offset <= self._last_offset:
            raise ValueError(f"offset {offset} is not after the last applied offset "
                             f"{self._last_offset}") from None
        self._last_offset = offset
        self._note(offset, "?", str(exc))
        return str(exc)

    def build(self) -> MetadataImage:
        """Freeze into an image. The delta then continues from that image."""
        base = self._base
        if self._partitions:
            topics = self._w_topics()
            for topic_id, parts in self._partitions.items():
                old = topics[topic_id]  # the constructor is several times faster than replace()
                topics[topic_id] = new_topic_image(
                    old.name, topic_id, tuple(parts), old.initial_partition_count,
                    old.undeleted_partition_count, old.configs)
        used = base.used_topic_ids
        if self._new_used:
            builder = used.map.builder()
            builder.update(dict.fromkeys(self._new_used))  # no key hashed again (a dict)
            used = FrozenKeySet(builder.freeze())
        image = MetadataImage(
            topics=base.topics if self._topics is None else self._topics.freeze(),
            topic_ids_by_name=(base.topic_ids_by_name if self._names is None
                               else self._names.freeze()),
            brokers=base.brokers if self._brokers is None else self._brokers.freeze(),
            metadata_topic_id=self._metadata_topic_id,
            used_topic_ids=used,
            last_applied_offset=self._last_offset,
            anomaly_count=self._anomaly_count,
            anomalies=tuple(self._anomalies),
            scram_credentials=(base.scram_credentials if self._scram is None
                               else self._scram.freeze()),
            acls=base.acls if self._acls is None else self._acls.freeze(),
            finalized_features=self._features,
            broker_configs=self._broker_configs,
        )
        self._reset(image)
        return image

    # --- internals ------------------------------------------------------------------

    def _note(self, offset: int, record_type: str, reason: str) -> None:
        self._anomaly_count += 1
        if len(self._anomalies) < MAX_KEPT_ANOMALIES:
            self._anomalies.append(Anomaly(offset=offset, record_type=record_type,
                                           reason=reason))

    def _w_topics(self) -> Builder[Uuid, TopicImage]:
        if self._topics is None:
            self._topics = self._base.topics.builder()
        return self._topics

    def _w_names(self) -> Builder[str, Uuid]:
        if self._names is None:
            self._names = self._base.topic_ids_by_name.builder()
        return self._names

    def _w_brokers(self) -> Builder[int, BrokerImage]:
        if self._brokers is None:
            self._brokers = self._base.brokers.builder()
        return self._brokers

    def _w_partitions(self, topic_id: Uuid) -> list[PartitionImage] | None:
        parts = self._partitions.get(topic_id)
        if parts is None:
            topics = self._base.topics if self._topics is None else self._topics
            topic = topics.get(topic_id)
            if topic is None:
                return None
            parts = self._partitions[topic_id] = list(topic.partitions)
        return parts

    # One method per record type; each returns why the record is skipped, or None.

    def _metadata_topic(self, record: rec.MetadataTopic, offset: int) -> str | None:
        topic_id = record.topic_id
        if topic_id in RESERVED:
            return f"reserved topic id {topic_id}"
        if self._metadata_topic_id is not None:
            return (None if topic_id == self._metadata_topic_id else
                    f"metadata topic id already {self._metadata_topic_id}")
        if self.is_topic_id_used(topic_id):
            return f"topic id {topic_id} already used"
        self._metadata_topic_id = topic_id
        self._new_used.add(topic_id)
        return None

    def _topic(self, record: rec.Topic, offset: int) -> str | None:
        if record.topic_id in RESERVED:
            return f"reserved topic id {record.topic_id}"
        if self.is_topic_id_used(record.topic_id):
            return f"topic id {record.topic_id} already used"
        live = self.topic_id_by_name(record.name)
        if live is not None:
            return f"name {record.name!r} is live as {live}"
        self._w_topics()[record.topic_id] = new_topic_image(
            record.name, record.topic_id, (), record.initial_partition_count, None, ())
        self._w_names()[record.name] = record.topic_id
        self._new_used.add(record.topic_id)
        return None

    def _retired_topic_id(self, record: rec.RetiredTopicId, offset: int) -> str | None:
        if record.topic_id in RESERVED:
            return f"reserved topic id {record.topic_id}"
        if self.is_topic_id_used(record.topic_id):
            return f"topic id {record.topic_id} already used"
        self._new_used.add(record.topic_id)
        return None

    def _replay_anomalies(self, record: rec.ReplayAnomalies, offset: int) -> str | None:
        # Only a snapshot may restore what replay skipped (metadata.image_snapshot); in a
        # log it would overwrite this replay's own account.
        return "ReplayAnomalies belongs in a snapshot, not in the log"

    def _partition(self, record: rec.Partition, offset: int) -> str | None:
        # _take_partitions applies the common case from its bytes: a rule added here
        # goes there too (tests/property/test_fast_replay.py compares the two).
        # _w_partitions inline for the common case (the topic's list is open already):
        # a topic's partitions follow its Topic record
        parts = self._partitions.get(record.topic_id) or self._w_partitions(record.topic_id)
        if parts is None:
            return f"no live topic {record.topic_id}"
        if not 0 <= record.partition <= len(parts):
            return f"partition {record.partition} of a topic with {len(parts)} partitions"
        if (record.leader_epoch_after_creation is not None
                or record.leader_epoch_before_deletion is not None):  # rare: resizes
            reason = (_epoch_map_error(record.leader_epoch_after_creation)
                      or _epoch_map_error(record.leader_epoch_before_deletion))
            if reason is not None:
                return reason
        image = new_partition_image(  # PartitionImage(...), fields in order; one per partition
            record.partition, record.replicas, record.isr, record.leader,
            record.leader_epoch, record.partition_epoch,
            record.leader_epoch_after_creation, record.leader_epoch_before_deletion,
            record.adding_replicas or (), record.removing_replicas or ())
        if record.partition == len(parts):
            parts.append(image)
        else:  # a full replacement, as Kafka replays a PartitionRecord for a known partition
            parts[record.partition] = image
        return None

    def _partition_change(self, record: rec.PartitionChange, offset: int) -> str | None:
        parts = self._w_partitions(record.topic_id)
        if parts is None:
            return f"no live topic {record.topic_id}"
        if not 0 <= record.partition < len(parts):
            return f"no partition {record.partition} in topic {record.topic_id}"
        old = parts[record.partition]
        leader = old.leader if record.leader is None else record.leader
        before_deletion = record.leader_epoch_before_deletion
        if before_deletion is None:
            before_deletion = old.leader_epoch_before_deletion
        else:
            reason = _epoch_map_error(before_deletion)
            if reason is None and not before_deletion:
                reason = "an empty before-deletion map marks nothing"
            if reason is not None:
                return reason
        parts[record.partition] = new_partition_image(  # dataclasses.replace(old, ...), faster
            old.partition, old.replicas if record.replicas is None else record.replicas,
            old.isr if record.isr is None else record.isr, leader,
            old.leader_epoch + (leader != old.leader or bool(record.bump_leader_epoch)),
            old.partition_epoch + 1, old.leader_epoch_after_creation, before_deletion,
            old.adding_replicas if record.adding_replicas is None else record.adding_replicas,
            old.removing_replicas if record.removing_replicas is None
            else record.removing_replicas)
        return None

    def _partition_count(self, record: rec.PartitionCount, offset: int) -> str | None:
        # Within a growth batch the count comes before the new Partition records, so it
        # may exceed the partitions there are; it never falls below the initial count.
        topics = self._w_topics()
        topic = topics.get(record.topic_id)
        if topic is None:
            return f"no live topic {record.topic_id}"
        initial = topic.initial_partition_count
        if record.initial_partition_count is not None:
            if initial is not None and initial != record.initial_partition_count:
                return (f"initial partition count {record.initial_partition_count}, but the "
                        f"topic's is {initial}")
            initial = record.initial_partition_count
        count = record.undeleted_partition_count
        if count < 1 or (initial is not None and count < initial):
            return (f"undeleted partition count {count} below 1 or the initial partition "
                    f"count {initial}")
        topics[record.topic_id] = dataclasses.replace(
            topic, initial_partition_count=initial, undeleted_partition_count=count)
        return None

    def _remove_partition(self, record: rec.RemovePartition, offset: int) -> str | None:
        parts = self._w_partitions(record.topic_id)
        if parts is None:
            return f"no live topic {record.topic_id}"
        if record.partition != len(parts) - 1:
            return (f"partition {record.partition} is not the last of topic "
                    f"{record.topic_id} ({len(parts)} partitions)")
        if not parts[-1].marked_for_deletion:
            return f"partition {record.partition} is not marked for deletion"
        parts.pop()
        return None

    def _remove_topic(self, record: rec.RemoveTopic, offset: int) -> str | None:
        topic = self.topic(record.topic_id)
        if topic is None:
            return f"no live topic {record.topic_id}"
        del self._w_topics()[record.topic_id]
        del self._w_names()[topic.name]
        self._partitions.pop(record.topic_id, None)
        return None

    def _rename_topic(self, record: rec.RenameTopic, offset: int) -> str | None:
        topics = self._w_topics()
        topic = topics.get(record.topic_id)
        if topic is None:
            return f"no live topic {record.topic_id}"
        owner = self.topic_id_by_name(record.new_name)
        if owner is not None and owner != record.topic_id:
            return f"name {record.new_name!r} is live as {owner}"
        names = self._w_names()
        del names[topic.name]
        names[record.new_name] = record.topic_id
        topics[record.topic_id] = dataclasses.replace(topic, name=record.new_name)
        return None

    def _topic_config(self, record: rec.TopicConfig, offset: int) -> str | None:
        topics = self._w_topics()
        topic = topics.get(record.topic_id)
        if topic is None:
            return f"no live topic {record.topic_id}"
        configs = dict(topic.configs)
        if record.value is None:
            if configs.pop(record.key, None) is None:
                return None  # deleting a key not set changes nothing
        else:
            configs[record.key] = record.value
        topics[record.topic_id] = dataclasses.replace(topic, configs=tuple(sorted(configs.items())))
        return None

    def _access_control_entry(self, record: rec.AccessControlEntry, offset: int
                              ) -> str | None:
        binding = AclBinding(
            resource_type=record.resource_type, resource_name=record.resource_name,
            pattern_type=record.pattern_type, principal=record.principal, host=record.host,
            operation=record.operation, permission_type=record.permission_type)
        reason = invalid_binding_reason(binding)
        if reason is not None:
            return reason
        acls = self._w_acls()
        if record.id in acls:
            return f"ACL id {record.id} already used"
        acls.add(StandardAcl(id=record.id, binding=binding))
        return None

    def _remove_access_control_entry(self, record: rec.RemoveAccessControlEntry,
                                     offset: int) -> str | None:
        acls = self._w_acls()
        if record.id not in acls:
            return f"no ACL {record.id}"
        acls.remove(record.id)
        return None

    def _w_acls(self) -> AclImageBuilder:
        if self._acls is None:
            self._acls = self._base.acls.builder()
        return self._acls

    def _user_scram_credential(self, record: rec.UserScramCredential, offset: int
                               ) -> str | None:
        reason = invalid_credential_reason(record)
        if reason is not None:
            return reason
        self._w_scram()[(record.name, record.mechanism)] = credential_from_record(record)
        return None

    def _remove_user_scram_credential(self, record: rec.RemoveUserScramCredential,
                                      offset: int) -> str | None:
        key = (record.name, record.mechanism)
        if key not in self.scram_credentials():
            return f"no {record.mechanism} credential for user {record.name!r}"
        del self._w_scram()[key]
        return None

    def _w_scram(self) -> Builder[tuple[str, str], ScramCredentialImage]:
        if self._scram is None:
            self._scram = self._base.scram_credentials.builder()
        return self._scram

    def _feature_level(self, record: rec.FeatureLevel, offset: int) -> str | None:
        reason = replay_refusal(record)
        if reason is None:
            kept = {name: level for name, level in self._features if name != record.name}
            if record.feature_level:
                kept[record.name] = record.feature_level
            self._features = tuple(sorted(kept.items()))
        return reason

    def _config_record(self, record: rec.ConfigRecord, offset: int) -> str | None:
        reason = config_replay_refusal(record)
        if reason is None:
            self._broker_configs = applied(self._broker_configs, record)
        return reason

    def _register_broker(self, record: rec.RegisterBroker, offset: int) -> str | None:
        self._w_brokers()[record.broker_id] = BrokerImage(
            broker_id=record.broker_id, incarnation_id=record.incarnation_id,
            broker_epoch=record.broker_epoch, endpoints=record.endpoints, rack=record.rack,
            fenced=True)
        return None

    def _set_fenced(self, broker_id: int, broker_epoch: int, fenced: bool) -> str | None:
        broker = self.broker(broker_id)
        if broker is None:
            return f"no registered broker {broker_id}"
        if broker.broker_epoch != broker_epoch:
            return f"broker {broker_id} has epoch {broker.broker_epoch}, not {broker_epoch}"
        if broker.fenced != fenced:
            self._w_brokers()[broker_id] = dataclasses.replace(broker, fenced=fenced)
        return None

    def _fence_broker(self, record: rec.FenceBroker, offset: int) -> str | None:
        return self._set_fenced(record.broker_id, record.broker_epoch, True)

    def _unfence_broker(self, record: rec.UnfenceBroker, offset: int) -> str | None:
        return self._set_fenced(record.broker_id, record.broker_epoch, False)


_HANDLERS: dict[type[rec.Record], _Handler] = {
    rec.MetadataTopic: MetadataDelta._metadata_topic,  # type: ignore[dict-item]
    rec.Topic: MetadataDelta._topic,  # type: ignore[dict-item]
    rec.RetiredTopicId: MetadataDelta._retired_topic_id,  # type: ignore[dict-item]
    rec.ReplayAnomalies: MetadataDelta._replay_anomalies,  # type: ignore[dict-item]
    rec.Partition: MetadataDelta._partition,  # type: ignore[dict-item]
    rec.PartitionChange: MetadataDelta._partition_change,  # type: ignore[dict-item]
    rec.PartitionCount: MetadataDelta._partition_count,  # type: ignore[dict-item]
    rec.RemovePartition: MetadataDelta._remove_partition,  # type: ignore[dict-item]
    rec.RemoveTopic: MetadataDelta._remove_topic,  # type: ignore[dict-item]
    rec.RenameTopic: MetadataDelta._rename_topic,  # type: ignore[dict-item]
    rec.TopicConfig: MetadataDelta._topic_config,  # type: ignore[dict-item]
    rec.FeatureLevel: MetadataDelta._feature_level,  # type: ignore[dict-item]
    rec.ConfigRecord: MetadataDelta._config_record,  # type: ignore[dict-item]
    rec.RegisterBroker: MetadataDelta._register_broker,  # type: ignore[dict-item]
    rec.FenceBroker: MetadataDelta._fence_broker,  # type: ignore[dict-item]
    rec.UnfenceBroker: MetadataDelta._unfence_broker,  # type: ignore[dict-item]
    rec.UserScramCredential: MetadataDelta._user_scram_credential,  # type: ignore[dict-item]
    rec.RemoveUserScramCredential:
        MetadataDelta._remove_user_scram_credential,  # type: ignore[dict-item]
    rec.AccessControlEntry: MetadataDelta._access_control_entry,  # type: ignore[dict-item]
    rec.RemoveAccessControlEntry:
        MetadataDelta._remove_access_control_entry,  # type: ignore[dict-item]
    # LeaderChange, NoOp and the snapshot header and footer change nothing but the offset.
}


def _epoch_map_error(epochs: rec.EpochMap | None) -> str | None:
    """Why a leader-epoch map is malformed (not (partition, epoch) pairs with partitions
    ascending), or None. The codec checks only that it is arrays of ints."""
    if epochs is None:
        return None
    previous = -1
    for pair in epochs:
        if len(pair) != 2 or pair[0] <= previous:
            return f"leader-epoch map {epochs!r} is not (partition, epoch) pairs by partition"
        previous = pair[0]
    return None


def replay(entries: Iterable[tuple[int, rec.Record]],
           base: MetadataImage | None = None) -> MetadataImage:
    """Build an image from (offset, record) pairs in log order, in one pass."""
    delta = MetadataDelta(base or MetadataImage.empty())
    for offset, record in entries:
        delta.apply(record, offset)
    return delta.build()


def replay_bytes(entries: Iterable[tuple[int, bytes]],
                 base: MetadataImage | None = None) -> MetadataImage:
    """Like `replay`, from encoded records; undecodable bytes become anomalies."""
    delta = MetadataDelta(base or MetadataImage.empty())
    for offset, data in entries:
        delta.apply_bytes(data, offset)
    return delta.build()
