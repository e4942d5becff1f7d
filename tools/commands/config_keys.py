"""`kraft config-keys [--json]`: every node configuration key (`tools.config.KEYS`) with
its default, where it comes from (Kafka, kraft-py, test-only), its old names and what it
does. The text output is the Markdown table in docs/configuration.md;
`tests/unit/tools/test_config_reference.py` checks that the two match."""

from __future__ import annotations

import argparse
import json

from tools.config import IGNORED_KAFKA_KEYS, KEYS, REQUIRED, reference_table


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object per key")


def run(args: argparse.Namespace) -> int:
    if not args.json:
        print(reference_table())
        return 0
    for key in KEYS:
        default = None if key.default is REQUIRED else key.default
        print(json.dumps({"key": key.name, "default": default,
                          "required": key.default is REQUIRED, "origin": key.origin,
                          "aliases": list(key.aliases), "doc": key.doc}))
    for name in sorted(IGNORED_KAFKA_KEYS):
        print(json.dumps({"key": name, "origin": "Kafka", "ignored": True}))
    return 0
