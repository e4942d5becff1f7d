"""`make mutation`: mutation testing of the checkers with mutmut, bounded in time.

Runs mutmut (config: `[tool.mutmut]` in pyproject.toml) in a scratch copy of the
repository, never in the checkout itself: mutmut writes a `mutants/` tree next to the
sources, and other people's work in progress must neither leak into the run nor be
disturbed by it. The copy is the committed HEAD (`git archive`), or with `--worktree`
the working tree's tracked and untracked, not ignored, files.

Three targets, each scored apart: the chaos checker (tools/chaos/checker.py), the
replay checks (tools/replay/checks.py, sequential.py, crossnode.py, snapshots.py) and the simulator
invariants (raft/sim/invariants.py). mutmut runs each mutant against only the tests
that call the mutated function, among the fast Spark-free tests the config selects.

Tests that read a checker's rules from its source (tests.support.rule_sites) are
pointed at the un-mutated copy (KRAFT_RULE_SOURCES), not at mutmut's rewritten one.
Tests that still fail in mutmut's copy before any mutant is active cannot judge a
mutant: they are left out, named, and the run is retried without them. The whole run
stops by itself after `--budget` seconds; mutants not reached by then count as not
killed. Prints the score per target (killed / total, and killed / the mutants not listed
as equivalent) and every mutant not killed with its file:line and the change; a survivor
listed in tests/mutation/equivalent.toml (see tests/mutation/equivalents.py) is marked
`equivalent (reason)`, and a listed mutant no survivor matched any more is named."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from equivalents import Equivalents, load  # this script's directory is on sys.path

REPO = Path(__file__).resolve().parents[2]
MUTMUT = Path(sys.executable).with_name("mutmut")

TARGETS = {
    "chaos checker": ("tools/chaos/checker.py",),
    "replay checks": ("tools/replay/checks.py", "tools/replay/sequential.py",
                      "tools/replay/crossnode.py", "tools/replay/snapshots.py"),
    "sim invariants": ("raft/sim/invariants.py",),
}
KILLED = {1: "killed", 3: "killed", 36: "timeout", 24: "timeout", -24: "timeout",
          152: "timeout", 255: "timeout", 37: "caught by type check"}
STATUS = {0: "survived", 5: "no tests", 33: "no tests", 34: "skipped", None: "not checked"}
FAILED = re.compile(r"^(FAILED|ERROR) (.+?)(?: - (.*))?$", re.MULTILINE)
MAX_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Mutant:
    name: str
    path: str
    status: str  # "equivalent": survived, and listed with `reason`
    reason: str = ""

    @property
    def killed(self) -> bool:
        return self.status in ("killed", "timeout", "caught by type check")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worktree", action="store_true",
                        help="mutate the working tree as it is, not the committed HEAD")
    parser.add_argument("--budget", type=float, default=1500.0,
                        help="seconds for the whole run (default 1500)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--target", action="append", choices=sorted(TARGETS),
                        help="only this target (repeatable; default: all three)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy")
    args = parser.parse_args(argv)
    targets = {name: TARGETS[name] for name in TARGETS if name in (args.target or TARGETS)}
    if not MUTMUT.exists():
        print(f"mutmut is not installed next to {sys.executable}: make mutation installs "
              "it with the dev extra", file=sys.stderr)
        return 2
    start = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="kraft-mutation-"))
    try:
        copy_repo(scratch, worktree=args.worktree)
        print(f"mutmut on {'the working tree' if args.worktree else 'HEAD'} in {scratch}, "
              f"{args.jobs} workers, budget {args.budget:.0f} s", flush=True)
        names = [] if len(targets) == len(TARGETS) else [
            path.removesuffix(".py").replace("/", ".") + ".*"
            for paths in targets.values() for path in paths]
        finished = run_mutmut(scratch, names, deadline=start + args.budget, jobs=args.jobs)
        if finished is None:
            return 1
        mutants = read_results(scratch, targets)
        report(scratch, targets, mutants, finished=finished,
               seconds=time.monotonic() - start)
        return 0
    finally:
        if args.keep:
            print(f"scratch copy kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def copy_repo(scratch: Path, *, worktree: bool) -> None:
    if not worktree:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "HEAD"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive, check=True)
        return
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], check=True, capture_output=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            target = scratch / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def run_mutmut(scratch: Path, names: list[str], *, deadline: float,
               jobs: int) -> bool | None:
    """Run mutmut until it is done (True) or the deadline passes (False); None when it
    cannot run at all. When the un-mutated tree fails tests, leaves them out and retries."""
    log_path = scratch / "mutmut.log"
    for _attempt in range(MAX_ATTEMPTS):
        with log_path.open("w") as log:
            process = subprocess.Popen([str(MUTMUT), "run", "--max-children", str(jobs), *names],
                                       cwd=scratch, stdout=log, stderr=subprocess.STDOUT,
                                       env=_rule_sources(scratch), start_new_session=True)
            try:
                code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                print("budget spent: mutmut stopped, mutants not reached count as not killed")
                return False
        output = log_path.read_text(errors="replace")
        if code == 0:
            return True
        broken = failing_tests(scratch) if "failed to collect stats" in output else {}
        if not broken:
            print(f"mutmut failed (exit {code}); the end of its output:\n{output[-3000:]}")
            return None
        for test, why in sorted(broken.items()):
            print(f"left out: {test} (fails on the un-mutated tree mutmut runs: {why[:90]})")
        _leave_out(scratch / "pyproject.toml", sorted(broken))
    print(f"mutmut failed after {MAX_ATTEMPTS} attempts:\n{output[-3000:]}")
    return None


def failing_tests(scratch: Path) -> dict[str, str]:
    """Selected tests (node ids, or files that fail to collect) failing in mutmut's copy
    with no mutant active: tests that read a checker's source, which mutmut rewrites."""
    config = tomllib.loads((scratch / "pyproject.toml").read_text())["tool"]["mutmut"]
    env = dict(_rule_sources(scratch), MUTANT_UNDER_TEST="",
               PYTHONPATH=str(scratch / "mutants"))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfE", "--no-header", "--tb=no",
         *config["pytest_add_cli_args"], *config["pytest_add_cli_args_test_selection"]],
        cwd=scratch / "mutants", env=env, capture_output=True, text=True)
    return {match.group(2): match.group(3) or "collection error"
            for match in FAILED.finditer(result.stdout)}


