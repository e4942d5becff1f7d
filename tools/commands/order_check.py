"""`kraft order-check`: check per-key order across ordered producers' and consumers'
outputs (tools/client/order_check.py), as the tests of ordered delivery do.

    kraft order-check --produced FILE [FILE ...] --consumed FILE [FILE ...] [--json]

Each file holds the `--json` lines of one `kraft produce --ordered` or `kraft consume
--ordered` run (other lines are skipped). It prints the counts (delivered, acknowledged,
out of order, missing (records without a key included), redelivered) and the first
out-of-order deliveries. Exit 0 when every acknowledged record arrived and no key went
backwards; 1 otherwise; 2 when a file cannot be read.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tools.client.order_check import check_outputs, read_json_lines
from tools.errors import CommandError


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--produced", nargs="+", required=True, type=Path, metavar="FILE",
                        help="outputs of kraft produce --ordered --json")
    parser.add_argument("--consumed", nargs="+", required=True, type=Path, metavar="FILE",
                        help="outputs of kraft consume --ordered --json")
    parser.add_argument("--json", action="store_true")


def _read(paths: list[Path]) -> list[list[dict[str, object]]]:
    try:
        return [read_json_lines(path) for path in paths]
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot read the outputs: {exc}", exit_code=2) from None


def run(args: argparse.Namespace) -> int:
    report = check_outputs(_read(args.produced), _read(args.consumed))
    if args.json:
        print(json.dumps({"ok": report.ok, "delivered": report.delivered,
                          "acknowledged": report.acknowledged,
                          "out_of_order": report.out_of_order_count,
                          "missing": report.missing_count,
                          "redelivered": report.redeliveries,
                          "examples": report.out_of_order}))
    else:
        print(("ok: " if report.ok else "FAILED: ") + report.summary())
        for example in report.out_of_order:
            print(f"  {example}")
    return 0 if report.ok else 1
