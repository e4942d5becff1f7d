"""`kraft metadata-shell`: a MetadataImage browsed as a read-only file tree, in the manner
of Kafka's kafka-metadata-shell.sh.

Modules, bottom to top:

* `tree`: a MetadataImage (and the offset and epoch it was built at) as directories and
  files, built lazily so a large image costs nothing until a path is visited. Pure.
* `paths`: absolute and relative paths (`.`, `..`) resolved against a working directory,
  and looked up in a tree. Pure.
* `commands`: `ls`, `cd`, `cat`, `find`, `tree`, `pwd`, `help`, `exit` run on a tree,
  each returning its output lines and a status instead of printing. Pure.
* `session`: the one-shot and interactive front ends over text streams.
* `source`: a node's metadata log in a local cluster directory (`tools/cluster.py`)
  replayed into a MetadataImage.
* `snapshot_source`: a snapshot checkpoint file (`raft/snapshot.py`) loaded into one.

Only the sources know where the image came from: each produces a `source.LoadedImage`
(a MetadataImage, its `tree.Provenance` and a header line); the rest is shared.
"""
