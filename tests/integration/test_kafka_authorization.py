"""Every row of the brokers' Kafka listener that needs a right (broker/access_table.py
`KAFKA`, all but the OPEN rows), against real processes on 127.0.0.1, in the manner of
Kafka's AuthorizerIntegrationTest, for SASL/SCRAM principals. What it proves, per row
(`test_row`):
- `mallory`, a SCRAM user with no ACL, sends a valid request (raw, over the wire, naming
  a real topic or group) and is refused with the row's Kafka error (`CASES` states which:
  TOPIC_AUTHORIZATION_FAILED 29, GROUP_AUTHORIZATION_FAILED 30,
  CLUSTER_AUTHORIZATION_FAILED 31, or for ListGroups the group left out), and nothing
  changes: the topics, partition counts, topic configs, end offsets, ACLs, SCRAM users,
  groups, members and committed offsets the admin reads are those of before;
- `ops` holding exactly the row's rights (its operation on its resource plus `also`,
  LITERAL on the names the request uses) is served: every error code in the answer is
  one the row expects of a served request, none an authorization failure, and a writing
  request changes what the admin reads; the same request once those ACLs are removed is
  refused again, as mallory's;
- the super user `admin` is served;
- `ops` holding the row's other rights and, instead of one of them, every operation on
  its resource that does not imply it, is refused and changes nothing
  (`test_every_other_operation_instead_of_one_right_is_refused`): a handler checking a
  weaker operation than its row, or skipping a right of `also`, fails here.
`CASES` must cover exactly the rows that are not OPEN (`test_every_row_that_needs_a_right_
has_a_case`), so a new row without a case fails here. `VARIANTS` hold other shapes of a
row's request (topics by ID, all topics, OffsetFetch v1, LeaveGroup v2) to the same
checks; a refused acks=0 Produce closes the connection and writes nothing; a
ConsumerGroupPosition names no partition of a topic the member may not READ.

One cluster for the module: 1 voter and 1 broker whose Kafka listener is SASL_PLAINTEXT
with SCRAM-SHA-256 and SCRAM-SHA-512 (the users from `kraft format --add-scram`), the
StandardAuthorizer on. The controller listener is plaintext (the explicit opt-out
`authorizer.allow.unbound.controller.listener`), so the broker reaches the controller as
User:ANONYMOUS, which super.users therefore holds; the Kafka listener takes SASL only, so
no client there is anonymous. ACLs are granted and removed as admin through the broker,
which answers once its own image holds the change."""

from __future__ import annotations

import dataclasses
import itertools
import random
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kio.index import load_request_schema

