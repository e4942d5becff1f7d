"""The brokers' Kafka protocol listener, decoded and encoded with `kio` through the wire
protocol in `raft.common.kafka` (framing, codec, ordered delivery's schemas).

listener         Trio TCP server, the dispatcher by api key/version, the wiring of it all
context          what the Kafka side shares: identity, image, partitions, controller, settings
handler_context  the handlers' context: that, and the group coordinator built on it
api_versions     advertised ranges; a too-new ApiVersions is answered in v0
authz            the ACL checks handlers make (Kafka's StandardAuthorizer rules)
admin/           topics, ACLs, configs, quorum and metadata APIs (answered or forwarded)
partitions/      the data path: Produce, Fetch, ListOffsets, producer state, partition logs
replication/     hosted partitions' state, followers fetching from leaders, ISR changes
groups/          consumer groups: coordinator, membership, offsets and their records
ordered/         ordered delivery across partition-count changes (KIP-253)
sasl/            SASL PLAIN and SCRAM, server side and client side
"""
