"""`kraft chaos --planted-bug NAME`: the brokers run `kraft node` with one data-plane rule
replaced, so that a chaos run shows its checks (and `kraft replay --history`) catch that
kind of bug in real processes, as `kraft sim --data-plane --planted-bug` shows it in the
model. The production modules have no switch for it: this module replaces the rule in
the namespace of the module that calls it, then runs the node as `tools.cli` would.

- `dp_ack_before_isr`: an acks=all write is acknowledged as soon as it is in the leader's
  own log, without waiting for the high watermark (the ISR). A leader cut off from its
  followers, or killed, then loses writes it acknowledged.

A broker is started as `python -m tools.chaos.planted NAME -m tools.cli ARGS...`
(`interpreter_args`): `tools.cluster.Cluster.start_node` puts interpreter arguments
before `-m tools.cli`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any


def _ack_before_isr() -> None:
    from broker.dataplane import acks
    from broker.kafka.partitions import produce

    real = acks.acks_all_verdict

    def acked_once_in_own_log(current: Any, broker_id: int, *, leader_epoch: int,
                              still_in_log: bool, **rest: Any) -> Any:
        if acks.leadership_lost(current, broker_id, leader_epoch, still_in_log):
            return real(current, broker_id, leader_epoch=leader_epoch,
                        still_in_log=still_in_log, **rest)
        return acks.ACKED  # not waiting for the high watermark, nor checking the ISR

    setattr(produce, "acks_all_verdict", acked_once_in_own_log)  # noqa: B010 (mypy: not exported)


PLANTS: dict[str, Callable[[], None]] = {"dp_ack_before_isr": _ack_before_isr}
PLANTED_BUGS = tuple(PLANTS)


def interpreter_args(name: str) -> tuple[str, ...]:
    """What goes before `-m tools.cli` to start a node with `name` planted."""
    if name not in PLANTS:
        raise ValueError(f"unknown planted bug {name!r} (known: {', '.join(PLANTED_BUGS)})")
    return ("-m", __name__, name)


def main(argv: Sequence[str]) -> int:
    if len(argv) < 3 or argv[0] not in PLANTS or list(argv[1:3]) != ["-m", "tools.cli"]:
        print(f"usage: python -m {__name__} {{{','.join(PLANTED_BUGS)}}} -m tools.cli "
              "ARGS...", file=sys.stderr)
        return 2
    PLANTS[argv[0]]()
    from tools.cli import main as cli_main

    return cli_main(list(argv[3:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
