"""ACLs and the authorizer (pure): Kafka's StandardAuthorizer rules over the ACLs of a
MetadataImage.

An ACL (`StandardAcl`, from an `AccessControlEntry` record) says that `principal`
from `host` is ALLOWed or DENIed `operation` on the resources a pattern names: a
LITERAL name (`*` names every resource of its type) or a PREFIXED one. `authorize`
answers one question, with Kafka's rules:
- the authorizer off (`authorizer.class.name` empty): everything is allowed;
- a principal in `super.users` is allowed everything;
- the ACLs that match the resource are those of its type whose pattern matches its name;
  of these, those whose principal is the caller's or `User:*` and whose host is the
  caller's or `*` apply;
- an applying DENY of the operation (or of ALL) denies, whatever else allows;
- an applying ALLOW of the operation allows; ALL implies every operation, DESCRIBE is
  implied by READ, WRITE, DELETE and ALTER, DESCRIBE_CONFIGS by ALTER_CONFIGS (for
  ALLOWs only: a DENY READ does not deny DESCRIBE, as in Kafka);
- nothing applies: denied, unless no ACL matches the resource at all and
  `allow.everyone.if.no.acl.found` is true.

`AclImage` holds the image's ACLs by id and an index kept with them: ACLs by (resource
type, pattern type, name), and per resource type the lengths of its PREFIXED names, so a
check looks up the literal name, the `*` name and each prefix of the name that some
PREFIXED ACL has the length of, never scanning every ACL (Kafka walks its ACLs sorted
by resource for the same). Both are persistent maps (`metadata.persistent`): an image
whose records leave the ACLs alone shares its base's, and one that adds or removes an
ACL copies the shards it touches, not the index.

Filters (`AclFilter`, DescribeAcls and DeleteAcls) match as Kafka's AclBindingFilter: ANY
matches every value of a field, a null name, principal or host every one, and the MATCH
pattern type every pattern that would apply to the named resource.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from metadata.persistent import FrozenMap, empty_map
from raft.common.session import KafkaPrincipal
from raft.common.uuid import Uuid

WILDCARD_RESOURCE = "*"  # a LITERAL name that matches every resource of its type
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"  # the name of the one CLUSTER resource
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_ALIASES = frozenset({STANDARD_AUTHORIZER, "standard"})


class ResourceType(enum.IntEnum):  # Kafka's org.apache.kafka.common.resource.ResourceType
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):  # Kafka's PatternType
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):  # Kafka's AclOperation
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):  # Kafka's AclPermissionType
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CONCRETE_RESOURCE_TYPES = frozenset(ResourceType) - {ResourceType.UNKNOWN, ResourceType.ANY}
CONCRETE_PATTERN_TYPES = frozenset({PatternType.LITERAL, PatternType.PREFIXED})
CONCRETE_OPERATIONS = frozenset(AclOperation) - {AclOperation.UNKNOWN, AclOperation.ANY}
CONCRETE_PERMISSIONS = frozenset({AclPermissionType.DENY, AclPermissionType.ALLOW})
IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                              AclOperation.DELETE, AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS,
                                      AclOperation.ALTER_CONFIGS})


@dataclass(frozen=True, slots=True, kw_only=True)
class AclBinding:
    """An ACL without its id: what CreateAcls asks for and Describe/DeleteAcls show."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StandardAcl:
    """An ACL of the image: its id and its binding."""

    id: Uuid
    binding: AclBinding