from broker.access_table import KAFKA, Check
from broker.kafka import api_versions as api
from broker.kafka.sasl.scram import MECHANISMS, SCRAM_SHA_256, ScramClient, salted_password
from metadata.admin import BROKER_RESOURCE
from metadata.authorizer import (
    CLUSTER_NAME,
    CONCRETE_OPERATIONS,
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from metadata.features import LATEST_METADATA_LEVEL
from raft.common.kafka.codec import build, request_schema
from raft.common.kafka.framing import read_frame
from raft.common.kafka.ordered_schemas import CONSUMER_GROUP_POSITION, PARTITION_LEADER_EPOCHS
from raft.common.kafka.record_batch import encode_batch
from raft.common.kafka.wire_client import connect, decode_response, encode_request
from tests.support.quorum_support import FAST_SETTINGS, running_cluster, wait_until
from tests.support.secure_cluster import format_with_scram, scram_jaas
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

VOTER, BROKER = 1, 2
PASSWORDS = {"admin": "admin-secret", "mallory": "mallory-secret", "ops": "ops-secret"}
MECHANISM = {"admin": "SCRAM-SHA-512", "mallory": "SCRAM-SHA-256", "ops": "SCRAM-SHA-512"}
OPS = "User:ops"
SETTINGS = {
    **FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
    "listener.security.protocol.map":
        "CONTROLLER:PLAINTEXT,PLAINTEXT:SASL_PLAINTEXT,STATUS:PLAINTEXT",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
    "listener.name.plaintext.scram-sha-512.sasl.jaas.config":
        scram_jaas("admin", PASSWORDS["admin"]),
    "authorizer.class.name": "standard",
    "super.users": "User:admin;User:ANONYMOUS",
    # the controller listener is plaintext: no peer is bound to a node id
    "authorizer.allow.unbound.controller.listener": "true",
}
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = \
    29, 30, 31
INVALID_TXN_STATE, LOG_DIR_NOT_FOUND = 48, 57
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85
AUTHORIZATION_FAILURES = frozenset({TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
                                    CLUSTER_AUTHORIZATION_FAILED})
WAIT_S = 30.0
# no member expires while the module runs (seconds), so the groups the admin reads
# change only by the requests sent
SESSION_TIMEOUT_MS = 600_000
PROTOCOL_TYPE = "kraft-authz-test"  # not "consumer": no subscription to decode

TOPIC = "authz-topic"  # read, written and configured by the rows that need a topic
GROUP = "authz-group"  # a group without members, with a committed offset
MEMBERS = "authz-members"  # a Stable group of one member (SyncGroup, Heartbeat, ...)
CREATED, DOOMED, GROWN = "authz-created", "authz-doomed", "authz-grown"
TRIMMED = "authz-trimmed"  # DeleteRecords' topic: a record produced before each turn
JOINING, LEAVING = "authz-joining", "authz-leaving"
DELETED, OFFSETS_DELETED = "authz-deleted", "authz-offsets-deleted"
CAROL = "carol"  # the user AlterUserScramCredentials creates
# the ACL CreateAcls creates and DeleteAcls deletes
TARGET_ACL = {"resource_type": ResourceType.TOPIC, "resource_name": "authz-acl-target",
              "resource_pattern_type": PatternType.LITERAL, "principal": "User:nobody",
              "host": "*", "operation": AclOperation.READ,
              "permission_type": AclPermissionType.ALLOW}
ANY_ACL = {"resource_type_filter": ResourceType.ANY, "resource_name_filter": None,
           "pattern_type_filter": PatternType.ANY, "principal_filter": None,
           "host_filter": None, "operation": AclOperation.ANY,
           "permission_type": AclPermissionType.ANY}


def request(api_key: int, version: int, values: dict[str, Any]) -> Any:
    return build(request_schema(api_key, version), values)


class SaslClient:
    """One connection to the broker's Kafka listener, logged in with SCRAM; requests one
    at a time, blocking. A failed exchange drops the connection; the next call logs in
    anew."""

    def __init__(self, address: str, user: str) -> None:
        self.address, self.user = address, user
        self.sock: socket.socket | None = None
        self._correlation = itertools.count(1)

    def _exchange(self, sock: socket.socket, body: Any) -> Any:
        correlation_id = next(self._correlation)
        sock.sendall(encode_request(body, correlation_id=correlation_id, client_id=self.user))
        answered, response = decode_response(read_frame(sock), int(body.__api_key__),
                                             int(body.__version__))
        assert answered == correlation_id, (answered, correlation_id)
        return response

    def _login(self) -> socket.socket:
        mechanism = MECHANISM[self.user]
        sock = connect(self.address, timeout_s=WAIT_S)
        try:
            handshake = self._exchange(sock, build(load_request_schema(api.SASL_HANDSHAKE, 1),
                                                   {"mechanism": mechanism}))
            assert int(handshake.error_code) == 0, handshake
            scram = ScramClient(MECHANISMS[mechanism], self.user, PASSWORDS[self.user],
                                rng=random.Random())

            def step(token: bytes) -> bytes:
                answer = self._exchange(sock, build(
                    load_request_schema(api.SASL_AUTHENTICATE, 2), {"auth_bytes": token}))
                assert int(answer.error_code) == 0, answer
                return bytes(answer.auth_bytes)
            scram.verify(step(scram.final(step(scram.first()))))
        except BaseException:
            sock.close()
            raise
        return sock

    def send(self, body: Any) -> Any:
        if self.sock is None:
            self.sock = self._login()
        try:
            return self._exchange(self.sock, body)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def error_codes(entity: Any) -> list[int]:
    """Every `error_code` in a response, at any depth."""
    found: list[int] = []
    if isinstance(entity, tuple | list):
        for item in entity:
            found += error_codes(item)
    elif hasattr(entity, "__dataclass_fields__"):
        for name in entity.__dataclass_fields__:
            value = getattr(entity, name)
            if name == "error_code":
                found.append(int(value))
            else:
                found += error_codes(value)
    return found


class Setup:
    def __init__(self, cluster: Cluster) -> None:
        address = cluster.node(BROKER).client_address
        assert address is not None
        self.cluster = cluster
        self.admin = SaslClient(address, "admin")
        self.mallory = SaslClient(address, "mallory")
        self.ops = SaslClient(address, "ops")
        self.members: dict[str, tuple[str, int]] = {}  # group -> (member id, generation)
        self.values = itertools.count(1)  # fresh config values, offsets, positions
        self.position = -1  # the last position reported (ConsumerGroupPosition)

    def close(self) -> None:
        for client in (self.admin, self.mallory, self.ops):
            client.close()

    # --- what the admin sees ---------------------------------------------------------

    def topics(self) -> dict[str, Any]:
        answer = self.admin.send(request(api.METADATA, 12, {"topics": None}))
        return {t.name: t for t in answer.topics if not t.is_internal}

    def topic_id(self, name: str) -> Any:
        return self.topics()[name].topic_id

    def partition_count(self, name: str) -> int:
        return len(self.topics()[name].partitions)

    def world(self) -> dict[str, Any]:
        """What a refused request must not change, read by the admin: topics and their
        partition counts, configs and end offsets, ACLs, SCRAM users, groups with their
        states, members and committed offsets."""
        topics = self.topics()
        configs = self.admin.send(request(api.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": ResourceType.TOPIC, "resource_name": name,
             "configuration_keys": None} for name in sorted(topics)]}))
        ends, starts = (self.admin.send(request(api.LIST_OFFSETS, 7, {
            "replica_id": -1, "topics": [
                {"name": name, "partitions": [{"partition_index": p.partition_index,
                                               "current_leader_epoch": -1,
                                               "timestamp": timestamp}
                                              for p in topic.partitions]}
                for name, topic in sorted(topics.items())]})) for timestamp in (-1, -2))
        acls = self.admin.send(request(api.DESCRIBE_ACLS, 3, {
            "resource_type_filter": ResourceType.ANY, "pattern_type_filter": PatternType.ANY,
            "operation": AclOperation.ANY, "permission_type": AclPermissionType.ANY}))
        users = self.admin.send(request(api.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                                        {"users": None}))
        listed = self.admin.send(request(api.LIST_GROUPS, 4, {}))
        group_ids = sorted(g.group_id for g in listed.groups)
        described = self.admin.send(request(api.DESCRIBE_GROUPS, 5, {"groups": group_ids}))
        committed = {g: self.admin.send(request(api.OFFSET_FETCH, 7, {
            "group_id": g, "topics": None})) for g in group_ids}
        for answer in (configs, ends, starts, acls, users, listed, described,
                       *committed.values()):
            assert set(error_codes(answer)) <= {0}, answer
        offsets = {(g, t.name, p.partition_index): p.committed_offset
                   for g, answer in committed.items() for t in answer.topics
                   for p in t.partitions}
        # a group left with no member and no offset is forgotten once its tombstone is
        # written, after the answer that emptied it: until then it reads Empty; both
        # are the same group state
        holding = {g for g, *_ in offsets}
        return {
            "topics": {n: (t.topic_id, len(t.partitions)) for n, t in topics.items()},
            "configs": {(r.resource_name, c.name): c.value
                        for r in configs.results for c in r.configs},
            "end offsets": {(t.name, p.partition_index): p.offset
                            for t in ends.topics for p in t.partitions},
            "log starts": {(t.name, p.partition_index): p.offset
                           for t in starts.topics for p in t.partitions},
            "acls": sorted((r.resource_type, r.resource_name, r.pattern_type, a.principal,
                            a.host, a.operation, a.permission_type)
                           for r in acls.resources for a in r.acls),
            "users": sorted((r.user, sorted((c.mechanism, c.iterations)
                                            for c in r.credential_infos))
                            for r in users.results),
            "groups": {g.group_id: (g.group_state, sorted(m.member_id for m in g.members))
                       for g in described.groups
                       if g.members or g.group_state != "Empty" or g.group_id in holding},
            "offsets": offsets,
        }

    # --- state a row needs, made by the admin --------------------------------------------

    def create_topic(self, name: str) -> None:
        if name in self.topics():
            return
        answer = self.admin.send(request(api.CREATE_TOPICS, 7, {"timeout": 20_000, "topics": [
            {"name": name, "num_partitions": 1, "replication_factor": 1}]}))
        assert error_codes(answer) == [0], answer

    def delete_topic(self, name: str) -> None:
        if name not in self.topics():
            return
        answer = self.admin.send(request(api.DELETE_TOPICS, 6, {
            "timeout": 20_000, "topics": [{"name": name, "topic_id": None}]}))
        assert error_codes(answer) == [0], answer

    def commit(self, group: str) -> None:
        """A committed offset of TOPIC for `group` (a simple commit: no member)."""
        answer = self.admin.send(offset_commit(group, next(self.values)))
        assert error_codes(answer) == [0], answer

    def group_state(self, group: str) -> str:
        [described] = self.admin.send(request(api.DESCRIBE_GROUPS, 5,
                                              {"groups": [group]})).groups
        assert int(described.error_code) == 0, described
        return str(described.group_state)

    def empty_group(self, group: str) -> None:
        """No member left in `group` (one without committed offsets), and the group
        forgotten: the coordinator writes its tombstone after the answer to the last
        LeaveGroup, so the groups the admin reads settle only then."""
        [described] = self.admin.send(request(api.DESCRIBE_GROUPS, 5,
                                              {"groups": [group]})).groups
        if described.members:
            answer = self.admin.send(request(api.LEAVE_GROUP, 4, {
                "group_id": group, "members": [{"member_id": m.member_id}
                                               for m in described.members]}))
            assert set(error_codes(answer)) == {0}, answer
        wait_until(lambda: self.group_state(group) == "Dead", WAIT_S,
                   f"group {group} to be forgotten")
        self.members.pop(group, None)

    def member(self, group: str) -> tuple[str, int]:
        """The (member id, generation) of the one member of Stable `group`, which the admin
        joins and syncs unless it is already there."""
        [described] = self.admin.send(request(api.DESCRIBE_GROUPS, 5,
                                              {"groups": [group]})).groups
        known = self.members.get(group)
        if known is not None and described.group_state == "Stable" and \
                [m.member_id for m in described.members] == [known[0]]:
            return known
        self.empty_group(group)
        joined = self.admin.send(join_group(group))
        assert int(joined.error_code) == 0, joined
        synced = self.admin.send(request(api.SYNC_GROUP, 5, {
            "group_id": group, "generation_id": joined.generation_id,
            "member_id": joined.member_id, "protocol_type": PROTOCOL_TYPE,
            "protocol_name": "authz", "assignments": [
                {"member_id": joined.member_id, "assignment": b""}]}))
        assert int(synced.error_code) == 0, synced
        self.members[group] = (joined.member_id, int(joined.generation_id))
        return self.members[group]

    def member_fields(self, group: str) -> dict[str, Any]:
        member_id, generation = self.member(group)
        return {"member_id": member_id, "generation_id": generation}

    def ensure_target_acl(self, present: bool) -> None:
        if present:
            answer = self.admin.send(request(api.CREATE_ACLS, 3, {"creations": [TARGET_ACL]}))
        else:
            answer = self.admin.send(request(api.DELETE_ACLS, 3,
                                             {"filters": [target_acl_filter()]}))
        assert set(error_codes(answer)) <= {0}, answer

    # --- ops's rights -----------------------------------------------------------------

    def grant(self, rights: list[tuple[AclOperation, ResourceType, str]]) -> None:
        answer = self.admin.send(request(api.CREATE_ACLS, 3, {"creations": [
            {"resource_type": resource, "resource_name": name,
             "resource_pattern_type": PatternType.LITERAL, "principal": OPS, "host": "*",
             "operation": operation, "permission_type": AclPermissionType.ALLOW}
            for operation, resource, name in rights]}))
        assert set(error_codes(answer)) == {0}, answer

    def revoke(self) -> None:
        answer = self.admin.send(request(api.DELETE_ACLS, 3, {"filters": [
            {**ANY_ACL, "principal_filter": OPS}]}))
        assert set(error_codes(answer)) <= {0}, answer
        left = self.admin.send(request(api.DESCRIBE_ACLS, 3, {
            **ANY_ACL, "principal_filter": OPS}))
        assert left.resources == (), left


