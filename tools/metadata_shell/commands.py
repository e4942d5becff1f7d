"""The shell's commands, run on a tree: each returns its output instead of printing it,
so the one-shot and interactive front ends (`tools.metadata_shell.session`) and the
tests share one implementation.

Errors name the command and the path as typed ("cat: x: no such file or directory") and
set the status: 1 for a path that failed, 2 for a command used wrongly (as the `kraft`
exit codes in `tools/cli.py`). A command given several paths goes on after a failed one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from tools.metadata_shell.paths import ROOT, child_path, lookup, resolve
from tools.metadata_shell.tree import Directory, File, Node

OK, FAILED, USAGE = 0, 1, 2

HELP: dict[str, tuple[str, str]] = {  # command: (synopsis, what it does)
    "cat": ("cat PATH...", "print files (partitions, brokers and provenance are JSON)"),
    "cd": ("cd [PATH]", "change the working directory (default /)"),
    "exit": ("exit", "leave the shell (end of input does too)"),
    "find": ("find [PATH]", "print the path of PATH and of everything below it"),
    "help": ("help", "print this list"),
    "ls": ("ls [PATH...]", "list a directory's entries, one per line"),
    "pwd": ("pwd", "print the working directory"),
    "tree": ("tree [PATH]", "draw PATH and everything below it"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    out: tuple[str, ...] = ()  # lines for stdout
    err: tuple[str, ...] = ()  # lines for stderr
    status: int = OK
    exit: bool = False  # the shell should stop


@dataclass(slots=True)
class _Collector:
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    status: int = OK

    def fail(self, line: str, status: int = FAILED) -> None:
        self.err.append(line)
        self.status = max(self.status, status)

    def outcome(self) -> Outcome:
        return Outcome(out=tuple(self.out), err=tuple(self.err), status=self.status)


def _usage(command: str, problem: str) -> Outcome:
    return Outcome(err=(f"{command}: {problem}", f"usage: {HELP[command][0]}"), status=USAGE)


def _missing(command: str, typed: str) -> str:
    return f"{command}: {typed}: no such file or directory"


class Shell:
    """A working directory in one tree; `execute` runs one command line's words."""

    def __init__(self, root: Directory) -> None:
        self.root = root
        self.cwd = ROOT

    def execute(self, words: Sequence[str]) -> Outcome:
        if not words:
            return Outcome()
        command = _COMMANDS.get(words[0])
        if command is None:
            return Outcome(err=(f"{words[0]}: command not found (try help)",), status=USAGE)
        return command(self, list(words[1:]))

    def _find(self, typed: str) -> tuple[str, Node | None]:
        path = resolve(self.cwd, typed)
        return path, lookup(self.root, path)

    def ls(self, args: list[str]) -> Outcome:
        result = _Collector()
        targets = args or ["."]
        for typed in targets:
            _, node = self._find(typed)
            if node is None:
                result.fail(_missing("ls", typed))
            elif isinstance(node, File):
                result.out.append(typed)
            else:
                if len(targets) > 1:  # several listings: each under its name, as ls does
                    result.out.extend([""] if result.out else [])
                    result.out.append(f"{typed}:")
                result.out.extend(node.names())
        return result.outcome()

    def cat(self, args: list[str]) -> Outcome:
        if not args:
            return _usage("cat", "missing path")
        result = _Collector()
        for typed in args:
            _, node = self._find(typed)
            if node is None:
                result.fail(_missing("cat", typed))
            elif isinstance(node, Directory):
                result.fail(f"cat: {typed}: is a directory")
            else:
                result.out.extend(node.render().splitlines())
        return result.outcome()

    def cd(self, args: list[str]) -> Outcome:
        if len(args) > 1:
            return _usage("cd", "too many arguments")
        typed = args[0] if args else ROOT
        path, node = self._find(typed)
        if node is None:
            return Outcome(err=(_missing("cd", typed),), status=FAILED)
        if isinstance(node, File):
            return Outcome(err=(f"cd: {typed}: not a directory",), status=FAILED)
        self.cwd = path
        return Outcome()

    def pwd(self, args: list[str]) -> Outcome:
        return _usage("pwd", "too many arguments") if args else Outcome(out=(self.cwd,))

    def find(self, args: list[str]) -> Outcome:
        return self._walk("find", args, _find_lines)

    def tree(self, args: list[str]) -> Outcome:
        return self._walk("tree", args, _tree_lines)

    def _walk(self, command: str, args: list[str],
              lines: Callable[[Node, str], Iterator[str]]) -> Outcome:
        if len(args) > 1:
            return _usage(command, "too many arguments")
        typed = args[0] if args else "."
        path, node = self._find(typed)
        if node is None:
            return Outcome(err=(_missing(command, typed),), status=FAILED)
        return Outcome(out=tuple(lines(node, path)))

    def help(self, args: list[str]) -> Outcome:
        width = max(len(synopsis) for synopsis, _ in HELP.values())
        return Outcome(out=tuple(f"{synopsis.ljust(width)}  {text}"
                                 for synopsis, text in HELP.values()))

    def exit(self, args: list[str]) -> Outcome:
        return Outcome(exit=True)


_COMMANDS: dict[str, Callable[[Shell, list[str]], Outcome]] = {
    "cat": Shell.cat, "cd": Shell.cd, "exit": Shell.exit, "find": Shell.find,
    "help": Shell.help, "ls": Shell.ls, "pwd": Shell.pwd, "tree": Shell.tree,
}


def _find_lines(node: Node | None, path: str) -> Iterator[str]:
    """`path`, then every path below it, depth first in `ls` order. An entry a directory
    lists but cannot look up is printed all the same: `cat` then shows what is wrong."""
    yield path
    if isinstance(node, Directory):
        for name in node.names():
            yield from _find_lines(node.child(name), child_path(path, name))


def _tree_lines(node: Node, path: str) -> Iterator[str]:
    yield path
    if isinstance(node, Directory):
        yield from _tree_branches(node, "")


def _tree_branches(directory: Directory, indent: str) -> Iterator[str]:
    # ASCII connectors, as `tree --charset=ascii` draws them: any terminal shows them
    names = directory.names()
    for index, name in enumerate(names):
        last = index == len(names) - 1
        yield f"{indent}{'`-- ' if last else '|-- '}{name}"
        child = directory.child(name)
        if isinstance(child, Directory):
            yield from _tree_branches(child, indent + ("    " if last else "|   "))
