"""The `kraft` command line: one entry point, Kafka-like verbs.

Each verb lives in `tools.commands.<module>` with `configure(parser)` and `run(args) -> int`;
modules are imported only when their verb runs (pyspark and trio are slow to import). The
start is most of a short verb's time, so a verb imports what its path uses: one that only
asks the controllers (`kraft quorum describe`, `kraft topics` with `--cluster`) loads
neither kio, Trio nor the node configuration (tests/unit/tools/test_cli_startup.py;
bench/cli_bench.py times them).
Exit codes: 0 ok, 1 a check or request failed, 2 usage or bad input, 3 (`kraft node`) a
broken Raft invariant stopped the node, 128 + the signal (130, 143) a verb that stops on
SIGINT or SIGTERM (`tools.errors.stop_on_signals`) stopped by one. A closed stdout
(`| head`) or a path that cannot be read or written is one line (or none), never a
traceback. `--log-level` defaults to
WARNING, and to INFO for `kraft node` (a server's log says what it does); `kraft
--version` prints the version.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from tools.errors import CommandError, StoppedBySignal
from tools.logs import configure_logging

VERBS: dict[str, tuple[str, str]] = {
    # verb: (module in tools.commands, one-line help)
    "format": ("format", "format a node's log directory (like kafka-storage.sh format)"),
    "storage": ("storage", "show a node's log directory (like kafka-storage.sh info)"),
    "config-keys": ("config_keys", "list the node configuration keys, their defaults and "
                    "meanings"),
    "random-uuid": ("format", "print a new random Uuid"),
    "dump-log": ("dump_log", "print every batch and record of a metadata log"),
    "metadata-shell": ("metadata_shell", "browse a node's metadata image as a file tree "
                       "(like kafka-metadata-shell.sh)"),
    "node": ("node", "run one node in the foreground"),
    "quorum": ("quorum", "start, stop, describe and drive a local multi-process cluster"),
    "features": ("features", "describe and change metadata.version and kraft.version "
                 "(like kafka-features.sh)"),
    "topics": ("topics", "create, describe, delete and alter topics"),
    "configs": ("configs", "describe and alter topic and broker configs (like "
                "kafka-configs.sh)"),
    "users": ("users", "describe and alter users' SCRAM credentials (like kafka-configs.sh "
              "--entity-type users)"),
    "acls": ("acls", "add, remove and list ACLs (like kafka-acls.sh)"),
    "produce": ("produce", "write records to a partition as an idempotent producer, by "
                "topic ID (like kafka-console-producer.sh)"),
    "consume": ("consume", "print a topic's records as a consumer-group member (like "
                "kafka-console-consumer.sh), in per-key order with --ordered"),
    "delete-records": ("delete_records", "delete partitions' records below given offsets "
                       "(like kafka-delete-records.sh)"),
    "log-dirs": ("log_dirs", "the brokers' log directories and partition sizes (like "
                 "kafka-log-dirs.sh)"),
    "leader-election": ("leader_election", "elect preferred or unclean partition leaders "
                        "(like kafka-leader-election.sh)"),
    "reassign-partitions": ("reassign_partitions", "move partition replicas between "
                            "brokers (like kafka-reassign-partitions.sh)"),
    "consumer-groups": ("consumer_groups", "list, describe, delete and reset consumer "
                        "groups (like kafka-consumer-groups.sh)"),
    "sim": ("sim", "deterministic simulation sweep of the raft core"),
    "replay": ("replay", "Spark replay of every node's log, with consistency checks"),
    "demo": ("demo", "the end-to-end demo run by `make demo`"),
    "chaos": ("chaos", "seeded fault injection against a local cluster, with a checked history"),
    "order-check": ("order_check", "check per-key order across ordered producers' and "
                    "consumers' --json outputs"),
    "completion": ("completion", "print a bash or zsh completion script"),
}


# help of the options many verbs share, for those a verb gives none of its own
COMMON_HELP = {
    "json": "print JSON instead of text",
    "cluster": "a local cluster's directory (made by kraft quorum start)",
    "timeout": "give up after this many seconds",
    "node": "the node's id",
}
# what each verb's (and action's) --help ends with: one example, run as written by
# tests/unit/tools/test_cli_help.py's parse of it
EXAMPLES = {
    "format": "kraft format --dir /tmp/n1 --node-id 1 --cluster-id MkU3OEVBNTcwNTJENDM2Qg",
    "storage": "kraft storage info --dir /tmp/n1",
    "storage info": "kraft storage info --dir /tmp/n1 --json",
    "config-keys": "kraft config-keys --json",
    "random-uuid": "kraft random-uuid",
    "dump-log": "kraft dump-log --dir /tmp/c1/node-1/data",
    "metadata-shell": "kraft metadata-shell --cluster /tmp/c1 -- ls /topics",
    "node": "kraft node --config /tmp/c1/node-1/node.toml",
    "quorum": "kraft quorum start --cluster /tmp/c1 --voters 3 --brokers 3",
    "quorum start": "kraft quorum start --cluster /tmp/c1 --voters 3 --brokers 3",
    "quorum stop": "kraft quorum stop --cluster /tmp/c1",
    "quorum kill": "kraft quorum kill --cluster /tmp/c1 --node 1 --signal TERM",
    "quorum restart": "kraft quorum restart --cluster /tmp/c1 --node 1",
    "quorum describe": "kraft quorum describe --cluster /tmp/c1 --status",
    "quorum demo": "kraft quorum demo --cluster /tmp/qdemo",
    "quorum append": "kraft quorum append --cluster /tmp/c1 --count 1000 --batch 100",
    "quorum snapshot": "kraft quorum snapshot --cluster /tmp/c1",
    "quorum add-node": "kraft quorum add-node --cluster /tmp/c1",
    "quorum add-controller": "kraft quorum add-controller --cluster /tmp/c1 --node 4",
    "quorum remove-controller": "kraft quorum remove-controller --cluster /tmp/c1 --node 3 "
                                "--directory-id z39fME8-Sra6pXGSVk5Yhw",
    "features": "kraft features --cluster /tmp/c1 describe",
    "features describe": "kraft features --cluster /tmp/c1 describe --json",
    "features upgrade": "kraft features --cluster /tmp/c1 upgrade --feature kraft.version=1",
    "features downgrade": "kraft features --bootstrap-server 127.0.0.1:9092 downgrade "
                          "--metadata 0.1-IV0 --dry-run",
    "features disable": "kraft features --cluster /tmp/c1 disable --feature kraft.version "
                        "--dry-run",
    "topics": "kraft topics --cluster /tmp/c1 --create --topic orders --partitions 3 "
              "--replication-factor 2",
    "configs": "kraft configs --cluster /tmp/c1 --entity-type topics --entity-name orders "
               "--alter --add-config retention.ms=60000",
    "users": "kraft users --cluster /tmp/c1 --alter --entity-name alice --add-config "
             "'SCRAM-SHA-256=[password=secret]'",
    "acls": "kraft acls --cluster /tmp/c1 --add --allow-principal User:alice --producer "
            "--topic orders",
    "produce": "kraft produce --cluster /tmp/c1 --topic orders --key-separator : "
               "user1:hello user2:world",
    "consume": "kraft consume --cluster /tmp/c1 --topic orders --from-beginning "
               "--max-messages 10 --property print.key=true",
    "delete-records": "kraft delete-records --cluster /tmp/c1 --offset-json-file "
                      "offsets.json",
    "log-dirs": "kraft log-dirs --cluster /tmp/c1 --describe --topic-list orders",
    "leader-election": "kraft leader-election --cluster /tmp/c1 --election-type PREFERRED "
                       "--all-topic-partitions",
    "reassign-partitions": "kraft reassign-partitions --cluster /tmp/c1 "
                           "--reassignment-json-file move.json --execute",
    "consumer-groups": "kraft consumer-groups --cluster /tmp/c1 --describe --group billing",
    "sim": "kraft sim --voters 5 --observers 2 --seeds 100",
    "replay": "kraft replay --cluster /tmp/c1 --out /tmp/c1/replay-report",
    "demo": "kraft demo --cluster /tmp/demo1 --skip-replay",
    "chaos": "kraft chaos --cluster /tmp/chaos1 --duration 60 --seed 11 --faults kill,pause",
    "order-check": "kraft order-check --produced p1.jsonl --consumed c1.jsonl c2.jsonl",
    "completion": "kraft completion bash",
}


# verbs whose clients take a client properties file (`kraft quorum` adds its own to the
# actions that take addresses): TLS settings, as Kafka tools' --command-config
COMMAND_CONFIG_VERBS = ("topics", "configs", "acls", "produce", "consume", "users",
                        "consumer-groups", "leader-election", "reassign-partitions")
# verbs that read and write records as an application does: with --cluster DIR they use
# the cluster's unprivileged client.properties; every other verb its admin.properties
DATA_VERBS = ("produce", "consume")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
DEFAULT_LOG_LEVELS = {"node": "INFO"}  # every other verb: WARNING
PACKAGE = "kraft-py"


def version() -> str:
    """The installed package's version (pyproject.toml), or "unknown" when run from a
    source tree that was never installed."""
    from importlib import metadata  # here, not above: importing it cost every verb 30-60 ms
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "unknown"


def _log_level(text: str) -> str:
    if text.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(LOG_LEVELS)} (any case), got {text!r}")
    return text.upper()


class _VersionAction(argparse.Action):
    """`--version`, as argparse's own, with the version looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"kraft {version()}")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        raise CommandError(f"{self.prog}: {message}", exit_code=2)


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog="kraft", description="kraft-py: a KRaft-style metadata quorum")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    parser.add_argument("--log-level", type=_log_level, default=None, metavar="LEVEL",
                        help=f"{'|'.join(LOG_LEVELS)}; default WARNING, INFO for kraft node")
    parser.add_argument("--version", action=_VersionAction)
    subparsers = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)
    for name, (module_name, help_text) in VERBS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        if name == verb:  # only the chosen verb's module is imported
            module = importlib.import_module(f"tools.commands.{module_name}")
            module.configure(sub, name)
            sub.set_defaults(run=module.run)
            if name in COMMAND_CONFIG_VERBS:
                sub.add_argument("--command-config", metavar="FILE",
                                 help="client properties (security.protocol, ssl.*, "
                                 "sasl.mechanism, sasl.jaas.config), as "
                                 "Kafka's tools; default with --cluster: its "
                                 + ("client.properties" if name in DATA_VERBS
                                    else "admin.properties") + " when it has one")
            _document(sub, name)
    return parser


