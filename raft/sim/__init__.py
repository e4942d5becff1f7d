"""Deterministic cluster simulator for the raft core (Kafka's RaftEventSimulationTest model).

- `cluster`: nodes running the real `RaftCore`, one event heap, one seed; drives each
  node like the Trio shell (persist, flush, then send; fsync latency; drifting clocks).
- `network`: latency distribution, loss, duplication, reordering, partitions.
- `disk`: `MemoryLog` plus a quorum-state store; a crash keeps only what was flushed.
- `invariants`: safety checks run after every event.
- `faults`: random fault schedules; `sweep`: one run per seed, liveness after the heal.
- `scenarios`: the RaftEventSimulationTest scenarios and Raft's Figure 8.
- `trace`: the last events of a run, printed on a violation.

`kraft sim` (tools/commands/sim.py) runs sweeps from the command line.
"""
