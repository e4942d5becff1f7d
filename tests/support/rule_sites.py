"""Where the checkers' rules fire, read from their source (no import, no execution).

A *site* is one place in a checker that reports a violation: a rule name (a chaos
`Violation`'s kind, or a replay check's name) and the message or reason text that place
writes, as a pattern (`Site.matches`). A message chosen by a conditional expression
(`a if c else b`) is two sites: two branches that can fail separately. The planted-rule
tests match every reported message against these sites, so a rule added to a checker
without a test planting it shows up as a site nothing matched.

What is recognised:
* tools/chaos/checker.py: `Violation(kind="...", message=...)`.
* tools/replay/sequential.py: `flag("check", offset, epoch, data, kind, fields, reason)`.
* tools/replay/checks.py: `("violation", "check", node, offset, epoch, hash, reason, ...)`
  rows, and the names of `NODE_CHECKS`.
* tools/replay/crossnode.py, checkpoint.py: in a function that builds a
  `CheckResult(name=...)` (or one it calls), each reason: a `"reason": ...` dict entry,
  the reason argument of `_example(version, reason)`, and the `(version, reason)` pairs
  added to a list named `bad`.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# The sources read: this checkout's, or (KRAFT_RULE_SOURCES) an un-mutated copy while
# `make mutation` runs the tests against a tree whose checkers mutmut has rewritten.
ROOT = Path(os.environ.get("KRAFT_RULE_SOURCES") or Path(__file__).resolve().parents[2])
CHAOS_CHECKER = ROOT / "tools" / "chaos" / "checker.py"
REPLAY_SOURCES = tuple(ROOT / "tools" / "replay" / name for name in (
    "sequential.py", "checks.py", "crossnode.py", "checkpoint.py", "snapshots.py"))


@dataclass(frozen=True, slots=True)
class Site:
    rule: str
    path: str  # relative to the repository
    line: int  # where the violation is reported (the call or row that carries it)
    pattern: str  # a regular expression the whole message matches

    def matches(self, rule: str, message: str) -> bool:
        return rule == self.rule and re.fullmatch(self.pattern, message, re.DOTALL) is not None

    def __str__(self) -> str:
        return f"{self.rule} ({self.path}:{self.line})"


def _alternatives(node: ast.expr, assigned: dict[str, ast.expr]) -> list[str]:
    """The patterns of a message expression, one per branch of a conditional in it."""
    if isinstance(node, ast.IfExp):
        return _alternatives(node.body, assigned) + _alternatives(node.orelse, assigned)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [re.escape(node.value)]
    if isinstance(node, ast.JoinedStr):
        return ["".join(re.escape(str(part.value)) if isinstance(part, ast.Constant) else ".*?"
                        for part in node.values)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [left + right for left in _alternatives(node.left, assigned)
                for right in _alternatives(node.right, assigned)]
    if isinstance(node, ast.BoolOp):  # `detail or "fallback"`: one site, either text
        choices = [p for value in node.values for p in _alternatives(value, assigned)]
        return ["(?:" + "|".join(choices) + ")"]
    if isinstance(node, ast.Name) and node.id in assigned:
        return _alternatives(assigned[node.id], assigned)
    return [".*"]  # computed elsewhere: any text


def _sites(rule: str, at: ast.AST, message: ast.expr, path: Path,
           assigned: dict[str, ast.expr]) -> list[Site]:
    """The sites of the violation reported at `at` (its line) with this message."""
    where = path.relative_to(ROOT).as_posix()
    return [Site(rule, where, getattr(at, "lineno", 0), pattern)
            for pattern in _alternatives(message, assigned)]


def _text(node: ast.expr | None, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else None


def _module_constants(tree: ast.Module) -> dict[str, str]:
    return {target.id: stmt.value.value for stmt in tree.body if isinstance(stmt, ast.Assign)
            for target in stmt.targets if isinstance(target, ast.Name)
            and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)}


def _assignments(function: ast.AST) -> dict[str, ast.expr]:
    """name -> value of the names a function assigns exactly once (`reason = ...`)."""
    seen: dict[str, list[ast.expr]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            seen.setdefault(node.targets[0].id, []).append(node.value)
    return {name: values[0] for name, values in seen.items() if len(values) == 1}


def chaos_sites(path: Path = CHAOS_CHECKER) -> list[Site]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    sites = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called_name(node) == "Violation":
            kind, message = _text(_keyword(node, "kind"), {}), _keyword(node, "message")
            if kind is None or message is None:
                raise ValueError(f"{path}:{node.lineno}: a Violation without a literal kind "
                                 "and a message")
            sites += _sites(kind, node, message, path, {})
    return sites


def _functions(tree: ast.Module) -> Iterator[ast.FunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            yield node


def _check_names(tree: ast.Module) -> dict[str, str]:
    """function -> the check it reports, for functions building `CheckResult(name=...)`
    and the module's functions they call."""
    constants = _module_constants(tree)
    owner: dict[str, str] = {}
    calls: dict[str, set[str]] = {}
    for function in _functions(tree):
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            calls.setdefault(function.name, set()).add(_called_name(node) or "")
            if _called_name(node) == "CheckResult":
                name = _text(_keyword(node, "name"), constants)
                if name is not None:
                    owner.setdefault(function.name, name)
    for caller, callees in calls.items():
        for callee in callees:
            if caller in owner and callee not in owner and callee in calls:
                owner[callee] = owner[caller]
    return owner