def target_acl_filter() -> dict[str, Any]:
    return {"resource_type_filter": TARGET_ACL["resource_type"],
            "resource_name_filter": TARGET_ACL["resource_name"],
            "pattern_type_filter": TARGET_ACL["resource_pattern_type"],
            "principal_filter": TARGET_ACL["principal"], "host_filter": TARGET_ACL["host"],
            "operation": TARGET_ACL["operation"],
            "permission_type": TARGET_ACL["permission_type"]}


def offset_commit(group: str, offset: int) -> Any:
    return request(api.OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})


def join_group(group: str) -> Any:
    return request(api.JOIN_GROUP, 7, {
        "group_id": group, "session_timeout": SESSION_TIMEOUT_MS, "rebalance_timeout": 10_000,
        "member_id": "", "group_instance_id": None, "protocol_type": PROTOCOL_TYPE,
        "protocols": [{"name": "authz", "metadata": b""}]})


def produce(setup: Setup, *, by_id: bool = False, name: str = TOPIC) -> Any:
    topic = {"topic_id": setup.topic_id(name)} if by_id else {"name": name}
    return request(api.PRODUCE, 13 if by_id else 9, {
        "transactional_id": None, "acks": 1, "timeout": 10_000, "topic_data": [
            {**topic, "partition_data": [{"index": 0, "records": encode_batch(
                [(None, b"authz")], timestamps=[int(time.time() * 1000)])}]}]})


