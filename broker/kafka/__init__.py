"""The brokers' Kafka protocol listener, decoded and encoded with `kio`.

listener          Trio TCP server, size framing, dispatch by api key/version
codec             request header + body parsing, response encoding, version-generic build
api_versions      advertised ranges; a too-new ApiVersions is answered in v0
metadata_api      Metadata v0-v12 and DescribeCluster from the broker's image (topic IDs)
admin_api         CreateTopics/DeleteTopics/CreatePartitions forwarded to the controller
produce / fetch   Produce, InitProducerId / Fetch, ListOffsets, OffsetForLeaderEpoch
group             FindCoordinator, OffsetCommit, OffsetFetch
membership        JoinGroup, SyncGroup, Heartbeat, LeaveGroup (classic rebalance, in memory)
group_state       a group's members and rebalance rounds, kept by its coordinator
replica           topic-ID fencing and the hosted partitions' state (high watermark)
partition_log     magic v2 batches on disk in the partition directory
replication       followers fetching from partition leaders (Fetch v13 by topic ID)
wire_client       a blocking one-request client (tests, tools)
"""
