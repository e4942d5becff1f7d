"""Kafka-named settings written as a node's TOML file (what the launcher, `tools.cluster`,
writes), every key checked against the table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.kafka.sasl import sasl_settings
from tools.config.keys import KNOWN_KEYS, canonical_key
from tools.config.parsers import ConfigError, flatten


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def to_toml(settings: Mapping[str, Any]) -> str:
    """Render Kafka-named settings as TOML with quoted keys (what the launcher writes);
    old alias names are written under their current name."""
    flat = flatten(settings)
    unknown = sorted(k for k in set(flat) - KNOWN_KEYS if sasl_settings.jaas_key(k) is None)
    if unknown:
        raise ConfigError(unknown[0], "unknown configuration key")
    current = {canonical_key(k): v for k, v in flat.items()}
    return "".join(f'"{key}" = {_toml_value(value)}\n' for key, value in current.items())

