"""`kraft replay --faults F`: a chaos run's faults on the wall clock, as the `faults` table.

The file is what `kraft chaos` writes as DIR/faults.jsonl (tools/chaos/nemesis.py), one
JSON object a line (blank lines skipped)::

    {"kind": "kill", "target": 4, "leader": false, "amount": null,
     "start_ms": 1700000001200, "end_ms": 1700000001400, "error": null}

`kind` and `start_ms` are required; `target` (the node id the fault hit; null when none
was found), `amount` (a slow-disk or slow-net delay in ms, a loss rate, a clock rate),
`end_ms` (when it was healed; null: never), `leader` (aimed at the raft leader) and
`error` may be left out. Times are milliseconds since the epoch, as the metadata log's
batch times, so the table joins `leadership`, `broker_sessions` and `partition_history`
on time (docs/replay.md). Anything else is bad input: one error naming the line, exit 2.
A `clock` fault on the raft leader skews the batch times it writes while it lasts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tools.replay.inputs import read_json_lines

FAULTS = ("kind string, target int, leader boolean, amount double, start_ms long, "
          "end_ms long, error string")


def _time(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def fault_row(_: int, data: Any) -> tuple[Any, ...]:
    """One `FAULTS` row of a fault log line; ValueError saying what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    kind, target, leader = data.get("kind"), data.get("target"), data.get("leader", False)
    amount, start, end, error = (data.get("amount"), data.get("start_ms"), data.get("end_ms"),
                                 data.get("error"))
    if not isinstance(kind, str) or not kind:
        raise ValueError("kind must be a non-empty string")
    if target is not None and not _time(target):
        raise ValueError(f"target must be a node id or null, not {target!r}")
    if not isinstance(leader, bool):
        raise ValueError(f"leader must be true or false, not {leader!r}")
    if amount is not None and (isinstance(amount, bool)
                               or not isinstance(amount, int | float)):
        raise ValueError(f"amount must be a number or null, not {amount!r}")
    if not _time(start):
        raise ValueError(f"start_ms must be ms since the epoch, not {start!r}")
    if end is not None and not (_time(end) and end >= start):
        raise ValueError(f"end_ms must be null or ms since the epoch from start_ms on, "
                         f"not {end!r}")
    if error is not None and not isinstance(error, str):
        raise ValueError(f"error must be a string or null, not {error!r}")
    return (kind, target, leader, None if amount is None else float(amount), start, end,
            error)


def read_faults(path: Path) -> list[tuple[Any, ...]]:
    """The `faults` rows of a fault log, in start order; InputError naming a bad line."""
    return sorted(read_json_lines(path, "--faults", fault_row), key=lambda row: row[4])