def with_a_record(name: str) -> Callable[[Setup], None]:
    """A prepare: the topic exists and holds one more record (written by the admin)."""
    def prepare(setup: Setup) -> None:
        setup.create_topic(name)
        answer = setup.admin.send(produce(setup, name=name))
        assert error_codes(answer) == [0], answer
    return prepare


def fetch(setup: Setup, *, by_id: bool = False) -> Any:
    topic = {"topic_id": setup.topic_id(TOPIC)} if by_id else {"topic": TOPIC}
    return request(api.FETCH, 13 if by_id else 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 16,
        "session_epoch": -1, "topics": [{**topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
             "last_fetched_epoch": -1, "log_start_offset": -1,
             "partition_max_bytes": 1 << 16}]}]})


def scram_upsertion(setup: Setup) -> Any:
    salt = random.Random(7).randbytes(32)
    return request(api.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [
        {"name": CAROL, "mechanism": SCRAM_SHA_256.kafka_type, "iterations": 4096,
         "salt": salt,
         "salted_password": salted_password(SCRAM_SHA_256, "carol-secret", salt, 4096)}]})


def api_name(api_key: int) -> str:
    low = api.SUPPORTED.get(api_key, (0, 0))[0]
    return request_schema(api_key, low).__name__.removesuffix("Request")


Build = Callable[[Setup], Any]
Shows = Callable[[Setup, Any], bool]


def listed(group: str) -> Shows:
    return lambda setup, answer: group in {g.group_id for g in answer.groups}


def report_position(setup: Setup) -> Any:
    """ConsumerGroupPosition: the MEMBERS member reports a new position of TOPIC-0."""
    setup.position = 1_000 + next(setup.values)
    return consumer_group_position(setup, need_position=False, position=setup.position)


def consumer_group_position(setup: Setup, *, need_position: bool, position: int = -1
                            ) -> Any:
    member_id, generation = setup.member(MEMBERS)
    return request(CONSUMER_GROUP_POSITION, 0, {
        "group_id": MEMBERS, "generation_id": generation, "member_id": member_id,
        "topics": [{"topic_id": setup.topic_id(TOPIC), "partitions": [
            {"partition": 0, "need_position": need_position, "position": position}]}]})


def position_recorded(setup: Setup, answer: Any) -> bool:
    """The group's position of TOPIC-0, asked by the admin, is the one last reported."""
    asked = setup.admin.send(consumer_group_position(setup, need_position=True))
    assert error_codes(asked) == [0], asked
    return setup.position in {p.position for t in asked.topics for p in t.partitions
                              if int(p.partition) == 0 and not p.need_position}


@dataclass(frozen=True)
class Case:
    """A row's request (`build`, as the caller sends it) and what it names: `topic` and
    `group` are the LITERAL names ops is granted the row's rights on. `refusal`: the
    error code a caller without the main right gets (None: none, the entry is left out,
    `shows` tells); `also_refusal`: the same without a right of `also` (a topic's);
    `served`: the codes a served answer may hold; `writes`: a served request changes
    what the admin sees (`Setup.world`); `prepare`: the state the request needs, made
    again by the admin before each caller's turn."""

    build: Build
    refusal: int | None
    topic: str | None = None
    group: str | None = None
    also_refusal: int | None = TOPIC_AUTHORIZATION_FAILED
    served: frozenset[int] = frozenset({0})
    shows: Shows | None = None
    writes: bool = False
    prepare: Callable[[Setup], None] | None = None
    same_request_again: bool = True  # False: built again (prepared) once ACLs are gone


