"""`make bench`: run every benchmark module in turn; each prints its own figures.

    python -m bench [MODULE ...] [-- OPTION ...]

A module is listed here once it exists; each has `main() -> None` and bounds its own
work in count and time. Modules in OPT_IN (minutes long) run only when named. Options
after `--` go to the one module named, whose `main(argv)` parses them (e.g.
`python -m bench snapshot_bench -- --topics 10000`)."""

import importlib
import inspect
import sys

MODULES = ["bench.log_bench", "bench.sim_bench", "bench.quorum_bench",
           "bench.controller_bench", "bench.replay_bench", "bench.replay_scale_bench",
           "bench.broker_bench", "bench.group_bench", "bench.resize_bench",
           "bench.rebuild_bench", "bench.tls_bench", "bench.sasl_bench", "bench.authorizer_bench",
           "bench.gate_bench", "bench.cli_bench", "bench.cleaner_bench", "bench.idle_bench",
           "bench.snapshot_bench", "bench.fetch_index_bench"]
OPT_IN = {"bench.snapshot_bench", "bench.fetch_index_bench", "bench.replay_scale_bench"}


def main() -> int:
    args = sys.argv[1:]
    options: list[str] = []
    if "--" in args:
        args, options = args[:args.index("--")], args[args.index("--") + 1:]
    only = args
    if "-h" in only or "--help" in only:
        print(__doc__)
        return 0
    unknown = sorted(set(only) - {name.rsplit(".", 1)[-1] for name in MODULES})
    if unknown:
        print(f"no benchmark {', '.join(unknown)} (known: "
              f"{', '.join(n.rsplit('.', 1)[-1] for n in MODULES)})", file=sys.stderr)
        return 2
    if options and len(only) != 1:
        print("options after -- need exactly one module named", file=sys.stderr)
        return 2
    for name in MODULES:
        short = name.rsplit(".", 1)[-1]
        if (only and short not in only) or (not only and name in OPT_IN):
            if not only:
                print(f"# {name}: opt-in, run with `python -m bench {short}`")
            continue
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            print(f"# {name}: not written yet")
            continue
        if options and not inspect.signature(module.main).parameters:
            print(f"{short} takes no options", file=sys.stderr)
            return 2
        print(f"# {name}")
        if options:
            module.main(options)
        else:
            module.main()
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
