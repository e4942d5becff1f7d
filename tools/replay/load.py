"""Read every node's segment files with Spark and decode them in the executors.

`sc.binaryFiles` hands each executor whole segment files; `decode_segment` walks the
batches with `raft.segment.iter_batches` and each record with msgpack and
`metadata.records`' type table, yielding one row per record copy (a record on three
nodes is three rows). Only what the checks and the analysis need is kept: the record
bytes themselves are reduced to a 64-bit BLAKE2b hash (`record_hash`), which is what the
log-matching check compares across nodes (a collision between two different records at
the same offset has probability about 2**-64).

One task per node reads that node's segments in offset order (a node's log is the unit
the per-node checks scan sequentially; the nodes are read in parallel).

A damaged segment does not raise in the executor (a Java stack trace would bury the
file name): it yields one `CORRUPT` row whose `detail` names the file and byte
position, and the driver turns that into exit 2.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import msgpack

from metadata.records import RECORD_CLASSES, RecordType
from raft.segment import CorruptBatchError, iter_batches
from tools.replay.inputs import ReplayInput

log = logging.getLogger(__name__)

CORRUPT = "CORRUPT"  # record_type of the row standing for a damaged segment
UNDECODABLE = "UNDECODABLE"  # a batch with a good CRC holding a record we cannot read
NODE_PASS = "NODE_PASS"  # a row carrying one output of a node's sequential scan

SCHEMA = (
    "node int, file string, position long, offset long, epoch int, batch_crc long, "
    "record_hash long, size int, record_type string, topic_id string, name string, "
    "partition int, leader_id int, detail string"
)
COLUMNS = tuple(part.split()[0] for part in SCHEMA.split(", "))

_TYPE_NAMES = {int(t): t.name for t in RecordType if int(t) in RECORD_CLASSES}
_LEADER_CHANGE = int(RecordType.LEADER_CHANGE)


def _uuid_text(raw: Any) -> str | None:
    """Uuid bytes as KIP-516 text (the same as `str(Uuid)`), without building a Uuid."""
    if isinstance(raw, bytes) and len(raw) == 16:
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    return None


def _record_row(node: int, file: str, position: int, offset: int, epoch: int, crc: int,
                data: bytes) -> tuple[Any, ...]:
    digest = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)
    try:
        fields = msgpack.unpackb(data, raw=False)
    except Exception as exc:  # msgpack raises several unrelated types
        return (node, file, position, offset, epoch, crc, digest, len(data), UNDECODABLE,
                None, None, None, None, f"not msgpack: {exc}")
    type_id = fields.get("type") if isinstance(fields, dict) else None
    type_name = _TYPE_NAMES.get(type_id) if isinstance(type_id, int) else None
    if type_name is None:
        return (node, file, position, offset, epoch, crc, digest, len(data), UNDECODABLE,
                None, None, None, None, f"unknown record {str(fields)[:80]}")
    get = fields.get
    name = get("name", get("new_name"))
    partition = get("partition")
    leader = get("leader_id") if fields["type"] == _LEADER_CHANGE else None
    return (node, file, position, offset, epoch, crc, digest, len(data), type_name,
            _uuid_text(get("topic_id")), name if isinstance(name, str) else None,
            partition if isinstance(partition, int) else None,
            leader if isinstance(leader, int) else None, None)


def decode_segment(node: int, file: str, data: bytes, is_last: bool) -> Iterator[tuple[Any, ...]]:
    """Rows for one segment file. A torn tail is only legal at the end of a node's last
    segment (the log truncates it on recovery); anything else is a CORRUPT row."""
    end = 0
    try:
        for stored in iter_batches(data, file):
            batch = stored.batch
            for index, record in enumerate(batch.records):
                yield _record_row(node, file, stored.position, batch.base_offset + index,
                                  batch.epoch, stored.crc, record)
            end = stored.position + stored.size
    except CorruptBatchError as exc:
        yield (node, file, exc.position, -1, -1, None, None, None, CORRUPT,
               None, None, None, None, str(exc))
        return
    if end < len(data) and not is_last:
        yield (node, file, end, -1, -1, None, None, None, CORRUPT, None, None, None, None,
               f"{file}: corrupt batch at byte {end}: incomplete batch "
               f"({len(data) - end} bytes) in a segment that is not the last")


def _local_path(url: str) -> str:
    parsed = urlparse(url)
    return unquote(parsed.path) if parsed.scheme in ("file", "") else url


def spark_session(master: str | None, *, shuffle_partitions: int = 8,
                  app_name: str = "kraft-replay", driver_memory: str = "3g") -> Any:
    """A SparkSession for the replay. `master=None` keeps whatever spark-submit chose
    (or PySpark's own default, local[*]). In local mode the executors live in the driver
    JVM, so `driver_memory` is what holds the cached records (the 1g default thrashes
    the garbage collector on a few million rows)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.adaptive.enabled", "true")
               .config("spark.python.worker.reuse", "true")
               .config("spark.driver.memory", driver_memory))
    log4j = Path(__file__).with_name("log4j2.properties")
    if log4j.is_file():
        builder = builder.config("spark.driver.extraJavaOptions",
                                 f"-Dlog4j2.configurationFile=file:{log4j}")
    if not master and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = "local[*]"  # not under spark-submit (which sets the gateway port)
    if master:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not str(spark.sparkContext.master).startswith("local"):
        spark.sparkContext.addPyFile(_project_zip())
    return spark


