"""The `Append` admin API: NoOp records through the leader, answered once committed.
Used by `kraft quorum append`, the tests, the demo and the bench."""

from __future__ import annotations

from typing import Any

import trio

from metadata.records import NoOp
from raft.common.errors import ErrorCode
from raft.node import ApiError, LogDirFailure, NotLeaderError, RaftNode

APPEND_API = "Append"
APPEND_MAX_IN_FLIGHT = 64
APPEND_MAX_RECORDS = 10_000_000


def install_append_api(node: RaftNode) -> None:
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
        window = trio.Semaphore(in_flight)
        started = trio.current_time()

        failures: list[NotLeaderError] = []

        async def one(index: int, size: int) -> None:
            try:
                begin = trio.current_time()
                results[index] = await node.propose_and_wait([record] * size)
                latencies[index] = (trio.current_time() - begin) * 1000
            except NotLeaderError as exc:  # stop the rest; the client follows the leader
                failures.append(exc)
                nursery.cancel_scope.cancel()
            except LogDirFailure:  # this node stopped: the client tries another one
                failures.append(NotLeaderError(None, None))
                nursery.cancel_scope.cancel()
            finally:
                window.release()

        async with trio.open_nursery() as nursery:
            for index, size in enumerate(sizes):
                await window.acquire()
                nursery.start_soon(one, index, size)
        if failures:
            raise failures[0]
        return {"error_code": 0, "epoch": results[-1][0], "last_offset": results[-1][1],
                "count": count, "batches": [list(r) for r in results],
                "latencies_ms": [round(v, 3) for v in latencies],
                "elapsed_ms": round((trio.current_time() - started) * 1000, 3)}

    node.add_api_handler(APPEND_API, handle)
