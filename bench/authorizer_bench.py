"""authorize() against the image's indexed ACLs, and the same check as a scan of every ACL
(what the index saves), at 100, 10,000 and 100,000 ACLs: half LITERAL topic names, a
quarter PREFIXED, a quarter on groups, 20 principals; each check a topic that one
literal and one prefixed ACL match. Also what one more ACL costs the next image (the
delta's builder over the persistent maps: a few shards copied, not the index). In
process, a few seconds."""

from __future__ import annotations

import random
import time

from metadata.authorizer import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    AuthorizerSettings,
    PatternType,
    ResourceType,
    StandardAcl,
    acl_image_of,
    authorize,
    filter_matches,
)
from raft.common.session import KafkaPrincipal
from raft.common.uuid import Uuid

ON = AuthorizerSettings(enabled=True)
CHECKS = 20_000
SCAN_CHECKS = 50


def _acls(count: int, rng: random.Random) -> dict[Uuid, StandardAcl]:
    acls = {}
    for i in range(count):
        kind = i % 4
        binding = AclBinding(
            resource_type=ResourceType.GROUP if kind == 3 else ResourceType.TOPIC,
            resource_name=f"t{i // 4}" if kind < 2 else f"t{i // 4}-",
            pattern_type=PatternType.PREFIXED if kind == 2 else PatternType.LITERAL,
            principal=f"User:u{rng.randrange(20)}", host="*",
            operation=AclOperation.READ if kind else AclOperation.WRITE,
            permission_type=AclPermissionType.ALLOW)
        acls[Uuid(i + 1)] = StandardAcl(id=Uuid(i + 1), binding=binding)
    return acls


def _scan(acls: dict[Uuid, StandardAcl], name: str) -> int:
    """The resource match alone, by a scan: what a check costs without an index."""
    match = AclFilter(resource_type=ResourceType.TOPIC, resource_name=name,
                    pattern_type=PatternType.MATCH)
    return sum(1 for acl in acls.values() if filter_matches(match, acl.binding))


def main() -> None:
    rng = random.Random(7)
    principal = KafkaPrincipal("User", "u3")
    for count in (100, 10_000, 100_000):
        acls = _acls(count, rng)
        image = acl_image_of(acls)
        names = [f"t{rng.randrange(max(1, count // 4))}-x" for _ in range(CHECKS)]
        extra = StandardAcl(id=Uuid(count + 1), binding=next(iter(acls.values())).binding)
        started = time.perf_counter()
        for _ in range(100):
            builder = image.builder()
            builder.add(extra)
            builder.freeze()
        added_s = (time.perf_counter() - started) / 100
        started = time.perf_counter()
        for name in names:
            authorize(image, principal, "10.0.0.1", AclOperation.READ, ResourceType.TOPIC,
                      name, ON)
        indexed_us = (time.perf_counter() - started) / CHECKS * 1e6
        started = time.perf_counter()
        for name in names[:SCAN_CHECKS]:
            _scan(acls, name)
        scan_us = (time.perf_counter() - started) / SCAN_CHECKS * 1e6
        print(f"{count:>7} ACLs: authorize {indexed_us:8.1f} us/check indexed, "
              f"scan {scan_us:10.1f} us/check ({scan_us / indexed_us:,.0f}x), "
              f"one ACL added in {added_s * 1000:.2f} ms")


if __name__ == "__main__":
    main()