CASES: dict[int, Case] = {
    api.METADATA: Case(  # named: TOPIC_AUTHORIZATION_FAILED (all topics: left out)
        lambda s: request(api.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}]}),
        TOPIC_AUTHORIZATION_FAILED, topic=TOPIC),
    api.DESCRIBE_CLUSTER: Case(
        lambda s: request(api.DESCRIBE_CLUSTER, 1, {}), CLUSTER_AUTHORIZATION_FAILED),
    api.DESCRIBE_QUORUM: Case(
        lambda s: request(api.DESCRIBE_QUORUM, 2, {"topics": [
            {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}),
        CLUSTER_AUTHORIZATION_FAILED),
    api.CREATE_TOPICS: Case(
        lambda s: request(api.CREATE_TOPICS, 7, {"timeout": 20_000, "topics": [
            {"name": CREATED, "num_partitions": 1, "replication_factor": 1}]}),
        TOPIC_AUTHORIZATION_FAILED, topic=CREATED, writes=True,
        prepare=lambda s: s.delete_topic(CREATED)),
    api.DELETE_TOPICS: Case(
        lambda s: request(api.DELETE_TOPICS, 6, {"timeout": 20_000, "topics": [
            {"name": DOOMED, "topic_id": None}]}),
        TOPIC_AUTHORIZATION_FAILED, topic=DOOMED, writes=True,
        prepare=lambda s: s.create_topic(DOOMED)),
    api.DELETE_RECORDS: Case(  # up to the high watermark: the log start moves
        lambda s: request(api.DELETE_RECORDS, 2, {"timeout": 20_000, "topics": [
            {"name": TRIMMED, "partitions": [{"partition_index": 0, "offset": -1}]}]}),
        TOPIC_AUTHORIZATION_FAILED, topic=TRIMMED, writes=True,
        prepare=with_a_record(TRIMMED)),
    api.CREATE_PARTITIONS: Case(
        lambda s: request(api.CREATE_PARTITIONS, 3, {"timeout": 20_000, "topics": [
            {"name": GROWN, "count": s.partition_count(GROWN) + 1, "assignments": None}]}),
        TOPIC_AUTHORIZATION_FAILED, topic=GROWN, writes=True),
    api.DESCRIBE_ACLS: Case(
        lambda s: request(api.DESCRIBE_ACLS, 3, ANY_ACL), CLUSTER_AUTHORIZATION_FAILED),
    api.CREATE_ACLS: Case(
        lambda s: request(api.CREATE_ACLS, 3, {"creations": [TARGET_ACL]}),
        CLUSTER_AUTHORIZATION_FAILED, writes=True,
        prepare=lambda s: s.ensure_target_acl(False)),
    api.DELETE_ACLS: Case(
        lambda s: request(api.DELETE_ACLS, 3, {"filters": [target_acl_filter()]}),
        CLUSTER_AUTHORIZATION_FAILED, writes=True,
        prepare=lambda s: s.ensure_target_acl(True)),
    api.DESCRIBE_CONFIGS: Case(
        lambda s: request(api.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": ResourceType.TOPIC, "resource_name": TOPIC,
             "configuration_keys": None}]}),
        TOPIC_AUTHORIZATION_FAILED, topic=TOPIC),
    api.INCREMENTAL_ALTER_CONFIGS: Case(
        lambda s: request(api.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": ResourceType.TOPIC, "resource_name": TOPIC, "configs": [
                {"name": "retention.ms", "config_operation": 0,  # SET
                 "value": str(3_600_000 + next(s.values))}]}]}),
        TOPIC_AUTHORIZATION_FAILED, topic=TOPIC, writes=True),
    api.ALTER_CONFIGS: Case(  # the legacy whole-set replace
        lambda s: request(api.ALTER_CONFIGS, 2, {"validate_only": False, "resources": [
            {"resource_type": ResourceType.TOPIC, "resource_name": TOPIC, "configs": [
                {"name": "retention.ms", "value": str(3_600_000 + next(s.values))}]}]}),
        TOPIC_AUTHORIZATION_FAILED, topic=TOPIC, writes=True),
    api.DESCRIBE_LOG_DIRS: Case(
        lambda s: request(api.DESCRIBE_LOG_DIRS, 4, {"topics": None}),
        CLUSTER_AUTHORIZATION_FAILED),
    api.DESCRIBE_PRODUCERS: Case(
        lambda s: request(api.DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": TOPIC, "partition_indexes": [0]}]}),
        TOPIC_AUTHORIZATION_FAILED, topic=TOPIC),
    api.PRODUCE: Case(produce, TOPIC_AUTHORIZATION_FAILED, topic=TOPIC, writes=True),
    api.FETCH: Case(fetch, TOPIC_AUTHORIZATION_FAILED, topic=TOPIC),
    api.LIST_OFFSETS: Case(
        lambda s: request(api.LIST_OFFSETS, 7, {"replica_id": -1, "topics": [
            {"name": TOPIC, "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}),
        TOPIC_AUTHORIZATION_FAILED, topic=TOPIC),
    api.OFFSET_FOR_LEADER_EPOCH: Case(
        lambda s: request(api.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
            {"topic": TOPIC, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
        TOPIC_AUTHORIZATION_FAILED, topic=TOPIC),
    api.INIT_PRODUCER_ID: Case(  # the main right: IDEMPOTENT_WRITE on the cluster
        lambda s: request(api.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1,
            "producer_epoch": -1}),
        CLUSTER_AUTHORIZATION_FAILED),
    api.FIND_COORDINATOR: Case(
        lambda s: request(api.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0}),
        GROUP_AUTHORIZATION_FAILED, group=GROUP),
    api.OFFSET_COMMIT: Case(
        lambda s: offset_commit(GROUP, next(s.values)),
        GROUP_AUTHORIZATION_FAILED, topic=TOPIC, group=GROUP, writes=True),
    api.OFFSET_FETCH: Case(
        lambda s: request(api.OFFSET_FETCH, 7, {"group_id": GROUP, "topics": [
            {"name": TOPIC, "partition_indexes": [0]}]}),
        GROUP_AUTHORIZATION_FAILED, topic=TOPIC, group=GROUP),
    api.JOIN_GROUP: Case(
        lambda s: join_group(JOINING), GROUP_AUTHORIZATION_FAILED, group=JOINING,
        writes=True, prepare=lambda s: s.empty_group(JOINING)),
    api.SYNC_GROUP: Case(
        lambda s: request(api.SYNC_GROUP, 5, {
            "group_id": MEMBERS, **s.member_fields(MEMBERS), "protocol_type": PROTOCOL_TYPE,
            "protocol_name": "authz", "assignments": []}),
        GROUP_AUTHORIZATION_FAILED, group=MEMBERS),
    api.HEARTBEAT: Case(
        lambda s: request(api.HEARTBEAT, 4, {
            "group_id": MEMBERS, **s.member_fields(MEMBERS), "group_instance_id": None}),
        GROUP_AUTHORIZATION_FAILED, group=MEMBERS),
    api.LEAVE_GROUP: Case(
        lambda s: request(api.LEAVE_GROUP, 4, {"group_id": LEAVING, "members": [
            {"member_id": s.member(LEAVING)[0], "group_instance_id": None}]}),
        GROUP_AUTHORIZATION_FAILED, group=LEAVING, writes=True),
    api.DESCRIBE_GROUPS: Case(
        lambda s: request(api.DESCRIBE_GROUPS, 5, {"groups": [GROUP]}),
        GROUP_AUTHORIZATION_FAILED, group=GROUP),
    api.LIST_GROUPS: Case(  # the group left out; the main right: DESCRIBE on the group
        lambda s: request(api.LIST_GROUPS, 4, {}), None, group=GROUP, shows=listed(GROUP)),
    api.DELETE_GROUPS: Case(
        lambda s: request(api.DELETE_GROUPS, 2, {"groups_names": [DELETED]}),
        GROUP_AUTHORIZATION_FAILED, group=DELETED, writes=True,
        prepare=lambda s: s.commit(DELETED)),
    api.OFFSET_DELETE: Case(
        lambda s: request(api.OFFSET_DELETE, 0, {"group_id": OFFSETS_DELETED, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0}]}]}),
        GROUP_AUTHORIZATION_FAILED, topic=TOPIC, group=OFFSETS_DELETED, writes=True,
        prepare=lambda s: s.commit(OFFSETS_DELETED)),
    api.DESCRIBE_USER_SCRAM_CREDENTIALS: Case(
        lambda s: request(api.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None}),
        CLUSTER_AUTHORIZATION_FAILED),
    api.ALTER_USER_SCRAM_CREDENTIALS: Case(scram_upsertion, CLUSTER_AUTHORIZATION_FAILED,
                                           writes=True),
    api.ELECT_LEADERS: Case(  # the broker already leads: served, nothing to elect
        lambda s: request(api.ELECT_LEADERS, 2, {"election_type": 0, "timeout": 20_000,
                                                 "topic_partitions": [
                                                     {"topic": TOPIC, "partitions": [0]}]}),
        CLUSTER_AUTHORIZATION_FAILED, served=frozenset({0, ELECTION_NOT_NEEDED})),
    api.DESCRIBE_TOPIC_PARTITIONS: Case(
        lambda s: request(api.DESCRIBE_TOPIC_PARTITIONS, 0, {
            "topics": [{"name": TOPIC}], "response_partition_limit": 2000, "cursor": None}),
        TOPIC_AUTHORIZATION_FAILED, topic=TOPIC),
    api.ALTER_PARTITION_REASSIGNMENTS: Case(  # a cancel with none ongoing: served, no write
        lambda s: request(api.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout": 20_000, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": None}]}]}),
        CLUSTER_AUTHORIZATION_FAILED, served=frozenset({0, NO_REASSIGNMENT_IN_PROGRESS})),
    api.LIST_PARTITION_REASSIGNMENTS: Case(
        lambda s: request(api.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout": 20_000,
                                                               "topics": None}),
        CLUSTER_AUTHORIZATION_FAILED),
    api.ALTER_REPLICA_LOG_DIRS: Case(  # not the broker's one log dir: nothing moves
        lambda s: request(api.ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [
            {"path": "/no/such/log/dir", "topics": [{"name": TOPIC, "partitions": [0]}]}]}),
        CLUSTER_AUTHORIZATION_FAILED, served=frozenset({LOG_DIR_NOT_FOUND})),
    api.WRITE_TXN_MARKERS: Case(  # no transaction is open here to end
        lambda s: request(api.WRITE_TXN_MARKERS, 1, {"markers": [
            {"producer_id": 0, "producer_epoch": 0, "transaction_result": False,
             "coordinator_epoch": 0, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}]}),
        CLUSTER_AUTHORIZATION_FAILED, served=frozenset({INVALID_TXN_STATE})),
    api.LIST_CONFIG_RESOURCES: Case(
        lambda s: request(api.LIST_CONFIG_RESOURCES, 0, {}), CLUSTER_AUTHORIZATION_FAILED),
    api.UPDATE_FEATURES: Case(  # validated only: served, nothing written
        lambda s: request(api.UPDATE_FEATURES, 1, {
            "timeout": 20_000, "validate_only": True, "feature_updates": [
                {"feature": "metadata.version", "max_version_level": LATEST_METADATA_LEVEL,
                 "upgrade_type": 1}]}),
        CLUSTER_AUTHORIZATION_FAILED),
    CONSUMER_GROUP_POSITION: Case(  # without READ on the topic: the report is dropped
        report_position, GROUP_AUTHORIZATION_FAILED, topic=TOPIC, group=MEMBERS,
        also_refusal=None, shows=position_recorded),
    PARTITION_LEADER_EPOCHS: Case(
        lambda s: request(PARTITION_LEADER_EPOCHS, 0, {"topics": [
            {"topic_id": s.topic_id(TOPIC), "partitions": [0]}]}),
        TOPIC_AUTHORIZATION_FAILED, topic=TOPIC),
}
NEEDS_A_RIGHT = sorted(key for key, rule in KAFKA.items() if rule.check is not Check.OPEN)


