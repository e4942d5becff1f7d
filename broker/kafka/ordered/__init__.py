"""Ordered delivery across partition-count changes (KIP-253, linear hashing): its rules,
pure (rules: the count check, marked partitions, PartitionLeaderEpochs answers), the two
APIs Kafka lacks (ordered_api: PartitionLeaderEpochs on any broker,
ConsumerGroupPosition on the coordinator) and the marked partitions led here with an
empty log, for the heartbeat (empty_marked). Its wire schemas are
`raft.common.kafka.ordered_schemas`.
"""
