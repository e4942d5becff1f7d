"""Switch the checkers' rules off one at a time and see which tests notice.

    python -m tests.support.disable_rules --ref HEAD --out /tmp/rules.json [--only chaos]
        [--without-spark]

For every site `tests.support.rule_sites` finds (a place where the chaos checker or a
replay check reports a violation), one *mutant*: a copy of the tree at `--ref` (`git
archive`, so the checkout itself is never touched) where that site no longer reports,
everything else unchanged. The tests of that checker (tests/unit/tools for the chaos
checker, tests/replay for the replay) then run in the copy, with the copy first on
PYTHONPATH (the Spark workers import it too), and the mutant is *caught* if a test fails.

A site is switched off by turning the statement that reports it into `None if True else
<statement>` (or `return [] if True else [...]`); the sites where that is not the whole
rule (a message chosen by a condition, a count kept apart from the examples) have a
written patch in `PATCHES`. A few narrower mutants (`EXTRA`) switch off one half of a
rule's condition.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.rule_sites import ROOT, Site, chaos_sites, replay_sites

TESTS = {"chaos": ["tests/unit/tools"], "replay": ["tests/replay"]}


@dataclass(frozen=True, slots=True)
class Mutant:
    name: str
    family: str  # chaos | replay
    path: str
    old: str  # replaced once; it must occur exactly once in the file
    new: str


# (path, a piece of the site's reason pattern) -> (old, new)
PATCHES: dict[tuple[str, str], tuple[str, str]] = {
    ("tools/replay/sequential.py", "duplicate"): (
        "        if gap:\n            previous = self.prev_offset",
        "        if gap and offset != self.prev_offset:\n            previous = self.prev_offset"),
    ("tools/replay/sequential.py", "gap:"): (
        "        if gap:\n            previous = self.prev_offset",
        "        if gap and offset == self.prev_offset:\n            previous = self.prev_offset"),
    ("tools/replay/crossnode.py", "same\\ offset\\ and\\ epoch"): (
        "conflicts = [v for group in by_epoch.values() if len(group) > 1 for v in group]",
        "conflicts: list[Version] = []"),
    ("tools/replay/crossnode.py", "where\\ both\\ hold"): (
        "in prefix_mismatches(runs[node_a], runs[node_b]):",
        "in prefix_mismatches(runs[node_a], runs[node_b])[:0]:"),
    ("tools/replay/crossnode.py", "committed\\ records\\ lost"): (
        "examples += _short_logs(comparison)", "examples += []"),
    ("tools/replay/crossnode.py", "different\\ committed\\ records"): (
        "if len(committed) > 1:  # impossible by majority", "if False:  # impossible by majority"),
    ("tools/replay/crossnode.py", "where\\ the\\ committed\\ record"): (
        "for v in group if id(v) not in chosen and v.epoch >= top]",
        "for v in group if id(v) not in chosen and v.epoch >= top and False]"),
    ("tools/replay/checkpoint.py", "but\\ the\\ replayed"): (
        "if expected == checkpoint.image_hash:",
        "if expected == checkpoint.image_hash or expected is not None:"),
    ("tools/replay/checkpoint.py", "ends\\ before"): (
        "if expected == checkpoint.image_hash:",
        "if expected == checkpoint.image_hash or expected is None:"),
}

EXTRA = [
    Mutant("stale_read: describe by ID, its other-name half off", "chaos",
           "tools/chaos/checker.py",
           "if got_id != asked or (origin is not None and origin.args.get(\"name\") != got_name):",
           "if got_id != asked:"),
    Mutant("stale_read: describe by ID, its other-ID half off", "chaos",
           "tools/chaos/checker.py",
           "if got_id != asked or (origin is not None and origin.args.get(\"name\") != got_name):",
           "if origin is not None and origin.args.get(\"name\") != got_name:"),
    Mutant("stale_partition: no due time is never overdue", "chaos", "tools/chaos/checker.py",
           "if staged.due_ms is None or staged.due_ms + OVERDUE_GRACE_MS < disk.observed_ms:",
           "if staged.due_ms is not None and staged.due_ms + OVERDUE_GRACE_MS < disk.observed_ms:"),
    Mutant("deleted_data: a failed produce counts as written", "chaos", "tools/chaos/checker.py",
           "if op is None or not op.may_have_happened:", "if op is None:"),
    Mutant("topic_ids_valid: the sentinel is not reserved", "replay",
           "tools/replay/sequential.py",
           "RESERVED = frozenset({ZERO_UUID.to_bytes(), METADATA_TOPIC_ID.to_bytes()})",
           "RESERVED = frozenset({ZERO_UUID.to_bytes()})"),
]

_PREFIXES = ("violations.append(", "rows.append(", "self.flag(", "flag(")


def _line_mutant(site: Site, family: str) -> Mutant:
    lines = (ROOT / site.path).read_text(encoding="utf-8").splitlines()
    line = lines[site.line - 1]
    body = line.lstrip()
    indent = line[:len(line) - len(body)]
    if body.startswith(_PREFIXES):
        new = f"{indent}None if True else {body}"
    elif m := re.match(r"return (True, )?\[", body):
        kept = m.group(1) or ""
        new = f"{indent}return {kept}[] if True else {body[len('return ' + kept):]}"
    else:
        raise ValueError(f"no way to switch off {site} ({body!r}): add it to PATCHES")
    # the lines above make the old text unique within the file
    old = "\n".join(lines[max(0, site.line - 3):site.line])
    replaced = "\n".join([*lines[max(0, site.line - 3):site.line - 1], new])
    return Mutant(str(site), family, site.path, old, replaced)


def mutants() -> list[Mutant]:
    out = []
    for family, sites in (("chaos", chaos_sites()), ("replay", replay_sites())):
        for site in sites:
            patch = next((p for (path, piece), p in PATCHES.items()
                          if path == site.path and piece in site.pattern), None)
            if patch is None:
                out.append(_line_mutant(site, family))
            else:
                out.append(Mutant(f"{site} [{site.pattern[:40]}]", family, site.path, *patch))
    return out + EXTRA


def _tree(ref: str, into: Path) -> Path:
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _apply(tree: Path, mutant: Mutant) -> None:
    path = tree / mutant.path
    text = path.read_text(encoding="utf-8")
    if text.count(mutant.old) != 1:
        raise ValueError(f"{mutant.name}: the patched text occurs {text.count(mutant.old)} "
                         f"times in {mutant.path}")
    mutated = text.replace(mutant.old, mutant.new)
    compile(mutated, str(path), "exec")
    path.write_text(mutated, encoding="utf-8")


def _run_tests(tree: Path, family: str) -> tuple[int, list[str], float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider",
                           *TESTS[family]], cwd=tree, env=env, capture_output=True, text=True)
    failed = sorted({line.split(" ", 1)[1].split(" - ")[0] for line in done.stdout.splitlines()
                     if line.startswith(("FAILED ", "ERROR "))})
    return done.returncode, failed, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--ref", default="HEAD")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", choices=sorted(TESTS))
    parser.add_argument("--without-spark", action="store_true",
                        help="run the replay's plants in process only (tests/support/"
                             "serial_spark.py), not through Spark: seconds, not minutes")
    args = parser.parse_args()
    if args.without_spark:
        TESTS["replay"] = [*TESTS["replay"], "-m", "not spark"]
    chosen = [m for m in mutants() if args.only in (None, m.family)]
    work = Path(tempfile.mkdtemp(prefix="disable-rules-"))
    base = _tree(args.ref, work / "base")
    report: dict[str, object] = {"ref": args.ref, "mutants": []}
    for family in sorted({m.family for m in chosen}):
        code, failed, seconds = _run_tests(base, family)
        print(f"baseline {family}: exit {code}, {len(failed)} failed, {seconds:.0f} s",
              flush=True)
        report[f"baseline_{family}"] = {"exit": code, "failed": failed}
    results: list[dict[str, object]] = []
    for mutant in chosen:
        tree = work / "mutant"
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(base, tree)
        _apply(tree, mutant)
        code, failed, seconds = _run_tests(tree, mutant.family)
        caught = code != 0 and bool(failed)
        results.append({"mutant": mutant.name, "family": mutant.family, "caught": caught,
                        "exit": code, "failed": failed})
        print(f"{'caught  ' if caught else 'SURVIVED'} {mutant.name} ({seconds:.0f} s): "
              f"{failed[:3]}", flush=True)
        args.out.write_text(json.dumps({**report, "mutants": results}, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    survived = [r["mutant"] for r in results if not r["caught"]]
    print(f"{len(results) - len(survived)} of {len(results)} caught; survived: {survived}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
