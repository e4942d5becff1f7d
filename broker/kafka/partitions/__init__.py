"""The data path of the partitions this broker hosts: Produce and InitProducerId
(produce), Fetch, ListOffsets and OffsetForLeaderEpoch (fetch), Kafka's idempotent-producer
rules (producer_state, pure), magic v2 batches on disk in the partition directory
(partition_log), whose batches are `raft.common.kafka.record_batch`'s format.
"""
