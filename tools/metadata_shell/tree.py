"""A MetadataImage as a read-only tree of directories and files, laid out as in Kafka's
metadata shell:

    /image/acls/byId/<acl id>                an ACL (Kafka's codes as names), JSON
    /image/cluster/brokers/<broker id>       a broker's registration, JSON
    /image/features/<name>                   a FeatureLevel record's level (metadata.version)
    /image/provenance                        offset and epoch the image was built at, JSON
    /image/scram/<mechanism>/<user>          a user's SCRAM credential, JSON: its salt
                                             and keys `(redacted)` unless asked for
    /image/topics/byId/<topic id>/           a topic: `id`, `name` and one file per
    /image/topics/byName/<topic name>/         partition, `0`, `1`, ... (state as JSON)

Directories list and look up their children only when visited, so an image of 100,000
topics is not copied into a tree up front. Nothing here knows where the image came from.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from metadata import records as rec
from metadata.authorizer import AclOperation, AclPermissionType, PatternType, ResourceType
from metadata.image import BrokerImage, MetadataImage, PartitionImage, TopicImage
from raft.common.uuid import Uuid

NO_EPOCH = -1  # the epoch of an image that holds no record


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """Where in the log an image stands: the offset of the last record it holds
    (inclusive; -1 when it holds none) and the epoch of the batch holding that record."""

    offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class File:
    render: Callable[[], str]


@dataclass(frozen=True, slots=True)
class Directory:
    list_names: Callable[[], list[str]]  # in `ls` order
    find_child: Callable[[str], Node | None]  # None: no such entry

    def names(self) -> list[str]:
        return self.list_names()

    def child(self, name: str) -> Node | None:
        return self.find_child(name)

    @classmethod
    def of(cls, entries: Mapping[str, Node]) -> Directory:
        """A directory whose entries are known up front, listed in the mapping's order."""
        return cls(lambda: list(entries), entries.get)


Node = File | Directory


def build_image_tree(image: MetadataImage, provenance: Provenance, *,
                     print_sensitive: bool = False) -> Directory:
    """The root directory `/`, holding `image`; secrets shown only if `print_sensitive`."""
    return Directory.of({"image": Directory.of({
        "acls": Directory.of({"byId": _acls(image)}),
        "cluster": Directory.of({"brokers": _brokers(image)}),
        "features": _features(image),
        "provenance": _json_file({"offset": provenance.offset, "epoch": provenance.epoch}),
        "scram": _scram(image, print_sensitive=print_sensitive),
        "topics": Directory.of({"byId": _topics_by_id(image),
                                "byName": _topics_by_name(image)}),
    })})


def _features(image: MetadataImage) -> Directory:
    """One file per FeatureLevel record's feature, holding its level."""
    return Directory.of({name: File(functools.partial(str, level))
                         for name, level in image.finalized_features})


def _scram(image: MetadataImage, *, print_sensitive: bool) -> Directory:
    """/image/scram/<mechanism>/<user>, as Kafka's shell lays SCRAM credentials out; the
    record's view (`metadata.records.to_json`) decides what is redacted."""
    credentials = image.scram_credentials

    def users(mechanism: str) -> Directory:
        def find(name: str) -> Node | None:
            found = credentials.get((name, mechanism))
            if found is None:
                return None
            view = rec.to_json(found.to_record(), print_sensitive=print_sensitive)
            return _json_file({k: v for k, v in view.items() if k not in ("type", "version")})
        return Directory(lambda: sorted(n for n, m in credentials if m == mechanism), find)

    def mechanisms() -> list[str]:
        return sorted({m for _, m in credentials})

    return Directory(mechanisms, lambda m: users(m) if m in mechanisms() else None)


