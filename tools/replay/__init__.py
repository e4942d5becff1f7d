"""`kraft replay`: Spark reads every node's metadata log and proves the copies consistent.

Modules: `inputs` finds the nodes, their segment files, log start offsets, snapshot
checkpoints, high-watermark checkpoints and broker checkpoints (driver side, plain
files); `snapshots` reads the snapshots in Spark tasks, picks where each node's replay
starts (offset 0, or the snapshot at the start of a log cut below it) and checks every
snapshot against the committed log, replaying images with `images`; `load` reads the
segments in Spark tasks: one per node indexes its batches (CRC checked, a BLAKE2b
digest per batch), and one more, started first, decodes every record of one node's log
(`job._root`) with `raft.segment` and `metadata.records` and runs the sequential scan
(`sequential`: offsets, epochs, leaders, topic IDs and liveness, plus the analysis
aggregates, from the node's snapshot when its log was cut below one).
Nodes holding a byte-identical prefix of that log, replayed from the same start, share
its scan; only the others (and batches that overlap a different batch at the same
offsets) are decoded, in a second job. `crossnode`
compares the nodes (log matching, committed prefix: from the high-watermark checkpoints,
else by majority) on distinct batch versions; `checks` merges everything into named
results; `checkpoint` compares broker image checkpoints; `analysis` builds the leader
timeline, churn and lag tables; `report` writes JSON, Parquet and a self-contained HTML
page; `job` ties them together and `synthetic` builds logs for the tests and the
benchmark. The brokers' partition logs are read on the driver (`partition_logs`) and
checked against each other and against the leader epochs the metadata log gave
(`partition_history`, `partition_checks`), and against `--history`'s acknowledged
writes (`acknowledged`). `timeline` lays the committed log out on a time axis (the
batches' append times: leadership, broker sessions, partition history, topic lifecycles)
and `availability` sums each partition's time without a leader or under-replicated;
`views` registers every table as a Spark temp view, for the report's Parquet files and
`kraft replay --sql` (docs/replay.md), with a chaos run's fault log (`faults`, `kraft
replay --faults`); `time_axis` turns the tables into the report's timeline events and a
run's figures, `axis_html` draws the timeline, availability and topic stories in the
page, and `compare` sets two reports' figures side by side (`kraft replay --compare`).

Running on a Spark cluster
--------------------------
The embedded default is `local[*]`. The same job runs on a standalone cluster when the
logs sit on a filesystem every worker can read (NFS, or copied to the same path)::

    kraft replay --logs /shared/run7/node-1/data /shared/run7/node-2/data \\
        --master spark://spark-master:7077 --out /shared/run7/report

or through `spark-submit`, with the project shipped to the executors as a zip (the
workers also need `msgpack` installed, and Python 3.11)::

    cd /path/to/kraft-py && zip -qr /tmp/kraft-py.zip raft metadata tools
    spark-submit --master spark://spark-master:7077 --py-files /tmp/kraft-py.zip \\
        tools/replay/__main__.py --cluster /shared/run7 --out /shared/run7/report --json

Under `spark-submit` the master comes from spark-submit (`--master` of `kraft replay`
is then left out). With `--master spark://...`, `kraft replay` ships the same zip itself,
makes every path absolute (executors run in their worker's directory), runs the
executors' Python as its own (PYSPARK_PYTHON, unless set) and takes
`--executor-memory SIZE`, which must fit a worker's `--memory` (Spark asks for 1g by
default; an application no worker can hold waits for ever).
`tests/replay/test_replay_standalone.py` (in `make test`) runs it on a master and two
workers started from pyspark's own `bin/spark-class`, each worker running one executor,
and expects the local[2] verdict.

The report's header names the cluster id (the nodes' `meta.properties`), when the replay
ran (UTC), the kraft-py version and the Spark master (`report.json`: `run`).

Broker checkpoint format
------------------------
A broker that has applied the metadata log writes `<log.dir>/metadata-image.checkpoint`,
one JSON object::

    {"applied_offset": 41, "image_hash": "<sha256 hex of MetadataImage.content_hash()>"}

`applied_offset` is the offset of the last record applied to the image (inclusive; -1
for an empty image), the same number as `MetadataImage.last_applied_offset`. The replay
rebuilds the image from the committed log up to and including that offset and compares
`content_hash()`.
"""

CHECKPOINT_FILE = "metadata-image.checkpoint"
METADATA_DIR = "__cluster_metadata-0"
