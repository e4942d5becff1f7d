"""The `Append` admin API: NoOp records through the leader, answered once committed.
Used by `kraft quorum append`, the tests, the demo and the bench."""

from __future__ import annotations

import functools
from typing import Any

import trio

from metadata.records import NoOp
from raft.common.errors import ErrorCode
from raft.node import NotLeaderError, RaftNode
from raft.rpc_host import ApiError, RpcHost

APPEND_API = "Append"
APPEND_MAX_IN_FLIGHT = 64
APPEND_MAX_RECORDS = 10_000_000


def install_append_api(node: RaftNode, rpc: RpcHost) -> None:
    """`Append {count, batch, in_flight=64}` -> `{error_code, epoch, last_offset, batches:
    [[epoch, last_offset], ...], latencies_ms, elapsed_ms}` once every batch has committed;
    at most `in_flight` batches wait for their commit at a time."""

    async def handle(body: Any, cluster_id: str) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiError(ErrorCode.INVALID_REQUEST, "Append body must be a map")
        count, batch = body.get("count"), body.get("batch", 1)
        in_flight = body.get("in_flight", APPEND_MAX_IN_FLIGHT)
        if type(count) is not int or type(batch) is not int or \
                not 0 < count <= APPEND_MAX_RECORDS or not 0 < batch <= count:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"need 0 < batch <= count <= {APPEND_MAX_RECORDS}")
        if type(in_flight) is not int or not 0 < in_flight <= APPEND_MAX_IN_FLIGHT:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"need 0 < in_flight <= {APPEND_MAX_IN_FLIGHT}")
        record = NoOp().encode()
        sizes = [batch] * (count // batch) + ([count % batch] if count % batch else [])
        results: list[tuple[int, int]] = [(0, 0)] * len(sizes)
        latencies: list[float] = [0.0] * len(sizes)
        failures: list[Exception] = []
        room = trio.Event()  # set when a batch settles: the window may have room
        pending = 0
        started = trio.current_time()

        def settled(index: int, begin: float, outcome: tuple[int, int] | Exception) -> None:
            nonlocal pending
            pending -= 1
            if isinstance(outcome, Exception):
                failures.append(outcome)
            else:
                results[index] = outcome
                latencies[index] = (trio.current_time() - begin) * 1000
            room.set()

        # One task, callbacks from the core task: no task or event per batch, and the
        # batches started together are proposed (and committed) together.
        for index, size in enumerate(sizes):
            while pending >= in_flight and not failures:
                room = trio.Event()
                await room.wait()
            if failures:
                break
            pending += 1
            node.propose_soon([record] * size,
                              functools.partial(settled, index, trio.current_time()))
        while pending and not failures:
            room = trio.Event()
            await room.wait()
        if failures:  # NotLeaderError: the client follows the leader; a log-dir failure
            error = failures[0]  # stopped this node: the client tries another one
            raise error if isinstance(error, NotLeaderError) else NotLeaderError(None, None)
        return {"error_code": 0, "epoch": results[-1][0], "last_offset": results[-1][1],
                "count": count, "batches": [list(r) for r in results],
                "latencies_ms": [round(v, 3) for v in latencies],
                "elapsed_ms": round((trio.current_time() - started) * 1000, 3)}

    rpc.add_api_handler(APPEND_API, handle)
