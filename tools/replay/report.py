"""The replay report: `report.json`, Parquet tables and a self-contained `report.html`.

REPORT_DIR/
  report.json           verdict, every check (count + examples), the analysis tables
  records.parquet/      one row per record copy (`RECORDS`), partitioned by node
  leaders.parquet/      the leader timeline;  nodes.parquet/  per-node log end and lag
  <derived>.parquet/    the time-axis tables (`tools.replay.views.DERIVED`, docs/replay.md)
  report.html           the same, readable, with matplotlib plots embedded as base64 PNG
                        and the time axis (`tools.replay.axis_html`): a zoomable timeline,
                        availability per partition, each topic's story
"""

from __future__ import annotations

import base64
import html
import io
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from raft.segment import iter_batches
from tools.replay.inputs import ReplayInput
from tools.replay.load import read_segments
from tools.replay.sequential import decode_record, record_columns, record_hash

log = logging.getLogger(__name__)


LEADERS = ("epoch int, leader_id int, claimants long, first_offset long, last_offset long, "
            "records long")
NODES = ("node int, role string, records long, start_offset long, end_offset long, "
          "last_epoch int, segments long, lag long, diverges_at long, committed_held long, "
          "replay_from long")


RECORDS = (
    "node int, file string, position long, offset long, epoch int, batch_crc long, "
    "record_hash long, size int, record_type string, topic_id string, name string, "
    "partition int, leader_id int, detail string"
)


def _copy_rows(node: int, files: Iterable[tuple[str, bytes]]) -> Iterator[tuple[Any, ...]]:
    """One `RECORDS` row per record of one node's segments (already checked by the
    replay, so no segment here is corrupt; a torn tail ends the last one)."""
    for path, data in files:  # in offset order
        for stored in iter_batches(data, path):
            batch = stored.batch
            for index, record in enumerate(batch.records):
                kind, fields, detail = decode_record(record)
                columns = record_columns(kind, fields)
                yield (node, path, stored.position, batch.base_offset + index, batch.epoch,
                       stored.crc, record_hash(record), len(record), columns["record_type"],
                       columns.get("topic_id"), columns.get("name"), columns.get("partition"),
                       columns.get("leader_id"), detail)


def record_copies(spark: Any, replay_input: ReplayInput) -> Any:
    """A DataFrame of every record copy on every node. Only the report builds it: the
    checks compare batches and scan each distinct log once (`tools.replay.load`)."""
    nodes = [(n.node_id, [str(s.resolve()) for s in n.segments])
             for n in replay_input.nodes if n.segments]
    rows = spark.sparkContext.parallelize(nodes, len(nodes)).flatMap(
        lambda item: _copy_rows(item[0], read_segments(item[1])))
    # verifySchema=False: the rows are built to fit RECORDS
    return spark.createDataFrame(rows, RECORDS, verifySchema=False)