def invalid_binding_reason(binding: AclBinding) -> str | None:
    """Why `binding` cannot be an ACL (Kafka: INVALID_REQUEST), or None."""
    if binding.resource_type not in CONCRETE_RESOURCE_TYPES:
        return f"resource type {binding.resource_type} is not a concrete resource type"
    if binding.pattern_type not in CONCRETE_PATTERN_TYPES:
        return f"pattern type {binding.pattern_type} is not LITERAL (3) or PREFIXED (4)"
    if binding.operation not in CONCRETE_OPERATIONS:
        return f"operation {binding.operation} is not a concrete operation"
    if binding.permission_type not in CONCRETE_PERMISSIONS:
        return f"permission type {binding.permission_type} is not DENY (2) or ALLOW (3)"
    if not binding.resource_name:
        return "the resource name is empty"
    if (binding.resource_type == ResourceType.CLUSTER
            and binding.resource_name != CLUSTER_NAME):
        return f"the cluster resource is named {CLUSTER_NAME!r}"
    try:
        KafkaPrincipal.parse(binding.principal)
    except ValueError as exc:
        return str(exc)
    if not binding.host:
        return "the host is empty (use * for any host)"
    return None


# --- the image's ACLs -----------------------------------------------------------------

_IndexKey = tuple[int, int, str]  # (resource type, pattern type, name)
_PrefixKey = tuple[int, int]  # (resource type, length of a PREFIXED name)


@dataclass(frozen=True, slots=True, eq=False)
class AclImage:
    """The ACLs by id and the index by resource pattern, both FrozenMaps (an image whose
    records leave the ACLs alone shares them; one that changes them copies the few
    shards it touches: `AclImageBuilder`). `prefix_counts` counts the PREFIXED ACLs per
    resource type and name length, the lengths a check looks up."""

    by_id: FrozenMap[Uuid, StandardAcl] = field(default_factory=empty_map)
    groups: FrozenMap[_IndexKey, tuple[StandardAcl, ...]] = field(default_factory=empty_map)
    prefix_counts: Mapping[_PrefixKey, int] = field(default_factory=dict)
    # memo: resource type -> its PREFIXED name lengths, ascending (not content)
    _lengths: dict[int, tuple[int, ...]] = field(default_factory=dict, init=False,
                                                 repr=False)

    def __len__(self) -> int:
        return len(self.by_id)

    def __iter__(self) -> Iterator[StandardAcl]:
        return iter(self.by_id.values())

    def get(self, acl_id: Uuid) -> StandardAcl | None:
        return self.by_id.get(acl_id)

    def builder(self) -> AclImageBuilder:
        return AclImageBuilder(self)

    def canonical(self) -> list[object]:
        """Sorted by id: part of the image's content hash."""
        return [[acl.id.to_bytes(), b.resource_type, b.resource_name, b.pattern_type,
                 b.principal, b.host, b.operation, b.permission_type]
                for acl in sorted(self.by_id.values(), key=lambda a: a.id.value)
                for b in (acl.binding,)]

    def _prefix_lengths(self, resource_type: int) -> tuple[int, ...]:
        lengths = self._lengths.get(resource_type)
        if lengths is None:
            lengths = self._lengths[resource_type] = tuple(sorted(
                length for (rt, length), n in self.prefix_counts.items()
                if rt == resource_type and n > 0))
        return lengths

    def matching(self, resource_type: int, resource_name: str) -> Iterator[StandardAcl]:
        """The ACLs whose pattern matches the resource (any principal, host, operation):
        a few look-ups, not a scan."""
        groups = self.groups
        literal = PatternType.LITERAL
        yield from groups.get((resource_type, literal, resource_name)) or ()
        if resource_name != WILDCARD_RESOURCE:
            yield from groups.get((resource_type, literal, WILDCARD_RESOURCE)) or ()
        for length in self._prefix_lengths(resource_type):
            if length > len(resource_name):
                break
            yield from groups.get((resource_type, PatternType.PREFIXED,
                                   resource_name[:length])) or ()

    def find(self, binding: AclBinding) -> StandardAcl | None:
        """The ACL with exactly this binding, if any."""
        for acl in self.groups.get((binding.resource_type, binding.pattern_type,
                                    binding.resource_name)) or ():
            if acl.binding == binding:
                return acl
        return None