def _acls(image: MetadataImage) -> Directory:
    """/image/acls/byId/<acl id>, as Kafka's shell lays ACLs out."""
    def find(name: str) -> Node | None:
        acl_id = _topic_id(name)  # an ACL id is a Uuid in the same text form
        acl = None if acl_id is None else image.acls.get(acl_id)
        if acl is None:
            return None
        b = acl.binding
        return _json_file({
            "id": str(acl.id), "resource_type": ResourceType(b.resource_type).name,
            "resource_name": b.resource_name,
            "pattern_type": PatternType(b.pattern_type).name, "principal": b.principal,
            "host": b.host, "operation": AclOperation(b.operation).name,
            "permission_type": AclPermissionType(b.permission_type).name})

    return Directory(lambda: sorted(str(a.id) for a in image.acls), find)


def _text_file(text: str) -> File:
    return File(lambda: text)


def _json_file(value: dict[str, Any]) -> File:
    return File(lambda: _json_object(value))


def _json_object(value: dict[str, Any]) -> str:
    """One field per line, each value on its line (`"isr": [1, 2]`): easier to read
    than json.dumps(indent=2), which spreads every list item over a line of its own."""
    if not value:
        return "{}"
    fields = ",\n".join(f"  {json.dumps(key)}: {json.dumps(item)}" for key, item in value.items())
    return "{\n" + fields + "\n}"


def _canonical_int(name: str) -> int | None:
    """The number `name` spells in its one canonical form: "07" or " 7" name nothing,
    so every entry has exactly one path."""
    try:
        number = int(name)
    except ValueError:
        return None
    return number if str(number) == name else None


def _topic_id(name: str) -> Uuid | None:
    try:
        return Uuid.from_string(name)  # accepts the canonical text only
    except ValueError:
        return None


def _brokers(image: MetadataImage) -> Directory:
    def find(name: str) -> Node | None:
        broker_id = _canonical_int(name)
        broker = None if broker_id is None else image.brokers.get(broker_id)
        return None if broker is None else _json_file(_broker_json(broker))

    return Directory(lambda: [str(b) for b in sorted(image.brokers)], find)


def _topics_by_name(image: MetadataImage) -> Directory:
    def find(name: str) -> Node | None:
        topic = image.topic_by_name(name)
        return None if topic is None else _topic(topic)

    return Directory(lambda: sorted(image.topic_ids_by_name), find)


def _topics_by_id(image: MetadataImage) -> Directory:
    def find(name: str) -> Node | None:
        topic_id = _topic_id(name)
        topic = None if topic_id is None else image.topic(topic_id)
        return None if topic is None else _topic(topic)

    return Directory(lambda: sorted(str(t) for t in image.topics), find)


def _topic(topic: TopicImage) -> Directory:
    entries: dict[str, Node] = {"id": _text_file(str(topic.topic_id)),
                                "name": _text_file(topic.name)}
    for partition in topic.partitions:
        entries[str(partition.partition)] = _json_file(_partition_json(partition))
    return Directory.of(entries)


def _partition_json(partition: PartitionImage) -> dict[str, Any]:
    # field names as in the Partition record, so they read as `kraft dump-log` shows them
    shown = {"partition": partition.partition, "replicas": list(partition.replicas),
             "isr": list(partition.isr), "leader": partition.leader,
             "leader_epoch": partition.leader_epoch,
             "partition_epoch": partition.partition_epoch,
             "leader_epoch_after_creation": partition.leader_epoch_after_creation,
             "leader_epoch_before_deletion": partition.leader_epoch_before_deletion}
    if partition.reassigning:  # only then, as the record carries them (KIP-455)
        shown.update(adding_replicas=list(partition.adding_replicas),
                     removing_replicas=list(partition.removing_replicas))
    return shown


def _broker_json(broker: BrokerImage) -> dict[str, Any]:
    return {"broker_id": broker.broker_id, "incarnation_id": str(broker.incarnation_id),
            "broker_epoch": broker.broker_epoch, "endpoints": list(broker.endpoints),
            "rack": broker.rack, "fenced": broker.fenced}