def _reasons(function: ast.FunctionDef) -> Iterator[ast.expr]:
    """The reasons a cross-node or checkpoint check writes into its examples."""
    for node in ast.walk(function):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if _text(key, {}) == "reason":
                    yield value
        elif isinstance(node, ast.Call) and _called_name(node) == "_example" \
                and len(node.args) == 2:
            yield node.args[1]
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) \
                and node.target.id == "bad":
            for pair in ast.walk(node.value):
                if isinstance(pair, ast.Tuple) and len(pair.elts) == 2:
                    yield pair.elts[1]


def _is_text(node: ast.expr, assigned: dict[str, ast.expr]) -> bool:
    """A reason written here, not one passed through (a parameter, a loop variable)."""
    if isinstance(node, ast.Name):
        return node.id in assigned and _is_text(assigned[node.id], assigned)
    return isinstance(node, ast.Constant | ast.JoinedStr | ast.IfExp | ast.BinOp)


def replay_sites(paths: tuple[Path, ...] = REPLAY_SOURCES) -> list[Site]:
    sites: list[Site] = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owners = _check_names(tree)
        for function in _functions(tree):
            assigned = _assignments(function)
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and _called_name(node) == "flag" \
                        and len(node.args) == 7 and _text(node.args[0], {}) is not None:
                    sites += _sites(str(_text(node.args[0], {})), node, node.args[6], path,
                                    assigned)
                elif isinstance(node, ast.Tuple) and len(node.elts) >= 7 \
                        and _text(node.elts[0], {}) == "violation" \
                        and _text(node.elts[1], {}) is not None:
                    sites += _sites(str(_text(node.elts[1], {})), node, node.elts[6], path,
                                    assigned)
            if function.name in owners:
                for reason in _reasons(function):
                    if _is_text(reason, assigned):
                        sites += _sites(owners[function.name], reason, reason, path, assigned)
    return sorted(set(sites), key=lambda s: (s.path, s.line, s.pattern))


def replay_check_names(paths: tuple[Path, ...] = REPLAY_SOURCES) -> set[str]:
    """Every check the replay reports: the keys of `NODE_CHECKS` and the names given to
    `CheckResult`."""
    names: set[str] = set()
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = _module_constants(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "NODE_CHECKS" for t in node.targets) \
                    and isinstance(node.value, ast.Dict):
                names |= {str(_text(k, {})) for k in node.value.keys}
            elif isinstance(node, ast.Call) and _called_name(node) == "CheckResult":
                name = _text(_keyword(node, "name"), constants)
                if name is not None:
                    names.add(name)
    return names


def chaos_kinds(path: Path = CHAOS_CHECKER) -> set[str]:
    return {site.rule for site in chaos_sites(path)}
