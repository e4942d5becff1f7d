"""`make mutation-authz`: remove one check at a time from the authorization table and
show that the authorization test notices.

For each row of the controller listener that the gate decides (broker/access_table.py,
`Check.GATE`), a scratch copy of the repository (the committed HEAD, `git archive`) gets
that row turned OPEN, and the row's own real-process test
(tests/integration/test_controller_authorization.py: `test_row[<api>]`, or
`test_status_row[<api>]` for a broker's STATUS rows) runs against the copy. A mutant is
killed when that test fails. Prints one line per row and the score; exit 1 when a mutant
survived. Bounded: each run stops after `--timeout` seconds (counted as killed only if the
test failed before)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TABLE = "broker/access_table.py"
TEST = "tests/integration/test_controller_authorization.py"


def gated_rows(source: str) -> list[str]:
    """The apis whose row is `cluster(...)` in the table's source."""
    return re.findall(r'^\s*"(\w+)": cluster\(Op\.\w+\),', source, flags=re.MULTILINE)


def mutate(source: str, api: str) -> str:
    mutated, count = re.subn(rf'^(\s*"{api}": )cluster\(Op\.\w+\),', r"\1OPEN,", source,
                             flags=re.MULTILINE)
    assert count == 1, api
    return mutated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="authz-mutants-") as scratch:
        copy = Path(scratch) / "repo"
        copy.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(copy)], input=archive, check=True)
        original = (copy / TABLE).read_text()
        rows = gated_rows(original)
        survivors = []
        for api in rows:
            (copy / TABLE).write_text(mutate(original, api))
            selector = f"test_row[{api}]"
            if api in ("BrokerStatus",):
                selector = f"test_status_row[{api}]"
            begin = time.monotonic()
            try:
                run = subprocess.run(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                     f"{TEST}::{selector}"], cwd=copy, capture_output=True, text=True,
                    timeout=args.timeout,
                    # the nodes the test starts import the copy too (before the checkout)
                    env={**os.environ, "PYTHONPATH": str(copy)})
                killed = run.returncode == 1  # a failed test; 4/5: not collected
                outcome = "killed" if killed else f"survived (pytest exit {run.returncode})"
                if run.returncode not in (0, 1):
                    outcome += ": " + (run.stdout + run.stderr).strip()[-300:]
            except subprocess.TimeoutExpired:
                killed, outcome = False, "timeout"
            if not killed:
                survivors.append(api)
            print(f"{api:32} {outcome} in {time.monotonic() - begin:.0f} s", flush=True)
        (copy / TABLE).write_text(original)
    print(f"authorization table: {len(rows) - len(survivors)}/{len(rows)} mutants killed")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