def metadata_of_every_topic_shows(topic: str) -> Shows:
    return lambda setup, answer: topic in {t.name for t in answer.topics}


def offsets_of_the_group_show(topic: str) -> Shows:
    return lambda setup, answer: topic in {t.name for t in answer.topics}


# Other shapes of a row's request, held to the same row: topics by ID (KIP-516), the
# all-topics Metadata and the all-offsets OffsetFetch (refused entries left out),
# OffsetFetch v1 (no top-level error code), the one-member LeaveGroup of v0-v2.
VARIANTS: dict[str, tuple[int, Case]] = {
    "Metadata-by-id": (api.METADATA, Case(
        lambda s: request(api.METADATA, 12, {"topics": [
            {"name": None, "topic_id": s.topic_id(TOPIC)}]}),
        TOPIC_AUTHORIZATION_FAILED, topic=TOPIC)),
    "Metadata-of-every-topic": (api.METADATA, Case(  # the topic left out
        lambda s: request(api.METADATA, 12, {"topics": None}), None, topic=TOPIC,
        shows=metadata_of_every_topic_shows(TOPIC))),
    "Produce-by-id": (api.PRODUCE, Case(
        lambda s: produce(s, by_id=True), TOPIC_AUTHORIZATION_FAILED, topic=TOPIC,
        writes=True)),
    "Fetch-by-id": (api.FETCH, Case(
        lambda s: fetch(s, by_id=True), TOPIC_AUTHORIZATION_FAILED, topic=TOPIC)),
    "DeleteTopics-by-id": (api.DELETE_TOPICS, Case(  # a new topic ID after each deletion
        lambda s: request(api.DELETE_TOPICS, 6, {"timeout": 20_000, "topics": [
            {"name": None, "topic_id": s.topic_id(DOOMED)}]}),
        TOPIC_AUTHORIZATION_FAILED, topic=DOOMED, writes=True, same_request_again=False,
        prepare=lambda s: s.create_topic(DOOMED))),
    "DescribeTopicPartitions-of-every-topic": (api.DESCRIBE_TOPIC_PARTITIONS, Case(
        lambda s: request(api.DESCRIBE_TOPIC_PARTITIONS, 0, {
            "topics": [], "response_partition_limit": 2000, "cursor": None}),
        None, topic=TOPIC, shows=metadata_of_every_topic_shows(TOPIC))),
    "ElectLeaders-of-every-partition": (api.ELECT_LEADERS, Case(  # none needs one
        lambda s: request(api.ELECT_LEADERS, 2, {"election_type": 0, "timeout": 20_000,
                                                 "topic_partitions": None}),
        CLUSTER_AUTHORIZATION_FAILED)),
    "OffsetFetch-of-every-offset": (api.OFFSET_FETCH, Case(  # without the topic: left out
        lambda s: request(api.OFFSET_FETCH, 7, {"group_id": GROUP, "topics": None}),
        GROUP_AUTHORIZATION_FAILED, topic=TOPIC, group=GROUP, also_refusal=None,
        shows=offsets_of_the_group_show(TOPIC))),
    "OffsetFetch-v1": (api.OFFSET_FETCH, Case(  # no top-level error: on each partition
        lambda s: request(api.OFFSET_FETCH, 1, {"group_id": GROUP, "topics": [
            {"name": TOPIC, "partition_indexes": [0]}]}),
        GROUP_AUTHORIZATION_FAILED, topic=TOPIC, group=GROUP)),
    "LeaveGroup-v2": (api.LEAVE_GROUP, Case(
        lambda s: request(api.LEAVE_GROUP, 2, {
            "group_id": LEAVING, "member_id": s.member(LEAVING)[0]}),
        GROUP_AUTHORIZATION_FAILED, group=LEAVING, writes=True)),
}
# (test id, api key, case): every row, then the variants
CHECKS = [(api_name(key), key, CASES[key]) for key in NEEDS_A_RIGHT] + [
    (label, key, case) for label, (key, case) in VARIANTS.items()]


