"""What `kraft dump-log` prints, for the two kinds of file in the metadata partition
directory: log segments (`raft/segment.py`) and snapshot checkpoints (`raft/snapshot.py`),
both runs of the same batches.

Modules, bottom to top:

* `render`: one batch and its records as text lines or JSON objects, records decoded as
  metadata records. Pure.
* `files`: which files to read (a partition directory's segments and checkpoints in
  name order, or files named one by one), each checked whole before it is shown.
"""