def _rule_sources(scratch: Path) -> dict[str, str]:
    """The environment that points tests reading the checkers' rules from their source
    (tests.support.rule_sites) at the un-mutated copy, not at mutmut's rewritten one."""
    return dict(os.environ, KRAFT_RULE_SOURCES=str(scratch))


def _leave_out(pyproject: Path, tests: list[str]) -> None:
    """Deselect `tests` (files: ignore them) in the scratch copy's mutmut config."""
    text = pyproject.read_text()
    key = "pytest_add_cli_args = ["
    if key not in text:
        raise SystemExit("pyproject.toml has no [tool.mutmut] pytest_add_cli_args list")
    extra = "".join(json.dumps(f"--deselect={t}" if "::" in t else f"--ignore={t}") + ", "
                    for t in tests)
    pyproject.write_text(text.replace(key, key + extra, 1))


def read_results(scratch: Path, targets: dict[str, tuple[str, ...]]) -> list[Mutant]:
    mutants = []
    for paths in targets.values():
        for path in paths:
            meta = scratch / "mutants" / f"{path}.meta"
            if not meta.exists():
                continue
            codes = json.loads(meta.read_text())["exit_code_by_key"]
            for name, code in codes.items():
                status = KILLED.get(code) or STATUS.get(code, "suspicious")
                mutants.append(Mutant(name, path, status))
    return mutants


def report(scratch: Path, targets: dict[str, tuple[str, ...]], mutants: list[Mutant], *,
           finished: bool, seconds: float) -> None:
    sources = {path: (scratch / path).read_text() for paths in targets.values()
               for path in paths if (scratch / path).exists()}
    equivalents = Equivalents(load())
    mutants, changes = _judge_survivors(scratch, mutants, sources, equivalents)
    print()
    print(f"{'target':<16} {'killed':>7} {'total':>6} {'score':>7} {'equiv.':>7} "
          f"{'score w/o equiv.':>17}   not killed")
    for target, paths in targets.items():
        rows = [m for m in mutants if m.path in paths]
        missed = Counter(m.status for m in rows if not m.killed and m.status != "equivalent")
        print(f"{target:<16} {_scores(rows)}   "
              + (", ".join(f"{n} {s}" for s, n in sorted(missed.items())) or "-"))
        if len(paths) > 1:
            for path in paths:
                print(f"  {Path(path).name:<14} {_scores([m for m in rows if m.path == path])}")
    print(f"\n{'all mutants checked' if finished else 'stopped at the budget'} in "
          f"{seconds:.0f} s")
    _list_not_killed([m for m in mutants if not m.killed], changes, sources)
    stale = equivalents.unmatched({path for paths in targets.values() for path in paths})
    if finished and stale:
        print(f"\nlisted as equivalent but no survivor matched ({len(stale)}; killed now, or "
              "the code changed): remove them from tests/mutation/equivalent.toml")
        for entry in stale:
            print(f"  {entry}")


def _judge_survivors(scratch: Path, mutants: list[Mutant], sources: dict[str, str],
                     equivalents: Equivalents
                     ) -> tuple[list[Mutant], dict[str, tuple[int | str, str]]]:
    """The mutants, survivors listed as equivalent marked so, and each survivor's line
    and change."""
    judged, changes = [], {}
    for mutant in mutants:
        if mutant.status == "survived":
            line, change, mutated = describe(scratch, mutant, sources[mutant.path])
            changes[mutant.name] = (line, change)
            reason = None if mutated is None else equivalents.reason(
                mutant.path, _display(_function_of(mutant.name)), mutated)
            if reason is not None:
                mutant = dataclasses.replace(mutant, status="equivalent", reason=reason)
        judged.append(mutant)
    return judged, changes


