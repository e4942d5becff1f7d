"""Read every node's segment files with Spark and index or decode them in the executors.

Each task reads one node's segment files as bytes; `node_task` walks the batches
(the `raft.segment` format: header, CRC-32, msgpack payload) and does what the driver's
plan for that node asks:

* index: one entry per batch (file, byte position, base offset, epoch, record count and a
  128-bit BLAKE2b digest of the batch bytes). Copies of a batch on several nodes have the
  same digest, so the cross-node checks compare batches, not records; this costs a CRC
  and a hash per batch, no msgpack.
* scan: decode every record and run the per-node checks (`sequential.NodeScan`, compiled
  when `tools.replay.compiled` built it). Only distinct logs are scanned: a node whose
  batches are the first n batches of the scanned log, replayed from the same base, shares
  its result (`ScanResult.view`). A log cut below a snapshot is scanned from that
  snapshot (the plan's `base`, `tools.replay.images.ReplayBase`): the scan starts from
  its image, and the records below its end offset are indexed but not scanned.
* decode: the record-level view (offset, epoch, record hash, columns) of a few batches,
  where different batches overlap the same offsets and the records must be compared.

Each task returns one compact dict (arrays, not rows), so nothing per record crosses
from Python to the JVM. A damaged segment does not raise in the executor (a Java stack
trace would bury the file name): the dict carries `corrupt` messages naming the file and
byte position, and the driver turns them into exit 2.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgpack

from raft.common.gc_pause import gc_paused
from raft.segment import CheckedHeader, CorruptBatchError, checked_header
from raft.snapshot import SnapshotError
from tools.replay.batch_index import IndexEntries, KnownFiles, NodeIndex
from tools.replay.compiled import scan_module
from tools.replay.images import ReplayBase, base_image
from tools.replay.inputs import ReplayInput
from tools.replay.sequential import decode_record, record_columns, record_hash

log = logging.getLogger(__name__)

def _walk(view: memoryview, path: str) -> Iterator[tuple[int, CheckedHeader]]:
    """(position, header) of each whole batch whose CRC holds (`raft.segment.
    checked_header`): the checks of `raft.segment.iter_batches` up to the payload, which
    only the batches that are decoded need (`_records`)."""
    position = 0
    while (header := checked_header(view, position, path)) is not None:
        yield position, header
        position = header[6]


def _records(view: memoryview, position: int, start: int, end: int, count: int,
             path: str) -> list[bytes]:
    """The payload's record bytes (`start:end`), checked as `raft.segment.iter_batches`
    checks them."""
    try:
        records = msgpack.unpackb(view[start:end], raw=False, use_list=True)
    except Exception as exc:  # msgpack raises several unrelated types
        raise CorruptBatchError(path, position, f"undecodable payload: {exc}") from None
    if type(records) is not list or len(records) != count or \
            (records and set(map(type, records)) != {bytes}):  # map/set: in C
        raise CorruptBatchError(path, position, "payload is not the declared records")
    return records


def decoded_batch(records: list[bytes], base_offset: int, epoch: int) -> list[tuple[Any, ...]]:
    """(offset, epoch, record hash, reported columns) of each record of one batch."""
    out = []
    for index, data in enumerate(records):
        kind, fields, _ = decode_record(data)
        out.append((base_offset + index, epoch, record_hash(data), record_columns(kind, fields)))
    return out


class _NodeRead:
    """One node's files walked in order for what its plan asks (`node_task`)."""

    def __init__(self, plan: dict[str, Any], scan: Any, start: int) -> None:
        self.want_index: bool = plan.get("index", False)
        self.decode: dict[str, list[int]] = plan.get("decode", {})
        self.scan, self.start = scan, start
        self.entries = IndexEntries()
        self.names: list[str] = []
        self.decoded: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
        self.seq = 0

    def walk(self, path: str, data: bytes) -> int:
        """Index, scan and decode one file's batches; returns where its last whole batch
        ends. A damaged batch raises CorruptBatchError."""
        file_id, scan, start = len(self.names) - 1, self.scan, self.start
        wanted = set(self.decode.get(path, ()))
        view = memoryview(data)
        end = 0
        for position, header in _walk(view, path):
            base_offset, epoch, count, _, _, payload_at, end = header
            if self.want_index:
                self.entries.add(file_id, view, position, header)
            scanned = scan is not None and base_offset + count > start
            if scanned or position in wanted:
                records = _records(view, position, payload_at, end, count, path)
                if scanned:
                    if base_offset >= start:
                        scan.batch(self.seq, base_offset, epoch, records)
                    else:  # records below the snapshot's end offset: not replayed
                        scan.batch(self.seq, start, epoch, records[start - base_offset:])
                if position in wanted:
                    self.decoded[(path, position)] = decoded_batch(records, base_offset, epoch)
            self.seq += 1
        return end


