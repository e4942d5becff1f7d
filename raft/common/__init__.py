"""The lowest layer of the project: code every other package may use.

Nothing here imports from raft, metadata, broker or tools (only the standard library,
msgpack, and `kio` and `crc32c` in the Kafka protocol of `raft.common.kafka`), so any of them can
depend on it without an import cycle.
"""