def _document(parser: argparse.ArgumentParser, path: str) -> None:
    """Give `parser` (the verb or action `path`) and its actions below the shared help
    where an option has none, and its example as the last line of --help."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                _document(sub, f"{path} {name}")
        elif action.help is None and action.dest in COMMON_HELP:
            action.help = COMMON_HELP[action.dest]
    example = EXAMPLES.get(path)
    if example is not None:
        parser.epilog = f"{parser.epilog} " if parser.epilog else ""
        parser.epilog += f"example: {example}"


def _client_tls(args: argparse.Namespace) -> None:
    """TLS for the verb's clients, from `--command-config`, or a `--cluster`'s own
    identity (`tools.cluster.cluster_properties`: its admin's, but for the data verbs):
    the context is `args.client_ssl` (None: plaintext), and the SASL login of
    `--command-config` `args.client_sasl` (None: none), which the verb hands to its
    clients: the msgpack ones take the context, the Kafka-protocol ones (`tools.client`)
    both."""
    args.client_ssl = args.client_sasl = None
    command_config = getattr(args, "command_config", None)
    cluster = getattr(args, "cluster", None)
    if args.verb == "node" or not (command_config or isinstance(cluster, str)):
        return
    from pathlib import Path

    from tools.cluster import cluster_properties
    from tools.quorum_client import ClusterError, client_ssl_context
    path = Path(command_config) if command_config else \
        cluster_properties(str(cluster), admin=args.verb not in DATA_VERBS)
    if path is not None:
        try:
            args.client_ssl = client_ssl_context(path)
        except ClusterError as exc:
            raise CommandError(f"--command-config: {exc}" if command_config else str(exc),
                               exit_code=2) from None
    if command_config:  # SASL is only ever read from a properties file
        from tools.client.sasl import SaslConfigError, command_line_sasl
        try:
            args.client_sasl = command_line_sasl(command_config)
        except SaslConfigError as exc:
            raise CommandError(f"--command-config: {exc}", exit_code=2) from None


def _keep_hypothesis_out() -> None:
    """kio registers hypothesis strategies for its wire types when it is imported where
    hypothesis can be imported (the test extra installs it), and hypothesis then maps
    every Unicode code point, caching the map under `./.hypothesis`: 1.5 s of CPU at
    each broker's start (0.4 s without) and a stray directory in its working directory.
    No verb uses hypothesis, so a process that has not imported it (a test calling
    `main` has) never will."""
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]  # None: import fails


def main(argv: Sequence[str] | None = None) -> int:
    _keep_hypothesis_out()
    argv = list(sys.argv[1:] if argv is None else argv)
    verb = next((a for a in argv if a in VERBS), None)
    wants_json = "--json" in argv
    try:
        args = build_parser(verb).parse_args(argv)
        configure_logging(args.log_format,
                          args.log_level or DEFAULT_LOG_LEVELS.get(args.verb, "WARNING"))
        _client_tls(args)
        code: int = args.run(args)
        return code
    except CommandError as exc:
        if wants_json:
            print(json.dumps({"error": str(exc), "exit_code": exc.exit_code}))
        else:
            print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except StoppedBySignal as exc:
        print(f"{verb}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        logging.getLogger(__name__).warning("interrupted")
        return 130
    except BrokenPipeError:  # `kraft ... | head`: the reader left, nothing is lost
        # Python would report the pipe again flushing stdout at exit: point it nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (PermissionError, FileNotFoundError, IsADirectoryError,
            NotADirectoryError) as exc:  # a path given on the command line
        if exc.filename is None:
            raise
        print(f"error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
