"""The brokers' Kafka protocol listener, decoded and encoded with `kio`.

listener          Trio TCP server, size framing, dispatch by api key/version
api_versions      advertised ranges; a too-new ApiVersions is answered in v0
metadata_api      Metadata v0-v12 and DescribeCluster from the broker's image (topic IDs)
admin_api         CreateTopics/DeleteTopics/CreatePartitions forwarded to the controller
produce / fetch   Produce, InitProducerId / Fetch, ListOffsets, OffsetForLeaderEpoch
group             FindCoordinator, OffsetCommit/Fetch/Delete, Describe/List/DeleteGroups
membership        JoinGroup, SyncGroup, Heartbeat, LeaveGroup (classic rebalance)
group_state       a group's members, rounds and offsets: a pure state machine
coordinator       leads __consumer_offsets partitions: loads, writes (acks=all), ticks
offsets_records   group -> partition hash, __consumer_offsets record format and batches
replica           topic-ID fencing and the hosted partitions' state (high watermark)
partition_log     magic v2 batches on disk in the partition directory
record_batch      magic v2 batches written here (varints, (key, value) records)
replication       followers fetching from partition leaders (Fetch v13 by topic ID)
ordered           its rules (pure): the count check, marked partitions, PLE answers
ordered_api       PartitionLeaderEpochs (any broker), ConsumerGroupPosition (coordinator)
group_positions   the positions members exchange within a generation (pure)
empty_marked      marked partitions led here with an empty log, for the heartbeat
"""
