"""ACL records in the image: replay, anomalies, the content hash and the snapshot round
trip (metadata.delta, metadata.image_snapshot)."""

from __future__ import annotations

from metadata import records as rec
from metadata.authorizer import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from metadata.delta import replay
from metadata.image import MetadataImage
from metadata.image_snapshot import image_from_records, image_records
from raft.common.uuid import Uuid


def _ace(acl_id: int, name: str = "orders", **overrides: object) -> rec.AccessControlEntry:
    fields: dict[str, object] = dict(
        id=Uuid(acl_id), resource_type=ResourceType.TOPIC, resource_name=name,
        pattern_type=PatternType.LITERAL, principal="User:alice", host="*",
        operation=AclOperation.READ, permission_type=AclPermissionType.ALLOW)
    fields.update(overrides)
    return rec.AccessControlEntry(**fields)  # type: ignore[arg-type]


def test_acl_is_in_the_image_when_its_record_is_replayed() -> None:
    image = replay([(0, _ace(1)), (1, _ace(2, "pay", pattern_type=PatternType.PREFIXED))])
    assert len(image.acls) == 2
    acl = image.acls.get(Uuid(1))
    assert acl is not None
    assert acl.binding.resource_name == "orders"
    assert image.anomaly_count == 0


def test_acl_is_gone_when_its_remove_record_is_replayed() -> None:
    image = replay([(0, _ace(1)), (1, _ace(2)), (2, rec.RemoveAccessControlEntry(id=Uuid(1)))])
    assert [a.id for a in image.acls] == [Uuid(2)]


def test_record_is_an_anomaly_when_the_acl_is_not_concrete() -> None:
    image = replay([(0, _ace(1, operation=AclOperation.ANY)),
                    (1, _ace(2, pattern_type=PatternType.MATCH)),
                    (2, _ace(3, resource_type=ResourceType.ANY)),
                    (3, _ace(4, principal="alice")),
                    (4, _ace(5, resource_type=ResourceType.CLUSTER, resource_name="x"))])
    assert len(image.acls) == 0
    assert image.anomaly_count == 5


def test_record_is_an_anomaly_when_the_id_is_taken_or_unknown() -> None:
    image = replay([(0, _ace(1)), (1, _ace(1, "other")),
                    (2, rec.RemoveAccessControlEntry(id=Uuid(9)))])
    assert image.anomaly_count == 2
    acl = image.acls.get(Uuid(1))
    assert acl is not None
    assert acl.binding.resource_name == "orders"


def test_content_hash_changes_when_an_acl_is_added() -> None:
    base = replay([(0, rec.NoOp()), (1, rec.NoOp())])
    with_acl = replay([(0, rec.NoOp()), (1, _ace(1))])
    assert base.content_hash() != with_acl.content_hash()
    # an image without ACLs hashes as it did before ACLs existed: same as an empty one's
    assert replay([(0, _ace(1)), (1, rec.RemoveAccessControlEntry(id=Uuid(1)))]
                  ).content_hash() == base.content_hash()


def test_image_shares_its_acls_when_a_record_leaves_them_alone() -> None:
    image = replay([(0, _ace(1))])
    assert list(image.acls.matching(ResourceType.TOPIC, "orders"))  # builds the index
    later = replay([(1, rec.NoOp())], base=image)
    assert later.acls is image.acls


def test_snapshot_round_trip_keeps_the_acls_when_the_image_has_them() -> None:
    image = replay([(0, _ace(3)), (1, _ace(1, "pay", pattern_type=PatternType.PREFIXED,
                                            permission_type=AclPermissionType.DENY,
                                            host="10.0.0.1")),
                    (2, _ace(2, "kafka-cluster", resource_type=ResourceType.CLUSTER,
                             operation=AclOperation.CLUSTER_ACTION, principal="User:broker")),
                    (3, rec.RemoveAccessControlEntry(id=Uuid(3)))])
    records = image_records(image)
    assert [r.id for r in records if isinstance(r, rec.AccessControlEntry)] == [Uuid(1),
                                                                                   Uuid(2)]
    rebuilt = image_from_records(records, image.last_applied_offset)
    assert rebuilt.content_hash() == image.content_hash()
    assert {a.id: a.binding for a in rebuilt.acls} == {a.id: a.binding for a in image.acls}


def test_snapshot_has_no_acl_records_when_the_image_has_none() -> None:
    assert not any(isinstance(r, rec.AccessControlEntry)
                   for r in image_records(MetadataImage.empty()))


def test_snapshot_bytes_keep_the_acls_when_written_and_loaded() -> None:
    """The writer's path (image_record_bytes) and the loader's (image_from_bytes), as a
    node's snapshot file holds them."""
    from metadata.image_snapshot import image_from_bytes, image_record_bytes
    image = replay([(0, _ace(2)), (1, _ace(1, "pay", pattern_type=PatternType.PREFIXED))])
    loaded = image_from_bytes(list(image_record_bytes(image)), image.last_applied_offset)
    assert {a.id: a.binding for a in loaded.acls} == {a.id: a.binding for a in image.acls}
    assert loaded.content_hash() == image.content_hash()
