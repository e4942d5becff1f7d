"""The project's own Kafka client for ordered delivery across partition-count changes:
a linear-hashing partitioner, an ordered producer and an ordered consumer-group member
that holds back records until the group has consumed what must come first."""
