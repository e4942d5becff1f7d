"""Consumer groups (Kafka's classic protocol): FindCoordinator, OffsetCommit/Fetch/Delete,
Describe/List/DeleteGroups (group), JoinGroup, SyncGroup, Heartbeat, LeaveGroup
(membership), a group's members, rounds and offsets as a pure state machine
(group_state), the coordinator that leads __consumer_offsets partitions, loads and writes
them with acks=all (coordinator), their record format (offsets_records), and the
positions members exchange within a generation for ordered delivery (group_positions).
"""