def rights(api_key: int, case: Case) -> list[tuple[AclOperation, ResourceType, str]]:
    """The row's rights on the names its case's request uses."""
    rule = KAFKA[api_key]
    assert rule.operation is not None
    assert rule.resource is not None
    names = {ResourceType.CLUSTER: CLUSTER_NAME, ResourceType.TOPIC: case.topic,
             ResourceType.GROUP: case.group}
    found = []
    for operation, resource in [(rule.operation, rule.resource), *rule.also]:
        name = names[resource]
        assert name is not None, f"{api_key}: the case names no {resource.name}"
        found.append((operation, resource, name))
    return found


def _format_users(cluster: Cluster) -> None:
    shutil.rmtree(cluster.node(VOTER).data_dir)  # formatted again, as a user would
    format_with_scram(cluster, VOTER, [
        f"{MECHANISM[user]}=[name={user},password={password}]"
        for user, password in PASSWORDS.items()])


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with running_cluster(tmp_path_factory.mktemp("kafka-authz") / "cluster", SETTINGS,
                         voters=1, brokers=1, prepare=_format_users) as cluster:
        ready = Setup(cluster)
        try:
            for name in (TOPIC, GROWN):
                ready.create_topic(name)
            # the broker leads TOPIC once it has reconciled; the coordinator is ready
            # once __consumer_offsets (made on the first FindCoordinator) has a leader
            # and is loaded
            wait_until(lambda: error_codes(ready.admin.send(produce(ready))) == [0], WAIT_S,
                       f"a produce to {TOPIC}")
            wait_until(lambda: error_codes(ready.admin.send(request(
                api.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0}))) == [0], WAIT_S,
                "a group coordinator")
            wait_until(lambda: error_codes(ready.admin.send(
                offset_commit(GROUP, 0))) == [0], WAIT_S, "the group coordinator")
            yield ready
        finally:
            ready.close()


def test_every_row_that_needs_a_right_has_a_case() -> None:
    assert sorted(CASES) == NEEDS_A_RIGHT


def _is_refused(setup: Setup, answer: Any, refusal: int | None,
                shows: Shows | None) -> bool:
    """Refused with `refusal` (and no other error), or for None answered with the
    entry left out (`shows` false)."""
    codes = set(error_codes(answer))
    # every answer here has an error code, and says it; one that leaves every entry
    # out may have none (Metadata of every topic)
    assert codes or refusal is None, answer
    if refusal is None:
        assert shows is not None
        return codes <= {0} and not shows(setup, answer)
    return refusal in codes and codes <= {refusal, 0}


def _is_served(setup: Setup, case: Case, answer: Any) -> bool:
    codes = set(error_codes(answer))
    assert codes, answer
    return not codes & AUTHORIZATION_FAILURES and codes <= case.served and (
        case.shows is None or case.shows(setup, answer))


@pytest.mark.parametrize(("api_key", "case"), [c[1:] for c in CHECKS],
                         ids=[c[0] for c in CHECKS])
def test_row(setup: Setup, api_key: int, case: Case) -> None:
    prepare = case.prepare or (lambda s: None)

    prepare(setup)
    attack = case.build(setup)
    before = setup.world()
    refused = setup.mallory.send(attack)
    assert _is_refused(setup, refused, case.refusal, case.shows), refused
    assert setup.world() == before

    prepare(setup)
    body = case.build(setup)
    before = setup.world()
    setup.grant(rights(api_key, case))
    try:
        served = setup.ops.send(body)
    finally:
        setup.revoke()
    assert _is_served(setup, case, served), served
    if case.writes:
        assert setup.world() != before
    if not case.same_request_again:
        prepare(setup)
        body = case.build(setup)
    again = setup.ops.send(body)
    assert _is_refused(setup, again, case.refusal, case.shows), again

    prepare(setup)
    by_super_user = setup.admin.send(case.build(setup))
    assert _is_served(setup, case, by_super_user), by_super_user


def implies(granted: AclOperation, needed: AclOperation) -> bool:
    """Does an ACL for `granted` allow `needed` (metadata/authorizer.py's rules)?"""
    return granted in (needed, AclOperation.ALL) or (
        needed == AclOperation.DESCRIBE and granted in IMPLIES_DESCRIBE) or (
        needed == AclOperation.DESCRIBE_CONFIGS and granted in IMPLIES_DESCRIBE_CONFIGS)


# (test id, api key, case, which right is missing: 0 the main one, i the i-th of `also`)
WITHOUT_ONE_RIGHT = [
    (f"{label}-without-{operation.name}-on-{resource.name}", key, case, index)
    for label, key, case in CHECKS
    for index, (operation, resource, _) in enumerate(rights(key, case))]


@pytest.mark.parametrize(("api_key", "case", "index"), [c[1:] for c in WITHOUT_ONE_RIGHT],
                         ids=[c[0] for c in WITHOUT_ONE_RIGHT])