def write_report(out_dir: Path, summary: dict[str, Any], tables: dict[str, Any],
                 time_axis: str = "") -> Path:
    """`tables`: the replay's views (`tools.replay.views.register_views`), each written
    as `<name>.parquet`; `records` partitioned by node, the small ones as one file.
    `time_axis`: the page's time-axis section (`tools.replay.axis_html`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps(summary, indent=2, default=str),
                                         encoding="utf-8")
    for name, table in tables.items():
        path = str(out_dir / f"{name}.parquet")
        if name == "records":
            table.write.mode("overwrite").partitionBy("node").parquet(path)
        else:
            table.coalesce(1).write.mode("overwrite").parquet(path)
    page = out_dir / "report.html"
    page.write_text(render_html(summary, time_axis), encoding="utf-8")
    log.info("report written", extra={"dir": str(out_dir)})
    return page


# --- plots --------------------------------------------------------------------------------

def _png(draw: Callable[[Any], None]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 3.2), dpi=96)
    try:
        draw(axes)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
    finally:
        plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _leader_plot(timeline: list[dict[str, Any]]) -> Callable[[Any], None]:
    def draw(ax: Any) -> None:
        leaders = sorted({e["leader_id"] for e in timeline if e["leader_id"] is not None})
        colours = {leader: f"C{i % 10}" for i, leader in enumerate(leaders)}
        for entry in timeline:
            width = entry["last_offset"] - entry["first_offset"] + 1
            ax.barh(entry["epoch"], width, left=entry["first_offset"],
                    color=colours.get(entry["leader_id"], "grey"))
        from matplotlib.patches import Patch
        from matplotlib.ticker import MaxNLocator

        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are integers
        ax.set_xlabel("offset")
        ax.set_ylabel("epoch")
        ax.set_title("Leader timeline: the offsets each epoch wrote", pad=24)
        if colours:  # above the axes, not over the bars
            ax.legend(handles=[Patch(color=c, label=f"leader {leader}")
                               for leader, c in colours.items()],
                      loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=min(len(colours), 6),
                      fontsize="small", frameon=False)
    return draw


def _types_plot(types: list[dict[str, Any]]) -> Callable[[Any], None]:
    def draw(ax: Any) -> None:
        ax.barh([t["record_type"] for t in types], [t["count"] for t in types], color="C0")
        ax.set_xscale("log")
        ax.set_xlabel("records (log scale)")
        ax.set_title("Record types")
    return draw


def _churn_plot(churn: list[dict[str, Any]]) -> Callable[[Any], None]:
    """Topics created (up) and removed (down) per bin of offsets, and the live topics
    after each bin, on one axis of topics; the legend above the plot."""
    def draw(ax: Any) -> None:
        from matplotlib.ticker import MaxNLocator

        starts = [c["bin_start"] for c in churn]
        width = churn[0]["bin_end"] - churn[0]["bin_start"]
        ax.bar(starts, [c["created"] for c in churn], width=width, align="edge", color="C2",
               edgecolor="white", label="created in the bin")
        ax.bar(starts, [-c["removed"] for c in churn], width=width, align="edge",
               color="C3", edgecolor="white", label="removed in the bin (below 0)")
        ax.step([churn[0]["bin_start"], *(c["bin_end"] for c in churn)],
                [0, *(c["live_after"] for c in churn)], where="pre", color="black",
                label="live topics")
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(starts[0], churn[-1]["bin_end"])
        ax.set_xlabel("offset")
        ax.set_ylabel("topics")
        ax.set_title("Topic churn", pad=24)
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, fontsize="small",
                  frameon=False)
    return draw


def _nodes_plot(nodes: list[dict[str, Any]], committed_end: int) -> Callable[[Any], None]:
    def draw(ax: Any) -> None:
        labels = [f"{n['role']} {n['node']}" for n in nodes]
        ax.barh(labels, [n["end_offset"] for n in nodes], color="C1", label="log end")
        ax.barh(labels, [n["committed_held"] for n in nodes], color="C0",
                label="agrees with committed log")
        ax.axvline(committed_end, color="black", linestyle="--", label="committed end")
        ax.set_xlabel("offset")
        ax.set_title("Per-node log end", pad=24)
        # above the axes: inside, it covers the bars' ends, where nodes differ
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, fontsize="small",
                  frameon=False)
    return draw


# --- HTML ---------------------------------------------------------------------------------

def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_text(r.get(c)))}</td>"
                                     for c in columns) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return json.dumps(value, default=str)
    return str(value)


def _checks_html(checks: list[dict[str, Any]]) -> str:
    parts = []
    for check in checks:
        status = "skipped" if check["skipped"] else ("pass" if check["passed"] else "FAIL")
        parts.append(
            f"<details class='{status.lower()}'><summary><b>{status}</b> "
            f"{html.escape(check['name'])}: {check['violations']} violation(s) - "
            f"{html.escape(check['description'])}</summary>"
            + (f"<p>{html.escape(check['note'])}</p>" if check["note"] else "")
            + ("<pre>" + html.escape("\n".join(json.dumps(e, default=str)
                                               for e in check["examples"])) + "</pre>"
               if check["examples"] else "") + "</details>")
    return "\n".join(parts)


_STYLE = """body{font-family:sans-serif;margin:2em;max-width:75em}
table{border-collapse:collapse;font-size:small}td,th{border:1px solid #ccc;padding:2px 6px}
details{margin:.3em 0}details.fail summary{color:#b00}details.pass summary{color:#070}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:small}img{max-width:100%}"""


def _run_html(run: dict[str, Any] | None) -> str:
    """The header line: cluster id, time, kraft-py version, Spark master."""
    if not run:
        return ""
    parts = [("cluster", run.get("cluster_id") or "unknown"), ("replayed", run.get("time")),
             ("kraft-py", run.get("version")), ("Spark master", run.get("spark_master")),
             ("Spark", run.get("spark_version"))]
    return "<p class='run'>" + " &middot; ".join(
        f"{name} <b>{html.escape(str(value))}</b>" for name, value in parts
        if value is not None) + "</p>"


def _recreated_html(recreated: list[dict[str, Any]]) -> str:
    """The names more than one topic ID took; nothing when none did."""
    if not recreated:
        return ""
    return "<h2>Recreated topic names</h2>" + _table(
        recreated[:200], ["name", "old_ids", "current_id", "offsets"])


def render_html(summary: dict[str, Any], time_axis: str = "") -> str:
    analysis = summary["analysis"]
    plots = [_png(_nodes_plot(analysis["nodes"], analysis["committed_end"]))]
    if analysis["leader_timeline"]:
        plots.append(_png(_leader_plot(analysis["leader_timeline"])))
    if analysis["record_types"]:
        plots.append(_png(_types_plot(analysis["record_types"])))
    if analysis["topic_churn"]:
        plots.append(_png(_churn_plot(analysis["topic_churn"])))
    images = "".join(f"<p><img alt='plot' src='data:image/png;base64,{p}'></p>" for p in plots)
    verdict = "PASS" if summary["passed"] else "FAIL: " + ", ".join(summary["failed"])
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>kraft replay</title><style>{_STYLE}</style></head>
<body><h1>kraft replay: {html.escape(verdict)}</h1>
{_run_html(summary.get('run'))}
<p>{summary['records']} record copies on {len(analysis['nodes'])} node(s); voters
{summary['voters']} (from {html.escape(summary['voters_source'])}); committed prefix ends at
offset {analysis['committed_end']}.</p>
<h2>Checks</h2>{_checks_html(summary['checks'])}
{time_axis}
<h2>Nodes</h2>{_table(analysis['nodes'], ['node', 'role', 'start_offset', 'replay_from',
    'end_offset', 'lag', 'last_epoch', 'records', 'segments', 'diverges_at',
    'committed_held'])}
<h2>Plots</h2>{images}
<h2>Leader timeline</h2>{_table(analysis['leader_timeline'], ['epoch', 'leader_id',
    'claimants', 'first_offset', 'last_offset', 'records'])}
{_recreated_html(analysis['recreated_names'])}
<h2>Record types</h2>{_table(analysis['record_types'], ['record_type', 'count'])}
</body></html>
"""