def node_task(node: int, last_path: str, files: Iterable[tuple[str, bytes]],
              plan: dict[str, Any], known: KnownFiles | None = None
              ) -> Iterator[dict[str, Any]]:
    """One node's segments, in file (offset) order; `plan` keys: index, scan, analysis
    (bools), decode ({path: [byte positions]}) and base (the ReplayBase the scan starts
    from; none: offset 0). Yields one result dict. `known`: files indexed earlier in
    the task, which a plan that only indexes reuses and adds to."""
    scan = scan_module().NodeScan(analysis=plan.get("analysis", False)) \
        if plan.get("scan") else None
    if scan is not None or plan.get("decode"):
        known = None
    base: ReplayBase | None = plan.get("base")
    start = 0 if base is None else base.end_offset
    corrupt: list[str] = []
    if scan is not None and base is not None and base.path is not None:
        try:
            scan.seed(base_image(base), start)
        except SnapshotError as exc:  # it read whole a moment ago (`snapshots.read_all`)
            corrupt.append(str(exc))
    read = _NodeRead(plan, scan, start)
    for path, data in files:  # in offset order (`read_segments` sorts the paths)
        read.names.append(path)
        same = None if known is None else known.entries(data)
        if same is not None:
            read.entries.extend(len(read.names) - 1, same)
            continue
        mark = len(read.entries.offsets)
        try:
            end = read.walk(path, data)
        except CorruptBatchError as exc:
            corrupt.append(str(exc))
            break
        if end < len(data) and path != last_path and (read.want_index or scan is not None):
            corrupt.append(f"{path}: corrupt batch at byte {end}: incomplete batch "
                           f"({len(data) - end} bytes) in a segment that is not the last")
            break
        if known is not None and end == len(data):  # whole: its entries hold anywhere
            known.add(path, data, read.entries.since(mark))
    index = read.entries.index(node, tuple(read.names)) if read.want_index else None
    yield {"node": node, "index": index, "corrupt": corrupt,
           "scan": None if scan is None else scan.result(), "decoded": read.decoded}


def read_segments(paths: Iterable[str]) -> Iterator[tuple[str, bytes]]:
    """Each segment's bytes, one file at a time, in offset order. An unreadable file is
    an OSError, which `node_task`'s caller reports as bad input."""
    for path in sorted(paths):
        yield path, Path(path).read_bytes()


def _task(node: int, paths: list[str], last_path: str, plan: dict[str, Any],
          known: KnownFiles | None = None) -> Iterator[dict[str, Any]]:
    """`node_task` with the collector paused (`raft.common.gc_pause`): what a task keeps
    (its index, the aggregates, a scan's topic state) holds no cycles, and what it
    throws away goes by reference counting, so collections only walked what it had
    built."""
    try:
        with gc_paused():
            yield from node_task(node, last_path, read_segments(paths), plan, known)
    except OSError as exc:
        yield {"node": node, "index": None, "scan": None, "decoded": {},
               "corrupt": [f"{exc.filename}: unreadable segment: {exc.strerror or exc}"]}


Task = tuple[int, list[str], str, dict[str, Any]]  # node, its paths, its last path, plan
_ARRAYS = ("file_ids", "positions", "offsets", "epochs", "counts", "digests")


def group_task(tasks: list[Task]) -> list[dict[str, Any]]:
    """Several nodes' tasks run as one: a file indexed once is not walked again
    (`KnownFiles`), and an index's arrays equal to an earlier index's are that index's
    objects, which the task's one pickled result then holds once."""
    known = KnownFiles()
    results = [result for task in tasks for result in _task(*task, known)]
    indexes: list[NodeIndex] = []
    for result in results:
        if (index := result["index"]) is None:
            continue
        for earlier in indexes:
            same = {name: getattr(earlier, name) for name in _ARRAYS
                    if getattr(earlier, name) == getattr(index, name)}
            index = dataclasses.replace(index, **same)
        result["index"] = index
        indexes.append(index)
    return results


