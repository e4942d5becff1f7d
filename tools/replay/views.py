"""The replay's tables as Spark temp views, for the report's Parquet files and for
`kraft replay --sql`.

The rule: every table the report writes is a view of the same name in the session, with
the schema below (documented column by column in docs/replay.md), so a query names
what the report holds. `records` is every record copy on every node (`report.RECORDS`,
read lazily from the segments); `leaders` and `nodes` are the analysis tables; the
derived tables come from the reference log's committed prefix (`tools.replay.timeline`,
`tools.replay.availability`), with times in milliseconds since the epoch (UTC) and null
where a batch carries no time.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from tools.replay.faults import FAULTS
from tools.replay.inputs import ReplayInput
from tools.replay.report import LEADERS, NODES, record_copies
from tools.replay.timeline import Timeline

LEADERSHIP = ("epoch int, leader_id int, start_offset long, start_ms long, end_offset long, "
              "end_ms long, ended_by string")
BROKER_SESSIONS = ("broker_id int, broker_epoch long, incarnation_id string, event string, "
                   "offset long, time_ms long, fenced_after boolean, until_event string, "
                   "until_offset long, until_ms long, duration_ms long")
PARTITION_HISTORY = ("topic_id string, topic_name string, partition int, change string, "
                     "offset long, epoch int, time_ms long, leader int, isr array<int>, "
                     "replicas array<int>, leader_epoch int, marked boolean")
TOPIC_LIFECYCLE = ("topic_id string, name string, event string, offset long, epoch int, "
                   "time_ms long, partitions int, config_key string, config_value string, "
                   "new_name string")
PARTITION_AVAILABILITY = ("topic_id string, name string, partition int, from_offset long, "
                          "from_ms long, to_offset long, to_ms long, ended_by string, "
                          "leaderless_ms long, under_replicated_ms long, "
                          "under_min_isr_ms long, min_insync_replicas int, "
                          "times_known boolean")
DERIVED = ("leadership", "broker_sessions", "partition_history", "topic_lifecycle",
           "partition_availability")


def _dict_rows(rows: list[dict[str, Any]], schema: str) -> list[tuple[Any, ...]]:
    columns = [c.split()[0] for c in schema.split(", ")]
    return [tuple(r.get(c) for c in columns) for r in rows]


def register_views(spark: Any, replay_input: ReplayInput, analysis: dict[str, Any],
                   timeline: Timeline, partition_availability: list[tuple[Any, ...]],
                   faults: list[tuple[Any, ...]] | None = None) -> dict[str, Any]:
    """Every table as a DataFrame, each registered as a temp view of its name (`faults`
    only when given)."""
    rows = {
        "leaders": (_dict_rows(analysis["leader_timeline"], LEADERS), LEADERS),
        "nodes": (_dict_rows(analysis["nodes"], NODES), NODES),
        "leadership": (timeline.leadership, LEADERSHIP),
        "broker_sessions": (timeline.broker_sessions, BROKER_SESSIONS),
        "partition_history": (timeline.partition_history, PARTITION_HISTORY),
        "topic_lifecycle": (timeline.topic_lifecycle, TOPIC_LIFECYCLE),
        "partition_availability": (partition_availability, PARTITION_AVAILABILITY),
    }
    if faults is not None:
        rows["faults"] = (faults, FAULTS)
    # verifySchema=False: the rows are built to fit (checked in tests/replay/
    # test_replay_views.py); verified one by one they cost a 1M-record replay 6 s
    tables = {"records": record_copies(spark, replay_input),
              **{name: spark.createDataFrame(data, schema, verifySchema=False)
                 for name, (data, schema) in rows.items()}}
    for name, table in tables.items():
        table.createOrReplaceTempView(name)
    return tables


class QueryError(Exception):
    """A query Spark refused (parse or analysis); the text is Spark's first line."""


def run_query(spark: Any, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """(column names, rows) of `query` over the registered views."""
    from pyspark.errors import PySparkException
    from pyspark.logger import PySparkLogger

    # pyspark logs a refused query's whole Java stack trace before raising: the error
    # line the caller prints is all a user should see
    PySparkLogger.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    try:
        frame = spark.sql(query)
        rows = [tuple(row) for row in frame.collect()]
    except PySparkException as exc:
        first = str(exc).strip().splitlines()
        raise QueryError(first[0] if first else type(exc).__name__) from None
    return list(frame.columns), rows


def _cell(value: Any) -> str:
    return "null" if value is None else json.dumps(value) if isinstance(value, list) \
        else str(value)


def query_table(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    """The rows as an aligned text table with a header line."""
    cells = [columns, *([_cell(v) for v in row] for row in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip()
                     for line in cells)


def query_json_lines(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    """One JSON object a row, keyed by column."""
    return "\n".join(json.dumps(dict(zip(columns, row, strict=True)), default=str)
                     for row in rows)
