"""Where a Raft response goes: the inbound connection its request came on.

The core answers `(src, correlation_id)`; the route table maps that to the connection
the request arrived on. Routes are bounded per connection (the oldest request is
forgotten: the core superseded it or will never answer it) and forgotten with their
connection, unless a newer connection re-mapped the same key.
"""

from __future__ import annotations

MAX_ROUTES_PER_CONNECTION = 4096

RouteKey = tuple[int, int]  # (src, correlation id)


class RouteTable:
    def __init__(self) -> None:
        self._routes: dict[RouteKey, int] = {}  # -> conn id
        # per connection, in arrival order (a dict used as an ordered set)
        self._by_conn: dict[int, dict[RouteKey, None]] = {}

    def __len__(self) -> int:
        return len(self._routes)

    def remember(self, key: RouteKey, conn_id: int) -> None:
        keys = self._by_conn.setdefault(conn_id, {})
        if len(keys) >= MAX_ROUTES_PER_CONNECTION:
            oldest = next(iter(keys))
            del keys[oldest]
            self._routes.pop(oldest, None)
        self._routes[key] = conn_id
        keys[key] = None

    def take(self, key: RouteKey) -> int | None:
        """The connection to answer `key` on, forgotten once taken (one answer)."""
        conn_id = self._routes.pop(key, None)
        if conn_id is not None:
            self._by_conn.get(conn_id, {}).pop(key, None)
        return conn_id

    def forget_connection(self, conn_id: int) -> None:
        for key in self._by_conn.pop(conn_id, {}):
            if self._routes.get(key) == conn_id:  # not re-mapped by a new connection
                del self._routes[key]
