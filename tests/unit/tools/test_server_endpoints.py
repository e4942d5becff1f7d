"""The controller endpoint a node hands its core (`tools.server.build`): what a voter of
a dynamic quorum compares with its voter entry, and asks the leader to update to
(UpdateRaftVoter, KIP-853)."""

from __future__ import annotations

from typing import Any

from raft.control_records import Endpoint
from tools.config import from_mapping
from tools.server.build import advertised_controller_endpoints

QUORUM: dict[str, Any] = {"node.id": 1, "controller.quorum.voters": "1@127.0.0.1:9093",
                          "log.dirs": "/tmp/unused", "cluster.id": "c"}


def test_a_controller_hands_its_advertised_controller_listener() -> None:
    config = from_mapping({**QUORUM, "process.roles": "controller",
                           "listeners": "CONTROLLER://0.0.0.0:9093",
                           "advertised.listeners": "CONTROLLER://node-1.example:19093"})
    assert advertised_controller_endpoints(config) == (
        Endpoint(name="CONTROLLER", host="node-1.example", port=19093),)


def test_a_controller_without_advertised_listeners_hands_its_listener() -> None:
    config = from_mapping({**QUORUM, "process.roles": "controller",
                           "controller.listener.names": "QUORUM",
                           "listener.security.protocol.map": "QUORUM:PLAINTEXT",
                           "listeners": "QUORUM://127.0.0.1:9094"})
    assert advertised_controller_endpoints(config) == (
        Endpoint(name="QUORUM", host="127.0.0.1", port=9094),)


def test_nothing_is_handed_that_nobody_could_dial() -> None:
    """A wildcard address is no endpoint: the voter entry keeps the formatted one."""
    config = from_mapping({**QUORUM, "process.roles": "controller",
                           "listeners": "CONTROLLER://0.0.0.0:9093"})
    assert advertised_controller_endpoints(config) == ()


def test_a_broker_hands_no_controller_endpoint() -> None:
    config = from_mapping({**QUORUM, "node.id": 4, "process.roles": "broker",
                           "listeners": "PLAINTEXT://127.0.0.1:9092"})
    assert advertised_controller_endpoints(config) == ()