def _project_zip() -> str:
    """The packages the executors import, zipped for `addPyFile` on a real cluster."""
    root = Path(__file__).resolve().parents[2]
    target = Path(tempfile.mkdtemp(prefix="kraft-replay-")) / "kraft-py.zip"
    with zipfile.ZipFile(target, "w") as archive:
        for package in ("raft", "metadata", "tools"):
            for path in (root / package).rglob("*.py"):
                archive.write(path, path.relative_to(root).as_posix())
    return str(target)


def decode_node(node: int, last_path: str, files: Iterable[tuple[str, bytes]]) -> Iterator[
        tuple[Any, ...]]:
    """Rows for all of one node's segments, in offset order, then the rows of its
    sequential scan (`NODE_PASS`, the scan's output as JSON in `detail`)."""
    from tools.replay.sequential import NodeScan

    scan = NodeScan(node)
    for path, data in sorted(((_local_path(p), d) for p, d in files), key=lambda f: f[0]):
        for row in decode_segment(node, path, data, path == last_path):
            yield row
            if row[8] == CORRUPT:
                return
            scan.step((row[0], row[3], row[4], row[6], row[8], row[9], row[10], row[11],
                       row[12], row[13], row[1]))
    for item in scan.finish():
        yield (node, None, None, -1, -1, None, None, None, NODE_PASS, None, None, None, None,
               json.dumps(item))


def load_records(spark: Any, replay_input: ReplayInput) -> Any:
    """One DataFrame row per record copy (columns `COLUMNS`), plus CORRUPT and NODE_PASS
    rows. Each node's segments are read by one task, in order, so the per-node checks
    (`tools.replay.sequential`) run in the same pass over the bytes as the decoding."""
    sc = spark.sparkContext
    per_node = []
    for node in replay_input.nodes:
        paths = [str(segment.resolve()) for segment in node.segments]
        if not paths:
            continue
        if any("," in path for path in paths):
            raise ValueError(f"{node.log_dir}: a comma in a segment path is not supported")
        raw = sc.binaryFiles(",".join(paths), minPartitions=1).coalesce(1)
        per_node.append(raw.mapPartitions(
            lambda files, n=node.node_id, last=paths[-1]: decode_node(n, last, files)))
    # verifySchema=False: the rows are built to fit SCHEMA; checking each one in Python
    # would double the cost of the load.
    return spark.createDataFrame(sc.union(per_node), SCHEMA, verifySchema=False)