class AclImageBuilder:
    """Adds and removes ACLs over an AclImage (`metadata.delta`), keeping the index."""

    def __init__(self, base: AclImage) -> None:
        self._by_id = base.by_id.builder()
        self._groups = base.groups.builder()
        self._prefix_counts = dict(base.prefix_counts)

    def __contains__(self, acl_id: object) -> bool:
        return acl_id in self._by_id

    def add(self, acl: StandardAcl) -> None:
        b = acl.binding
        self._by_id[acl.id] = acl
        key = (b.resource_type, b.pattern_type, b.resource_name)
        self._groups[key] = (*(self._groups.get(key) or ()), acl)
        if b.pattern_type == PatternType.PREFIXED:
            length = (b.resource_type, len(b.resource_name))
            self._prefix_counts[length] = self._prefix_counts.get(length, 0) + 1

    def remove(self, acl_id: Uuid) -> None:
        acl = self._by_id[acl_id]
        del self._by_id[acl_id]
        b = acl.binding
        key = (b.resource_type, b.pattern_type, b.resource_name)
        rest = tuple(a for a in self._groups[key] if a.id != acl_id)
        if rest:
            self._groups[key] = rest
        else:
            del self._groups[key]
        if b.pattern_type == PatternType.PREFIXED:
            length = (b.resource_type, len(b.resource_name))
            self._prefix_counts[length] -= 1
            if not self._prefix_counts[length]:
                del self._prefix_counts[length]

    def freeze(self) -> AclImage:
        return AclImage(self._by_id.freeze(), self._groups.freeze(),
                        dict(self._prefix_counts))


EMPTY_ACLS = AclImage()


# --- the switch and the check ---------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorizerSettings:
    """`authorizer.class.name` (enabled), `super.users`, `allow.everyone.if.no.acl.found`."""

    enabled: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


OFF = AuthorizerSettings()


def authorizer_enabled(class_name: str) -> bool:
    """`authorizer.class.name`: empty is off; StandardAuthorizer (or `standard`) is on;
    anything else is a ValueError (one line for the config error)."""
    name = class_name.strip()
    if not name:
        return False
    if name in AUTHORIZER_ALIASES:
        return True
    raise ValueError(f"authorizer.class.name {name!r}: kraft-py has only {STANDARD_AUTHORIZER} "
                     f"(or 'standard'), or empty for none")


def parse_super_users(text: str) -> frozenset[str]:
    """`User:admin;User:broker` (Kafka's separator is `;`); ValueError on a bad name."""
    users = [part.strip() for part in text.split(";") if part.strip()]
    for user in users:
        KafkaPrincipal.parse(user)
    return frozenset(users)


def _result(binding: AclBinding, operation: int) -> int | None:
    """ALLOW or DENY if this (principal- and host-matching) ACL speaks to `operation`;
    None when it does not (Kafka's StandardAuthorizerData.findResult)."""
    if binding.operation != AclOperation.ALL:
        if binding.permission_type == AclPermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if binding.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if binding.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif binding.operation != operation:
                return None
        elif binding.operation != operation:
            return None
    return binding.permission_type


def authorize(image_acls: AclImage, principal: KafkaPrincipal | str, host: str,
              operation: int, resource_type: int, resource_name: str,
              settings: AuthorizerSettings) -> bool:
    """May `principal` from `host` do `operation` on the resource? (the rules are in the
    module docstring)."""
    if not settings.enabled:
        return True
    who = str(principal)
    if who in settings.super_users:
        return True
    matched = allowed = False
    for acl in image_acls.matching(resource_type, resource_name):
        matched = True
        binding = acl.binding
        if binding.principal != who and binding.principal != WILDCARD_PRINCIPAL:
            continue
        if binding.host != host and binding.host != WILDCARD_HOST:
            continue
        result = _result(binding, operation)
        if result == AclPermissionType.DENY:
            return False
        if result == AclPermissionType.ALLOW:
            allowed = True
    if allowed:
        return True
    return not matched and settings.allow_everyone_if_no_acl_found


