"""The Kafka wire protocol as both sides speak it, below `broker` and `tools.client`.

framing          the 4-byte size prefix: the one reader and writer, with its size limit
codec            request header + body parsing, response encoding, `build` of any version
ordered_schemas  ordered delivery's wire: the count tag, ConsumerGroupPosition, PLE
record_batch     magic v2 record batches as this project writes them (varints, CRC32C)
wire_client      a blocking one-request client (tests, tools)

Error codes are `raft.common.errors.ErrorCode` (Kafka's numbers, and ordered delivery's
INVALID_PARTITION_METADATA). Nothing here holds state or knows a broker: a broker's
listener and the command line's clients use it alike.
"""
