"""Ordered delivery across partition-count changes (KIP-253, linear hashing): its rules,
pure (rules: the count check, marked partitions, PartitionLeaderEpochs answers), the two
APIs Kafka lacks (ordered_api: PartitionLeaderEpochs on any broker,
ConsumerGroupPosition on the coordinator) and the marked partitions led here with an
empty log, for the heartbeat (empty_marked). The clients' rules live here too, pure, so
that the data-plane simulator (`broker.dataplane.sim`) runs the same code as the
ordered clients of `tools.client`: linear hashing (partitioner), the consumer's
gates (gates) and the group leader's assignment (assignment). Its wire schemas are
`raft.common.kafka.ordered_schemas`.
"""