def authorize_any(image_acls: AclImage, principal: KafkaPrincipal | str, host: str,
                  operation: int, resource_type: int, settings: AuthorizerSettings) -> bool:
    """Is `operation` allowed on at least one resource of the type? (Kafka 3's
    authorizeByResourceType, which lets a producer with WRITE on some topic be
    idempotent without IDEMPOTENT_WRITE on the cluster.) A resource counts when an ALLOW
    ACL of the principal names it and `authorize` allows the operation on that name."""
    if not settings.enabled or str(principal) in settings.super_users:
        return True
    if settings.allow_everyone_if_no_acl_found and not any(
            acl.binding.resource_type == resource_type for acl in image_acls):
        return True
    who = str(principal)
    for acl in image_acls:
        b = acl.binding
        if (b.resource_type == resource_type and b.permission_type == AclPermissionType.ALLOW
                and b.principal in (who, WILDCARD_PRINCIPAL)
                and b.host in (host, WILDCARD_HOST)
                and _result(b, operation) == AclPermissionType.ALLOW
                and authorize(image_acls, principal, host, operation, resource_type,
                              b.resource_name, settings)):
            return True
    return False


# --- filters (DescribeAcls, DeleteAcls) ----------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AclFilter:
    """Kafka's AclBindingFilter: ANY codes and None strings match every value."""

    resource_type: int = int(ResourceType.ANY)  # plain ints: they travel as msgpack
    resource_name: str | None = None
    pattern_type: int = int(PatternType.ANY)
    principal: str | None = None
    host: str | None = None
    operation: int = int(AclOperation.ANY)
    permission_type: int = int(AclPermissionType.ANY)


def invalid_filter_reason(acl_filter: AclFilter) -> str | None:
    """Why a filter is malformed (an UNKNOWN or out-of-range code), or None."""
    checks = ((acl_filter.resource_type, ResourceType, "resource type"),
              (acl_filter.pattern_type, PatternType, "pattern type"),
              (acl_filter.operation, AclOperation, "operation"),
              (acl_filter.permission_type, AclPermissionType, "permission type"))
    for value, codes, what in checks:
        if value not in {int(c) for c in codes} or value == 0:
            return f"{what} {value} is unknown"
    return None


def filter_matches(acl_filter: AclFilter, binding: AclBinding) -> bool:
    f = acl_filter
    if f.resource_type != ResourceType.ANY and f.resource_type != binding.resource_type:
        return False
    if f.pattern_type not in (PatternType.ANY, PatternType.MATCH) and \
            f.pattern_type != binding.pattern_type:
        return False
    if f.resource_name is not None:
        if f.pattern_type in (PatternType.ANY, binding.pattern_type):
            if f.resource_name != binding.resource_name:
                return False
        elif binding.pattern_type == PatternType.LITERAL:  # MATCH
            if binding.resource_name not in (f.resource_name, WILDCARD_RESOURCE):
                return False
        elif not f.resource_name.startswith(binding.resource_name):  # MATCH, PREFIXED
            return False
    if f.principal is not None and f.principal != binding.principal:
        return False
    if f.host is not None and f.host != binding.host:
        return False
    if f.operation != AclOperation.ANY and f.operation != binding.operation:
        return False
    return f.permission_type in (AclPermissionType.ANY, binding.permission_type)


def matching_acls(acls: Iterable[StandardAcl], acl_filter: AclFilter) -> list[StandardAcl]:
    """The ACLs `acl_filter` matches, sorted by resource then the rest (a stable order
    for DescribeAcls and `kraft acls --list`)."""
    return sorted((acl for acl in acls if filter_matches(acl_filter, acl.binding)),
                  key=lambda a: _sort_key(a.binding))


def _sort_key(b: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    return (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host,
            b.operation, b.permission_type)


def acl_image_of(entries: Mapping[Uuid, StandardAcl]) -> AclImage:
    """An AclImage holding `entries` (tests, benchmarks)."""
    builder = AclImageBuilder(AclImage())
    for acl in entries.values():
        builder.add(acl)
    return builder.freeze()
