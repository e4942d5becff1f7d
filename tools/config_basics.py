"""What every client of the configuration needs, apart from the node configuration.

`ConfigError` (a key that is unknown, missing or wrong) and `parse_address` (`HOST:PORT`)
live here rather than in `tools.config`, which re-exports both: `tools.cluster`'s
blocking client parses the address it dials on every request, and importing the node
configuration (its key table, the broker, authorizer and snapshot settings it builds)
cost each `kraft` verb's start more than that verb's round trip.
"""

from __future__ import annotations

Address = tuple[str, int]


class ConfigError(ValueError):
    """A configuration key is unknown, missing or has a bad value; `key` names it."""

    def __init__(self, key: str, message: str, source: str = "") -> None:
        prefix = f"{source}: " if source else ""
        super().__init__(f"{prefix}{key}: {message}")
        self.key = key
        self.detail = message


def parse_address(text: str, key: str = "address") -> Address:
    """`HOST:PORT` (an IPv6 host in brackets: `[::1]:9092`) -> (host, port). A ConfigError
    naming `key` when it is not one; its `detail` is the message without the key."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(key, f"bad address {text!r}: expected HOST:PORT")
    return host, int(port)
