"""Moved to `broker.heartbeat` (registration and heartbeats are the broker's side).

`kraft node` still imports `install_broker_heartbeat` from here until it installs the
broker role with `broker.role.install_broker_role`; then this module goes.
"""

from broker.heartbeat import BrokerHeartbeat, install_broker_heartbeat

__all__ = ["BrokerHeartbeat", "install_broker_heartbeat"]
