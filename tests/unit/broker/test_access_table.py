"""The authorization table (broker/access_table.py): every request a listener serves has a
row, and the gate decides GATE rows by the cluster ACL they name, refuses what has no
row and leaves the rest to the handlers.

The served APIs are read off real objects, not listed here: the Kafka listener's handler
map, the Raft messages, and the handlers a built controller node and a built broker node
install on their RaftNode (`tools.server.build.build_node`, nothing started)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker import access_table
from broker.access_table import CONTROLLER, KAFKA, STATUS, Check, gate_refusal
from broker.kafka.listener import HANDLERS
from metadata.authorizer import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    AuthorizerSettings,
    PatternType,
    ResourceType,
    StandardAcl,
    acl_image_of,
)
from raft import messages
from raft.common.errors import ErrorCode
from raft.common.session import KafkaPrincipal
from raft.common.uuid import Uuid
from raft.rpc_host import DESCRIBE_QUORUM
from tools import access_probes
from tools import config as node_config
from tools.cluster import Cluster
from tools.server.build import build_node

ALICE = KafkaPrincipal("User", "alice")
ON = AuthorizerSettings(enabled=True, super_users=frozenset({"User:root"}))


def test_every_kafka_api_served_has_a_row_and_every_row_is_served() -> None:
    assert set(HANDLERS) == set(KAFKA)


def test_a_controller_node_loads_no_kafka_codec() -> None:
    """The table writes Kafka's API keys out: the codec's import costs a start ~0.5 s."""
    done = subprocess.run([sys.executable, "-c", "import sys, broker.access_table, "
                           "tools.server.build; print('kio' in sys.modules)"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_every_raft_request_has_a_controller_row() -> None:
    assert {t.__name__ for t in messages.REQUEST_TYPES} <= set(CONTROLLER)


@pytest.fixture(scope="module")
def served_apis(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every api a controller node and a broker node put on their controller listener."""
    cluster = Cluster.create(tmp_path_factory.mktemp("served") / "c", voters=1, brokers=1)
    served: set[str] = {DESCRIBE_QUORUM}
    for info in cluster.nodes.values():
        built = build_node(node_config.load(info.config))
        try:
            served |= built.rpc.apis
        finally:
            built.close()
    return served


def test_every_api_a_built_node_serves_has_a_controller_row(served_apis: set[str]) -> None:
    missing = served_apis - set(CONTROLLER)
    assert not missing, f"served without an authorization row: {sorted(missing)}"
    assert {"Append", "WriteSnapshot", "BrokerStatus", "CreateTopics"} <= served_apis


def test_status_rows_are_the_controller_rows_of_the_same_apis() -> None:
    assert all(STATUS[api] == CONTROLLER[api] for api in STATUS)


def _acl(operation: AclOperation, principal: str = "User:alice",
         permission: AclPermissionType = AclPermissionType.ALLOW) -> StandardAcl:
    return StandardAcl(id=Uuid.random(), binding=AclBinding(
        resource_type=ResourceType.CLUSTER, resource_name=CLUSTER_NAME,
        pattern_type=PatternType.LITERAL, principal=principal, host="*",
        operation=operation, permission_type=permission))


GATED = sorted(api for api, rule in CONTROLLER.items() if rule.check is Check.GATE)


@pytest.mark.parametrize("api", GATED)
def test_a_gate_row_refuses_without_its_acl_and_serves_with_exactly_it(api: str) -> None:
    rule = CONTROLLER[api]
    assert rule.operation is not None
    none = acl_image_of({})
    refused = gate_refusal(CONTROLLER, api, none, ALICE, "127.0.0.1", ON)
    assert refused is not None
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert rule.operation.name in refused.message
    others = [op for op in (AclOperation.DESCRIBE, AclOperation.ALTER,
                            AclOperation.CLUSTER_ACTION, AclOperation.CREATE)
              if op != rule.operation and not (rule.operation == AclOperation.DESCRIBE
                                               and op == AclOperation.ALTER)]
    wrong = {(a := _acl(op)).id: a for op in others}  # ALTER implies DESCRIBE, as Kafka's
    assert gate_refusal(CONTROLLER, api, acl_image_of(wrong), ALICE, "h", ON) is not None
    exact = _acl(rule.operation)
    assert gate_refusal(CONTROLLER, api, acl_image_of({exact.id: exact}), ALICE, "h",
                        ON) is None
    denied = _acl(rule.operation, permission=AclPermissionType.DENY)
    both = acl_image_of({exact.id: exact, denied.id: denied})
    assert gate_refusal(CONTROLLER, api, both, ALICE, "h", ON) is not None
    assert gate_refusal(CONTROLLER, api, none, KafkaPrincipal("User", "root"), "h", ON) is None
    assert gate_refusal(CONTROLLER, api, none, ALICE, "h", AuthorizerSettings()) is None


def test_every_gate_row_has_a_probe_for_the_attacker() -> None:
    """tools/access_probes.py: the authorization test's and `kraft chaos --secure`'s."""
    probed = {p.api: p.right for p in access_probes.probes("c", 1)}
    assert sorted(probed) == GATED
    assert probed == {api: CONTROLLER[api].operation for api in GATED}


def test_a_request_without_a_row_is_refused_even_with_the_authorizer_off() -> None:
    refused = gate_refusal(CONTROLLER, "Shutdown", acl_image_of({}), ALICE, "h",
                           AuthorizerSettings())
    assert refused is not None
    assert refused.error_code == ErrorCode.INVALID_REQUEST


def test_per_resource_rows_pass_the_gate_to_their_handlers() -> None:
    for api, rule in CONTROLLER.items():
        if rule.check is Check.PER_RESOURCE:
            assert gate_refusal(CONTROLLER, api, acl_image_of({}), ALICE, "h", ON) is None


def test_every_raft_request_needs_cluster_action_or_more() -> None:
    """Nobody but the nodes (or a super user) reads or moves the metadata log."""
    for api in access_table.RAFT_RPCS:
        rule = CONTROLLER[api]
        assert rule.check is Check.GATE
        assert rule.operation in (AclOperation.CLUSTER_ACTION, AclOperation.ALTER,
                                  AclOperation.DESCRIBE)
    assert CONTROLLER["FetchRequest"].operation == AclOperation.CLUSTER_ACTION
    assert CONTROLLER["FetchSnapshotRequest"].operation == AclOperation.CLUSTER_ACTION


def test_a_refused_raft_request_is_answered_in_its_response_shape() -> None:
    for request_type in messages.REQUEST_TYPES:
        answer = messages.refusal(request_type.__name__,
                                  ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "no")
        assert answer is not None
        api, body = answer
        decoded = messages.decode_message(api, body)
        assert messages.is_response(decoded)
        assert decoded.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert messages.refusal("Append", ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "no") is None


def test_the_table_reads_as_kafka_rights() -> None:
    assert str(CONTROLLER["AddRaftVoterRequest"]) == "ALTER on CLUSTER (gate)"
    assert str(KAFKA[0]) == "WRITE on TOPIC (per resource)"
    assert str(access_table.METRICS["GET /metrics"]) == "open"
