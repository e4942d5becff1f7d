"""The brokers' data-plane replication rules as pure code (no I/O, no clock of their own):
what a leader answers a follower's fetch, where a diverged follower truncates, how the
leader's high watermark and ISR proposals follow its followers' progress. The Kafka
handlers (`broker.kafka`) and the data-plane simulator (`broker.dataplane.sim`) both run
these same functions."""