def task_groups(tasks: list[Task], slots: int) -> list[list[Task]]:
    """The Spark tasks of a job: each scan (or decode) alone, in the given order, then
    the tasks that only index dealt in order into the slots the scans leave (at least
    one), so a node's index and its followers' share a task (`group_task`)."""
    alone = [[task] for task in tasks if not _index_only(task[3])]
    rest = [task for task in tasks if _index_only(task[3])]
    if not rest:
        return alone
    size = -(-len(rest) // max(1, slots - len(alone)))
    return alone + [rest[at:at + size] for at in range(0, len(rest), size)]


def _index_only(plan: dict[str, Any]) -> bool:
    return not (plan.get("scan") or plan.get("decode"))


def run_tasks(spark: Any, replay_input: ReplayInput, plans: dict[int, dict[str, Any]],
              busy: int = 0) -> dict[int, dict[str, Any]]:
    """One Spark job for the planned nodes (in the order of `plans`: put the longest
    first so the other cores take the rest); returns each node's result dict. A plan's
    `files` (optional) limits the task to those segment paths. The tasks that only
    index are grouped into the cores left (`task_groups`), and `busy` cores are taken by
    another job (a scan running meanwhile: `tools.replay.job._first_pass` scans a log
    and indexes it in two jobs at once).

    The executors open the segment files themselves (the paths must be readable on every
    worker, as `sc.binaryFiles` of local paths also requires): handing them the bytes
    through the JVM cost about 1.5 s per 80 MB node, more than indexing them."""
    tasks: list[Task] = []
    for node_id, plan in plans.items():
        node = replay_input.node(node_id)
        every = [str(segment.resolve()) for segment in node.segments]
        paths = plan.get("files") or every
        if paths:
            tasks.append((node_id, paths, every[-1], plan))
    if not tasks:
        return {}
    groups = task_groups(tasks, spark.sparkContext.defaultParallelism - busy)
    results = spark.sparkContext.parallelize(groups, len(groups)).map(group_task).collect()
    return {result["node"]: result for group in results for result in group}


def spark_session(master: str | None, *, shuffle_partitions: int = 8,
                  app_name: str = "kraft-replay", driver_memory: str = "3g",
                  executor_memory: str | None = None, java_options: str = "") -> Any:
    """A SparkSession for the replay. `master=None` keeps whatever spark-submit chose
    (or PySpark's own default, local[*]). In local mode the executors live in the driver
    JVM, so `driver_memory` is what holds the report's record rows. On a standalone
    cluster `executor_memory` must fit a worker's `--memory` (Spark's default asks for
    1g, and an application no worker can hold waits for ever). Executors run this same
    Python (PYSPARK_PYTHON, unless set): the venv's, where msgpack and the project are.
    `java_options` go to the driver's JVM (in local mode, the executors' too), e.g. the
    tests' C1-only JIT (tests/replay/conftest.py)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.adaptive.enabled", "true")
               .config("spark.python.worker.reuse", "true")
               # A task's result (a node's index or scan: 3-6 MB per million records)
               # goes to the driver in the task's status message rather than through the
               # block manager (above the default 1m); on a fresh JVM the first job's
               # own CPU fell from 1.0 s to 0.5 s. Spark caps it at the RPC message size.
               .config("spark.task.maxDirectResultSize", "64m")
               .config("spark.driver.memory", driver_memory))
    if executor_memory:
        builder = builder.config("spark.executor.memory", executor_memory)
    log4j = Path(__file__).with_name("log4j2.properties")
    driver_options = [java_options] if java_options else []
    if log4j.is_file():
        driver_options.append(f"-Dlog4j2.configurationFile=file:{log4j}")
    if driver_options:
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(driver_options))
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
    """The packages the executors import, zipped for `addPyFile` on a real cluster; the
    driver serves it to executors for as long as it runs, and removes it as it exits."""
    root = Path(__file__).resolve().parents[2]
    directory = Path(tempfile.mkdtemp(prefix="kraft-replay-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    target = directory / "kraft-py.zip"
    with zipfile.ZipFile(target, "w") as archive:
        for package in ("raft", "metadata", "tools"):
            for path in (root / package).rglob("*.py"):
                archive.write(path, path.relative_to(root).as_posix())
    return str(target)