def test_every_other_operation_instead_of_one_right_is_refused(
        setup: Setup, api_key: int, case: Case, index: int) -> None:
    """ops holds the row's other rights, and on the missing one's resource every
    operation that does not imply it: the handler checks the row's operation, not a
    weaker one, and every right of `also` too. Nothing changes."""
    wanted = rights(api_key, case)
    missing_operation, resource, name = wanted[index]
    instead = [(operation, resource, name) for operation in sorted(CONCRETE_OPERATIONS)
               if not implies(operation, missing_operation)]
    refusal = case.refusal if index == 0 else case.also_refusal
    shows = case.shows if refusal is None else None

    (case.prepare or (lambda s: None))(setup)
    body = case.build(setup)
    before = setup.world()
    setup.grant([*wanted[:index], *wanted[index + 1:], *instead])
    try:
        answer = setup.ops.send(body)
    finally:
        setup.revoke()
    assert _is_refused(setup, answer, refusal, shows), answer
    assert setup.world() == before


def test_consumer_group_position_names_no_partition_of_a_topic_the_member_may_not_read(
        setup: Setup) -> None:
    """The answer lists the partitions some member waits on, for the caller to report:
    only those of topics the caller may READ, as its reports are (the topic's ID is not
    told to a caller without the right)."""
    topic_id = setup.topic_id(TOPIC)
    waits = setup.admin.send(consumer_group_position(setup, need_position=True))
    assert error_codes(waits) == [0], waits
    member_id, generation = setup.member(MEMBERS)
    empty = request(CONSUMER_GROUP_POSITION, 0, {
        "group_id": MEMBERS, "generation_id": generation, "member_id": member_id,
        "topics": []})

    def named(rights: list[tuple[AclOperation, ResourceType, str]]) -> set[Any]:
        setup.grant(rights)
        try:
            answer = setup.ops.send(empty)
        finally:
            setup.revoke()
        assert error_codes(answer) == [0], answer
        return {t.topic_id for t in answer.topics}

    group_only = [(AclOperation.READ, ResourceType.GROUP, MEMBERS)]
    assert topic_id not in named(group_only)
    assert topic_id in named([*group_only, (AclOperation.READ, ResourceType.TOPIC, TOPIC)])


def test_produce_without_acks_closes_the_connection_and_writes_nothing_when_refused(
        setup: Setup) -> None:
    """acks=0 has no answer to carry TOPIC_AUTHORIZATION_FAILED: as in Kafka, the
    connection closes. Requests on a connection are handled in order, so the answer to
    a Metadata sent after the Produce (or its absence) tells that it was handled."""
    body = request(api.PRODUCE, 9, {
        "transactional_id": None, "acks": 0, "timeout": 10_000, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": encode_batch(
                [(None, b"unacknowledged")], timestamps=[int(time.time() * 1000)])}]}]})
    after_it = request(api.METADATA, 12, {"topics": None})

    def produce_then_metadata(client: SaslClient) -> Any:
        client.send(after_it)  # logged in
        assert client.sock is not None
        client.sock.sendall(encode_request(body, correlation_id=0))
        return client.send(after_it)

    before = setup.world()
    with pytest.raises(ConnectionError):
        produce_then_metadata(setup.mallory)
    assert setup.world() == before
    produce_then_metadata(setup.admin)
    assert setup.world()["end offsets"][(TOPIC, 0)] == before["end offsets"][(TOPIC, 0)] + 1


def test_a_client_claiming_a_replica_id_is_refused_without_cluster_action(
        setup: Setup) -> None:
    """A Fetch, ListOffsets or OffsetForLeaderEpoch naming a replica (the broker's own
    id) is a follower's: it needs CLUSTER_ACTION on the cluster (Fetch's row comment),
    which every right on the topic does not replace. Nothing changes."""
    follower = [
        dataclasses.replace(fetch(setup), replica_id=BROKER),
        request(api.LIST_OFFSETS, 7, {"replica_id": BROKER, "topics": [
            {"name": TOPIC, "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}),
        request(api.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": BROKER, "topics": [
            {"topic": TOPIC, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
    ]
    before = setup.world()
    setup.grant([(AclOperation.ALL, ResourceType.TOPIC, TOPIC)])
    try:
        answers = [setup.ops.send(body) for body in follower]
    finally:
        setup.revoke()
    for answer in answers:
        assert set(error_codes(answer)) <= {0, TOPIC_AUTHORIZATION_FAILED}, answer
        assert TOPIC_AUTHORIZATION_FAILED in error_codes(answer), answer
    assert setup.world() == before


def test_broker_config_resources_need_the_rights_on_the_cluster(setup: Setup) -> None:
    """DescribeConfigs and IncrementalAlterConfigs of a BROKER resource (the dynamic
    broker configs) need DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster, which every
    right on a topic does not replace: CLUSTER_AUTHORIZATION_FAILED, nothing written.
    With the cluster right they are served."""
    rate = "leader.replication.throttled.rate"

    def describe() -> Any:
        return request(api.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": BROKER_RESOURCE, "resource_name": str(BROKER),
             "configuration_keys": [rate]}]})

    def alter() -> Any:
        return request(api.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": BROKER_RESOURCE, "resource_name": "", "configs": [
                {"name": rate, "config_operation": 0,  # SET
                 "value": str(1_000_000 + next(setup.values))}]}]})

    def default_rate() -> str:
        (result,) = setup.admin.send(request(api.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": BROKER_RESOURCE, "resource_name": "",
             "configuration_keys": [rate]}]})).results
        return ",".join(str(c.value) for c in result.configs)

    before = default_rate()
    setup.grant([(AclOperation.ALL, ResourceType.TOPIC, TOPIC)])
    try:
        refused = [setup.ops.send(describe()), setup.ops.send(alter())]
    finally:
        setup.revoke()
    assert [error_codes(a) for a in refused] == [[CLUSTER_AUTHORIZATION_FAILED]] * 2
    assert default_rate() == before
    setup.grant([(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME),
                 (AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)])
    try:
        served = [setup.ops.send(describe()), setup.ops.send(alter())]
    finally:
        setup.revoke()
    assert [error_codes(a) for a in served] == [[0], [0]]
    assert default_rate() != before
