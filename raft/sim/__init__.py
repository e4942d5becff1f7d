"""Deterministic cluster simulator for the raft core (Kafka's RaftEventSimulationTest model).

- `cluster`: nodes running the real `RaftCore`, one event heap, one seed; drives each
  node like the Trio shell (persist, flush, then send; fsync latency; drifting clocks),
  including what the shell's transport reports: a crashed voter's connections lost,
  then refused at each reconnect (a paused or cut-off node's: nothing).
- `network`: latency distribution, loss, duplication, reordering, long delays, frames
  corrupted on the wire (through the real decoders), partitions and one-way cuts.
- `disk`: `MemoryLog` plus a quorum-state store and a snapshot store; a crash keeps only
  what was flushed (and whole snapshots), tearing the write in progress now and then
  (recovered by the real segment scan); the log notes every tail it truncates (for the
  divergence counts) and keeps a ledger of every write and fsync, which the invariants
  judge by.
- `snapshots`: each node's state machine (the committed records it applied) and its
  seeded snapshot policy: snapshots every few records, log starts moved at once, later
  or never, so nodes behind the leader's log start catch up by FetchSnapshot (KIP-630).
- `invariants`: safety checks run after every event.
- `faults`: random fault schedules (a background stream and a leader chaser); `sweep`:
  one run per seed, liveness and convergence after the heal, worker processes, the
  depth summary (elections, divergences, snapshots and snapshot fetches).
- `scenarios`: the RaftEventSimulationTest scenarios, Raft's Figure 8 and a forced
  multi-epoch divergence.
- `planted`: deliberate core bugs, to show the checkers catch them.
- `trace`: the last events of a run, printed on a violation.

`kraft sim` (tools/commands/sim.py) runs sweeps from the command line.
"""
