"""`make bench`: run every benchmark module in turn; each prints its own figures.

A module is listed here once it exists; each has `main() -> None` and bounds its own
work in count and time."""

import importlib
import sys

MODULES = ["bench.log_bench", "bench.sim_bench", "bench.quorum_bench",
           "bench.controller_bench", "bench.replay_bench",
           "bench.broker_bench"]


def main() -> int:
    only = sys.argv[1:]
    for name in MODULES:
        if only and name.rsplit(".", 1)[-1] not in only:
            continue
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            print(f"# {name}: not written yet")
            continue
        print(f"# {name}")
        module.main()
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
