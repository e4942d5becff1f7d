"""A `NodeConfig` from a TOML or `.properties` file (`load`) or a mapping (`from_mapping`):
each key of the table read or given its default, then the checks across keys (roles,
quorum, listeners, log directory; TLS and SASL in `tools.config.security`)."""

from __future__ import annotations

import socket
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from broker.kafka.sasl import sasl_settings
from tools.config.keys import IGNORED_KAFKA_KEYS, KEYS, KNOWN_KEYS, REQUIRED, canonical_key
from tools.config.node import NodeConfig
from tools.config.parsers import (
    FRAME_OVERHEAD_BYTES,
    IMPLEMENTED_PROTOCOLS,
    ROLES,
    STATUS_LISTENER,
    WILDCARD_HOST,
    Address,
    ConfigError,
    bind_address,
    flatten,
    parse_address,
    parse_listeners,
    parse_protocol_map,
    parse_replica_routes,
    parse_voters,
    pop_tls_settings,
)
from tools.config.security import (
    LISTENER_CLIENT_AUTH_KEY,
    check_controller_identities,
    check_sasl,
    check_tls,
    jaas_configs,
    listener_client_auth_modes,
)
from tools.properties import PropertiesError, logical_lines, parse_properties


def _canonical(flat: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(values by current name, the name each was written as, warnings). An unknown key
    is a ConfigError; so is a key given under both its names."""
    values: dict[str, Any] = {}
    written: dict[str, str] = {}
    warnings: list[str] = []
    ignored: list[str] = []
    for name, value in flat.items():
        if name in IGNORED_KAFKA_KEYS:
            ignored.append(name)
            continue
        if sasl_settings.jaas_key(name) is not None:  # a pattern key: kept as written
            values[name], written[name] = value, name
            continue
        if LISTENER_CLIENT_AUTH_KEY.fullmatch(name):  # listener.name.<l>.ssl.client.auth
            values[name], written[name] = value, name
            continue
        if name not in KNOWN_KEYS:
            raise ConfigError(name, "unknown configuration key")
        current = canonical_key(name)
        if current in written:
            raise ConfigError(name, f"given twice, as {written[current]} and {name}")
        if current != name:
            warnings.append(f"{name} is deprecated: use {current}")
        values[current], written[current] = value, name
    if ignored:
        warnings.append(f"ignored (no effect in kraft-py): {', '.join(sorted(ignored))}")
    return values, written, warnings


def from_mapping(raw: Mapping[str, Any], source: str = "") -> NodeConfig:
    """The NodeConfig of Kafka-named keys (TOML's nested tables flattened): every key of
    the table given or its default; a ConfigError names the key, after `source`."""
    values: dict[str, Any] = {}
    try:
        given, written, warnings = _canonical(flatten(raw))
        for key in KEYS:
            if key.name in given:
                values[key.attribute] = key.convert(written[key.name], given[key.name])
            elif key.default is REQUIRED:
                raise ConfigError(key.name, "is required")
            else:
                values[key.attribute] = key.default
        values["sasl_jaas_configs"] = jaas_configs(given)
        values["listener_client_auth"] = listener_client_auth_modes(given)
        return replace(_build(values, written), source=source, warnings=tuple(warnings))
    except ConfigError as exc:
        raise ConfigError(exc.key, exc.detail, source) from None


def _build(values: dict[str, Any], written: Mapping[str, str]) -> NodeConfig:
    def name(key: str) -> str:  # a key as the file spells it
        return written.get(key, key)

    roles = frozenset(r.lower() for r in values.pop("roles"))
    if not roles or not roles <= set(ROLES):
        raise ConfigError("process.roles", f"expected broker and/or controller, got "
                          f"{sorted(roles)}")
    voters_text = values.pop("voters")
    voters = parse_voters("controller.quorum.voters", voters_text) if voters_text else {}
    bootstrap = tuple(parse_address(a, "controller.quorum.bootstrap.servers")
                      for a in values.pop("bootstrap_servers"))
    listeners = parse_listeners("listeners", values.pop("listener_specs"))
    protocols = parse_protocol_map("listener.security.protocol.map",
                                   values.pop("protocol_map"))
    _check_protocols(listeners, protocols)
    advertised = _advertised(listeners, values.pop("advertised_specs"))
    replica_routes = parse_replica_routes(name("fault.injection.replica.routes"),
                                          values.pop("replica_routes"))
    config = NodeConfig(roles=roles, voters=voters, listeners={
        n: bind_address(a) for n, a in listeners.items()}, advertised_listeners=advertised,
        protocol_map=protocols, bootstrap_servers=bootstrap, replica_routes=replica_routes,
        tls=pop_tls_settings(values),
        log_dir=_log_dir(values.pop("log_dirs"), values.pop("single_log_dir"),
                         values.pop("metadata_log_dir")), **values)
    _check_quorum(config, voters_text, bootstrap)
    _check_listeners(config)
    check_sasl(config)
    check_tls(config, name)
    check_controller_identities(config, name)
    if config.fetch_max_bytes + FRAME_OVERHEAD_BYTES > config.socket_request_max_bytes:
        # A Fetch response must fit in one frame, or the follower could never catch up.
        raise ConfigError(name("controller.quorum.fetch.max.bytes"), "must be at least "
                          f"{FRAME_OVERHEAD_BYTES} below socket.request.max.bytes")
    if config.fetch_timeout_ms < config.election_timeout_ms:
        raise ConfigError(name("controller.quorum.fetch.timeout.ms"),
                          f"must not be below {name('controller.quorum.election.timeout.ms')}")
    return config


def _check_protocols(listeners: Mapping[str, Address], protocols: Mapping[str, str]) -> None:
    for listener, address in listeners.items():
        protocol = protocols.get(listener)
        if protocol is None:
            raise ConfigError("listener.security.protocol.map",
                              f"no security protocol for listener {listener}: map it, "
                              f"e.g. {listener}:PLAINTEXT")
        if protocol not in IMPLEMENTED_PROTOCOLS:
            raise ConfigError("listeners", f"listener {listener}://{address[0]}:{address[1]} "
                              f"uses security protocol {protocol}, which kraft-py does not "
                              f"implement (only {', '.join(IMPLEMENTED_PROTOCOLS)})")



def _advertised(listeners: Mapping[str, Address], specs: tuple[str, ...]) -> dict[str, Address]:
    """advertised.listeners, defaulting per listener to `listeners`; an empty host is
    this host's name, a wildcard is refused (nobody can connect to it)."""
    given = parse_listeners("advertised.listeners", specs)
    for listener in given:
        if listener not in listeners:
            raise ConfigError("advertised.listeners",
                              f"listener {listener} is not in listeners")
    # a wildcard stays: _check_listeners refuses it where it would be advertised
    return {listener: (address[0] or socket.getfqdn(), address[1])
            for listener, address in {**listeners, **given}.items()}


def _log_dir(log_dirs: tuple[str, ...], single: str, metadata: str) -> Path:
    if len(log_dirs) > 1:
        raise ConfigError("log.dirs", f"exactly one directory is supported, got {len(log_dirs)}")
    chosen = log_dirs[0] if log_dirs else single or metadata
    if not chosen:
        raise ConfigError("log.dirs", "is required (or log.dir, or metadata.log.dir)")
    if metadata and Path(metadata) != Path(chosen):
        raise ConfigError("metadata.log.dir", f"{metadata} differs from the log directory "
                          f"{chosen}: kraft-py keeps the metadata log beside the partitions "
                          "in one directory")
    return Path(chosen)


def _check_quorum(config: NodeConfig, voters_text: str, bootstrap: tuple[Address, ...]) -> None:
    roles, node_id = config.roles, config.node_id
    if not voters_text:
        if not bootstrap:
            raise ConfigError("controller.quorum.voters", "is required")
        # A broker, or a controller of a dynamic quorum (KIP-853) to be added, learns
        # the voters from the bootstrap servers at start.
        return
    endpoints = set(config.voters.values())
    for address in bootstrap:
        if address not in endpoints:
            raise ConfigError("controller.quorum.bootstrap.servers",
                              f"{address[0]}:{address[1]} is not the endpoint of any voter "
                              "in controller.quorum.voters")
    # A controller outside controller.quorum.voters is one of a dynamic quorum (KIP-853)
    # formatted with --no-initial-controllers: an observer until `kraft quorum
    # add-controller` adds it; the configured voters are whom it asks.
    if "controller" not in roles and config.is_voter:
        raise ConfigError("process.roles",
                          f"node {node_id} is a voter but lacks the controller role")


def _check_listeners(config: NodeConfig) -> None:
    if "controller" in config.roles and config.controller_address is None:
        raise ConfigError("listeners", "a controller needs a "
                          f"{'/'.join(config.controller_listener_names)} listener")
    name = config.inter_broker_listener_name.upper()
    if name and name not in config.listeners:
        raise ConfigError("inter.broker.listener.name", f"{name} is not in listeners")
    if name and name in {n.upper() for n in config.controller_listener_names}:
        raise ConfigError("inter.broker.listener.name", f"{name} is a controller listener")
    if "broker" not in config.roles:
        return
    reserved = {n.upper() for n in config.controller_listener_names} | {STATUS_LISTENER}
    kafka = [n for n in config.listeners if n not in reserved]
    if not name and len(kafka) > 1:
        raise ConfigError("listeners", f"kraft-py serves the Kafka protocol on one listener, "
                          f"got {', '.join(kafka)}: set inter.broker.listener.name")
    advertised = config.advertised_client_address
    if advertised is not None and advertised[0] in (WILDCARD_HOST, "::"):
        raise ConfigError("advertised.listeners",
                          f"{config.kafka_listener_name} would advertise {advertised[0]}, "
                          "which no client can connect to: set advertised.listeners")


# --- files --------------------------------------------------------------------------


def _read(path: Path) -> dict[str, Any]:
    """A `.properties` file by its name; anything else as TOML, and as properties when it
    is not TOML but reads as key=value lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("config", f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError("config", f"{path} is not UTF-8 text: {exc}") from None
    try:
        if path.suffix == ".properties":
            return dict(parse_properties(text, str(path)))
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            if path.suffix == ".toml" or not all("=" in line or ":" in line
                                                 for _, line in logical_lines(text)):
                raise ConfigError("config", f"{path} is neither valid TOML ({exc}) nor a "
                                  ".properties file (name it *.properties)") from None
            return dict(parse_properties(text, str(path)))
    except PropertiesError as exc:
        raise ConfigError("config", str(exc)) from None


def load(path: str | Path) -> NodeConfig:
    path = Path(path)
    config = from_mapping(_read(path), str(path))
    if config.fault_injection_file and not Path(config.fault_injection_file).is_absolute():
        config = replace(config,
                         fault_injection_file=str(path.parent / config.fault_injection_file))
    return config