def _scores(rows: list[Mutant]) -> str:
    """killed, total, killed / total, equivalent, killed / (total - equivalent)."""
    killed = sum(m.killed for m in rows)
    equivalent = sum(m.status == "equivalent" for m in rows)

    def percent(part: int, whole: int) -> str:
        return f"{100 * part / whole:6.1f}%" if whole else "    n/a"

    return (f"{killed:>7} {len(rows):>6} {percent(killed, len(rows))} {equivalent:>7} "
            f"{percent(killed, len(rows) - equivalent):>17}")


def _list_not_killed(missed: list[Mutant], changes: dict[str, tuple[int | str, str]],
                     sources: dict[str, str]) -> None:
    if not missed:
        return
    print(f"\nnot killed ({len(missed)}), by file and line:")
    untested: dict[tuple[str, str], int] = Counter()
    rows: list[tuple[str, int, str]] = []
    for mutant in missed:
        if mutant.status == "no tests":  # one line per function no selected test calls
            untested[(mutant.path, _function_of(mutant.name))] += 1
            continue
        line, change = changes.get(mutant.name, ("?", f"(see: mutmut show {mutant.name})"))
        status = f"equivalent ({mutant.reason})" if mutant.reason else mutant.status
        rows.append((mutant.path, line if isinstance(line, int) else 0,
                     f"[{status}]  {change}  ({mutant.name.rsplit('.', 1)[-1]})"))
    for (path, function), count in untested.items():
        line = _function_line(sources[path], function) or 0
        rows.append((path, line, f"[no tests]  {_display(function)}: "
                                 f"{count} mutants, no selected test calls it"))
    for path, line, text in sorted(rows):
        print(f"  {path}:{line}  {text}")


def describe(scratch: Path, mutant: Mutant, source: str) -> tuple[int | str, str, str | None]:
    """The mutated line in the original source, the change (`old -> new`) and the new
    code (None: not found): the mutant's copy of the function against mutmut's copy of
    the original, both found in the mutated file through mutmut's line spans
    (`<file>.spans`)."""
    mutated = scratch / "mutants" / mutant.path
    unknown = "?", f"(see: mutmut show {mutant.name})", None
    try:
        spans = json.loads(Path(f"{mutated}.spans").read_text())["spans"]
    except (OSError, ValueError, KeyError):
        return unknown
    key = mutant.name.rsplit(".", 1)[-1]
    function = key.rsplit("__mutmut_", 1)[0]
    lines = mutated.read_text().splitlines()
    if key not in spans or f"{function}__mutmut_orig" not in spans:
        return unknown

    def copy(name: str) -> list[str]:
        first, last = spans[name]
        return [text.replace(name, function) for text in lines[first - 1:last]]

    original, changed = copy(f"{function}__mutmut_orig"), copy(key)
    matcher = difflib.SequenceMatcher(a=original, b=changed, autojunk=False)
    edit = next((op for op in matcher.get_opcodes() if op[0] != "equal"), None)
    if edit is None:
        return "?", "(no change)", None
    _, i1, i2, j1, j2 = edit
    old = " ".join(text.strip() for text in original[i1:i2])
    new = " ".join(text.strip() for text in changed[j1:j2])
    change = f"{old or '(nothing)'}  ->  {new or '(removed)'}"
    def_line = _function_line(source, _function_of(mutant.name))
    if def_line is None:
        return "?", change, new
    anchor = original[i1].strip() if i1 < len(original) else ""
    return _locate(source, def_line + i1, anchor), change, new


def _locate(source: str, guess: int, text: str) -> int:
    """The line nearest `guess` that reads `text` (decorators or comments above a `def`
    shift mutmut's copy against the source)."""
    lines = source.splitlines()
    for distance in range(12):
        for line in (guess + distance, guess - distance):
            if 1 <= line <= len(lines) and lines[line - 1].strip() == text:
                return line
    return guess


def _function_of(mutant_name: str) -> str:
    """`function` or `ǁClassǁmethod` from a mutmut name (`module.x_function__mutmut_N`,
    `module.xǁClassǁmethod__mutmut_N`)."""
    tail = mutant_name.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[-1]
    return tail[1:] if tail.startswith("xǁ") else tail[2:]


def _display(function: str) -> str:
    """`name` or `Class.method`, from `_function_of`'s `name` or `ǁClassǁmethod`."""
    return function.replace("ǁ", ".").strip(".")


def _function_line(source: str, function: str) -> int | None:
    """Line of the `def` of `function` (as `_function_of` names it)."""
    parts = function.split("ǁ")
    wanted = (parts[1], parts[2]) if len(parts) == 3 else (None, function)
    for top in ast.parse(source).body:
        if isinstance(top, ast.ClassDef) and wanted[0] == top.name:
            for item in top.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) \
                        and item.name == wanted[1]:
                    return item.lineno
        elif isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef) and wanted[0] is None \
                and top.name == wanted[1]:
            return top.lineno
    return None


if __name__ == "__main__":
    sys.exit(main())
