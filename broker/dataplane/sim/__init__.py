"""A deterministic simulator of the brokers' data plane (`kraft sim --data-plane`).

One topic, every partition replicated on every broker, resized under KIP-253 with
ordered producers and an ordered consumer group on it (`ordered`, `ordered_group`;
Kafka's own clients on partition 0, `plain`). The controller is the real pure controller
code (`metadata.broker_control`, `metadata.isr`) over a real `MetadataDelta`: brokers
register and heartbeat, are fenced when their session runs out, leaders move, AlterPartition
shrinks and expands the ISR; each broker sees the committed images with its own lag. The
brokers run the real data-plane rules (`broker.dataplane`: the leader's follower progress,
high watermark and ISR proposals, the diverging-epoch answer and the follower's
truncation, the acks=all verdict, and `check_partition`'s epoch fencing) and the real
producer-state rules (`broker.kafka.partitions.producer_state`) over an in-memory log;
idempotent and plain producers send batches with acks 0, 1 or all and retry them as
Kafka's clients do, with `min.insync.replicas=2`. Faults: broker crashes
(the log survives, as a process crash leaves the page cache), cut links, slow followers,
lagging metadata, paused group members. Invariants, per-key order among them, are checked
after every event (`invariants`), planted bugs
must be found by the random sweep (`planted`), and a run ends with a liveness check: once
healed, every replica converges on the leader's log and a new write is acknowledged.
"""
